#if os(Linux)
import CLarderSupport
import Foundation
import Testing
@testable @_spi(Inspection) import Larder

/// Apple platforms' record locks belong to the process: every descriptor of a file shares them,
/// and closing any one drops them all (`ProcessLockTable`). Linux's POSIX record locks behave
/// the same, so each test runs in a child process that takes its locks that way (its writer lock
/// too: a record lock on byte 2, as on Apple platforms, not Linux's mutex), and watches
/// them through a descriptor of its own holding open-file-description locks, which conflict
/// with the process's record locks as another process's would. The probe is never closed before
/// the end: closing it would drop the process's record locks on the file. (Linux only: it has
/// both kinds of lock, and `/proc`.)
@Suite("Process-owned locks")
struct ProcessOwnedLockTests {
    @Test(.failsIfItHangs) func closingOneModeLeavesTheOtherModesLocks() async throws {
        let directory = TemporaryDirectory()
        let path = try closedCacheFile(in: directory)

        report(await #expect(processExitsWith: .success, observing: [\.standardErrorContent]) { [path = path as String] in
            let probe = LockProbe(switchingToProcessOwnedLocksOn: path)
            let writer = try Cache(path: path)
            var reader = try Cache(path: path, options: .init(readOnly: true))
            probe.expect(taken: [.writers, .users], "with both stores open")

            // The read-only store's close dropped every lock of the process before: another
            // process could then have opened as the sole writer and recovered under this writer.
            try reader.close()
            probe.expect(taken: [.writers, .users], "after the read-only store closed")
            try writer.set([1, 2, 3], forKey: "after")
            probe.expect(taken: [.writers, .users], "after a write")

            reader = try Cache(path: path, options: .init(readOnly: true))
            try writer.close()
            probe.expect(taken: [.users], free: [.writers], "after the read-write store closed")
            probe.expect(try reader.bytes(forKey: "after") == [1, 2, 3], "the read-only store reads on")

            try reader.close()
            probe.expect(free: [.transition, .writers, .users], "after both closed")
            probe.expect(ProcessLockTable.shared.counts.parked == 0, "descriptors still parked")
            probe.expect(openDescriptors(of: path) == 1, "descriptors of the file left open")
        })
        // The writer closed last was the last writer: the file is clean.
        #expect(try !Cache(path: path).wasRecovered)
    }

    /// A `Cache` let go of after its close (its descriptor closed only then) drops nothing either.
    @Test(.failsIfItHangs) func aClosedStoreLetGoOfLaterLeavesTheOthersLocks() async throws {
        let directory = TemporaryDirectory()
        let path = try closedCacheFile(in: directory)

        report(await #expect(processExitsWith: .success, observing: [\.standardErrorContent]) { [path = path as String] in
            let probe = LockProbe(switchingToProcessOwnedLocksOn: path)
            var reader: Cache? = try Cache(path: path, options: .init(readOnly: true))
            let writer = try Cache(path: path)
            try reader?.close()
            reader = nil
            probe.expect(taken: [.writers, .users], "after the read-only store went away")
            try writer.set([4], forKey: "k")
            try writer.close()
            probe.expect(free: [.transition, .writers, .users], "after both closed")
            probe.expect(openDescriptors(of: path) == 1, "descriptors of the file left open")
        })
    }

    /// The table itself, on two descriptors of one file: they share a byte both lock shared;
    /// an exclusive lock of one excludes the other, whose waiting request waits for it; a
    /// descriptor closed with a lock held gives it up, and is kept open (parked) beside the other;
    /// opens and closes beside the open one take the parked descriptor up again rather than
    /// parking more.
    @Test(.failsIfItHangs) func siblingDescriptorsShareTheProcesssLocks() async throws {
        let directory = TemporaryDirectory()
        let path = try closedCacheFile(in: directory)

        report(await #expect(processExitsWith: .success, observing: [\.standardErrorContent]) { [path = path as String] in
            let probe = LockProbe(switchingToProcessOwnedLocksOn: path)
            let (transition, users) = (CacheStore.LockByte.transition, CacheStore.LockByte.users)
            let first = try FileDescriptor.open(path, create: false, readOnly: false, permissions: 0)
            let second = try FileDescriptor.open(path, create: false, readOnly: true, permissions: 0)
            probe.expect(try first.lock(byte: users, .shared, wait: true) && second.lock(byte: users, .shared, wait: true), "users byte not shared")
            probe.expect(try !first.lock(byte: users, .exclusive, wait: false), "exclusive beside a sibling's shared lock")
            try second.lock(byte: users, .unlock, wait: false)
            probe.expect(taken: [.users], "after one of two holders unlocked")

            try first.lock(byte: transition, .exclusive, wait: true)
            probe.expect(try !second.lock(byte: transition, .shared, wait: false), "shared beside a sibling's exclusive lock")
            try first.lock(byte: transition, .shared, wait: true)
            probe.expect(try second.lock(byte: transition, .shared, wait: false), "shared refused beside a sibling's shared lock")
            try second.lock(byte: transition, .unlock, wait: false)
            try first.lock(byte: transition, .exclusive, wait: false)
            let granted = AtomicWord()
            Thread {
                do { try second.lock(byte: transition, .shared, wait: true) } catch { probe.expect(false, "\(error)") }
                granted.store(1)
            }.start()
            try await Task.sleep(for: .milliseconds(200))
            probe.expect(granted.load() == 0, "a waiting request went past a sibling's lock")
            try first.lock(byte: transition, .unlock, wait: false)
            try await waitUntil(seconds: 600) { granted.load() == 1 }
            probe.expect(granted.load() == 1, "a waiting request not granted once the sibling let go")
            probe.expect(taken: [.transition, .users], "after the waiting request was granted")

            second.close()
            probe.expect(taken: [.users], free: [.transition], "after a descriptor closed holding a lock")
            probe.expect(ProcessLockTable.shared.counts.parked == 1, "the closed descriptor not parked")
            for _ in 0..<100 { try FileDescriptor.open(path, create: false, readOnly: true, permissions: 0).close() }
            probe.expect(ProcessLockTable.shared.counts.parked == 1, "\(ProcessLockTable.shared.counts.parked) parked after 100 opens")
            first.close()
            probe.expect(free: [.transition, .writers, .users], "after both closed")
            probe.expect(ProcessLockTable.shared.counts.parked == 0, "descriptors still parked")
            probe.expect(openDescriptors(of: path) == 1, "descriptors of the file left open")
        })
    }

    /// Close, then reopen (how an iOS app shares a cache with its extensions): the closed
    /// store's `Cache`, let go of only after the reopen, drops none of the new store's locks.
    /// (What keeps them is the closed store's retired descriptor, `FileDescriptor.retire`.)
    @Test(.failsIfItHangs) func aCacheClosedBeforeAReopenAndLetGoOfAfterLeavesTheNewStoresLocks() async throws {
        let directory = TemporaryDirectory()
        let path = try closedCacheFile(in: directory)

        report(await #expect(processExitsWith: .success, observing: [\.standardErrorContent]) { [path = path as String] in
            let probe = LockProbe(switchingToProcessOwnedLocksOn: path)
            var closed: Cache? = try Cache(path: path)
            try closed?.close()
            let reopened = try Cache(path: path)
            closed = nil
            probe.expect(taken: [.writers, .users], "after the closed cache went away")
            try reopened.set([6], forKey: "k")
            try reopened.close()
            probe.expect(free: [.transition, .writers, .users], "after the close")
            probe.expect(openDescriptors(of: path) == 1, "descriptors of the file left open")
        })
    }

    /// While another process holds a file's transition lock (it opens, recovers or compacts
    /// the file), an open of that file waits for it without holding up the process's opens and
    /// closes of other files. (The test process, whose locks belong to descriptors, is the other
    /// process here.)
    @Test(.failsIfItHangs) func otherFilesOpenWhileAnOpenWaitsForAnotherProcess() async throws {
        let directory = TemporaryDirectory()
        let path = try closedCacheFile(in: directory)
        let (otherPath, started, otherDone) = (directory.path("other.larder"), directory.path("started"), directory.path("other done"))
        let holder = try FileDescriptor.open(path, create: false, readOnly: false, permissions: 0)
        try holder.lock(byte: CacheStore.LockByte.transition, .exclusive, wait: true)

        async let child = #expect(processExitsWith: .success, observing: [\.standardErrorContent]) {
            [path = path as String, otherPath = otherPath as String, started = started as String, otherDone = otherDone as String] in
            let probe = LockProbe(switchingToProcessOwnedLocksOn: path)
            let opened = AtomicWord()
            Thread {
                do { try Cache(path: path).close() } catch { probe.expect(false, "the waiting open: \(error)") }
                opened.store(1)
            }.start()
            while ProcessLockTable.shared.counts.waiting == 0 { try await Task.sleep(for: .milliseconds(1)) }
            _ = FileManager.default.createFile(atPath: started, contents: nil)
            let other = try Cache(path: otherPath)
            try other.set([7], forKey: "k")
            try other.close()
            probe.expect(opened.load() == 0, "the open went past another process's lock")
            _ = FileManager.default.createFile(atPath: otherDone, contents: nil)
            try await waitUntil(seconds: 600) { opened.load() == 1 }
            probe.expect(opened.load() == 1, "the waiting open never ended")
        }
        // The child's start is bounded should it fail before it; from then on, a second or so is
        // what an open and a close of another file take (seconds on a loaded machine), while a
        // wait for this file's lock would last until the lock is given back, below.
        try await waitUntil(seconds: 900) { FileManager.default.fileExists(atPath: started) }
        try await waitUntil(seconds: 120) { FileManager.default.fileExists(atPath: otherDone) }
        #expect(FileManager.default.fileExists(atPath: otherDone), "another file's open and close waited for this file's lock")
        holder.close()
        report(await child)
    }

    /// Apple platforms' writer lock (a record lock on byte 2, and the held word in the file): a
    /// writer that dies holding it leaves the word set, and the next writer, to whom the kernel
    /// gives the lock, repairs what the dead one left half done. (The test process keeps the
    /// file open, writing nothing, so that the second child is not its sole writer, which would
    /// recover at its open instead.)
    @Test(.failsIfItHangs) func aWriterThatDiesHoldingTheRecordLockIsRepairedByTheNext() async throws {
        let directory = TemporaryDirectory()
        let path = try closedCacheFile(in: directory)
        let bystander = try Cache(path: path)

        await #expect(processExitsWith: .signal(SIGKILL)) { [path = path as String] in
            FileDescriptor.lockOwner = .process
            let cache = try Cache(path: path)
            for key in 0..<100 { try cache.set(VersionedValue.make(key: key, version: 1), forKey: "k\(key)") }
            let store = cache.entry.store
            try store.withWriterLock { () throws(LarderError) in
                store.state.entryCount = 12_345
                kill(getpid(), SIGKILL)
            }
        }
        report(await #expect(processExitsWith: .success, observing: [\.standardErrorContent]) { [path = path as String] in
            let probe = LockProbe(switchingToProcessOwnedLocksOn: path)
            let cache = try Cache(path: path)
            try cache.set([1], forKey: "after")
            probe.expect(cache.stats.recoveries == 1, "\(cache.stats.recoveries) recoveries")
            probe.expect(cache.count == 101, "\(cache.count) entries")
            probe.expect(try cache.bytes(forKey: "k99").flatMap { VersionedValue.check($0, key: 99) } == 1, "k99 lost")
            try cache.close()
        })
        try bystander.close()
        #expect(try Cache(path: path).count == 101)
    }

    /// A read-write open beside the process's own read-only store is a sole writer (no other
    /// process writes) but not alone with the file: it may not change the capacity that the
    /// read-only store mapped. The process's own record lock on the users byte never conflicts
    /// with its test, so before the table it took itself for alone.
    @Test(.failsIfItHangs) func aWriterBesideTheProcesssReaderIsNotAlone() async throws {
        let directory = TemporaryDirectory()
        let path = try closedCacheFile(in: directory, capacity: .megabytes(4))

        report(await #expect(processExitsWith: .success, observing: [\.standardErrorContent]) { [path = path as String] in
            let probe = LockProbe(switchingToProcessOwnedLocksOn: path)
            let reader = try Cache(path: path, options: .init(readOnly: true))
            let writer = try Cache(path: path, options: .init(capacity: .megabytes(8)))
            probe.expect(writer.capacity == 4 << 20, "capacity changed under a reader: \(writer.capacity)")
            try writer.close()
            try reader.close()
            // Alone now, it may.
            let alone = try Cache(path: path, options: .init(capacity: .megabytes(8)))
            probe.expect(alone.capacity == 8 << 20, "capacity not changed when alone: \(alone.capacity)")
            try alone.close()
        })
    }

    /// Inspecting, or trying to compact, a file the process has open opens and closes a
    /// descriptor of its own: the store's locks stay, and the compaction finds the file in use
    /// (before, the process's own locks never conflicted with it: it rewrote the file under the
    /// running store).
    @Test(.failsIfItHangs) func inspectingAnOpenFileLeavesItsLocks() async throws {
        let directory = TemporaryDirectory()
        let path = try closedCacheFile(in: directory)

        report(await #expect(processExitsWith: .success, observing: [\.standardErrorContent]) { [path = path as String] in
            let probe = LockProbe(switchingToProcessOwnedLocksOn: path)
            let writer = try Cache(path: path)
            try writer.set([5], forKey: "k")
            do {
                let inspector = try FileInspector(path: path)
                probe.expect(inspector.state?.entryCount == 1, "inspection saw \(String(describing: inspector.state?.entryCount)) entries")
            }
            probe.expect(taken: [.writers, .users], "after an inspection")
            probe.expect(errorCode { _ = try FileInspector.compact(path: path) } == .busy, "a compaction went ahead on an open file")
            probe.expect(taken: [.writers, .users], "after a refused compaction")
            try writer.close()
            probe.expect(free: [.transition, .writers, .users], "after the close")
            probe.expect(openDescriptors(of: path) == 1, "descriptors of the file left open")
        })
    }
}

/// The path of a cache file created and closed in `directory`.
private func closedCacheFile(in directory: TemporaryDirectory, capacity: ByteCount? = nil) throws -> String {
    let path = directory.path()
    try Cache(path: path, options: .init(capacity: capacity)).close()
    return path
}

/// Records what a child's probe found wrong (its lines on standard error): which lock, when.
private func report(_ result: ExitTest.Result?, sourceLocation: SourceLocation = #_sourceLocation) {
    guard let result else { return }
    let failures = String(decoding: result.standardErrorContent, as: UTF8.self)
        .split(separator: "\n").filter { $0.hasPrefix(LockProbe.prefix) }
    #expect(failures.isEmpty, "\(failures.joined(separator: "\n"))", sourceLocation: sourceLocation)
}

/// Watches a file's lock bytes as another process would, from inside the process.
private final class LockProbe: Sendable {
    enum Byte: UInt64 {
        case transition = 0, writers = 1, users = 3
    }

    static let prefix = "process-owned locks: "
    let descriptor: Int32

    /// Takes this process's locks the way Apple platforms do, from now on, and opens the probe.
    init(switchingToProcessOwnedLocksOn path: String) {
        FileDescriptor.lockOwner = .process
        descriptor = open(path, O_RDWR | O_CLOEXEC)
        precondition(descriptor >= 0)
    }

    /// Whether no one else holds `byte`: an exclusive open-file-description lock on it, taken
    /// and given back at once, conflicts with this process's record locks.
    func isFree(_ byte: Byte) -> Bool {
        guard lrd_lock_byte(descriptor, byte.rawValue, Int32(LRD_LOCK_EXCLUSIVE), 0, 0) == 0 else { return false }
        _ = lrd_lock_byte(descriptor, byte.rawValue, Int32(LRD_UNLOCK), 0, 0)
        return true
    }

    func expect(taken: [Byte] = [], free: [Byte] = [], _ moment: String) {
        for byte in taken where isFree(byte) { fail("byte \(byte.rawValue) (\(byte)) is free \(moment)") }
        for byte in free where !isFree(byte) { fail("byte \(byte.rawValue) (\(byte)) is held \(moment)") }
    }

    func expect(_ condition: Bool, _ what: String) {
        if !condition { fail(what) }
    }

    private func fail(_ message: String) {
        FileHandle.standardError.write(Data("\(Self.prefix)\(message)\n".utf8))
    }
}

#endif

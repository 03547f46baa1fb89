// Linux only: Swift's Darwin module offers no fork(). The child's side of Apple platforms'
// locking runs here too, on Linux's process-owned record locks.
#if os(Linux)
import Foundation
import Glibc
import Testing
@testable @_spi(Inspection) import Larder

/// A process that forks after opening a cache: the child inherits the handle, but the file's
/// locks are the parent's (on Linux, locks of the open file description, which parent and child
/// share). Each test runs in a process of its own, which opens a cache and forks.
@Suite("Fork")
struct ForkTests {
    /// In the child, the inherited handle refuses every call as closed, even with the parent's
    /// in-process lock held at the fork (by the forking thread here: the child's copy stays held),
    /// and its close releases nothing of the parent's (a close that gave up the shared locks let a
    /// compaction rewrite the file under the parent) but the child's copy of the descriptor (which
    /// kept the parent's locks alive after the parent). A cache the child opens itself works, and
    /// pins records under the child's own process ID (one taken once per process, at the parent's
    /// first pin, was the parent's, so a writer would free the child's pins as soon as the parent
    /// exited). The parent's handle goes on, and closes the file cleanly. Run with Linux's locks
    /// and with Apple platforms' (process-owned record locks, which a child does not inherit).
    @Test(.failsIfItHangs, arguments: [false, true])
    func aChildProcessOpensTheFileAgainAndLeavesTheParentsHandleAlone(processOwnedLocks: Bool) async throws {
        let directory = TemporaryDirectory()
        let path = directory.path()
        let result = await #expect(processExitsWith: .success, observing: [\.standardErrorContent]) {
            [path = path as String, processOwnedLocks] in
            #if os(Linux)
            if processOwnedLocks { FileDescriptor.lockOwner = .process }
            #endif
            let cache = try Cache(path: path)
            try cache.set([1], forKey: "parent")
            guard try cache.withValue(forKey: "parent", { Array($0) }) == [1] else { ForkTests.fail("no value to lend") }
            let lent = pattern(7, count: 1_000)
            cache.entry.lock.lockExclusive()
            let child = fork()
            guard child != 0 else { _exit(ForkTests.childChecks(inherited: cache, path: path, lent: lent)) }
            cache.entry.lock.unlockExclusive()
            guard child > 0 else { ForkTests.fail("fork failed: errno \(errno)") }
            guard let status = try await ForkTests.waitForExit(of: child, seconds: 120) else {
                kill(child, SIGKILL)
                ForkTests.fail("the child did not exit within two minutes")
            }
            guard status == 0 else { ForkTests.fail("the child failed its checks: \(status)") }
            guard try cache.bytes(forKey: "child") == lent else { ForkTests.fail("the child's value is not there") }
            try cache.set([3], forKey: "after the child")
            try cache.close()
            let reopened = try Cache(path: path)
            guard !reopened.wasRecovered else { ForkTests.fail("the parent's close did not leave the file clean") }
            guard try reopened.bytes(forKey: "after the child") == [3] else { ForkTests.fail("the parent's last write is lost") }
        }
        // A failed check ends the process successfully, having said why: the result of an exit
        // test that fails carries no output to show.
        let failures = result.map { String(decoding: $0.standardErrorContent, as: UTF8.self) }?
            .split(separator: "\n").filter { $0.hasPrefix(ForkTests.failurePrefix) } ?? []
        #expect(failures.isEmpty, "\(failures.joined(separator: "\n"))")
    }

    private static let failurePrefix = "fork test: "

    /// The child's side: returns its exit status, 0 when every check held, else the first that
    /// failed (its reason on standard error).
    private static func childChecks(inherited cache: Cache, path: String, lent: [UInt8]) -> Int32 {
        func check(_ holds: Bool, _ status: Int32, _ reason: String) -> Int32 {
            if !holds { FileHandle.standardError.write(Data("\(failurePrefix)child: \(reason)\n".utf8)) }
            return holds ? 0 : status
        }
        let readCode = errorCode { _ = try cache.bytes(forKey: "parent") }
        if readCode != .closed { return check(false, 10, "a read through the inherited handle gave \(String(describing: readCode))") }
        let writeCode = errorCode { try cache.set([2], forKey: "inherited") }
        if writeCode != .closed { return check(false, 11, "a write through the inherited handle gave \(String(describing: writeCode))") }
        if cache.count != 0 { return check(false, 12, "the inherited handle counts \(cache.count) entries, not none as a closed one") }
        if cache.stats.entryCount != 0 || cache.capacity != cache.store.capacity {
            return check(false, 18, "the inherited handle's statistics or capacity are not a closed handle's")
        }
        let syncCode = errorCode { try cache.sync() }
        if syncCode != .closed { return check(false, 19, "a sync through the inherited handle gave \(String(describing: syncCode))") }
        do { try cache.close() } catch { return check(false, 13, "closing the inherited handle threw \(error)") }
        let kept = openDescriptors(of: path)
        if kept != 0 { return check(false, 20, "the child keeps \(kept) descriptors of the file after closing the inherited handle") }
        let compaction = errorCode { _ = try FileInspector.compact(path: path) }
        if compaction != .busy { return check(false, 14, "a compaction while the parent has the file open gave \(String(describing: compaction))") }
        do {
            let own = try Cache(path: path)
            if try own.bytes(forKey: "parent") != [1] { return check(false, 15, "the child's own handle does not read the parent's value") }
            try own.set(lent, forKey: "child")
            let owners = try own.withValue(forKey: "child") { _ in own.store.readers.owners }
            if owners?.contains(UInt64(getpid())) != true {
                return check(false, 16, "a pin of the child's is owned by \(String(describing: owners)), not the child (\(getpid()))")
            }
            try own.close()
        } catch {
            return check(false, 17, "the child's own handle threw \(error)")
        }
        return 0
    }

    /// The exit status of `pid` once it exits, or nil when it has not within `seconds`. Looks
    /// every 10 ms, holding no thread meanwhile.
    private static func waitForExit(of pid: pid_t, seconds: Double) async throws -> Int32? {
        let deadline = Date().addingTimeInterval(seconds)
        var status: Int32 = 0
        while Date() < deadline {
            let waited = waitpid(pid, &status, WNOHANG)
            if waited == pid {
                // WIFEXITED and WEXITSTATUS, which Swift does not import (macros).
                return status & 0x7f == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
            }
            if waited < 0 { return -1 }
            try await Task.sleep(for: .milliseconds(10))
        }
        return nil
    }

    private static func fail(_ reason: String) -> Never {
        FileHandle.standardError.write(Data("\(failurePrefix)parent: \(reason)\n".utf8))
        exit(EXIT_SUCCESS)
    }
}

extension ReaderTable {
    /// The owner word of every slot taken now.
    var owners: [UInt64] {
        (0..<slotCount).compactMap { index in
            let owner = slots.load(fromByteOffset: index * SharedState.readerSlotSize, as: UInt64.self)
            return owner == 0 ? nil : owner
        }
    }
}
#endif

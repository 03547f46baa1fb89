import Foundation
import Testing
@testable @_spi(Inspection) import Larder

/// Opening a file with another capacity than it has (FORMAT.md 6.7).
@Suite("Changing the capacity")
struct CapacityChangeTests {
    static let valueSize = 8 << 10

    /// Writes keys `k0`... of `valueSize` bytes each, in order.
    static func fill(_ cache: Cache, keys: Range<Int>) throws {
        for key in keys { try cache.set(value(key), forKey: "k\(key)") }
    }

    static func value(_ key: Int) -> [UInt8] { pattern(key, count: valueSize) }

    static func diskSize(_ path: String) throws -> Int {
        try #require(FileManager.default.attributesOfItem(atPath: path)[.size] as? Int)
    }

    @Test func aLargerCapacityIsTakenAtOpen() throws {
        let directory = TemporaryDirectory()
        let path = directory.path()
        try Cache(at: path, capacity: 1 << 20).close()
        let cache = try Cache(at: path, capacity: 8 << 20)
        #expect(cache.capacity == 8 << 20)
        try Self.fill(cache, keys: 0..<400)
        #expect(cache.fileBytes > 2 << 20)
        #expect(cache.count == 400)
    }

    /// A capacity asked for at open is measured against the file's page size, not the one the
    /// options give (which only a creation uses): below the file's minimum it is not taken.
    /// Before, a 64 KiB-page file cut short (and recovered) to less than 16 pages took a
    /// capacity below its minimum, and wrote a meta copy that every later open turned down.
    @Test func aCapacityBelowTheFilesMinimumIsNotTaken() throws {
        let directory = TemporaryDirectory()
        let path = directory.path()
        do {
            let cache = try Cache(path: path, options: .init(capacity: .bytes(4 << 20), pageSize: 65536))
            try cache.set([1, 2, 3], forKey: "a")
            try cache.sync()
            try cache.close()
        }
        // Cut short to 8 pages, and recovered: the file's size is now below 16 pages.
        let handle = try #require(FileHandle(forUpdatingAtPath: path))
        try handle.truncate(atOffset: 8 * 65536)
        try handle.close()
        try Cache(path: path).close()
        let cache = try Cache(at: path, capacity: 640 << 10)
        #expect(cache.capacity == 4 << 20)
        try cache.close()
        #expect(try Cache(path: path).capacity == 4 << 20)
    }

    /// Options no open may use are refused on every open: also when the process has the file
    /// open already (before, the second handle was handed out unchecked), and a capacity too
    /// small for the page size asked for also for an existing file.
    @Test func impossibleOptionsAreRefusedOnEveryOpen() throws {
        let directory = TemporaryDirectory()
        let path = directory.path()
        let first = try Cache(path: path)
        for options in [Cache.Options(pageSize: 1000), Cache.Options(capacity: .kilobytes(32)),
                        Cache.Options(capacity: .bytes(-1)), Cache.Options(capacity: .gigabytes(1 << 34 + 1))] {
            #expect(errorCode { _ = try Cache(path: path, options: options) } == .invalidArgument)
        }
        try first.close()
        #expect(errorCode { _ = try Cache(path: path, options: .init(capacity: .kilobytes(32))) } == .invalidArgument)
        // A size that does not fit an Int is not taken for a smaller one.
        #expect(ByteCount.gigabytes(1 << 34 + 1).bytes == Int.max)
        #expect(ByteCount.kilobytes(-2).bytes == -2048)
    }

    @Test(.waitsOnItsOwnThreads) func aSmallerCapacityKeepsTheNewestEntriesThatFit() throws {
        let directory = TemporaryDirectory()
        let path = directory.path()
        let keys = 0..<600
        do {
            let cache = try Cache(at: path, capacity: 16 << 20)
            try Self.fill(cache, keys: keys)
            // Compressed, and expiring: both survive the rewrite as they were.
            try cache.set(Data(repeating: 7, count: 20_000), forKey: "compressed", compression: .lz4)
            try cache.set([1, 2, 3], forKey: "expiring", expiry: .seconds(3600))
            try cache.set([4], forKey: "expired", expiry: .date(Date(timeIntervalSinceNow: 0.001)))
            try cache.close()
        }
        #expect(try Self.diskSize(path) > 4 << 20)
        Thread.sleep(forTimeInterval: 0.01)

        let cache = try Cache(at: path, capacity: 1 << 20)
        #expect(cache.capacity == 1 << 20)
        #expect(cache.fileBytes <= 1 << 20)
        #expect(try Self.diskSize(path) <= 1 << 20)
        #expect(try cache.bytes(forKey: "compressed") == [UInt8](repeating: 7, count: 20_000))
        #expect(try cache.bytes(forKey: "expiring") == [1, 2, 3])
        #expect(try cache.bytes(forKey: "expired") == nil)

        // What is left is the newest keys, each intact, and nothing older.
        let present = try keys.filter { try cache.bytes(forKey: "k\($0)") != nil }
        #expect(present.count > 50)
        #expect(present == Array((keys.upperBound - present.count)..<keys.upperBound))
        for key in present { #expect(try cache.bytes(forKey: "k\(key)") == Self.value(key)) }
        #expect(cache.count == present.count + 2)

        // The smaller file works as any other: it takes new values within its capacity.
        try Self.fill(cache, keys: 1000..<1200)
        #expect(cache.fileBytes <= 1 << 20)
        #expect(try cache.bytes(forKey: "k1199") == Self.value(1199))
        try cache.close()
        #expect(try FileInspector(path: path).verify().report.problems.isEmpty)
        #expect(try Cache(at: path).capacity == 1 << 20)
    }

    @Test func aSmallerCapacityWaitsUntilNoOtherHandleHasTheFile() throws {
        let directory = TemporaryDirectory()
        let path = directory.path()
        let writer = try Cache(at: path, capacity: 16 << 20)
        try Self.fill(writer, keys: 0..<600)
        try writer.close()
        let size = try Self.diskSize(path)

        // Every handle maps the capacity it found; a rewrite would leave this one on a file no
        // one else uses.
        let reader = try Cache(at: path, readOnly: true)
        let cache = try Cache(at: path, capacity: 1 << 20)
        #expect(cache.capacity == 16 << 20)
        #expect(try Self.diskSize(path) == size)
        #expect(cache.count == 600 && reader.count == 600)
        try cache.close()
        try reader.close()

        let alone = try Cache(at: path, capacity: 1 << 20)
        #expect(alone.capacity == 1 << 20)
        #expect(try alone.bytes(forKey: "k599") == Self.value(599))
    }

    /// Writes keys 0..<600 of `valueSize` bytes into a new file of 16 MiB and closes it.
    static func makeLargeFile(_ path: String, permissions: UInt16 = 0o600) throws {
        let cache = try Cache(path: path, options: .init(capacity: .bytes(16 << 20), permissions: permissions))
        try fill(cache, keys: 0..<600)
        try cache.close()
    }

    @Test(.waitsOnItsOwnThreads) func aShrinkWithNoRoomOnTheDiskKeepsTheFileWhole() async throws {
        let directory = TemporaryDirectory()
        let path = directory.path()
        try Self.makeLargeFile(path)
        await #expect(processExitsWith: .success) { [path = path as String] in
            // Room for half the smaller copy: the disk fills while entries are written to it.
            guard limitFileSize(to: 2 << 20) else { exit(4) }
            let cache = try Cache(path: path, options: .init(capacity: .megabytes(4)))
            guard cache.capacity == 16 << 20, cache.count == 600 else { exit(5) }
            try cache.close()
        }
        let cache = try Cache(at: path)
        #expect(cache.capacity == 16 << 20 && cache.count == 600)
        #expect(try cache.bytes(forKey: "k0") == Self.value(0))
        #expect(!FileManager.default.fileExists(atPath: path + ".larder-tmp"))
    }

    @Test func aShrinkKeepsTheOwnerThePermissionsAndTheLinkThatNamesTheFile() throws {
        let directory = TemporaryDirectory()
        let real = directory.path("real.larder")
        try Self.makeLargeFile(real, permissions: 0o640)
        if getuid() == 0 { #expect(chown(real, 65534, 65534) == 0) }
        let link = directory.path("link.larder")
        #expect(symlink(real, link) == 0)

        let cache = try Cache(at: link, capacity: 1 << 20)
        #expect(cache.capacity == 1 << 20)
        try cache.close()
        var info = stat()
        #expect(lstat(link, &info) == 0 && (info.st_mode & S_IFMT) == S_IFLNK)
        #expect(stat(real, &info) == 0 && info.st_mode & 0o7777 == 0o640)
        if getuid() == 0 { #expect(info.st_uid == 65534 && info.st_gid == 65534) }
        #expect(try Cache(at: real).capacity == 1 << 20)
    }

    /// An owner who is not in the file's group (root made the file, then gave it to them) can
    /// still lower its capacity: the copy stays theirs, in their own group.
    @Test(.waitsOnItsOwnThreads, .enabled(if: getuid() == 0, "needs root to hand the file to another user"))
    func anOwnerOutsideTheFilesGroupCanShrinkIt() async throws {
        let directory = TemporaryDirectory()
        let path = directory.path()
        try Self.makeLargeFile(path)
        #expect(chmod(directory.url.path, 0o777) == 0 && chown(path, 65534, 0) == 0)
        await #expect(processExitsWith: .success) { [path = path as String] in
            guard setgroups(0, nil) == 0, setgid(65534) == 0, setuid(65534) == 0 else { exit(4) }
            let cache = try Cache(path: path, options: .init(capacity: .megabytes(1)))
            guard cache.capacity == 1 << 20, try cache.bytes(forKey: "k599") == Self.value(599) else { exit(5) }
            try cache.close()
        }
        var info = stat()
        #expect(stat(path, &info) == 0 && info.st_uid == 65534 && info.st_mode & 0o7777 == 0o600)
    }

    @Test func aFileWithAnotherHardLinkKeepsItsCapacity() throws {
        let directory = TemporaryDirectory()
        let path = directory.path()
        try Self.makeLargeFile(path)
        let other = directory.path("other-name.larder")
        #expect(link(path, other) == 0)
        let cache = try Cache(at: path, capacity: 1 << 20)
        #expect(cache.capacity == 16 << 20 && cache.count == 600)
        try cache.close()
        #expect(try Cache(at: other).count == 600)
    }

    @Test func aNewestValueTooLargeForTheSmallerCapacityLeavesTheOthers() throws {
        let directory = TemporaryDirectory()
        let path = directory.path()
        let cache = try Cache(at: path, capacity: 16 << 20)
        try Self.fill(cache, keys: 0..<600)
        try cache.set(pattern(-1, count: 2 << 20), forKey: "large")
        try cache.close()

        let smaller = try Cache(at: path, capacity: 1 << 20)
        #expect(smaller.capacity == 1 << 20)
        #expect(try smaller.bytes(forKey: "large") == nil)
        #expect(smaller.count > 50)
        #expect(try smaller.bytes(forKey: "k599") == Self.value(599))
    }

    /// A value of more than half the capacity fits a cache whose ring has the room: a
    /// compaction that keeps the capacity, and a recovery into another file, keep it too.
    @Test func compactionAndRecoveryKeepAValueOfMoreThanHalfTheCapacity() throws {
        let directory = TemporaryDirectory()
        let path = directory.path()
        do {
            let cache = try Cache(at: path, capacity: 1 << 20)
            try cache.set(pattern(1, count: 600 << 10), forKey: "large")
            try cache.set([1], forKey: "small")
            try cache.close()
        }
        let out = directory.path("recovered.larder")
        #expect(try FileInspector(path: path).salvage(into: out).kept.count == 2)
        #expect(try FileInspector.compact(path: path).kept.count == 2)
        for file in [path, out] {
            let cache = try Cache(at: file)
            #expect(try cache.bytes(forKey: "large") == pattern(1, count: 600 << 10))
            #expect(try cache.bytes(forKey: "small") == [1])
        }
    }

    @Test(.waitsOnItsOwnThreads) func anOpenThatWaitedWhileTheFileWasReplacedOpensTheNewFile() throws {
        let directory = TemporaryDirectory()
        let path = directory.path()
        let opened = OpenedCache()
        try replaceFile(at: path, in: directory, whileOpening: { opened.result = Result { try Cache(at: path) } })

        let cache = try #require(try opened.result?.get())
        #expect(try cache.bytes(forKey: "new") == [2])
        #expect(try cache.bytes(forKey: "old") == nil)
        try cache.set([3], forKey: "written after")
        try cache.close()
        #expect(try Cache(at: path).bytes(forKey: "written after") == [3])
    }

    /// The same through an open that waits on its own descriptor for the lock (the registry
    /// waits elsewhere and starts over, but the check still guards a rename between an open of
    /// the path and its lock).
    @Test(.waitsOnItsOwnThreads)
    func anOpenWaitingOnItsOwnDescriptorWhileTheFileWasReplacedOpensTheNewFile() throws {
        let directory = TemporaryDirectory()
        let path = directory.path()
        let opened = OpenedStore()
        try replaceFile(at: path, in: directory, whileOpening: {
            var configuration = CacheStore.Configuration(capacity: nil, pageSize: 4096, readOnly: false, permissions: 0o644)
            opened.result = Result { () throws(LarderError) in try CacheStore.open(path: path, configuration: &configuration) }
        })

        let store = try #require(try opened.result?.get())
        defer { try? store.close() }
        var now = stat(), mapped = stat()
        #expect(stat(path, &now) == 0 && fstat(store.file.descriptor.rawValue, &mapped) == 0)
        #expect(mapped.st_ino == now.st_ino, "the open went on with the file renamed over")
        for (key, present) in [("new", true), ("old", false)] {
            let found = Array(key.utf8).withUnsafeBytes { store.lookup($0, hash: KeyHash($0)) != nil }
            #expect(found == present, "\(key)")
        }
    }

    /// A read-write open with a smaller capacity that saw a read-only handle of the file open in
    /// this process, then waited for another process, shrinks the file if the handle has closed
    /// by the time it starts over (and keeps the capacity while it is open: the control).
    @Test(.waitsOnItsOwnThreads, arguments: [false, true])
    func anOpenThatWaitedShrinksOnceTheOtherModeHasClosed(readerStaysOpen: Bool) throws {
        let directory = TemporaryDirectory()
        let path = directory.path()
        try Self.makeLargeFile(path)
        let reader = try Cache(at: path, readOnly: true)
        // Another process's read-only open: the transition byte held shared.
        let holder = try FileDescriptor.open(path, create: false, readOnly: true, permissions: 0)
        try holder.lock(byte: CacheStore.LockByte.transition, .shared, wait: true)
        let opened = OpenedCache()
        let done = DispatchSemaphore(value: 0)
        Thread {
            opened.result = Result { try Cache(at: path, capacity: 1 << 20) }
            done.signal()
        }.start()
        Thread.sleep(forTimeInterval: 0.3)
        if !readerStaysOpen { try reader.close() }
        Thread.sleep(forTimeInterval: 0.1)
        holder.close()
        done.wait()
        let cache = try #require(try opened.result?.get())
        #expect(cache.capacity == (readerStaysOpen ? 16 << 20 : 1 << 20))
        try cache.close()
        try reader.close()
    }

    /// Makes a cache at `path` holding "old" and, while `open` runs on another thread and waits
    /// for the file's transition lock (held here as a compaction holds it), renames a cache
    /// holding "new" over it; returns once `open` has.
    private func replaceFile(at path: String, in directory: TemporaryDirectory,
                             whileOpening open: @escaping @Sendable () -> Void) throws {
        let replacement = directory.path("new.larder")
        for (file, key, value) in [(path, "old", UInt8(1)), (replacement, "new", 2)] {
            let cache = try Cache(at: file)
            try cache.set([value], forKey: key)
            try cache.close()
        }
        let holder = try FileDescriptor.open(path, create: false, readOnly: false, permissions: 0)
        try holder.lock(byte: CacheStore.LockByte.transition, .exclusive, wait: true)
        let done = DispatchSemaphore(value: 0)
        Thread {
            open()
            done.signal()
        }.start()
        // Long enough for the open to wait on the lock; if it has not got there yet, it opens
        // the new file directly, and the test holds as well.
        Thread.sleep(forTimeInterval: 0.3)
        #expect(rename(replacement, path) == 0)
        holder.close()
        done.wait()
    }
}

/// The outcome of an open made on another thread.
private final class OpenedStore: @unchecked Sendable {
    var result: Result<CacheStore, LarderError>?
}

/// The outcome of an open made on another thread.
private final class OpenedCache: @unchecked Sendable {
    var result: Result<Cache, any Error>?
}

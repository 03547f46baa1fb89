import Foundation
import Testing
@testable import Larder

@Suite("Basic operations")
struct BasicOperationsTests {
    @Test func setThenReadBackInEveryForm() throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(path: directory.path())
        try cache.set(Data("hello".utf8), forKey: "greeting")
        #expect(try cache.data(forKey: "greeting") == Data("hello".utf8))
        #expect(try cache.bytes(forKey: "greeting") == Array("hello".utf8))
        #expect(try cache.withValue(forKey: "greeting") { String(decoding: $0, as: UTF8.self) } == "hello")
        #expect(cache.contains("greeting"))
        #expect(!cache.contains("absent"))
        #expect(try cache.data(forKey: "absent") == nil)
        #expect(try cache.withValue(forKey: "absent") { _ in 1 } == nil)
    }

    @Test func keysMayBeStringsBytesOrData() throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(path: directory.path())
        try cache.set([1, 2, 3], forKey: [0xFF, 0x00, 0x7F] as [UInt8])
        #expect(try cache.bytes(forKey: Data([0xFF, 0x00, 0x7F])) == [1, 2, 3])
        try cache.set([4], forKey: "ключ")
        #expect(try cache.bytes(forKey: Array("ключ".utf8)) == [4])
        #expect(try cache.bytes(forKey: "ключ"[...]) == [4])
        let raw: [UInt8] = [9, 9]
        try raw.withUnsafeBytes { buffer in
            try cache.set(buffer, forKey: buffer)
            #expect(try cache.bytes(forKey: buffer) == raw)
        }
    }

    @Test func overwriteReplacesTheValueAndKeepsTheCount() throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(path: directory.path())
        try cache.set(pattern(1, count: 500), forKey: "k")
        try cache.set(pattern(2, count: 30), forKey: "k")
        #expect(try cache.bytes(forKey: "k") == pattern(2, count: 30))
        #expect(cache.count == 1)
        #expect(cache.totalBytes == 30)
        #expect(cache.stats.updates == 1)
        #expect(cache.stats.inserts == 1)
    }

    @Test func removeValueReportsWhetherSomethingWasRemoved() throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(path: directory.path())
        try cache.set([1], forKey: "a")
        #expect(try cache.removeValue(forKey: "a"))
        #expect(try !cache.removeValue(forKey: "a"))
        #expect(try cache.bytes(forKey: "a") == nil)
        #expect(cache.count == 0)
        #expect(cache.totalBytes == 0)
    }

    @Test func removeAllEmptiesTheCacheAndItStaysEmptyAfterReopen() throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(path: directory.path())
        for index in 0..<100 { try cache.set(pattern(index, count: 50), forKey: "k\(index)") }
        try cache.removeAll()
        #expect(cache.count == 0)
        #expect(try cache.bytes(forKey: "k5") == nil)
        try cache.set([7], forKey: "after")
        try cache.close()
        let reopened = try Cache(path: directory.path())
        #expect(reopened.count == 1)
        #expect(try reopened.bytes(forKey: "k5") == nil)
        #expect(try reopened.bytes(forKey: "after") == [7])
    }

    /// Every kind of read counts once, whichever path answers it (the short path of the copying
    /// reads, or the careful one for compressed, expired and too-large values).
    @Test func everyReadCountsOneHitOrOneMiss() throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(path: directory.path(), options: .init(capacity: .bytes(4 << 20)))
        try cache.set(jsonLike(1, count: 3000), forKey: "packed", compression: .lz4)
        try cache.set(pattern(1, count: 100), forKey: "plain")
        try cache.set([1], forKey: "past", expiry: .date(Date(timeIntervalSinceNow: -10)))
        func expectCounts(hits: UInt64, misses: UInt64, _ comment: Comment) {
            #expect(cache.stats.hits == hits && cache.stats.misses == misses, comment)
        }
        expectCounts(hits: 0, misses: 0, "after writes")
        #expect(try cache.data(forKey: "packed") == Data(jsonLike(1, count: 3000)))
        expectCounts(hits: 1, misses: 0, "a compressed hit")
        #expect(try cache.data(forKey: "past") == nil)
        expectCounts(hits: 1, misses: 1, "an expired entry")
        #expect(try cache.data(forKey: "absent") == nil)
        expectCounts(hits: 1, misses: 2, "an absent key")
        var small = [UInt8](repeating: 0, count: 10)
        #expect(try small.withUnsafeMutableBytes { try cache.copyValue(forKey: "plain", into: $0) } == 100)
        expectCounts(hits: 1, misses: 2, "a buffer too small reads nothing")
        // What an offline-first read falls back on (`Cache+Loading.swift`).
        let stale = try Array("past".utf8).withUnsafeBytes { (key) throws(LarderError) in
            try cache.copyData(forKey: key, includingExpired: true)
        }
        #expect(stale == Data([1]))
        expectCounts(hits: 2, misses: 2, "an expired entry read on purpose")
        #expect(try cache.data(forKey: "plain") == Data(pattern(1, count: 100)))
        expectCounts(hits: 3, misses: 2, "a plain hit")
        // Lent reads answer their usual hit and miss on a path of their own.
        #expect(try cache.withValue(forKey: "absent") { $0.count } == nil)
        expectCounts(hits: 3, misses: 3, "an absent key lent")
        #expect(try cache.withValue(forKey: "plain") { Array($0) } == pattern(1, count: 100))
        expectCounts(hits: 4, misses: 3, "a plain hit lent")
    }

    /// A caller's buffer too small for the value learns the length it needs, and keeps its bytes:
    /// nothing of the value is copied there, plain or decompressed.
    @Test(arguments: [Compression.none, .lz4])
    func aBufferTooSmallGetsTheLengthAndKeepsItsBytes(compression: Compression) throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(path: directory.path())
        let value = jsonLike(2, count: 3000)
        try cache.set(value, forKey: "k", compression: compression)
        for size in [1, 100, 2999] {
            var buffer = [UInt8](repeating: 0xAA, count: size)
            #expect(try buffer.withUnsafeMutableBytes { try cache.copyValue(forKey: "k", into: $0) } == 3000)
            #expect(buffer.allSatisfy { $0 == 0xAA }, "a buffer of \(size) bytes was written to")
        }
        var exact = [UInt8](repeating: 0xAA, count: 3000)
        #expect(try exact.withUnsafeMutableBytes { try cache.copyValue(forKey: "k", into: $0) } == 3000)
        #expect(exact == value)
    }

    @Test func countsSizesAndStatistics() throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(at: directory.path(), capacity: 1 << 20)
        try cache.set(pattern(1, count: 100), forKey: "a")
        try cache.set(pattern(2, count: 200), forKey: "b")
        _ = try cache.data(forKey: "a")
        _ = try cache.data(forKey: "a")
        _ = try cache.data(forKey: "nope")
        let stats = cache.stats
        #expect(cache.count == 2 && stats.entryCount == 2)
        #expect(cache.totalBytes == 300 && stats.liveBytes == 300 && stats.storedBytes == 300)
        #expect(stats.hits == 2 && stats.misses == 1 && stats.inserts == 2)
        #expect(stats.hitRatio > 0.66 && stats.hitRatio < 0.67)
        #expect(cache.capacity == 1 << 20 && stats.capacity == 1 << 20)
        #expect(cache.fileBytes > 0 && cache.fileBytes <= cache.capacity)
        let onDisk = try FileManager.default.attributesOfItem(atPath: directory.path())[.size] as! Int
        #expect(cache.fileBytes == onDisk)
    }

    @Test func statisticsPersistAcrossReopen() throws {
        let directory = TemporaryDirectory()
        do {
            let cache = try Cache(path: directory.path())
            try cache.set([1], forKey: "a")
            _ = try cache.data(forKey: "a")
            _ = try cache.data(forKey: "b")
            try cache.close()
        }
        let cache = try Cache(path: directory.path())
        #expect(cache.stats.hits == 1 && cache.stats.misses == 1 && cache.stats.inserts == 1)
    }

    @Test func closeIsIdempotentAndLaterCallsFailCleanly() throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(path: directory.path())
        try cache.set([1], forKey: "a")
        try cache.close()
        try cache.close()
        #expect(throws: LarderError.self) { try cache.set([2], forKey: "a") }
        #expect(throws: LarderError.self) { try cache.data(forKey: "a") }
        #expect(throws: LarderError.self) { try cache.sync() }
        #expect(!cache.contains("a"))
        #expect(cache.count == 0)
        do {
            _ = try cache.data(forKey: "a")
        } catch {
            #expect(error.code == .closed)
        }
    }

    /// A closed cache whose object lives on keeps no descriptor of its file: where locks belong
    /// to the process (Apple platforms), closing that descriptor when the object went away would
    /// drop the locks of the store the process opened on the file since (close, then reopen: how
    /// an iOS app shares a cache with its extensions; `ProcessOwnedLockTests` shows the locks
    /// kept). What is checked here is that the closed store's descriptor names the file no more,
    /// and that its number stays taken.
    @Test func aClosedCacheKeepsNoDescriptorOfItsFile() throws {
        let directory = TemporaryDirectory()
        let closed = try Cache(path: directory.path())
        try closed.set([1], forKey: "a")
        let number = closed.store.file.descriptor.rawValue
        var file = stat(), after = stat()
        #expect(fstat(number, &file) == 0)
        try closed.close()
        #expect(fstat(number, &after) == 0)
        #expect(after.st_ino != file.st_ino || after.st_dev != file.st_dev)
        #expect(after.st_mode & S_IFMT == S_IFCHR)
        #expect(fcntl(number, F_GETFD) & FD_CLOEXEC != 0)
        let reopened = try Cache(path: directory.path())
        #expect(reopened.store.file.descriptor.rawValue != number)
        #expect(try reopened.bytes(forKey: "a") == [1])
        withExtendedLifetime(closed) {}
        try reopened.set([2], forKey: "b")
        try reopened.close()
        #expect(try Cache(path: directory.path()).bytes(forKey: "b") == [2])
    }

    #if os(Linux)
    /// The same with every descriptor number of the process taken: the retirement needs no
    /// descriptor of its own, which it could not have (a retirement that failed would leave the
    /// number naming the file, to be closed when the object goes).
    @Test(.failsIfItHangs) func aClosingCacheRetiresItsDescriptorWithNoDescriptorFree() async throws {
        let directory = TemporaryDirectory()
        await #expect(processExitsWith: .success) { [path = directory.path() as String] in
            let cache = try Cache(path: path)
            try cache.set([1], forKey: "a")
            let number = cache.store.file.descriptor.rawValue
            var limit = rlimit()
            getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
            limit.rlim_cur = min(limit.rlim_cur, 4096)
            setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
            while open("/dev/null", O_RDONLY) >= 0 {}
            guard errno == EMFILE else { exit(2) }
            try cache.close()
            var after = stat()
            guard fstat(number, &after) == 0, after.st_mode & S_IFMT == S_IFCHR else { exit(1) }
        }
    }
    #endif

    /// A program that closed its standard output, then prints: the cache file, opened after the
    /// close, must not be what descriptor 1 names (SQLite's lesson, its robust_open).
    @Test(.failsIfItHangs) func aCacheIsNeverOpenedAsStandardOutput() async throws {
        let directory = TemporaryDirectory()
        await #expect(processExitsWith: .success) { [path = directory.path() as String] in
            try Cache(path: path).set([1, 2, 3], forKey: "a")
            close(STDOUT_FILENO)
            let cache = try Cache(path: path)
            // Exit statuses, as the child's output is what is at stake: 1 the number, 3 the value.
            if cache.store.file.descriptor.rawValue <= 2 { exit(1) }
            let garbage = [UInt8](repeating: 0x41, count: 256)
            _ = garbage.withUnsafeBytes { write(STDOUT_FILENO, $0.baseAddress, $0.count) }
            try cache.close()
            if try Cache(path: path).bytes(forKey: "a") != [1, 2, 3] { exit(3) }
        }
    }

    /// A lent value is checked against the key asked for, not the record's own key bytes, which
    /// a writer of another process may change under a reader: a value passes only as its key's.
    @Test func aLentValueIsCheckedAgainstTheKeyAskedFor() throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(path: directory.path())
        try cache.set([1, 2, 3], forKey: "k1")
        let store = cache.store
        let view = store.currentView
        let found = try #require(Array("k1".utf8).withUnsafeBytes { store.lookup($0, hash: KeyHash($0)) })
        #expect(Array("k1".utf8).withUnsafeBytes { view.dataIsIntact(found, key: $0) })
        #expect(!Array("k2".utf8).withUnsafeBytes { view.dataIsIntact(found, key: $0) })
    }

    @Test func syncKeepsEverythingReadable() throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(path: directory.path())
        try cache.set([1, 2], forKey: "a")
        try cache.sync()
        #expect(try cache.bytes(forKey: "a") == [1, 2])
    }

    @Test func writingInsideWithValueIsAnErrorNotADeadlock() throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(path: directory.path())
        try cache.set([1], forKey: "a")
        let code = try cache.withValue(forKey: "a") { _ -> LarderError.Code? in
            do {
                try cache.set([2], forKey: "b")
                return nil
            } catch let error as LarderError {
                return error.code
            }
        }
        #expect(code == .invalidArgument)
        // Reads inside are fine, and writes work again afterwards.
        #expect(try cache.withValue(forKey: "a") { _ in try cache.bytes(forKey: "a") } == [1])
        try cache.set([3], forKey: "b")
    }

    /// A read inside `forEachEntry` after another process changed the file's meta page takes up
    /// the change: the listing holds no lock while its closure runs (it used to hold the read
    /// lock, and such a read was `.busy`).
    @Test(.failsIfItHangs) func aReadInsideAListingTakesUpAnotherProcessesChange() throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(path: directory.path())
        try cache.set([1], forKey: "a")
        var values: [Data?] = []
        try cache.forEachEntry { _, _ in
            // What a writer of another process does to the shared state when it writes a meta copy.
            cache.store.state.changeCounter &+= 1
            values.append(try cache.data(forKey: "a"))
            #expect(try cache.containsValue(forKey: "a"))
            return false
        }
        #expect(values == [Data([1])])
    }

    /// The mark is the borrowing thread's own: another thread writes as usual meanwhile.
    @Test(.failsIfItHangs) func anotherThreadWritesWhileOneBorrows() throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(path: directory.path())
        try cache.set([1], forKey: "a")
        try cache.withValue(forKey: "a") { _ in
            let done = DispatchSemaphore(value: 0)
            nonisolated(unsafe) var code: LarderError.Code? = .closed
            Thread {
                code = errorCode { try cache.set([2], forKey: "t") }
                done.signal()
            }.start()
            done.wait()
            #expect(code == nil)
        }
        #expect(try cache.bytes(forKey: "t") == [2])
    }

    @Test func errorsThrownByTheBodyOfWithValuePropagate() throws {
        struct Marker: Error {}
        let directory = TemporaryDirectory()
        let cache = try Cache(path: directory.path())
        try cache.set([1], forKey: "a")
        #expect(throws: Marker.self) { try cache.withValue(forKey: "a") { _ in throw Marker() } }
        try cache.set([2], forKey: "a")
    }

    @Test func newFilesAreOwnerOnlyByDefault() throws {
        let directory = TemporaryDirectory()
        _ = try Cache(path: directory.path())
        let permissions = try FileManager.default.attributesOfItem(atPath: directory.path())[.posixPermissions] as! Int
        #expect(permissions == 0o600)
        _ = try Cache(path: directory.path("shared.larder"), options: .init(permissions: 0o644))
        let shared = try FileManager.default.attributesOfItem(atPath: directory.path("shared.larder"))[.posixPermissions] as! Int
        #expect(shared == 0o644)
    }

    @Test func readOnlyCachesReadButRefuseWrites() throws {
        let directory = TemporaryDirectory()
        do {
            let cache = try Cache(path: directory.path())
            try cache.set([5], forKey: "a")
            try cache.close()
        }
        let cache = try Cache(at: directory.path(), readOnly: true)
        #expect(try cache.bytes(forKey: "a") == [5])
        #expect(throws: LarderError(.readOnly, "the cache was opened read-only", path: directory.path())) {
            try cache.set([6], forKey: "a")
        }
        #expect(throws: LarderError.self) { try cache.removeAll() }
        #expect(throws: LarderError.self) { try Cache(at: directory.path("missing.larder"), readOnly: true) }
    }

    /// A reader may open a file it may only read (another user's, a backup, a file on a
    /// read-only volume): nothing it does, hits and misses included, changes a byte of it.
    @Test func aReadOnlyHandleLeavesEveryByteOfTheFileAsItWas() throws {
        let directory = TemporaryDirectory()
        let path = directory.path()
        let keys = (0..<300).map { "k\($0)" }
        do {
            let cache = try Cache(path: path, options: .init(capacity: .megabytes(4)))
            for (index, key) in keys.enumerated() {
                try cache.set(pattern(index, count: 50 + index * 13 % 3000), forKey: key,
                              compression: index % 3 == 0 ? .lz4 : Compression.none)
            }
            try cache.set(jsonLike(1, count: 3000), forKey: "k-packed", compression: .lz4)
            try cache.set([1], forKey: "k-past", expiry: .date(Date(timeIntervalSinceNow: -10)))
            for index in stride(from: 0, to: 300, by: 11) { try cache.removeValue(forKey: keys[index]) }
            try cache.close()
        }
        let before = try Data(contentsOf: URL(fileURLWithPath: path))
        let found = try readEverythingReadOnly(path: path, keys: keys + ["k-packed", "k-past"])
        for (index, key) in keys.enumerated() {
            #expect(found[key] == (index % 11 == 0 ? nil : pattern(index, count: 50 + index * 13 % 3000)), "\(key)")
        }
        #expect(found["k-packed"] == jsonLike(1, count: 3000))
        #expect(found["k-past"] == nil)
        let after = try Data(contentsOf: URL(fileURLWithPath: path))
        #expect(after == before, "\(firstChange(from: before, to: after))")
    }

    @Test func twoHandlesOnOneFileShareItAndCloseIndependently() throws {
        let directory = TemporaryDirectory()
        let first = try Cache(path: directory.path())
        let second = try Cache(path: directory.path())
        try first.set([1], forKey: "a")
        #expect(try second.bytes(forKey: "a") == [1])
        try second.set([2], forKey: "b")
        try first.close()
        #expect(throws: LarderError.self) { try first.bytes(forKey: "b") }
        #expect(try second.bytes(forKey: "b") == [2])
        try second.close()
        let reopened = try Cache(path: directory.path())
        #expect(!reopened.wasRecovered)
        #expect(try reopened.bytes(forKey: "a") == [1])
    }

    /// Threads opening one file at the same moment, over and over (new at first), while others
    /// open and close other files: every handle open at once on the file shares one store, and
    /// the last close leaves the file clean.
    @Test(.waitsOnItsOwnThreads) func threadsOpeningOneFileAtOnceShareOneStore() throws {
        let directory = TemporaryDirectory()
        let path = directory.path()
        let others = (0..<2).map { directory.path("other-\($0).larder") }
        for round in 0..<20 {
            let stores = openAtOnce(Array(repeating: path, count: 4)) { cache, thread in
                try cache.set([UInt8(thread), UInt8(round)], forKey: "t\(thread)")
            } meanwhile: { thread in
                for _ in 0..<5 { try Cache(path: others[thread]).close() }
            }
            #expect(stores.failures.isEmpty, "\(stores.failures)")
            #expect(stores.distinct == 1, "round \(round): \(stores.distinct) stores for one file")
        }
        let reopened = try Cache(path: path)
        #expect(!reopened.wasRecovered)
        #expect(try reopened.bytes(forKey: "t3") == [3, 19])
    }

    /// Two spellings of one file that does not exist yet ("x" and "dir/./x", or a symbolic link
    /// and its target), opened by two threads at the same moment: one store, not two (whose
    /// locks, on Apple platforms, would be one process's and exclude nothing).
    @Test(.waitsOnItsOwnThreads, arguments: [false, true]) func twoSpellingsOfANewFileOpenedAtOnceShareOneStore(throughLink: Bool) throws {
        let directory = TemporaryDirectory()
        for round in 0..<20 {
            let path = directory.path("f\(round).larder")
            let other = throughLink ? directory.path("link\(round).larder") : directory.url.path + "/./f\(round).larder"
            if throughLink { #expect(symlink(path, other) == 0) }
            let stores = openAtOnce([path, other])
            #expect(stores.failures.isEmpty, "\(stores.failures)")
            #expect(stores.distinct == 1, "round \(round): \(stores.distinct) stores for one file")
        }
    }

    /// While another process opens, repairs or compacts a file (it holds the file's transition
    /// lock, for seconds in a recovery), opens of that file wait, without spinning, and the
    /// process's other opens and closes go on meanwhile; the opens that waited then share one
    /// store.
    @Test(.waitsOnItsOwnThreads)
    func otherOpensGoOnWhileOneWaitsForAnotherProcess() throws {
        let restartsBefore = OpenFileRegistry.shared.restartsAfterWaiting
        let directory = TemporaryDirectory()
        let path = directory.path()
        let otherPath = directory.path("other.larder")
        try Cache(path: path).close()
        // Where locks belong to descriptors, a descriptor of this process stands for the other one.
        let holder = try FileDescriptor.open(path, create: false, readOnly: false, permissions: 0)
        try holder.lock(byte: CacheStore.LockByte.transition, .exclusive, wait: true)
        let meanwhile = Outcomes()
        let stores = openAtOnce([path, path]) { _, _ in
            meanwhile.record(waitersOpened: true)
        } meanwhile: { thread in
            guard thread == 0 else { return }
            // Both opens wait for the other process's lock.
            waitForBlockedLockRequests(on: path, count: 2)
            meanwhile.openAndClose(otherPath)
            holder.close()
        }
        #expect(meanwhile.otherFileDone == true, "another file's open and close waited for this file's")
        #expect(meanwhile.waitersOpenedFirst == false, "an open went past the other process's lock")
        #expect(meanwhile.failures.isEmpty && stores.failures.isEmpty, "\(meanwhile.failures) \(stores.failures)")
        #expect(stores.distinct == 1, "\(stores.distinct) stores for one file")
        // Each waiting open starts over once; other tests running meanwhile add a few at most.
        let restarts = OpenFileRegistry.shared.restartsAfterWaiting - restartsBefore
        #expect(restarts >= 2 && restarts < 50, "\(restarts) restarts of two opens that waited")
        #expect(try Cache(path: path).bytes(forKey: "absent") == nil)
    }

    /// An open that recovers a file (seconds, for a large one) holds up no open or close of
    /// another file in the process; an open of the same file meanwhile waits for it, and then
    /// shares its store.
    @Test(.failsIfItHangs) func anOpenThatRecoversHoldsUpOnlyOpensOfItsFile() throws {
        let directory = TemporaryDirectory()
        let crashed = directory.path("crashed.larder")
        let otherPath = directory.path("other.larder")
        let cache = try Cache(path: directory.path())
        try cache.set([1], forKey: "k")
        // A copy of a file in use is what a crash leaves: the next open recovers it.
        try FileManager.default.copyItem(atPath: directory.path(), toPath: crashed)
        try cache.close()
        let recovering = DispatchSemaphore(value: 0)
        let goOn = DispatchSemaphore(value: 0)
        CacheStore.recoveryAtOpenHook = { path in
            guard path == crashed else { return }
            recovering.signal()
            // Longer than the other file's open and close may take (`openAndClose`).
            _ = goOn.wait(timeout: .now() + 180)
        }
        defer { CacheStore.recoveryAtOpenHook = nil }
        let meanwhile = Outcomes()
        let stores = openAtOnce([crashed, crashed]) { cache, _ in
            if try cache.bytes(forKey: "k") != [1] { meanwhile.record(failure: "the recovered value is wrong") }
        } meanwhile: { thread in
            guard thread == 0 else { return }
            defer { goOn.signal() }
            guard recovering.wait(timeout: .now() + 600) == .success else {
                meanwhile.record(failure: "no open recovered the file")
                return
            }
            meanwhile.openAndClose(otherPath)
        }
        #expect(meanwhile.otherFileDone == true, "another file's open and close waited for a recovery")
        #expect(meanwhile.failures.isEmpty && stores.failures.isEmpty, "\(meanwhile.failures) \(stores.failures)")
        #expect(stores.distinct == 1, "\(stores.distinct) stores for one file")
    }

    /// An open that gives way to another process closes its descriptor once: a second close of
    /// the number would close whatever another thread opened under it meanwhile (a store's
    /// descriptor, dropping its locks, or a caller's file).
    @Test(.waitsOnItsOwnThreads)
    func anOpenGivingWayClosesItsDescriptorOnce() throws {
        let directory = TemporaryDirectory()
        let path = directory.path()
        try Cache(path: path).close()
        let holder = try FileDescriptor.open(path, create: false, readOnly: false, permissions: 0)
        defer { holder.close() }
        try holder.lock(byte: CacheStore.LockByte.transition, .exclusive, wait: true)
        let stop = AtomicWord(), lost = AtomicWord()
        let bystander = Thread {
            // Opens a file, lets others run, and checks that it is still its own.
            while stop.load() == 0 {
                let descriptor = open("/dev/null", O_RDONLY)
                for _ in 0..<50 { sched_yield() }
                if fcntl(descriptor, F_GETFD) == -1 { lost.store(lost.load() + 1) } else { close(descriptor) }
            }
        }
        bystander.start()
        var gaveWay = 0
        for _ in 0..<5_000 {
            var configuration = CacheStore.Configuration(capacity: nil, pageSize: 4096, readOnly: false, permissions: 0o644)
            configuration.waitsForOtherProcesses = false
            do {
                try CacheStore.open(path: path, configuration: &configuration).close()
            } catch {
                if error.code == LarderError.otherProcessInTransition.code { gaveWay += 1 }
            }
        }
        stop.store(1)
        Thread.sleep(forTimeInterval: 0.05)
        #expect(gaveWay == 5_000)
        #expect(lost.load() == 0, "\(lost.load()) descriptors of another thread closed by opens giving way")
    }

    /// The same for a close that waits for another process's open: the process's opens and
    /// closes of other files go on, and an open of the closing file waits for the close.
    @Test(.waitsOnItsOwnThreads)
    func otherOpensGoOnWhileACloseWaitsForAnotherProcess() throws {
        let directory = TemporaryDirectory()
        let path = directory.path()
        let otherPath = directory.path("other.larder")
        try Cache(path: path).close()
        let closing = try Cache(path: path, options: .init(readOnly: true))
        let holder = try FileDescriptor.open(path, create: false, readOnly: false, permissions: 0)
        try holder.lock(byte: CacheStore.LockByte.transition, .exclusive, wait: true)
        let closed = DispatchSemaphore(value: 0), reopened = DispatchSemaphore(value: 0), other = DispatchSemaphore(value: 0)
        let outcomes = Outcomes()
        Thread {
            do { try closing.close() } catch { outcomes.record(failure: "close: \(error)") }
            closed.signal()
        }.start()
        // The close waits for the other process's lock before the reopen starts.
        waitForBlockedLockRequests(on: path, count: 1)
        Thread {
            do {
                let again = try Cache(path: path, options: .init(readOnly: true))
                outcomes.record(waitersOpened: true)
                #expect(again.entry.store !== closing.entry.store)
                try again.close()
            } catch {
                outcomes.record(failure: "reopen: \(error)")
            }
            reopened.signal()
        }.start()
        Thread {
            do { try Cache(path: otherPath).close() } catch { outcomes.record(failure: "other: \(error)") }
            other.signal()
        }.start()
        // A wait for this file's lock would last until the lock is given back, below: the bound
        // is far longer than a loaded machine's open and close of another file take.
        let otherFileDone = other.wait(timeout: .now() + 120) == .success
        outcomes.record(otherFileDone: otherFileDone)
        holder.close()
        closed.wait()
        reopened.wait()
        if !otherFileDone { other.wait() }
        #expect(outcomes.otherFileDone == true, "another file's open and close waited for this file's close")
        #expect(outcomes.waitersOpenedFirst == false, "an open of a closing file went past its close")
        #expect(outcomes.failures.isEmpty, "\(outcomes.failures)")
    }

    /// A value lent by `withValue` lies in the map a write puts records into: storing it through
    /// another handle on the file (allowed, unlike through the lending one) must store exactly
    /// those bytes with a checksum that holds, plain or compressed, however the copy overlaps.
    @Test(arguments: [Compression.none, .lz4]) func storingBytesLentOutOfTheSameFile(compression: Compression) throws {
        let directory = TemporaryDirectory()
        let lender = try Cache(path: directory.path())
        let writer = try Cache(path: directory.path())
        let value = jsonLike(7, count: 5_000)
        try lender.set(value, forKey: "source")
        for round in 0..<50 {
            try lender.withValue(forKey: "source") { lent in
                // What lets a put skip comparing addresses when nothing is lent: a lend is seen.
                #expect(writer.entry.store.readers.mayBeLending)
                try writer.set(lent, forKey: "copy-\(round)", compression: compression)
                // The lent bytes as the key too: keys may come out of the map as well.
                try writer.set(Array("key".utf8), forKey: Array(lent.prefix(64)), compression: compression)
            }
        }
        for round in 0..<50 {
            // A read checks the stored checksum: a wrong one throws `.corrupt`.
            #expect(try writer.bytes(forKey: "copy-\(round)") == value)
        }
        #expect(try writer.bytes(forKey: Array(value.prefix(64))) == Array("key".utf8))
    }
}

/// Opens `paths[i]` on thread `i`, all at the same moment, runs `each` with the handle, and
/// keeps every handle open until all are; `meanwhile` runs on threads of its own at once (0, 1,
/// ...). Returns the stores the handles saw.
private func openAtOnce(_ paths: [String], each: @escaping @Sendable (Cache, Int) throws -> Void = { _, _ in },
                        meanwhile: (@Sendable (Int) throws -> Void)? = nil) -> StoreIdentities {
    let stores = StoreIdentities()
    let others = meanwhile == nil ? 0 : 2
    runOnThreads(paths.count + others) { thread in
        do {
            guard thread < paths.count else {
                try meanwhile?(thread - paths.count)
                return
            }
            let cache = try Cache(path: paths[thread])
            try each(cache, thread)
            stores.record(ObjectIdentifier(cache.entry.store))
            while stores.count < paths.count { usleep(100) }
            try cache.close()
        } catch {
            stores.fail("\(error)")
        }
    }
    return stores
}

/// What the threads of the tests of opens and closes waiting for another process saw.
private final class Outcomes: @unchecked Sendable {
    private let lock = NSLock()
    private var waitersOpened = false
    private(set) var otherFileDone: Bool?
    /// Whether a waiting open was done before the other file's open and close were.
    private(set) var waitersOpenedFirst: Bool?
    private var errors: [String] = []

    var failures: [String] { lock.withLock { errors } }

    func record(waitersOpened: Bool) { lock.withLock { self.waitersOpened = waitersOpened } }

    func record(otherFileDone: Bool) {
        lock.withLock {
            self.otherFileDone = otherFileDone
            waitersOpenedFirst = waitersOpened
        }
    }

    func record(failure: String) { lock.withLock { errors.append(failure) } }

    /// Opens, writes and closes the cache at `path` on a thread of its own, and records whether
    /// that was done within 2 minutes (a wait for a lock that the caller holds meanwhile lasts
    /// for ever; a loaded machine's open and close take seconds at most).
    func openAndClose(_ path: String) {
        let done = DispatchSemaphore(value: 0)
        Thread {
            do {
                let other = try Cache(path: path)
                try other.set([1], forKey: "k")
                try other.close()
            } catch {
                self.record(failure: "\(error)")
            }
            done.signal()
        }.start()
        record(otherFileDone: done.wait(timeout: .now() + 120) == .success)
    }
}

/// The stores that handles opened at once on one file saw, from several threads.
private final class StoreIdentities: @unchecked Sendable {
    private let lock = NSLock()
    private var stores: [ObjectIdentifier] = []
    private var errors: [String] = []

    var count: Int { lock.withLock { stores.count } }
    var distinct: Int { lock.withLock { Set(stores).count } }
    var failures: [String] { lock.withLock { errors } }

    func record(_ store: ObjectIdentifier) { lock.withLock { stores.append(store) } }

    func fail(_ text: String) {
        lock.withLock {
            errors.append(text)
            // The others stop waiting for this one.
            stores.append(ObjectIdentifier(self))
        }
    }
}

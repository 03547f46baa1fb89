import Foundation
import Testing
@testable import Larder

/// A listing holds no lock while its closure runs: the closure, other threads and other
/// processes write meanwhile, and every entry that stays in the cache throughout is listed once.
@Suite("Listing while writing")
struct ListingWhileWritingTests {
    /// Names of the keys listed, with how often each was.
    private static func tally(_ cache: Cache, _ visit: (String) throws -> Void = { _ in }) throws -> [String: Int] {
        var listed: [String: Int] = [:]
        try cache.forEachEntry { key, _ in
            let name = String(decoding: key, as: UTF8.self)
            listed[name, default: 0] += 1
            try visit(name)
            return true
        }
        return listed
    }

    /// Removing a key shifts the keys after it in its cluster back a slot: a walk over slots would
    /// pass some of them.
    @Test func removingEachEntryAsItIsListedListsEveryKeyOnce() throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(path: directory.path())
        let keys = Set((0..<5000).map { "key-\($0)" })
        for key in keys { try cache.set([1, 2, 3], forKey: key) }
        let listed = try Self.tally(cache) { try cache.removeValue(forKey: $0) }
        #expect(Set(listed.keys) == keys)
        #expect(listed.values.allSatisfy { $0 == 1 })
        #expect(cache.count == 0)
    }

    /// Writes from the closure that make the index grow into a new table while the listing is
    /// under way: the keys not yet moved out of the old table (which moves a few slots a write)
    /// are listed from there.
    @Test func writesThatGrowTheIndexMidListingLoseNoKey() throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(path: directory.path())
        let keys = Set((0..<3000).map { "old-\($0)" })
        for key in keys { try cache.set([1], forKey: key) }
        let slotsBefore = cache.store.active.slotCount
        var added = 0
        let listed = try Self.tally(cache) { _ in
            while cache.store.active.slotCount == slotsBefore {
                try cache.set([2], forKey: "new-\(added)")
                added += 1
            }
        }
        #expect(cache.store.draining != nil)
        #expect(keys.subtracting(listed.keys).isEmpty)
        #expect(listed.values.allSatisfy { $0 == 1 })
    }

    /// Between a step's reading of its slots and its checking of the records they name, a writer
    /// of another process replaces an entry with a longer value (it moves to the head) and places
    /// a new key in the room it left. The step finds there a live record of another key: the
    /// entry's new slot is not among those it read, so it must read them again.
    @Test(.serialized, arguments: [false, true])
    func anEntryMovedAndItsRoomReusedDuringAStepIsListed(expired: Bool) throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(path: directory.path(), options: .init(capacity: .megabytes(64)))
        let keys = (0..<100).map { "k\($0)" }
        // Records of 4 KiB and more: their rooms are reused below the capacity (FORMAT.md 6.8).
        for (index, key) in keys.enumerated() { try cache.set(pattern(index, count: 5000), forKey: key) }
        let moved = "k7"
        func place(of key: String) -> Int? {
            key.withCacheKeyBytes { cache.store.lookup($0, hash: KeyHash($0))?.offset }
        }
        let movedFrom = try #require(place(of: moved))
        var reused = false
        let store = cache.store
        defer { store.listingStepHook = nil }
        store.listingStepHook = { slots in
            guard !reused, slots.contains(where: { HashTable.offset(of: $0) == movedFrom }) else { return }
            reused = true
            do {
                try store.acquireWriterLock()
                defer {
                    store.publishView()
                    store.releaseWriterLock()
                }
                try Array(moved.utf8).withUnsafeBytes { key in
                    try pattern(1, count: 6000).withUnsafeBytes { try store.put(key: key, value: $0, compress: false, expiry: .never) }
                }
                // The newcomer may be expired: a record of another key is not the slot's
                // entry, however it reads.
                try Array("n7".utf8).withUnsafeBytes { key in
                    try pattern(2, count: 5000).withUnsafeBytes {
                        try store.put(key: key, value: $0, compress: false, expiry: expired ? .date(Date(timeIntervalSinceNow: -1)) : .never)
                    }
                }
            } catch {
                Issue.record(error)
            }
        }
        let listed = try Self.tally(cache)
        #expect(reused && place(of: "n7") == movedFrom)
        #expect(Set(keys).subtracting(listed.keys).isEmpty)
        #expect(listed.values.allSatisfy { $0 == 1 })
    }

    /// Writers that keep changing what a listing reads for longer than a read's patience (here,
    /// at every attempt, a record of the step is marked dead inside a new bracket of the epoch,
    /// as a writer replacing it would) make the listing fail with `.busy` rather than list what
    /// it cannot vouch for; once they stop, the listing lists every key.
    @Test(.failsIfItHangs) func aListingWhoseRecordsKeepChangingIsBusy() throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(path: directory.path())
        for index in 0..<1000 { try cache.set([1], forKey: "k\(index)") }
        let store = cache.store
        var changed: Int?
        func restore() {
            if let changed { RecordHeader.markLiveAgain(in: store.file, at: changed) }
            changed = nil
        }
        store.listingStepHook = { slots in
            restore()
            guard let first = slots.first else { return }
            store.state.beginIndexChange()
            changed = HashTable.offset(of: first)
            RecordHeader.markDead(in: store.file, at: changed!)
        }
        let code = errorCode { _ = try cache.keys }
        store.listingStepHook = nil
        restore()
        store.state.endIndexChange()
        #expect(code == .busy)
        #expect(try cache.keys.count == 1000)
    }

    /// Another process deletes half the keys, then adds ten times as many, which grows the file
    /// and the index (its meta page changes twice or more) while this process's listing waits
    /// inside its closure; the listing takes up the change and goes on.
    @Test(.failsIfItHangs)
    func anotherProcessGrowingTheIndexMidListingLosesNoKey() async throws {
        let directory = TemporaryDirectory()
        let path = directory.path()
        let cache = try Cache(path: path, options: .init(capacity: .megabytes(64)))
        let stable = Set((0..<3000).map { "stable-\($0)" })
        for key in stable { try cache.set([1], forKey: key) }
        for index in 0..<3000 { try cache.set([2], forKey: "doomed-\(index)") }
        let counterBefore = cache.store.state.changeCounter
        async let child = #expect(processExitsWith: .success) { [path = path as String] in
            let cache = try Cache(path: path)
            try cache.set([1], forKey: "started")
            let deadline = Date().addingTimeInterval(100)
            while !cache.contains("go") {
                guard Date() < deadline else { exit(3) }
                try await Task.sleep(for: .milliseconds(1))
            }
            for index in 0..<3000 { try cache.removeValue(forKey: "doomed-\(index)") }
            for index in 0..<30_000 { try cache.set([3], forKey: "fresh-\(index)") }
            try cache.set([1], forKey: "grown")
        }
        // The listing runs on a thread of its own: it waits inside its closure, which must not
        // hold up the test runner's shared threads.
        let listed = try await withCheckedThrowingContinuation { (done: CheckedContinuation<[String: Int], any Error>) in
            Thread {
                done.resume(with: Result {
                    var waited = false
                    return try Self.tally(cache) { _ in
                        guard !waited else { return }
                        waited = true
                        try cache.set([1], forKey: "go")
                        // The deadline counts from the child's start, within a bound of its
                        // own, far longer, should the child fail before it (this thread is not
                        // one a time limit can stop).
                        var deadline = Date().addingTimeInterval(900)
                        var sawStart = false
                        while !cache.contains("grown") && Date() < deadline {
                            if !sawStart && cache.contains("started") {
                                sawStart = true
                                deadline = min(deadline, Date().addingTimeInterval(100))
                            }
                            usleep(1000)
                        }
                    }
                })
            }.start()
        }
        _ = await child
        #expect(cache.contains("grown"))
        #expect(cache.store.state.changeCounter != counterBefore)
        #expect(stable.subtracting(listed.keys).isEmpty)
        #expect(listed.values.allSatisfy { $0 == 1 })
    }

    /// Reads, writes and syncs from inside the closure all work; closing the cache being listed
    /// is refused (the C ABI would free the handle under the listing), and withValue keeps its
    /// own rule: no change through the handle lending bytes.
    @Test(.failsIfItHangs) func whatTheClosureMayDo() throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(path: directory.path("a.larder"))
        let other = try Cache(path: directory.path("b.larder"))
        let sameFile = try Cache(path: directory.path("a.larder"))
        try cache.set([1], forKey: "a")
        try other.set([2], forKey: "b")
        var codes: [String: LarderError.Code?] = [:]
        try cache.forEachEntry { _, _ in
            codes["set"] = errorCode { try cache.set([3], forKey: "x") }
            codes["set through another handle on the file"] = errorCode { try sameFile.set([4], forKey: "y") }
            codes["read"] = errorCode { _ = try cache.bytes(forKey: "a") }
            codes["sync"] = errorCode { try cache.sync() }
            codes["close"] = errorCode { try cache.close() }
            _ = try other.withValue(forKey: "b") { _ in
                codes["set inside withValue"] = errorCode { try other.set([5], forKey: "z") }
                codes["close inside withValue"] = errorCode { try other.close() }
                codes["set of the listed cache inside another's withValue"] = errorCode { try cache.set([6], forKey: "w") }
            }
            return false
        }
        #expect(codes == [
            "set": nil, "set through another handle on the file": nil, "read": nil, "sync": nil,
            "close": .invalidArgument, "set inside withValue": .invalidArgument,
            "close inside withValue": .invalidArgument, "set of the listed cache inside another's withValue": nil,
        ])
        #expect(try sameFile.bytes(forKey: "x") == [3])
        #expect(try cache.bytes(forKey: "w") == [6])
        try cache.close()
        #expect(try sameFile.bytes(forKey: "y") == [4])
    }
}

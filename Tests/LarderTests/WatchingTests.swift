import Foundation
import Testing
@testable import Larder

/// Watching a cache: changes to a key, a prefix or every key, made by this process or another.
@Suite("Watching")
struct WatchingTests {
    /// Collects what `stream` delivers until `isDone` holds for everything collected so far.
    static func collect(_ stream: AsyncStream<CacheChange>,
                        until isDone: @escaping @Sendable ([CacheChange]) -> Bool) -> Task<[CacheChange], Never> {
        Task {
            var seen: [CacheChange] = []
            for await change in stream {
                seen.append(change)
                if isDone(seen) { break }
            }
            return seen
        }
    }

    /// The last kind delivered for each key.
    static func lastKinds(_ changes: [CacheChange]) -> [String: CacheChange.Kind] {
        var last: [String: CacheChange.Kind] = [:]
        for change in changes { if let key = change.key { last[String(decoding: key, as: UTF8.self)] = change.kind } }
        return last
    }

    static func key(_ text: String) -> Data { Data(text.utf8) }

    @Test(.failsIfItHangs) func aWatchOfAKeySeesItsChangesInThisProcess() async throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(path: directory.path())
        let watched = Self.collect(try cache.changes(forKey: "a")) { $0.last == CacheChange(.removed, key: Self.key("a")) }
        try cache.set([1], forKey: "b")
        try cache.set([1], forKey: "a")
        try cache.removeValue(forKey: "a")
        let seen = await watched.value
        #expect(seen.allSatisfy { $0.key == Self.key("a") })
        #expect(seen.last == CacheChange(.removed, key: Self.key("a")))
    }

    @Test(.waitsOnItsOwnThreads, .failsIfItHangs) func watchesSeeWhatAnotherProcessChanges() async throws {
        let directory = TemporaryDirectory()
        let path = directory.path()
        let cache = try Cache(path: path)
        try cache.set([0], forKey: "user/2")
        let finalUsers: [String: CacheChange.Kind] = ["user/1": .stored, "user/2": .removed]
        let ofKey = Self.collect(try cache.changes(forKey: "user/1")) { $0.last == CacheChange(.stored, key: Self.key("user/1")) }
        let ofPrefix = Self.collect(try cache.changes(forKeysWithPrefix: "user/")) { seen in
            Self.lastKinds(seen) == finalUsers
        }
        let ofAll = Self.collect(try cache.changes()) { seen in
            Self.lastKinds(seen).filter { $0.key.hasPrefix("user/") } == finalUsers
        }

        await #expect(processExitsWith: .success) { [path = path as String] in
            let child = try Cache(path: path)
            try child.set([1], forKey: "user/1")
            try child.set([1], forKey: "other/9")
            try child.removeValue(forKey: "user/1")
            try child.removeValue(forKey: "user/2")
            try child.removeValue(forKey: "other/9")
            try child.set([2], forKey: "user/1")
            exit(0)
        }

        let key = await ofKey.value
        #expect(key.allSatisfy { $0.key == Self.key("user/1") })
        #expect(key.last == CacheChange(.stored, key: Self.key("user/1")))
        let prefix = await ofPrefix.value
        #expect(prefix.allSatisfy { $0.key.map { $0.starts(with: Data("user/".utf8)) } ?? false })
        #expect(Self.lastKinds(prefix) == finalUsers)
        // A key stored and removed before the watch looked is reported removed, or not at all.
        let all = await ofAll.value
        #expect(Self.lastKinds(all)["other/9"] ?? .removed == .removed)
    }

    /// A watch on a read-only handle: writers do not count it, so it looks by itself.
    @Test(.waitsOnItsOwnThreads, .failsIfItHangs) func aWatchOnAReadOnlyHandleSeesChanges() async throws {
        let directory = TemporaryDirectory()
        let path = directory.path()
        try Cache(path: path).close()
        let cache = try Cache(path: path, options: .init(readOnly: true))
        let watched = Self.collect(try cache.changes(forKeysWithPrefix: "k")) { Self.lastKinds($0)["k"] == .stored }
        await #expect(processExitsWith: .success) { [path = path as String] in
            let child = try Cache(path: path)
            try child.set([1], forKey: "k")
            exit(0)
        }
        #expect(Self.lastKinds(await watched.value)["k"] == .stored)
        #expect(cache.entry.store.changes.watcherCount == 0)
    }

    /// A watch of a key on a read-only handle with no watcher counted finds every change lost,
    /// and looks at its key: it reports the key only when its entry is another.
    @Test(.waitsOnItsOwnThreads, .failsIfItHangs) func aLostChangeOfAnotherKeyIsNotReported() async throws {
        let directory = TemporaryDirectory()
        let path = directory.path()
        try Cache(path: path).close()
        let reader = try Cache(path: path, options: .init(readOnly: true))
        let writer = try Cache(path: path)
        let stored = CacheChange(.stored, key: Self.key("a")), removed = CacheChange(.removed, key: Self.key("a"))
        var changes = try reader.changes(forKey: "a").makeAsyncIterator()
        try writer.set([1], forKey: "a")
        #expect(await changes.next() == stored)
        // Other keys, each change lost to the reader: its look finds "a" as it was.
        for round in 0..<20 {
            try writer.set([UInt8(round)], forKey: "b\(round)")
            try await Task.sleep(for: .milliseconds(5))
        }
        _ = try writer.removeValue(forKey: "a")
        #expect(await changes.next() == removed)
        #expect(writer.entry.store.changes.watcherCount == 0)
    }

    /// More changes than the ring holds before the watch reads them: it still ends on the final
    /// state, by looking at the cache itself.
    @Test(.failsIfItHangs) func aWatchThatFallsBehindEndsOnTheFinalState() async throws {
        let directory = TemporaryDirectory()
        let path = directory.path()
        try Cache(path: path).close()
        // Read-only: no writer wakes it, so it reads at most every 20 ms.
        let reader = try Cache(path: path, options: .init(readOnly: true))
        let writer = try Cache(path: path)
        let ofKey = Self.collect(try reader.changes(forKey: "last")) { $0.last == CacheChange(.stored, key: Self.key("last")) }
        let ofAll = Self.collect(try reader.changes()) { seen in seen.contains { $0.kind == .resynced || $0.key == Self.key("last") } }
        for round in 0..<(ChangeRing.slotCount * 4) { try writer.set([UInt8(round & 255)], forKey: "k\(round)") }
        try writer.set([1], forKey: "last")
        #expect(await ofKey.value.last == CacheChange(.stored, key: Self.key("last")))
        _ = await ofAll.value
    }

    @Test func theRingReportsAStretchItNoLongerHolds() throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(path: directory.path())
        let ring = cache.entry.store.changes
        // Writers fill slots only while a watcher is counted.
        ring.addWatcher()
        defer { ring.removeWatcher() }
        let start = ring.nextNumber
        for round in 0..<ChangeRing.slotCount { try cache.set([1], forKey: "k\(round)") }
        guard case .lost(let next) = ring.changes(since: start) else {
            Issue.record("a stretch of \(ChangeRing.slotCount) changes was read as whole")
            return
        }
        #expect(next == ring.nextNumber)
        guard case .changes(let changes, _) = ring.changes(since: start &+ 1) else {
            Issue.record("the last \(ChangeRing.slotCount - 1) changes were not read")
            return
        }
        #expect(changes.count == ChangeRing.slotCount - 1)
        let hash = "k\(ChangeRing.slotCount - 1)".withCacheKeyBytes { KeyHash($0).value }
        #expect(changes.last.map { $0.isOfKey(hashed: hash) && $0.kind == .stored } == true)
        // A number that went back (a damaged page) is a lost stretch too, not a wait for ever.
        guard case .lost = ring.changes(since: ring.nextNumber &+ 5) else {
            Issue.record("a cursor ahead of the ring was trusted")
            return
        }
    }

    /// With no watcher counted, a write only moves the change number: its slot keeps what an
    /// earlier lap left there, which a watcher counted in later reads as lost, never as a change.
    @Test func aChangeMadeWithNoWatcherIsReadAsLost() throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(path: directory.path())
        let ring = cache.entry.store.changes
        // A full lap of filled slots, then a lap written with nobody counted.
        ring.addWatcher()
        for round in 0..<ChangeRing.slotCount { try cache.set([1], forKey: "filled\(round)") }
        ring.removeWatcher()
        let unwatched = ring.nextNumber
        for round in 0..<ChangeRing.slotCount { try cache.set([2], forKey: "unfilled\(round)") }
        #expect(ring.nextNumber == unwatched &+ UInt64(ChangeRing.slotCount))
        // As when a watcher counts itself in while a writer has already read a count of 0.
        ring.addWatcher()
        defer { ring.removeWatcher() }
        for back in [1, 2, ChangeRing.slotCount - 1] {
            guard case .lost(let next) = ring.changes(since: ring.nextNumber &- UInt64(back)) else {
                Issue.record("a slot of an earlier lap was read as the change \(back) back")
                continue
            }
            #expect(next == ring.nextNumber)
        }
        // Once counted, every change is read again.
        let counted = ring.nextNumber
        try cache.set([3], forKey: "seen")
        guard case .changes(let changes, let next) = ring.changes(since: counted) else {
            Issue.record("a change made with a watcher counted was lost")
            return
        }
        let hash = "seen".withCacheKeyBytes { KeyHash($0).value }
        #expect(changes.count == 1 && changes[0].isOfKey(hashed: hash) && changes[0].kind == .stored)
        #expect(next == counted &+ 1)
    }

    /// A watch outlives `suspend()`: counted out of the file meanwhile, it looks at its key again
    /// after `resume()` and carries on.
    @Test(.failsIfItHangs) func aWatchCarriesOnAcrossSuspendAndResume() async throws {
        let directory = TemporaryDirectory()
        let path = directory.path()
        let cache = try Cache(path: path)
        let stored = CacheChange(.stored, key: Self.key("a")), removed = CacheChange(.removed, key: Self.key("a"))
        var changes = try cache.changes(forKey: "a").makeAsyncIterator()
        #expect(cache.entry.store.changes.watcherCount == 1)
        try cache.suspend()
        let other = try Cache(path: path)
        #expect(other.entry.store.changes.watcherCount == 0)
        try other.set([1], forKey: "a")
        try cache.resume()
        #expect(other.entry.store.changes.watcherCount == 1)
        // The watch reports "a" stored, from its look after the resume.
        var seen: [CacheChange] = []
        while let change = await changes.next() {
            seen.append(change)
            if change == stored { break }
        }
        _ = try other.removeValue(forKey: "a")
        while let change = await changes.next() {
            seen.append(change)
            if change == removed { break }
        }
        #expect(seen.allSatisfy { $0.key == Self.key("a") })
        #expect(seen.last == removed)
    }

    /// Ending the task that iterates a watch ends the watch: it is counted out of the file.
    @Test(.failsIfItHangs) func cancellingTheTaskEndsTheWatch() async throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(path: directory.path())
        let ring = cache.entry.store.changes
        let stream = try cache.changes()
        let task = Task { for await _ in stream {} }
        try await waitUntil(seconds: 240) { ring.watcherCount == 1 }
        #expect(ring.watcherCount == 1)
        task.cancel()
        await task.value
        try await waitUntil(seconds: 240) { ring.watcherCount == 0 }
        #expect(ring.watcherCount == 0)
    }

    @Test(.failsIfItHangs) func manyWatchesInOneProcessEachSeeTheirKey() async throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(path: directory.path())
        let count = 24
        var watches: [Task<[CacheChange], Never>] = []
        for index in 0..<count {
            let key = Self.key("w\(index)")
            watches.append(Self.collect(try cache.changes(forKey: key)) { $0.last == CacheChange(.stored, key: key) })
        }
        for index in 0..<count { try cache.set([UInt8(index)], forKey: "w\(index)") }
        for (index, watch) in watches.enumerated() {
            let seen = await watch.value
            #expect(seen.allSatisfy { $0.key == Self.key("w\(index)") })
        }
        try await waitUntil(seconds: 240) { cache.entry.store.changes.watcherCount == 0 }
        #expect(cache.entry.store.changes.watcherCount == 0)
    }

    @Test(.failsIfItHangs) func aClearIsReportedToEveryWatch() async throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(path: directory.path())
        try cache.set([1], forKey: "a")
        let ofKey = Self.collect(try cache.changes(forKey: "a")) { $0.last?.kind == .cleared }
        let ofAll = Self.collect(try cache.changes()) { $0.last?.kind == .cleared }
        _ = try cache.removeAll()
        #expect(await ofKey.value.last == CacheChange(.cleared, key: Self.key("a")))
        #expect(await ofAll.value.last == CacheChange(.cleared, key: nil))
    }

    /// A writer killed while it appends a change (the slot written, the number not moved, and
    /// the slot after it garbage) leaves watchers waiting as before; the next write wakes them.
    @Test(.waitsOnItsOwnThreads, .failsIfItHangs) func aWriterKilledWhileAppendingHangsNoWatcher() async throws {
        let directory = TemporaryDirectory()
        let path = directory.path()
        let cache = try Cache(path: path)
        let watched = Self.collect(try cache.changes(forKey: "after")) { $0.last == CacheChange(.stored, key: Self.key("after")) }
        await #expect(processExitsWith: .signal(SIGKILL)) { [path = path as String] in
            let child = try Cache(path: path)
            let store = child.entry.store
            try store.withWriterLock { () throws(LarderError) in
                let next = store.changes.nextNumber
                let slots = store.file.mutableBytes(at: store.pageSize + ChangeRing.slotsPageOffset,
                                                    count: ChangeRing.slotCount * ChangeRing.slotSize)
                let size = ChangeRing.slotSize, mask = UInt64(ChangeRing.slotCount - 1)
                // Slot `next`: its stamp, and a word of kind 7; slot `next + 1`: its word alone.
                slots.storeBytes(of: UInt64.max, toByteOffset: Int(next & mask) * size, as: UInt64.self)
                slots.storeBytes(of: next &+ 1, toByteOffset: Int(next & mask) * size + 8, as: UInt64.self)
                slots.storeBytes(of: UInt64(0x1234_5677), toByteOffset: Int((next + 1) & mask) * size, as: UInt64.self)
                kill(getpid(), SIGKILL)
            }
        }
        try cache.set([1], forKey: "after")
        #expect(await watched.value.last == CacheChange(.stored, key: Self.key("after")))
    }
}

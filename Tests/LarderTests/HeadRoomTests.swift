import Testing
@testable import Larder

/// Most placements take the room at the head without the general loop of placement
/// (`RingAllocator.headRoom`). That shortcut must place every record exactly where the loop
/// would: the same head, tail, span and file size after every write.
@Suite("The head's usual room")
struct HeadRoomTests {
    /// Where the ring stands: what the placement of the next record depends on.
    private struct Ring: Equatable {
        let head, tail, span, fileSize, count: Int

        init(_ store: CacheStore) {
            head = store.state.head
            tail = store.state.tail
            span = store.state.spanBytes
            fileSize = store.ringEnd
            count = store.state.entryCount
        }
    }

    /// Counts of the writes made in each case the shortcut answers.
    private struct Cases {
        var aheadBelowCapacity = 0, behindTail = 0, aheadAtCapacity = 0

        mutating func count(_ ring: Ring, capacity: Int) {
            guard ring.span > 0 else { return }
            if ring.tail >= ring.head {
                behindTail += 1
            } else if ring.fileSize < capacity {
                aheadBelowCapacity += 1
            } else {
                aheadAtCapacity += 1
            }
        }
    }

    #if DEBUG
    @Test("the shortcut places every record where the general loop does, below and at the capacity")
    func shortcutMatchesTheLoop() throws {
        let shortcut = TemporaryDirectory(), loop = TemporaryDirectory()
        let capacity = 6 << 20
        let fast = try Cache(at: shortcut.path(), capacity: capacity)
        let slow = try Cache(at: loop.path(), capacity: capacity)
        slow.store.takesHeadRoomFirst = false
        // Keys enough for the index to grow into the ring several times (islands), values of
        // many sizes, and removals: the head meets the tail, islands and the ring's end.
        var generator = SplitMix(seed: 29)
        var cases = Cases()
        for step in 0..<30_000 {
            let key = "k\(generator.next() % 4_000)"
            let before = Ring(fast.store)
            if generator.next() % 8 == 0 {
                #expect(try fast.removeValue(forKey: key) == slow.removeValue(forKey: key))
            } else {
                cases.count(before, capacity: capacity)
                let value = versionedBytes(key: step, version: step, length: 8 + Int(generator.next() % 3_000))
                try fast.set(value, forKey: key)
                try slow.set(value, forKey: key)
            }
            let placed = Ring(fast.store), expected = Ring(slow.store)
            #expect(placed == expected, "step \(step)")
            if placed != expected { break }
        }
        #expect(cases.aheadBelowCapacity > 0 && cases.behindTail > 0 && cases.aheadAtCapacity > 0, "\(cases)")
        #expect(fast.stats.evictions > 0 && fast.stats.evictions == slow.stats.evictions)
        try checkRingWalk(fast.store)
        try fast.close()
        try slow.close()
    }
    #endif

    /// The gap and the slack as FORMAT.md 6.1 and 6.4 define them, from the store's fields.
    private static func expectGapAndSlackAsSpecified(in store: CacheStore, _ comment: Comment) {
        let ringBytes = store.ringEnd - store.ringStart, capacity = store.meta.capacity
        let head = store.state.head, tail = store.state.tail, span = store.state.spanBytes
        let live = store.state.liveRecordBytes
        let islands = [store.layout.activeIsland, store.layout.drainingIsland].compactMap { $0 }
        let islandBytes = islands.reduce(0) { $0 + $1.end - $1.start }
        let parked = islands.filter { island in
            span == 0 || (tail > head ? (head..<tail).contains(island.start)
                                      : island.start >= head || island.start < tail)
        }.reduce(0) { $0 + $1.end - $1.start }
        #expect(store.allocator.value.gapBytes == ringBytes - span - parked, comment)
        let fixed = min(ringBytes / 16, 256 << 10) / 16 * 16
        let usableAtCapacity = capacity - store.ringStart - islandBytes
        let usable = ringBytes - islandBytes
        let passed = store.allocator.value.largestRecordPassedInPlace
        for size in [16, 48, 160, 1_024, 4_096, 65_536, 1 << 20] {
            var slack = fixed
            if store.ringEnd < capacity || live <= usableAtCapacity / 4 * 3 {
                let extra = max(2 * min(size, usable / 8), min(passed, usable / 4))
                slack += max(0, min(extra, (usable - live - size - fixed) / 2))
            }
            #expect(store.allocator.value.slack(for: size) == slack, "\(comment), size \(size)")
        }
    }

    @Test("the gap and the slack are as FORMAT.md specifies, below and at the capacity")
    func gapAndSlackAsSpecified() throws {
        let directory = TemporaryDirectory()
        let capacity = 4 << 20
        let cache = try Cache(at: directory.path(), capacity: capacity)
        var generator = SplitMix(seed: 31)
        var checks = 0, atCapacity = 0
        for step in 0..<20_000 {
            let key = "k\(generator.next() % 3_000)"
            if generator.next() % 8 == 0 {
                _ = try cache.removeValue(forKey: key)
            } else {
                try cache.set(versionedBytes(key: step, version: step, length: 8 + Int(generator.next() % 4_000)), forKey: key)
            }
            if step % 97 == 0 {
                Self.expectGapAndSlackAsSpecified(in: cache.store, "step \(step)")
                checks += 1
                if cache.store.ringEnd == capacity { atCapacity += 1 }
            }
        }
        #expect(atCapacity > 0 && atCapacity < checks)
        #expect(cache.stats.evictions > 0)
        try cache.close()
    }
}

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
}

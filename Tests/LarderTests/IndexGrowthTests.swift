import Foundation
import Testing
@testable import Larder

@Suite("Index growth")
struct IndexGrowthTests {
    @Test(arguments: [4096, 65536])
    func manyKeysStayFindableWhileTheIndexGrows(pageSize: Int) throws {
        let directory = TemporaryDirectory()
        let count = 60_000
        do {
            let cache = try Cache(at: directory.path(), capacity: 32 << 20, pageSize: pageSize)
            for index in 0..<count {
                try cache.set(pattern(index, count: index % 40), forKey: "key-\(index)")
                if index % 7_919 == 0 {
                    // Spot checks as the file and the index grow (the drain windows are short:
                    // the tests below stop inside them on purpose).
                    for probe in stride(from: 0, through: index, by: 997) {
                        #expect(try cache.bytes(forKey: "key-\(probe)") == pattern(probe, count: probe % 40))
                    }
                }
            }
            #expect(cache.count == count)
            #expect(cache.stats.evictions == 0)
            try cache.close()
        }
        let cache = try Cache(path: directory.path())
        #expect(cache.count == count)
        for index in 0..<count {
            #expect(try cache.bytes(forKey: "key-\(index)") == pattern(index, count: index % 40))
        }
    }

    /// Halfway through a doubling, keys live in both tables, and a lookup picks the table to
    /// probe first from the migration cursor: every key must still be found, with its value,
    /// and absent keys must miss.
    @Test func everyKeyIsFoundHalfwayThroughADoubling() throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(at: directory.path(), capacity: 16 << 20)
        var count = 0
        func drainedHalf() -> Bool {
            guard count > 10_000, let old = cache.entry.store.draining else { return false }
            return cache.entry.store.state.migrationCursor >= old.slotCount / 2
        }
        while !drainedHalf() {
            try cache.set(pattern(count, count: 12), forKey: "key-\(count)")
            count += 1
            try #require(count < 200_000)
        }
        for index in 0..<count {
            #expect(try cache.bytes(forKey: "key-\(index)") == pattern(index, count: 12), "key-\(index)")
        }
        for index in count..<(count + 2_000) {
            #expect(try cache.bytes(forKey: "key-\(index)") == nil)
        }
        #expect(cache.entry.store.draining != nil)
    }

    @Test func removalsWhileGrowingDoNotLoseOtherKeys() throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(at: directory.path(), capacity: 16 << 20)
        for index in 0..<20_000 {
            try cache.set(pattern(index, count: 8), forKey: "k\(index)")
            if index % 3 == 0 { try cache.removeValue(forKey: "k\(index / 2)") }
        }
        var removed = Set<Int>()
        for index in 0..<20_000 where index % 3 == 0 { removed.insert(index / 2) }
        for index in 0..<20_000 {
            let expected = removed.contains(index) ? nil : pattern(index, count: 8)
            #expect(try cache.bytes(forKey: "k\(index)") == expected, "k\(index)")
        }
        #expect(cache.count == 20_000 - removed.count)
    }
}

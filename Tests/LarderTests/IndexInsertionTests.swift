import Foundation
import Testing
@testable import Larder

/// A put of a new key inserts its slot where its lookup met an empty slot, unless the room the
/// put makes changed the index meanwhile: evictions shift the probe run back, and the slot must
/// then go to the first empty slot again, or the key could not be found.
@Suite("Index insertion")
struct IndexInsertionTests {
    /// Keys found by search whose home slot is the same in a table of the smallest size: their
    /// probe sequences are one run of slots.
    private static func keysSharingAHome(count: Int) -> [String] {
        let shift = HashTable.tagBits - HashTable.minimumSlotCount.trailingZeroBitCount
        var byHome: [UInt32: [String]] = [:]
        var index = 0
        while true {
            let key = "run-\(index)"
            index += 1
            let home = Array(key.utf8).withUnsafeBytes { KeyHash($0).tag } >> shift
            byHome[home, default: []].append(key)
            if let keys = byHome[home], keys.count == count { return keys }
        }
    }

    private let keys = IndexInsertionTests.keysSharingAHome(count: 120)

    @Test("a new key stays findable when making its room evicts keys of its probe run")
    func newKeysStayFindableWhenEvictionsShiftTheirRun() throws {
        let directory = TemporaryDirectory()
        // Room for a few dozen of these records: from then on, each put evicts the oldest ones,
        // whose slots lie in the run the put's lookup walked.
        let cache = try Cache(at: directory.path(), capacity: 256 << 10)
        try #require(cache.entry.store.active.slotCount == HashTable.minimumSlotCount)
        for (index, key) in keys.enumerated() {
            try cache.set(pattern(index, count: 6_000), forKey: key)
            #expect(try cache.bytes(forKey: key) == pattern(index, count: 6_000), "\(key)")
        }
        #expect(cache.stats.evictions > 0)
        var present = 0
        for (index, key) in keys.enumerated() {
            guard let value = try cache.bytes(forKey: key) else { continue }
            #expect(value == pattern(index, count: 6_000), "\(key)")
            present += 1
        }
        #expect(present == cache.count)
    }

    @Test("a new key stays findable when removals and updates change its run between puts")
    func newKeysStayFindableAmongRemovalsAndUpdates() throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(at: directory.path(), capacity: 4 << 20)
        var expected: [String: [UInt8]] = [:]
        for (index, key) in keys.enumerated() {
            try cache.set(pattern(index, count: 40), forKey: key)
            expected[key] = pattern(index, count: 40)
            if index % 3 == 2 {
                // A removal shifts the run back; an update repoints a slot (or writes in place).
                let removed = keys[index / 2]
                #expect(try cache.removeValue(forKey: removed) == (expected[removed] != nil))
                expected[removed] = nil
                try cache.set(pattern(-index, count: 300), forKey: keys[index - 1])
                expected[keys[index - 1]] = pattern(-index, count: 300)
            }
        }
        for key in keys {
            #expect(try cache.bytes(forKey: key) == expected[key], "\(key)")
        }
        #expect(cache.count == expected.count)
    }
}

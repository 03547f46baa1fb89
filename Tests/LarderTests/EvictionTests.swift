import Foundation
import Testing
@_spi(Inspection) @testable import Larder

@Suite("Eviction")
struct EvictionTests {
    @Test("the file never exceeds its capacity, and the newest entry is always there")
    func capacityIsHard() throws {
        let directory = TemporaryDirectory()
        let capacity = 512 * 1024
        let cache = try Cache(at: directory.path(), capacity: capacity)
        for index in 0..<2_000 {
            let value = pattern(index, count: 100 + (index * 37) % 3000)
            try cache.set(value, forKey: "key-\(index)")
            #expect(try cache.bytes(forKey: "key-\(index)") == value)
            #expect(cache.fileBytes <= capacity)
        }
        let size = try FileManager.default.attributesOfItem(atPath: directory.path())[.size] as! Int
        #expect(size <= capacity)
        #expect(cache.stats.evictions > 0)
    }

    @Test("a cache a third full keeps every key of large values through any number of updates",
          arguments: [UInt64(1), 2, 3, 4])
    func largeValuesAreNotEvictedFromACacheFarFromFull(seed: UInt64) throws {
        let directory = TemporaryDirectory()
        // Values larger than the fixed part of the room kept free in front of the head.
        let cache = try Cache(at: directory.path(), capacity: 3 << 20)
        let keys = 4
        // Keys of different lengths make records of different sizes: the room in front of the
        // head is then rarely a whole number of records.
        func name(_ key: Int) -> String { String(repeating: "k", count: 1 + 19 * key) }
        let base = pattern(7, count: 256 << 10)
        func value(_ key: Int, _ version: Int) -> [UInt8] {
            var bytes = base
            withUnsafeBytes(of: (key, version)) { bytes.replaceSubrange(0..<$0.count, with: $0) }
            return bytes
        }
        var version = [Int](repeating: 0, count: keys)
        for key in 0..<keys { try cache.set(value(key, 0), forKey: name(key)) }
        // Seeded: a sequence that failed fails again.
        var generator = SplitMix(seed: seed)
        for _ in 0..<300 {
            let key = Int.random(in: 0..<keys, using: &generator)
            version[key] += 1
            try cache.set(value(key, version[key]), forKey: name(key))
        }
        for key in 0..<keys {
            #expect(try cache.bytes(forKey: name(key)) == value(key, version[key]), "key \(key)")
        }
        #expect(cache.stats.evictions == 0)
    }

    @Test("a large value put into a cache of many small entries, far from full, evicts none")
    func aLargeValueAmongSmallOnesEvictsNothing() throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(at: directory.path(), capacity: 1 << 20)
        for key in 0..<3_000 { try cache.set(pattern(key, count: 8), forKey: "s\(key)") }
        let big = pattern(-1, count: 512 << 10)
        try cache.set(big, forKey: "big")
        #expect(try cache.bytes(forKey: "big") == big)
        #expect(cache.stats.evictions == 0)
        #expect(cache.count == 3_001)
    }

    @Test("values overwritten round-robin at two thirds of the capacity are all kept")
    func roundRobinOverwritesBelowTheThresholdKeepEveryKey() throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(at: directory.path(), capacity: 4 << 20)
        let keys = 7
        for round in 0..<12 {
            for key in 0..<keys { try cache.set(pattern(round * keys + key, count: 400_000), forKey: "v\(key)") }
        }
        for key in 0..<keys {
            #expect(try cache.bytes(forKey: "v\(key)") == pattern(11 * keys + key, count: 400_000), "v\(key)")
        }
        #expect(cache.stats.evictions == 0)
    }

    /// Unique keys written and never read: the least recently used are the oldest, so a full
    /// cache gives up its entries in the order they were written, and what it keeps is the
    /// newest run of them, each with its own value.
    @Test("writes into a full cache evict the oldest unread entries first, and keep the newest run")
    func writesEvictTheOldestUnreadEntries() throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(at: directory.path(), capacity: 1 << 20)
        func value(_ index: Int) -> [UInt8] { pattern(index, count: 1_800 + (index * 37) % 500) }
        var written = 0
        while cache.stats.evictions <= 50 && written < 20_000 {
            try cache.set(value(written), forKey: "k\(written)")
            written += 1
        }
        var present: [Int] = []
        for index in 0..<written {
            guard let stored = try cache.bytes(forKey: "k\(index)") else { continue }
            #expect(stored == value(index), "k\(index)")
            present.append(index)
        }
        #expect(present.count > 100)
        #expect(present.count == cache.count)
        let newestEvicted = (0..<written).last { !present.contains($0) } ?? -1
        let isTheNewestRun = present == Array((written - present.count)..<written)
        #expect(isTheNewestRun, "kept \(present.count) of \(written): the oldest k\(present.first ?? -1), evicted k\(newestEvicted)")
    }

    @Test("a key read all the time survives any amount of writing")
    func hotKeySurvives() throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(at: directory.path(), capacity: 1 << 20)
        try cache.set(pattern(-1, count: 64), forKey: "hot")
        for index in 0..<3_000 {
            try cache.set(pattern(index, count: 10_000), forKey: "blob-\(index)")
            if index % 20 == 0 {
                #expect(try cache.bytes(forKey: "hot") == pattern(-1, count: 64), "lost at \(index)")
            }
        }
    }

    /// A reader held up between its lookup and its pin pins the range its old header named,
    /// which the ring may have filled otherwise since: here one that starts just ahead of the
    /// head and reaches into the index segment parked in the gap of a full ring. The writer must
    /// not take it for a record to step over (before, the head jumped to its end, inside the
    /// segment, and wrote records over index slots).
    @Test func aStalePinIsNoObstacle() throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(at: directory.path(), capacity: 1 << 20)
        let store = cache.store
        var written = 0
        func write() throws {
            try cache.set(pattern(written, count: 1_000), forKey: "k\(written)")
            written += 1
        }
        // Until the active segment lies in the gap, at least a record's length ahead of the head.
        var island: (start: Int, end: Int)?
        while written < 50_000 {
            try write()
            if written > 2_000, let active = store.layout.activeIsland, store.state.tail > store.state.head,
               active.start > store.state.head + 2_048, active.start < store.state.tail {
                island = active
                break
            }
        }
        let parked = try #require(island, "the index segment never lay ahead of the head")
        let pin = try #require(store.readers.pin(start: store.state.head + 32, end: parked.start + 64))
        for _ in 0..<100 {
            try write()
            // Records go around a live index segment, never into it (FORMAT.md 6.2).
            if let active = store.layout.activeIsland {
                #expect(!(active.start..<active.end).contains(store.state.head), "the head inside the index segment")
            }
        }
        store.readers.unpin(pin)
        for _ in 0..<100 { try write() }
        var found = 0
        for index in 0..<written {
            guard let value = try cache.bytes(forKey: "k\(index)") else { continue }
            #expect(value == pattern(index, count: 1_000), "k\(index)")
            found += 1
        }
        #expect(found == cache.count && found > 100)
        #expect(try FileInspector(path: directory.path()).verify().report.problems.isEmpty)
    }

    @Test("a full cache whose every range is lent out refuses a put as busy, not corrupt, and takes it afterwards")
    func pinsAllRoundTheRingMakeAPutBusy() throws {
        let directory = TemporaryDirectory()
        let capacity = 256 << 10
        let cache = try Cache(at: directory.path(), capacity: capacity)
        for index in 0..<100 { try cache.set(pattern(index, count: 5_000), forKey: "k\(index)") }
        #expect(cache.fileBytes == capacity)
        // Every record is lent, as many zero-copy reads of processes that keep their values for
        // long would: each pin covers one record whole, as a reader's does.
        let store = cache.store
        var pins: [Int] = []
        var offset = store.ringStart
        while offset < store.ringEnd {
            if let length = RecordHeader.paddingLength(in: store.file, at: offset, limit: store.ringEnd) {
                offset += length
                continue
            }
            guard let header = RecordHeader.read(from: store.file, at: offset, limit: store.ringEnd, seed: store.seed) else { break }
            if header.kind == .entry { pins.append(try #require(store.readers.pin(start: offset, end: offset + header.totalSize))) }
            offset += header.totalSize
        }
        #expect(pins.count >= 40)
        let count = cache.count
        let refusal = #expect(throws: LarderError.self) { try cache.set(pattern(1000, count: 50_000), forKey: "large") }
        #expect(refusal?.code == .busy)
        #expect(cache.count <= count)
        for pin in pins { store.readers.unpin(pin) }
        try cache.set(pattern(1000, count: 50_000), forKey: "large")
        #expect(try cache.bytes(forKey: "large") == pattern(1000, count: 50_000))
        for index in 0..<100 {
            guard let value = try cache.bytes(forKey: "k\(index)") else { continue }
            #expect(value == pattern(index, count: 5_000), "k\(index)")
        }
    }
}

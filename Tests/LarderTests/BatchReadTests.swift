import Foundation
import Testing
@testable import Larder

/// Reading many keys at once gives what reading them one by one gives, in the keys' order.
@Suite("Batch reads")
struct BatchReadTests {
    @Test func aBatchReadsWhatSingleReadsRead() throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(path: directory.path(), options: .init(compression: .lz4, compressionThreshold: 512))
        // Lengths from 0 to 3,000 bytes: some grow the batch's copy buffer, some are compressed.
        for index in 0..<1000 { try cache.set(pattern(index, count: index * 3), forKey: "key-\(index)") }
        try cache.set([Character](repeating: "a", count: 5000).map { UInt8($0.asciiValue!) }, forKey: "key-squeezable")
        try cache.set([1], forKey: "key-expired", expiry: .date(Date(timeIntervalSinceNow: -1)))
        var generator = SplitMix(seed: 7)
        // Present, absent and expired keys, in random order, some more than once; 2,500 of them
        // span many batches, and the last batch is a partial one.
        var keys = (0..<2497).map { _ in "key-\(generator.next() % 1300)" }
        keys += ["key-squeezable", "key-expired", "key-squeezable"]
        let single = try keys.map { try cache.bytes(forKey: $0) }
        let hits = cache.stats.hits, misses = cache.stats.misses

        var batch = [[UInt8]?](repeating: nil, count: keys.count)
        var calls: [Int] = []
        try cache.withValues(forKeys: keys) { index, value in
            calls.append(index)
            batch[index] = value.map { Array($0) }
        }
        #expect(calls == Array(keys.indices))
        #expect(batch == single)
        #expect(single.contains { $0 == nil } && single.contains { $0 != nil })
        // Each read counts as one hit or one miss, as single reads do.
        #expect(cache.stats.hits - hits == UInt64(single.count { $0 != nil }))
        #expect(cache.stats.misses - misses == UInt64(single.count { $0 == nil }))

        let data = try cache.data(forKeys: keys.map { Data($0.utf8) })
        #expect(data.map { $0.map { [UInt8]($0) } } == single)
        #expect(try cache.data(forKeys: [String]()).isEmpty)
    }

    /// Keys up to the 4,096-byte limit, mixed with short ones: a batch's keys take several KiB,
    /// more than the room a batch starts with, and each keeps its own bytes.
    @Test func longKeysInABatchAreWrittenReadAndRemovedAsSingleCallsDo() throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(path: directory.path())
        let keys = (0..<40).map { index in
            [UInt8](repeating: UInt8(index), count: index % 3 == 0 ? 3 : CacheStore.maximumKeyLength - index)
        }
        let values = keys.indices.map { index in [UInt8](repeating: UInt8(255 - index), count: index) }
        try cache.set(zip(keys, values).map { (key: $0, value: $1) })
        #expect(try keys.map { try cache.bytes(forKey: $0) } == values)

        var read = [[UInt8]?](repeating: nil, count: keys.count)
        try cache.withValues(forKeys: keys) { index, value in read[index] = value.map { Array($0) } }
        #expect(read == values)
        #expect(try cache.data(forKeys: keys).map { $0.map { [UInt8]($0) } } == values)

        #expect(try cache.removeValues(forKeys: keys) == keys.count)
        #expect(cache.count == 0)
    }

    /// In async code the overload taken reads off the caller's actor: the keys are read
    /// elsewhere.
    @Test func asyncCodeReadsABatchOffItsActor() async throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(path: directory.path())
        try cache.set([1], forKey: "a")
        try cache.set([3, 3], forKey: "c")
        let keys = WatchedCollection(["a", "b", "c"])
        let values = try await QueueActor().run { (_) async throws(LarderError) in try await cache.data(forKeys: keys) }
        #expect(values == [Data([1]), nil, Data([3, 3])])
        #expect(keys.reads.value > 0 && keys.readsOnTheActor.value == 0)
    }

    @Test func aKeyThatCannotBeReadStopsTheBatchThere() throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(path: directory.path())
        try cache.set([1], forKey: "a")
        var seen: [Int] = []
        #expect(throws: LarderError.self) {
            try cache.withValues(forKeys: [Data("a".utf8), Data(), Data("a".utf8)]) { index, _ in seen.append(index) }
        }
        #expect(seen == [0])
        struct Stop: Error {}
        #expect(throws: Stop.self) {
            try cache.withValues(forKeys: ["a", "a"]) { index, _ in
                seen.append(index)
                throw Stop()
            }
        }
        #expect(seen == [0, 0])
    }

    /// The batch's loads ahead are hints; what it returns is checked as a single read checks it,
    /// while another thread writes the same keys over and over.
    @Test(.failsIfItHangs) func batchesWhileAnotherThreadWritesGetNoMixedValue() throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(path: directory.path(), options: .init(capacity: .megabytes(8)))
        let keys = 64
        for key in 0..<keys { try cache.set(versionedBytes(key: key, version: 0, length: 200 + key), forKey: "k\(key)") }
        let names = (0..<keys).map { "k\($0)" }
        let done = AtomicWord()
        let wrong = LockedCounter(), missing = LockedCounter(), failures = LockedCounter()
        runOnThreads(2) { thread in
            if thread == 0 {
                var version = 1
                while done.load() == 0 {
                    for key in 0..<keys {
                        // Lengths change, so records move as well as being written over.
                        do {
                            try cache.set(versionedBytes(key: key, version: version, length: 200 + (key + version) % 300), forKey: "k\(key)")
                        } catch { failures.increment() }
                    }
                    version += 1
                }
                return
            }
            for _ in 0..<300 {
                do {
                    try cache.withValues(forKeys: names) { index, value in
                        guard let value else { return missing.increment() }
                        let version = Int(value.loadUnaligned(fromByteOffset: 4, as: UInt32.self))
                        if Array(value) != versionedBytes(key: index, version: version, length: value.count) { wrong.increment() }
                    }
                } catch { failures.increment() }
            }
            done.store(1)
        }
        #expect(wrong.value == 0)
        #expect(missing.value == 0)
        #expect(failures.value == 0)
    }
}

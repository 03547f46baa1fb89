import Foundation
import Testing
@testable import Larder

/// Writing or removing many keys at once leaves the cache as doing it one by one leaves it.
@Suite("Batch writes")
struct BatchWriteTests {
    @Test func aBatchStoresWhatSingleWritesStore() throws {
        let directory = TemporaryDirectory()
        let options = Cache.Options(capacity: .kilobytes(512), compression: .lz4, compressionThreshold: 512)
        let single = try Cache(path: directory.path("single.larder"), options: options)
        let batched = try Cache(path: directory.path("batched.larder"), options: options)
        var generator = SplitMix(seed: 11)
        // 2,500 writes over 700 keys: new keys and updates, some twice in one batch, lengths from 0
        // to 3,000 bytes (some compressed), many batches and a partial last one; enough data that
        // the 512 KiB cache evicts.
        let entries = (0..<2500).map { step -> (key: String, value: [UInt8]) in
            let key = Int(generator.next() % 700)
            return ("key-\(key)", pattern(step, count: Int(generator.next() % 3000)))
        }
        for entry in entries { try single.set(entry.value, forKey: entry.key) }
        try batched.set(entries)

        #expect(batched.count == single.count)
        #expect(batched.stats.inserts == single.stats.inserts && batched.stats.updates == single.stats.updates)
        #expect(batched.stats.evictions == single.stats.evictions && batched.stats.evictions > 0)
        for key in Set(entries.map(\.key)) {
            #expect(try batched.bytes(forKey: key) == single.bytes(forKey: key), "\(key)")
        }
        // The last value written for a key is the one kept.
        let last = Dictionary(entries, uniquingKeysWith: { _, newer in newer })
        let survivors = last.filter { batched.contains($0.key) }
        #expect(!survivors.isEmpty)
        for (key, value) in survivors { #expect(try batched.bytes(forKey: key) == value) }

        // A dictionary is a collection of entries too; an empty one writes nothing.
        try batched.set(["from-a-dictionary": Data([1, 2]), "and-another": Data([3])])
        #expect(try batched.bytes(forKey: "from-a-dictionary") == [1, 2])
        let count = batched.count
        try batched.set([(key: String, value: Data)]())
        #expect(batched.count == count)
    }

    @Test func theBatchsExpiryAndCompressionApplyToEveryEntry() throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(path: directory.path())
        let squeezable = [UInt8](repeating: 7, count: 4000)
        try cache.set((0..<40).map { (key: "s\($0)", value: squeezable) }, compression: .lz4)
        #expect(cache.stats.storedBytes < cache.stats.liveBytes / 10)
        try cache.set((0..<40).map { (key: "e\($0)", value: [UInt8($0)]) }, expiry: .date(Date(timeIntervalSinceNow: -1)))
        #expect((0..<40).allSatisfy { !cache.contains("e\($0)") })
        #expect(try (0..<40).allSatisfy { try cache.bytes(forKey: "s\($0)") == squeezable })
    }

    @Test func anEntryThatCannotBeStoredStopsTheBatchThere() throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(path: directory.path())
        let tooLong = String(repeating: "k", count: CacheStore.maximumKeyLength + 1)
        #expect(errorCode { try cache.set([(key: "a", value: [1]), (key: "", value: [2]), (key: "c", value: [3])]) } == .invalidArgument)
        #expect(errorCode { try cache.set([(key: "d", value: [4]), (key: tooLong, value: [5]), (key: "f", value: [6])]) } == .tooLarge)
        #expect(try cache.bytes(forKey: "a") == [1] && cache.bytes(forKey: "d") == [4])
        #expect(!cache.contains("c") && !cache.contains("f"))
        #expect(cache.count == 2)
    }

    @Test func aBatchRemovesWhatSingleRemovalsRemove() throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(path: directory.path())
        for index in 0..<100 { try cache.set(pattern(index, count: index), forKey: "key-\(index)") }
        try cache.set([1], forKey: "expired", expiry: .date(Date(timeIntervalSinceNow: -1)))
        // Every third key, twice over, an absent one and an expired one, over several batches.
        let keys = stride(from: 0, to: 100, by: 3).map { "key-\($0)" } + ["key-3", "absent", "expired", "key-99"]
        let removals = cache.stats.removals
        #expect(try cache.removeValues(forKeys: keys) == 34)
        #expect(cache.stats.removals - removals == 34)
        #expect(cache.count == 66)
        for index in 0..<100 {
            #expect(cache.contains("key-\(index)") == (index % 3 != 0))
        }
        // An empty key stops the batch there: the keys before it are removed, those after it not.
        #expect(errorCode { try cache.removeValues(forKeys: ["key-1", "", "key-2"]) } == .invalidArgument)
        #expect(!cache.contains("key-1") && cache.contains("key-2"))
    }

    @Test func asyncCodeRemovesABatchOffItsActor() async throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(path: directory.path())
        try cache.set([1], forKey: "a")
        let keys = WatchedCollection(["a", "b"])
        let removed = try await QueueActor().run { (_) async throws(LarderError) in try await cache.removeValues(forKeys: keys) }
        #expect(removed == 1 && !cache.contains("a"))
        #expect(keys.reads.value > 0 && keys.readsOnTheActor.value == 0)
    }

    /// In async code the overload taken writes off the caller's actor: the entries are read
    /// elsewhere.
    @Test func asyncCodeWritesABatchOffItsActor() async throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(path: directory.path())
        let entries = WatchedCollection([(key: "a", value: Data([1])), (key: "b", value: Data([2, 2]))])
        try await QueueActor().run { (_) async throws(LarderError) in try await cache.set(entries) }
        #expect(entries.reads.value > 0 && entries.readsOnTheActor.value == 0)
        #expect(try await cache.data(forKeys: ["a", "b"]) == [Data([1]), Data([2, 2])])
    }

    /// Each write of a batch is a single write: a reader of another thread finds every key, with
    /// a whole value, old or new, while batches write them over and over.
    @Test(.failsIfItHangs) func readersWhileBatchesWriteGetNoMixedValue() throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(path: directory.path(), options: .init(capacity: .megabytes(8)))
        let keys = 64
        for key in 0..<keys { try cache.set(versionedBytes(key: key, version: 0, length: 200 + key), forKey: "k\(key)") }
        let done = AtomicWord(), readerStarted = AtomicWord()
        let reads = LockedCounter(), wrong = LockedCounter(), missing = LockedCounter(), failures = LockedCounter()
        runOnThreads(2) { thread in
            if thread == 0 {
                while readerStarted.load() == 0 { sched_yield() }
                for version in 1...300 {
                    // Lengths change, so records move as well as being written over.
                    let entries = (0..<keys).map { key in
                        (key: "k\(key)", value: versionedBytes(key: key, version: version, length: 200 + (key + version) % 300))
                    }
                    do { try cache.set(entries) } catch { failures.increment() }
                }
                done.store(1)
                return
            }
            var generator = SplitMix(seed: 3)
            readerStarted.store(1)
            while done.load() == 0 {
                let key = Int(generator.next() % UInt64(keys))
                reads.increment()
                do {
                    guard let value = try cache.bytes(forKey: "k\(key)") else { missing.increment(); continue }
                    let version = value.withUnsafeBytes { Int($0.loadUnaligned(fromByteOffset: 4, as: UInt32.self)) }
                    if value != versionedBytes(key: key, version: version, length: value.count) { wrong.increment() }
                } catch { failures.increment() }
            }
        }
        #expect(reads.value > 0)
        #expect(wrong.value == 0)
        #expect(missing.value == 0)
        #expect(failures.value == 0)
        #expect(cache.stats.updates == UInt64(300 * keys))
    }
}

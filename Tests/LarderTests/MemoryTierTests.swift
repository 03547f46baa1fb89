import Foundation
import Synchronization
import Testing
@testable import Larder

/// A ~1 KiB Codable value, as an app would keep a profile or an article.
struct Profile: Codable, Equatable, Sendable {
    var id: Int
    var name: String
    var version: Int
    var tags: [String]

    static func make(_ id: Int, version: Int = 1) -> Profile {
        Profile(id: id, name: "user \(id)", version: version, tags: (0..<4).map { "tag\($0)" })
    }
}

/// A value that is not Codable, with a conversion of the tests' own: a "bitmap" whose cost in
/// memory is larger than its bytes, as a decoded image's is.
final class Bitmap: @unchecked Sendable {
    let pixels: [UInt8]
    init(pixels: [UInt8]) { self.pixels = pixels }
}

struct BitmapConversion: CacheConversion {
    /// Thrown by `bytes(from:)` for a bitmap of no pixels, and by `value(from:)` for bytes that do
    /// not start with "BMP".
    struct NotABitmap: Error {}
    /// The cost of each bitmap (nil: four times its pixels).
    var fixedCost: Int?

    func bytes(from value: Bitmap) throws -> Data {
        guard !value.pixels.isEmpty else { throw NotABitmap() }
        return Data("BMP".utf8) + Data(value.pixels)
    }

    func value(from bytes: Data) throws -> Bitmap {
        guard bytes.starts(with: Data("BMP".utf8)) else { throw NotABitmap() }
        return Bitmap(pixels: [UInt8](bytes.dropFirst(3)))
    }

    func memoryCost(of value: Bitmap) -> Int { fixedCost ?? value.pixels.count * 4 }
}

@Suite("Memory tier")
struct MemoryTierTests {
    @Test func aSecondReadComesFromMemoryAndIsTheSameObject() throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(path: directory.path())
        try cache.set(Bitmap(pixels: [1, 2, 3]), forKey: "b", using: BitmapConversion())
        let first = try #require(try cache.value(forKey: "b", using: BitmapConversion()))
        let second = try #require(try cache.value(forKey: "b", using: BitmapConversion()))
        #expect(first === second)
        #expect(first.pixels == [1, 2, 3])
        let stats = cache.stats
        #expect(stats.memoryHits == 2)
        #expect(stats.memoryMisses == 0)
        #expect(stats.hits == 0, "a memory hit reads no value from the file")
        #expect(stats.memoryCount == 1 && stats.memoryCost == 12)
    }

    @Test func codableValuesAreKeptAfterTheFirstRead() throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(path: directory.path())
        try cache.set(Profile.make(1), forKey: "p1", placement: .fileOnly)
        #expect(cache.memoryUsage.count == 0)
        #expect(try cache.value(Profile.self, forKey: "p1") == Profile.make(1))
        #expect(cache.stats.memoryMisses == 1 && cache.stats.hits == 1)
        #expect(try cache.value(Profile.self, forKey: "p1") == Profile.make(1))
        #expect(cache.stats.memoryHits == 1 && cache.stats.hits == 1)
    }

    @Test func anotherHandleOfTheProcessChangesWhatTheTierReturns() throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(path: directory.path())
        let other = try Cache(path: directory.path(), options: .init(memory: nil))
        try cache.set(Profile.make(1), forKey: "p")
        try other.set(Profile.make(1, version: 2), forKey: "p")
        #expect(try cache.value(Profile.self, forKey: "p")?.version == 2)
        try other.removeValue(forKey: "p")
        #expect(try cache.value(Profile.self, forKey: "p") == nil)
        try cache.set(Profile.make(1, version: 3), forKey: "p")
        try other.set(Data("not json".utf8), forKey: "p")
        // A value that no longer decodes is never the remembered one.
        #expect(throws: DecodingError.self) { try cache.value(Profile.self, forKey: "p") }
        #expect(cache.memoryUsage.count == 0)
    }

    @Test func expiryEndsAnObjectInMemory() async throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(path: directory.path())
        let start = ContinuousClock.now
        try cache.set(Profile.make(1), forKey: "p", expiry: .seconds(0.5))
        let remembered = try await cache.value(Profile.self, forKey: "p")
        // Read before its time (unless a loaded machine held the test up that long): there.
        if ContinuousClock.now - start < .milliseconds(480) { #expect(remembered != nil) }
        try await Task.sleep(for: .milliseconds(600))
        #expect(try await cache.value(Profile.self, forKey: "p") == nil)
    }

    @Test func theFilesMaximumAgeEndsAnObjectInMemory() async throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(path: directory.path(), options: .init(maximumAge: 0.05))
        let start = ContinuousClock.now
        try cache.set(Profile.make(1), forKey: "p")
        let remembered = try await cache.value(Profile.self, forKey: "p")
        // Read before its time (unless a loaded machine held the test up that long): from memory.
        if ContinuousClock.now - start < .milliseconds(45) {
            #expect(remembered == Profile.make(1))
            #expect(cache.stats.memoryHits == 1)
        }
        try await Task.sleep(for: .milliseconds(120))
        #expect(try await cache.value(Profile.self, forKey: "p") == nil)
    }

    @Test func aReadFromMemoryPushesASlidingExpiry() async throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(path: directory.path())
        // A window no stall of a loaded machine outlasts: the push needs only a millisecond.
        try cache.set(Profile.make(1), forKey: "p", expiry: .sliding(3600))
        func slideCount() throws -> UInt8 {
            try #require(try cache.write { store throws(LarderError) in
                Array("p".utf8).withUnsafeBytes { store.lookup($0, hash: KeyHash($0)) }
            }).header.slideCount
        }
        #expect(try slideCount() == 0)
        // A read a little later asks for a window from then, past the one the write gave.
        try await Task.sleep(for: .milliseconds(20))
        #expect(try await cache.value(Profile.self, forKey: "p") == Profile.make(1))
        #expect(cache.stats.memoryHits == 1)
        #expect(try slideCount() > 0)
    }

    @Test func theCountLimitIsHeld() throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(path: directory.path(), options: .init(memory: MemoryLimits(count: 10)))
        for key in 0..<50 { try cache.set(Profile.make(key), forKey: "p\(key)") }
        #expect(cache.memoryUsage.count == 10)
        // Everything is still in the file.
        for key in 0..<50 { #expect(try cache.value(Profile.self, forKey: "p\(key)", placement: .fileOnly) == Profile.make(key)) }
    }

    @Test func theCostLimitIsHeldAcrossShards() throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(path: directory.path(), options: .init(memory: MemoryLimits(cost: .bytes(10_000), count: 5_000)))
        for key in 0..<500 { try cache.set(Bitmap(pixels: [UInt8](repeating: 1, count: 100)), forKey: "b\(key)", using: BitmapConversion()) }
        let usage = cache.memoryUsage
        #expect(usage.cost <= 10_000 && usage.cost >= 9_000)
        #expect(usage.count == usage.cost / 400)
        // One object over the whole limit is not kept, and nothing is lost from the file.
        try cache.set(Bitmap(pixels: [UInt8](repeating: 2, count: 3_000)), forKey: "big", using: BitmapConversion())
        #expect(cache.memoryUsage.cost <= 10_000)
        #expect(try cache.value(forKey: "big", using: BitmapConversion())?.pixels.count == 3_000)
    }

    @Test func sieveKeepsObjectsThatAreReadOverOnesThatAreNot() throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(path: directory.path(), options: .init(memory: MemoryLimits(count: 10)))
        for key in 0..<10 { try cache.set(Profile.make(key), forKey: "p\(key)") }
        for key in 0..<5 { _ = try cache.value(Profile.self, forKey: "p\(key)") }
        for key in 10..<15 { try cache.set(Profile.make(key), forKey: "p\(key)") }
        let before = cache.stats.memoryHits
        for key in 0..<5 { _ = try cache.value(Profile.self, forKey: "p\(key)") }
        #expect(cache.stats.memoryHits - before == 5, "the objects read were evicted before the unread ones")
    }

    @Test func trimAndPressureCalls() throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(path: directory.path())
        for key in 0..<100 { try cache.set(Bitmap(pixels: [UInt8](repeating: 1, count: 25)), forKey: "b\(key)", using: BitmapConversion()) }
        #expect(cache.memoryUsage.cost == 10_000)
        try cache.trimMemory(toBytes: 6_000)
        #expect(cache.memoryUsage.cost <= 6_000 && cache.memoryUsage.cost > 5_000)
        cache.relieveMemory(.warning)
        #expect(cache.memoryUsage.cost <= 3_000 && cache.memoryUsage.cost > 2_000)
        cache.relieveMemory(.critical)
        #expect(cache.memoryUsage == (0, 0))
        try cache.trimMemory(toBytes: 0)
        #expect(cache.count == 100, "trimming memory leaves the file alone")
        #expect(throws: LarderError.self) { try cache.trimMemory(toBytes: -1) }
        for key in 0..<10 { _ = try cache.value(forKey: "b\(key)", using: BitmapConversion()) }
        cache.emptyMemory()
        #expect(cache.memoryUsage.count == 0)
    }

    @Test func aMemoryOnlyValueNeverReachesTheFile() throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(path: directory.path())
        try cache.set(Bitmap(pixels: [9]), forKey: "decoded", using: BitmapConversion(), placement: .memoryOnly)
        #expect(cache.count == 0)
        #expect(try cache.data(forKey: "decoded") == nil)
        #expect(try cache.value(forKey: "decoded", using: BitmapConversion())?.pixels == [9])
        #expect(try cache.value(forKey: "decoded", using: BitmapConversion(), placement: .fileOnly) == nil)
        try cache.set(Profile.make(1), forKey: "profile", placement: .memoryOnly)
        #expect(try cache.value(Profile.self, forKey: "profile") == Profile.make(1))
        #expect(cache.count == 0 && cache.stats.inserts == 0)
        // A memory-only read never reads the file.
        try cache.set(Profile.make(2), forKey: "filed", placement: .fileOnly)
        #expect(try cache.value(Profile.self, forKey: "filed", placement: .memoryOnly) == nil)
        #expect(cache.stats.hits == 0)
        // Removing the key removes the object.
        try cache.removeValue(forKey: "decoded")
        #expect(try cache.value(forKey: "decoded", using: BitmapConversion()) == nil)
        try cache.removeAll(withPrefix: "prof")
        #expect(try cache.value(Profile.self, forKey: "profile") == nil)
    }

    @Test func aFileOnlyWriteLeavesTheTierAsItWas() throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(path: directory.path())
        for key in 0..<5 { try cache.set(Profile.make(key), forKey: "p\(key)") }
        let before = cache.memoryUsage
        for key in 5..<100 { try cache.set(Profile.make(key), forKey: "p\(key)", placement: .fileOnly) }
        #expect(cache.memoryUsage == before)
        for key in 5..<100 { _ = try cache.value(Profile.self, forKey: "p\(key)", placement: .fileOnly) }
        #expect(cache.memoryUsage == before)
        let hits = cache.stats.memoryHits
        for key in 0..<5 { #expect(try cache.value(Profile.self, forKey: "p\(key)") == Profile.make(key)) }
        #expect(cache.stats.memoryHits == hits + 5)
        // A file-only write of a key drops only that key's object (it would be stale).
        try cache.set(Profile.make(0, version: 2), forKey: "p0", placement: .fileOnly)
        #expect(cache.memoryUsage.count == before.count - 1)
        #expect(try cache.value(Profile.self, forKey: "p0")?.version == 2)
    }

    @Test func badInputGetsTypedErrorsAndLosesNothing() throws {
        let directory = TemporaryDirectory()
        #expect(throws: LarderError.self) {
            try Cache(path: directory.path("zero.larder"), options: .init(memory: MemoryLimits(count: 0)))
        }
        #expect(throws: LarderError.self) {
            try Cache(path: directory.path("negative.larder"), options: .init(memory: MemoryLimits(cost: .bytes(-1))))
        }
        let cache = try Cache(path: directory.path())
        try cache.set(Bitmap(pixels: [1]), forKey: "b", using: BitmapConversion())
        // A conversion that throws.
        let thrown = errorCode { try cache.set(Bitmap(pixels: []), forKey: "b", using: BitmapConversion()) }
        #expect(thrown == .invalidArgument)
        // A cost that is not positive, on a write and on a read.
        #expect(errorCode { try cache.set(Bitmap(pixels: [2]), forKey: "b", using: BitmapConversion(fixedCost: 0)) } == .invalidArgument)
        #expect(errorCode { try cache.set(Bitmap(pixels: [2]), forKey: "c", using: BitmapConversion(fixedCost: -5)) } == .invalidArgument)
        cache.emptyMemory()
        #expect(errorCode { _ = try cache.value(forKey: "b", using: BitmapConversion(fixedCost: 0)) } == .invalidArgument)
        #expect(try cache.value(forKey: "b", using: BitmapConversion())?.pixels == [1], "the file kept its value")
        #expect(try cache.data(forKey: "c") == nil)
        // Bytes that do not convert.
        try cache.set(Data("junk".utf8), forKey: "junk")
        #expect(errorCode { _ = try cache.value(forKey: "junk", using: BitmapConversion()) } == .invalidArgument)
        #expect(try cache.data(forKey: "junk") == Data("junk".utf8))
        // Memory-only without a tier.
        let plain = try Cache(path: directory.path("plain.larder"), options: .init(memory: nil))
        #expect(errorCode { try plain.set(Bitmap(pixels: [1]), forKey: "b", using: BitmapConversion(), placement: .memoryOnly) } == .invalidArgument)
        try cache.close()
        #expect(errorCode { _ = try cache.value(forKey: "b", using: BitmapConversion()) } == .closed)
    }

    @Test func secureCodingObjectsRoundTrip() throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(path: directory.path())
        let conversion = SecureCodingConversion(NSString.self)
        try cache.set(NSString(string: "archived"), forKey: "s", using: conversion)
        cache.emptyMemory()
        #expect(try cache.value(forKey: "s", using: conversion) == NSString(string: "archived"))
        try cache.set(Data("junk".utf8), forKey: "s")
        #expect(errorCode { _ = try cache.value(forKey: "s", using: conversion) } == .invalidArgument)
    }

    @Test(.failsIfItHangs) func manyThreadsReadAndWriteTypedValues() async throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(path: directory.path(), options: .init(memory: MemoryLimits(count: 64)))
        for key in 0..<100 { try cache.set(Profile.make(key, version: 0), forKey: "p\(key)") }
        try await onOwnThread {
            runOnThreads(4) { thread in
                for round in 0..<2_000 {
                    let key = (round &* 7 &+ thread &* 13) % 100
                    if round % 5 == thread % 5 {
                        try! cache.set(Profile.make(key, version: round), forKey: "p\(key)")
                    } else if let profile = try! cache.value(Profile.self, forKey: "p\(key)") {
                        precondition(profile.id == key, "read another key's value")
                    }
                }
            }
        }
        #expect(cache.memoryUsage.count <= 64)
        // What memory returns now is what the file holds.
        for key in 0..<100 {
            let fromFile = try await cache.value(Profile.self, forKey: "p\(key)", placement: .fileOnly)
            #expect(try await cache.value(Profile.self, forKey: "p\(key)") == fromFile)
        }
    }
}

extension MemoryTierTests {
    /// Hits take no lock: readers of a shard go on while other threads replace, evict, trim and
    /// empty it. Every read returns its own key's whole value or nothing, and every read is
    /// counted once, as a hit or a miss.
    @Test(.failsIfItHangs) func hitsWhileOthersInsertAndEvictReturnTheirOwnValues() async throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(path: directory.path(), options: .init(memory: MemoryLimits(count: 32)))
        let conversion = BitmapConversion(fixedCost: 1)
        let bitmap = { @Sendable (key: Int, round: Int) in Bitmap(pixels: [UInt8(key)] + [UInt8](repeating: UInt8(truncatingIfNeeded: round), count: 8 + key)) }
        for key in 0..<48 { try cache.set(bitmap(key, 0), forKey: "b\(key)", using: conversion, placement: .memoryOnly) }
        let found = Mutex<(reads: Int, hits: Int)>((0, 0))
        try await onOwnThread {
            runOnThreads(4) { thread in
                var (reads, hits) = (0, 0)
                for round in 0..<20_000 {
                    let key = (round &* 7 &+ thread &* 13) % 48
                    if thread == 0 {
                        if round % 1_000 == 999 { cache.emptyMemory() } else if round % 100 == 99 { try! cache.trimMemory(toBytes: 8) }
                        try! cache.set(bitmap(key, round), forKey: "b\(key)", using: conversion, placement: .memoryOnly)
                        continue
                    }
                    reads += 1
                    guard let value = try! cache.value(forKey: "b\(key)", using: conversion, placement: .memoryOnly) else { continue }
                    hits += 1
                    let pixels = value.pixels
                    precondition(pixels.count == 9 + key && pixels[0] == UInt8(key), "read another key's value")
                    precondition(pixels.dropFirst().allSatisfy { $0 == pixels[1] }, "read a value part old, part new")
                }
                found.withLock { $0 = ($0.reads + reads, $0.hits + hits) }
            }
        }
        let (reads, hits) = found.withLock { $0 }
        #expect(hits > 0)
        #expect(cache.stats.memoryHits == UInt64(hits))
        #expect(cache.stats.memoryHits + cache.stats.memoryMisses == UInt64(reads))
        #expect(cache.memoryUsage.count <= 32)
    }

    /// Raw bytes read or written as typed values stay out of memory (their "decoding" is a copy),
    /// unless a call asks for memory only.
    @Test func rawBytesAreNotKeptInMemoryBesideTheFile() async throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(path: directory.path())
        try cache.set(Data([1, 2]), forKey: "d", coder: nil)
        try cache.set([UInt8]([3]), forKey: "u", coder: nil)
        #expect(try cache.synchronously { () throws in try cache.value(Data.self, forKey: "d") } == Data([1, 2]))
        #expect(try cache.synchronously { () throws in try cache.value([UInt8].self, forKey: "u") } == [3])
        let loaded = try await cache.value(Data.self, forKey: "l") { Data([4]) }
        #expect(loaded == Data([4]))
        #expect(cache.memoryUsage.count == 0)
        try cache.set(Data([5]), forKey: "m", coder: nil, placement: .memoryOnly)
        #expect(cache.memoryUsage.count == 1 && cache.count == 3)
    }
}

import CPeers
import Foundation
import Larder

/// Typed reads: decoding every time, Larder's memory tier, NSCache, and a Dictionary behind a
/// mutex (`NSLock`: the in-process ceiling, which checks nothing), for a ~1 KiB JSON Codable struct and a
/// 64 KiB value with a conversion, random and Zipf 0.99 keys, on 1 and 2 threads.
struct TypedResult: Codable, Sendable {
    var value: String
    var distribution: String
    var threads: Int
    /// Reads per second of each way, summed over the threads, by way's name.
    var readsPerSecond: [String: Double]
}

/// A ~1 KiB JSON value, as an app keeps a user profile or an article.
struct TypedArticle: Codable, Sendable {
    var id: Int
    var title: String
    var author: String
    var body: String
    var tags: [String]
    var score: Double
    var published: Date

    static func make(_ id: Int) -> TypedArticle {
        TypedArticle(id: id, title: "Article \(id): what a cache keeps", author: "Author \(id % 97)",
                     body: String(repeating: "Caches keep what was costly to get. ", count: 22),
                     tags: ["swift", "cache", "mmap", "\(id % 13)"], score: Double(id % 1000) / 10,
                     published: Date(timeIntervalSince1970: 1_700_000_000 + Double(id)))
    }
}

/// A 64 KiB value with a conversion of its own: "decoding" copies the bytes into a bitmap.
final class TypedBitmap: @unchecked Sendable {
    let pixels: [UInt8]
    init(pixels: [UInt8]) { self.pixels = pixels }
}

struct TypedBitmapConversion: CacheConversion {
    func bytes(from value: TypedBitmap) throws -> Data { Data(value.pixels) }
    func value(from bytes: Data) throws -> TypedBitmap { TypedBitmap(pixels: [UInt8](bytes)) }
    func memoryCost(of value: TypedBitmap) -> Int { value.pixels.count }
}

/// NSCache wants objects.
final class Boxed<Value>: @unchecked Sendable {
    let value: Value
    init(_ value: Value) { self.value = value }
}

enum TypedBench {
    static let ways = ["decode every time", "memory tier", "typed view", "tier miss", "NSCache", "Dictionary + mutex"]

    static func measure(keys: Int, seconds: Double, reps: Int, directory: String) throws -> [TypedResult] {
        var results: [TypedResult] = []
        let names = (0..<keys).map { "item/\($0)" }
        let articles = (0..<keys).map(TypedArticle.make)
        results += try measure(value: "1 KiB JSON struct", names: names, values: articles, seconds: seconds, reps: reps,
                               directory: directory, read: { cache, key in try cache.value(TypedArticle.self, forKey: key) },
                               view: { cache in
                                   let view = TypedCache<String, TypedArticle>(cache)
                                   return { key in try? view.value(forKey: key) }
                               },
                               write: { cache, value, key in try cache.set(value, forKey: key) })
        var rng = SplitMix64(seed: 64)
        let pixels = (0..<65_536).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
        let bitmaps = (0..<keys).map { id -> TypedBitmap in
            var own = pixels
            withUnsafeBytes(of: UInt32(id)) { own.replaceSubrange(0..<4, with: $0) }
            return TypedBitmap(pixels: own)
        }
        results += try measure(value: "64 KiB, conversion", names: names, values: bitmaps, seconds: seconds, reps: reps,
                               directory: directory,
                               read: { cache, key in try cache.value(forKey: key, using: TypedBitmapConversion()) },
                               view: { cache in
                                   let view = TypedCache<String, TypedBitmap>(cache, conversion: TypedBitmapConversion())
                                   return { key in try? view.value(forKey: key) }
                               },
                               write: { cache, value, key in try cache.set(value, forKey: key, using: TypedBitmapConversion()) })
        return results
    }

    /// The heap bytes the memory tier takes for each object it keeps, beyond the value itself:
    /// what `keys` memory-only `Int`s add, per object, less the `Int`. Nil where the C library
    /// does not count its heap.
    static func bytesPerObject(keys: Int, directory: String) throws -> Double? {
        let dir = try System.freshDirectory(directory)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let cache = try Cache(path: dir + "/objects.larder", options: .init(memory: MemoryLimits(cost: .gigabytes(1), count: keys)))
        defer { try? cache.close() }
        let names = (0..<keys).map { "item/\($0)" }
        let before = bench_heap_bytes()
        guard before > 0 else { return nil }
        for (value, name) in names.enumerated() { try cache.set(value, forKey: name, placement: .memoryOnly) }
        let after = bench_heap_bytes()
        guard cache.memoryUsage.count == keys else { throw BenchFailure("the tier kept \(cache.memoryUsage.count) of \(keys) objects") }
        return Double(Int64(after) - Int64(before)) / Double(keys) - Double(MemoryLayout<Int>.size)
    }

    private static func measure<Value>(value name: String, names: [String], values: [Value], seconds: Double, reps: Int,
                                       directory: String, read: @escaping @Sendable (Cache, String) throws -> Value?,
                                       view: (Cache) -> @Sendable (String) -> Value?,
                                       write: (Cache, Value, String) throws -> Void) throws -> [TypedResult] {
        let keys = names.count
        let dir = try System.freshDirectory(directory)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = dir + "/typed.larder"
        let bytes = Int(Double(keys) * 80_000 * 1.5)
        // The file with every value, written without the tier; handles for each way.
        let plain = try Cache(path: path, options: .init(capacity: .bytes(max(bytes, 64 << 20)), memory: nil))
        for (key, value) in zip(names, values) { try write(plain, value, key) }
        let tier = try Cache(path: path, options: .init(memory: MemoryLimits(cost: .gigabytes(4), count: keys)))
        let missing = try Cache(path: path, options: .init(memory: MemoryLimits(count: 1)))
        let viewRead = view(tier)
        let nsCache = NSCache<NSString, Boxed<Value>>()
        let mutex = NSLock()
        nonisolated(unsafe) var dictionary: [String: Value] = [:]
        for key in names {
            let value = try read(tier, key)!
            nsCache.setObject(Boxed(value), forKey: key as NSString)
            dictionary[key] = value
        }
        nonisolated(unsafe) let nsCacheRef = nsCache
        let readers: [String: @Sendable (String) -> Bool] = [
            "decode every time": { (try? read(plain, $0)) != nil },
            "memory tier": { (try? read(tier, $0)) != nil },
            "typed view": { viewRead($0) != nil },
            "tier miss": { (try? read(missing, $0)) != nil },
            "NSCache": { nsCacheRef.object(forKey: $0 as NSString) != nil },
            "Dictionary + mutex": { key in mutex.withLock { dictionary[key] != nil } },
        ]
        var results: [TypedResult] = []
        for distribution in ["random", "Zipf 0.99"] {
            for threads in [1, 2] {
                var rates: [String: [Double]] = [:]
                for _ in 0..<reps {
                    for way in ways {
                        rates[way, default: []].append(rate(threads: threads, seconds: seconds, names: names,
                                                            zipf: distribution != "random", readOne: readers[way]!))
                    }
                }
                Run.progress("typed: \(name), \(distribution), \(threads) thread(s)")
                results.append(TypedResult(value: name, distribution: distribution, threads: threads,
                                           readsPerSecond: rates.mapValues(Stats.median)))
            }
        }
        let stats = tier.stats
        if stats.memoryMisses > UInt64(keys) { Run.progress("  problem: \(stats.memoryMisses) memory misses on the tier's row") }
        for cache in [plain, tier, missing] { try cache.close() }
        return results
    }

    /// Reads per second of `readOne` over keys drawn at random (or Zipf 0.99), summed over
    /// `threads` threads that run for `seconds`.
    private static func rate(threads: Int, seconds: Double, names: [String], zipf: Bool,
                             readOne: @escaping @Sendable (String) -> Bool) -> Double {
        let counts = UnsafeMutablePointer<Int>.allocate(capacity: threads * 16)
        counts.initialize(repeating: 0, count: threads * 16)
        defer { counts.deallocate() }
        nonisolated(unsafe) let shared = counts
        let order: [[Int]] = (0..<threads).map { thread in
            var rng = SplitMix64(seed: 77 + UInt64(thread))
            let scrambled = ScrambledZipf(keys: names.count)
            return (0..<200_000).map { _ in zipf ? scrambled.next(&rng) : rng.next(below: names.count) }
        }
        let start = bench_now_ns()
        let deadline = start + UInt64(seconds * 1e9)
        let group = DispatchGroup()
        for thread in 0..<threads {
            group.enter()
            let keys = order[thread]
            Thread {
                var done = 0
                var index = 0
                while true {
                    if !readOne(names[keys[index]]) { fatalError("typed benchmark: a read missed") }
                    done += 1
                    index = index + 1 == keys.count ? 0 : index + 1
                    if done & 255 == 0 && bench_now_ns() >= deadline { break }
                }
                shared[thread * 16] = done
                group.leave()
            }.start()
        }
        group.wait()
        let elapsed = Double(bench_now_ns() - start) / 1e9
        return Double((0..<threads).reduce(0) { $0 + shared[$1 * 16] }) / elapsed
    }
}

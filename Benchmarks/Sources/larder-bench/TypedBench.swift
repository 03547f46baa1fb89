import CPeers
import Foundation
import Larder

/// Typed reads: decoding every time, Larder's memory tier, NSCache, and a Dictionary behind a
/// mutex (`NSLock`: the in-process ceiling, which checks nothing), and the same Dictionary read with no
/// lock at all (what a read that merely returns the value reaches on this machine), for a ~1 KiB JSON
/// Codable struct and a 64 KiB value with a conversion, random and Zipf 0.99 keys, on 1 and 2 threads.
struct TypedResult: Codable, Sendable {
    var value: String
    var distribution: String
    var threads: Int
    /// Reads per second of each way, summed over the threads, by way's name: medians of rounds.
    var readsPerSecond: [String: Double]
    /// The memory tier's speed over each way's, by way's name: the median of the ratios of one
    /// round, whose ways ran one right after another (so a slow second of the machine falls on
    /// every way of a round alike).
    var tierRatios: [String: Double]? = nil
    /// On 2 threads: the memory tier's speed over its speed on 1 thread, the median of the ratios
    /// of one round.
    var tierScaling: Double? = nil
    /// On 2 threads: the same for the Dictionary read without a lock (the machine's ceiling).
    var ceilingScaling: Double? = nil
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
    static let ways = ["decode every time", "memory tier", "typed view", "tier miss", "NSCache", "Dictionary + mutex",
                             "Dictionary, no lock"]

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
        let bitmaps = bitmaps(keys: keys)
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

    /// The handles and readers of one value type: the file with every value, written without the
    /// tier, and one reader for each way, each returning the value it found.
    private struct Setup<Value>: ~Copyable {
        let directory: String
        let caches: [Cache]
        let tier: Cache
        let readers: [String: @Sendable (String) -> Value?]

        deinit {
            for cache in caches { try? cache.close() }
            try? FileManager.default.removeItem(atPath: directory)
        }
    }

    /// The memory tier's limits here: every one of `keys` objects fits (10,000 values of 64 KiB
    /// are 640 MiB, ten times the default cost limit), as a user sizing the tier would make it.
    static func tierLimits(keys: Int) -> MemoryLimits {
        MemoryLimits(cost: .gigabytes(4), count: keys)
    }

    private static func setUp<Value>(names: [String], values: [Value], directory: String,
                                     read: @escaping @Sendable (Cache, String) throws -> Value?,
                                     view: (Cache) -> @Sendable (String) -> Value?,
                                     write: (Cache, Value, String) throws -> Void) throws -> Setup<Value> {
        let keys = names.count
        let dir = try System.freshDirectory(directory)
        let path = dir + "/typed.larder"
        let bytes = Int(Double(keys) * 80_000 * 1.5)
        let plain = try Cache(path: path, options: .init(capacity: .bytes(max(bytes, 64 << 20)), memory: nil))
        for (key, value) in zip(names, values) { try write(plain, value, key) }
        let tier = try Cache(path: path, options: .init(memory: tierLimits(keys: keys)))
        let missing = try Cache(path: path, options: .init(memory: MemoryLimits(count: 1)))
        let viewRead = view(tier)
        let nsCache = NSCache<NSString, Boxed<Value>>()
        let mutex = NSLock()
        var filled: [String: Value] = [:]
        for key in names {
            let value = try read(tier, key)!
            nsCache.setObject(Boxed(value), forKey: key as NSString)
            filled[key] = value
        }
        // A constant from here: a captured variable would add the runtime's exclusivity checks
        // (some 80 instructions a read) to the ceiling.
        nonisolated(unsafe) let dictionary = filled
        let kept = tier.memoryUsage.count
        guard kept == keys else { throw BenchFailure("the tier kept \(kept) of \(keys) objects") }
        nonisolated(unsafe) let nsCacheRef = nsCache
        // Each way hands out the value itself (a copy of the struct, a reference to the object),
        // which the loop passes on to `typedSink`: none can skip the copy a caller gets.
        let readers: [String: @Sendable (String) -> Value?] = [
            "decode every time": { try? read(plain, $0) },
            "memory tier": { try? read(tier, $0) },
            "typed view": { viewRead($0) },
            "tier miss": { try? read(missing, $0) },
            "NSCache": { nsCacheRef.object(forKey: $0 as NSString)?.value },
            "Dictionary + mutex": { key in mutex.withLock { dictionary[key] } },
            // Immutable, so no synchronisation: the scaling of a read that returns the value.
            "Dictionary, no lock": { key in dictionary[key] },
        ]
        return Setup(directory: dir, caches: [plain, tier, missing], tier: tier, readers: readers)
    }

    private static func measure<Value>(value name: String, names: [String], values: [Value], seconds: Double, reps: Int,
                                       directory: String, read: @escaping @Sendable (Cache, String) throws -> Value?,
                                       view: (Cache) -> @Sendable (String) -> Value?,
                                       write: (Cache, Value, String) throws -> Void) throws -> [TypedResult] {
        let keys = names.count
        let setup = try setUp(names: names, values: values, directory: directory, read: read, view: view, write: write)
        let missesBefore = setup.tier.stats.memoryMisses
        var results: [TypedResult] = []
        // Short rounds, alternating: every round runs each way on 1 thread, then on 2, each time
        // in another order, for a third of `seconds`. Ratios are taken inside a round.
        let rounds = max(reps * 3, 9)
        for distribution in ["random", "Zipf 0.99"] {
            var rates: [Int: [[String: Double]]] = [1: [], 2: []]
            let keyOrders = [1, 2].map { orders(threads: $0, keys: names.count, zipf: distribution != "random") }
            for round in 0..<rounds {
                for threads in [1, 2] {
                    var measured: [String: Double] = [:]
                    for index in ways.indices {
                        let way = ways[(index + round) % ways.count]
                        measured[way] = rate(threads: threads, seconds: seconds / 3, names: names,
                                             order: keyOrders[threads - 1], readOne: setup.readers[way]!)
                    }
                    rates[threads]!.append(measured)
                }
            }
            for threads in [1, 2] {
                let rounds = rates[threads]!
                Run.progress("typed: \(name), \(distribution), \(threads) thread(s)")
                var result = TypedResult(value: name, distribution: distribution, threads: threads,
                                         readsPerSecond: Dictionary(uniqueKeysWithValues: ways.map { way in
                                             (way, Stats.median(rounds.map { $0[way]! }))
                                         }))
                result.tierRatios = Dictionary(uniqueKeysWithValues: ways.map { way in
                    (way, Stats.median(rounds.map { $0["memory tier"]! / $0[way]! }))
                })
                if threads == 2 {
                    result.tierScaling = Stats.median(zip(rounds, rates[1]!).map { $0["memory tier"]! / $1["memory tier"]! })
                    result.ceilingScaling = Stats.median(zip(rounds, rates[1]!).map {
                        $0["Dictionary, no lock"]! / $1["Dictionary, no lock"]!
                    })
                }
                results.append(result)
            }
        }
        let misses = setup.tier.stats.memoryMisses - missesBefore
        if misses > 0 { throw BenchFailure("\(misses) of the memory tier's timed reads missed (\(keys) keys, \(name))") }
        return results
    }

    /// `larder-bench typed-profile json|bitmap WAY KEYS READS DIRECTORY`: `READS` random reads of
    /// one way on one thread, in `typedProfileLoop` alone, for callgrind to count
    /// (`--toggle-collect='*typedProfileLoop*'`; instructions per read = its total / READS).
    static func profile(_ arguments: [String]) throws {
        guard arguments.count == 5, let keys = Int(arguments[2]), let reads = Int(arguments[3]) else {
            throw BenchFailure("typed-profile json|bitmap WAY KEYS READS DIRECTORY")
        }
        let names = (0..<keys).map { "item/\($0)" }
        var rng = SplitMix64(seed: 77)
        let order = (0..<reads).map { _ in rng.next(below: keys) }
        switch arguments[0] {
        case "json":
            let setup = try setUp(names: names, values: (0..<keys).map(TypedArticle.make), directory: arguments[4],
                                  read: { cache, key in try cache.value(TypedArticle.self, forKey: key) },
                                  view: { cache in
                                      let view = TypedCache<String, TypedArticle>(cache)
                                      return { key in try? view.value(forKey: key) }
                                  },
                                  write: { cache, value, key in try cache.set(value, forKey: key) })
            guard let reader = setup.readers[arguments[1]] else { throw BenchFailure("no way \(arguments[1])") }
            typedProfileLoop(names: names, order: order, readOne: reader)
        default:
            let setup = try setUp(names: names, values: bitmaps(keys: keys), directory: arguments[4],
                                  read: { cache, key in try cache.value(forKey: key, using: TypedBitmapConversion()) },
                                  view: { cache in
                                      let view = TypedCache<String, TypedBitmap>(cache, conversion: TypedBitmapConversion())
                                      return { key in try? view.value(forKey: key) }
                                  },
                                  write: { cache, value, key in try cache.set(value, forKey: key, using: TypedBitmapConversion()) })
            guard let reader = setup.readers[arguments[1]] else { throw BenchFailure("no way \(arguments[1])") }
            typedProfileLoop(names: names, order: order, readOne: reader)
        }
    }

    /// The 64 KiB values: random bytes, each starting with its number.
    static func bitmaps(keys: Int) -> [TypedBitmap] {
        var rng = SplitMix64(seed: 64)
        let pixels = (0..<65_536).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
        return (0..<keys).map { id -> TypedBitmap in
            var own = pixels
            withUnsafeBytes(of: UInt32(id)) { own.replaceSubrange(0..<4, with: $0) }
            return TypedBitmap(pixels: own)
        }
    }

    /// The keys each of `threads` threads reads, in order: 200,000 drawn at random (or Zipf 0.99).
    private static func orders(threads: Int, keys: Int, zipf: Bool) -> [[Int]] {
        (0..<threads).map { thread in
            var rng = SplitMix64(seed: 77 + UInt64(thread))
            let scrambled = ScrambledZipf(keys: keys)
            return (0..<200_000).map { _ in zipf ? scrambled.next(&rng) : rng.next(below: keys) }
        }
    }

    /// Reads per second of `readOne` over the keys of `order`, summed over `threads` threads (one
    /// order each) that run for `seconds`.
    private static func rate<Value>(threads: Int, seconds: Double, names: [String], order: [[Int]],
                                    readOne: @escaping @Sendable (String) -> Value?) -> Double {
        let counts = UnsafeMutablePointer<Int>.allocate(capacity: threads * 16)
        counts.initialize(repeating: 0, count: threads * 16)
        defer { counts.deallocate() }
        nonisolated(unsafe) let shared = counts
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
                    guard let value = readOne(names[keys[index]]) else { fatalError("typed benchmark: a read missed") }
                    typedSink(value)
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

/// Takes a value a way read, so that no way's copy of it is optimized away (out of line: the
/// call is the same for every way).
@inline(never)
func typedSink<Value>(_ value: Value) {
    withExtendedLifetime(value) {}
}

/// The counted loop of `TypedBench.profile` (a name of its own, for callgrind's toggle).
@inline(never)
func typedProfileLoop<Value>(names: [String], order: [Int], readOne: (String) -> Value?) {
    for index in order {
        guard let value = readOne(names[index]) else { fatalError("typed profile: a read missed") }
        typedSink(value)
    }
}

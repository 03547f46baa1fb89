import Foundation
import Larder

/// LZ4: the compression ratio and put/get throughput with and without it, on JSON-like values.
struct CompressionResult: Codable, Sendable {
    var valueSize: Int
    var keys: Int
    var lz4: Bool
    var ratio: Double
    var putOpsPerSecond: Double
    var getOpsPerSecond: Double
}

enum CompressionBench {
    static let words = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india",
                        "juliet", "kilo", "lima", "mike", "november", "oscar", "papa", "quebec", "romeo",
                        "sierra", "tango", "uniform", "victor", "whiskey", "xray", "yankee", "zulu",
                        "Lisbon", "Oslo", "Kyoto", "Quito", "Accra", "Perth", "Dublin", "Austin"]

    /// A JSON array of user-like records, cut (or padded with spaces) to exactly `size` bytes:
    /// the kind of API response an app caches.
    static func document(size: Int, _ rng: inout SplitMix64) -> [UInt8] {
        var text = "["
        while text.utf8.count < size {
            func word() -> String { words[rng.next(below: words.count)] }
            let id = rng.next(below: 10_000_000)
            text += "{\"id\":\(id),\"name\":\"\(word().capitalized) \(word().capitalized)\","
            text += "\"email\":\"\(word())\(rng.next(below: 1000))@example.com\",\"active\":\(rng.next(below: 2) == 0),"
            text += "\"score\":\(rng.next(below: 10000)).\(rng.next(below: 100)),\"tags\":[\"\(word())\",\"\(word())\"],"
            text += "\"address\":{\"city\":\"\(word())\",\"zip\":\"\(10000 + rng.next(below: 89999))\"},"
            text += "\"created_at\":\"2025-\(10 + rng.next(below: 3))-\(10 + rng.next(below: 18))T12:\(10 + rng.next(below: 50)):00Z\"},"
        }
        var bytes = Array(text.utf8.prefix(size))
        bytes += Array(repeating: UInt8(ascii: " "), count: size - bytes.count)
        return bytes
    }

    static func measure(valueSize: Int, keys: Int, lz4: Bool, reps: Int, seconds: Double, directory: String) throws -> CompressionResult {
        var rng = SplitMix64(seed: UInt64(valueSize))
        let documents = (0..<64).map { _ in document(size: valueSize, &rng) }
        let data = Dataset(keyCount: keys, valueLength: valueSize, documents: documents)
        let fill = Workload.fill.operations(keys: keys, count: 0, seed: 0)
        let reads = Workload.read.operations(keys: keys, count: 2_000_000, seed: 5)
        let sizing = StoreSizing(keys: keys, dataBytes: data.dataBytes(count: keys))
        let meter = Meter(valueLength: valueSize)
        var puts: [Double] = [], gets: [Double] = [], ratios: [Double] = []
        for _ in 0..<reps {
            let dir = try System.freshDirectory(directory)
            defer { try? FileManager.default.removeItem(atPath: dir) }
            let cache = try Cache(path: Store.larderPath(in: dir),
                                  options: .init(capacity: .bytes(sizing.larderCapacity), compression: lz4 ? .lz4 : .none))
            let store = Store(wrapping: cache, directory: dir)
            let put = meter.measure(store, data, fill, maxSeconds: 0)
            let get = meter.measure(store, data, reads, maxSeconds: seconds)
            guard put.errors == 0, get.errors == 0, get.notFound == 0 else {
                throw BenchFailure("LZ4 benchmark: \(put.errors + get.errors) failed operations, \(get.notFound) missing")
            }
            puts.append(put.opsPerSecond)
            gets.append(get.opsPerSecond)
            ratios.append(cache.stats.compressionRatio)
            store.close()
        }
        return CompressionResult(valueSize: valueSize, keys: keys, lz4: lz4, ratio: Stats.median(ratios),
                                 putOpsPerSecond: Stats.median(puts), getOpsPerSecond: Stats.median(gets))
    }
}

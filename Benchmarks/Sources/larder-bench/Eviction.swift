import Foundation
import Larder

/// Eviction quality: replay a Zipf trace (get; on a miss, put) through Larder's API at a cache of
/// 1% or 10% of the data, and through an exact LRU holding the same live bytes.
struct EvictionResult: Codable, Sendable {
    var theta: Double
    var cachePercent: Double
    var objects: Int
    var valueSize: Int
    var requests: Int
    var capacity: Int
    /// Larder's live value bytes at the end of the warm-up: the LRU's budget.
    var liveBytes: Int
    var larderMissRatio: Double
    var lruMissRatio: Double
    var problems: [String]
}

/// An exact LRU over keys 0..<n with a byte budget: arrays for the doubly linked list.
struct ExactLRU {
    private var prev: [Int32], next: [Int32], present: [Bool]
    private var head: Int32 = -1, tail: Int32 = -1  // head: most recent
    private var bytes = 0
    let budget: Int
    let valueSize: Int

    init(keys: Int, budget: Int, valueSize: Int) {
        prev = Array(repeating: -1, count: keys)
        next = Array(repeating: -1, count: keys)
        present = Array(repeating: false, count: keys)
        self.budget = budget
        self.valueSize = valueSize
    }

    private mutating func unlink(_ k: Int32) {
        let p = prev[Int(k)], n = next[Int(k)]
        if p >= 0 { next[Int(p)] = n } else { head = n }
        if n >= 0 { prev[Int(n)] = p } else { tail = p }
    }

    private mutating func pushFront(_ k: Int32) {
        prev[Int(k)] = -1
        next[Int(k)] = head
        if head >= 0 { prev[Int(head)] = k }
        head = k
        if tail < 0 { tail = k }
    }

    /// Get; on a miss, put. Returns whether it was a hit.
    mutating func access(_ key: Int) -> Bool {
        let k = Int32(key)
        if present[key] {
            unlink(k)
            pushFront(k)
            return true
        }
        while bytes + valueSize > budget && tail >= 0 {
            let victim = tail
            unlink(victim)
            present[Int(victim)] = false
            bytes -= valueSize
        }
        if valueSize <= budget {
            present[key] = true
            pushFront(k)
            bytes += valueSize
        }
        return false
    }
}

enum Eviction {
    static func measure(theta: Double, percent: Double, objects: Int, valueSize: Int, directory: String) throws -> EvictionResult {
        let warmup = objects * 2, measured = objects * 4
        // The trace: Zipf ranks spread over the keys by a fixed random permutation.
        var rng = SplitMix64(seed: 99)
        var permutation = Array(0..<objects)
        for i in stride(from: objects - 1, to: 0, by: -1) { permutation.swapAt(i, rng.next(below: i + 1)) }
        let zipf = ZipfGenerator(items: UInt64(objects), theta: theta)
        let trace = (0..<(warmup + measured)).map { _ in permutation[min(objects - 1, Int(zipf.next(&rng)))] }

        let data = Dataset(keyCount: objects, valueLength: valueSize)
        let capacity = max(256 << 10, (Int(Double(objects * valueSize) * percent / 100) + 4095) & ~4095)
        let dir = try System.freshDirectory(directory)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let cache = try Cache(path: Store.larderPath(in: dir), options: .init(capacity: .bytes(capacity)))
        var problems: [String] = []
        var larderMisses = 0, liveBytes = 0
        for (i, key) in trace.enumerated() {
            if i == warmup {
                liveBytes = cache.totalBytes
                larderMisses = 0
            }
            let hit = try cache.withValue(forKey: data.key(key)) { $0.count } != nil
            if !hit {
                larderMisses += 1
                do { try cache.set(data.value(key), forKey: data.key(key)) } catch { problems.append("set: \(error)") }
            }
        }
        try cache.close()
        var lru = ExactLRU(keys: objects, budget: liveBytes, valueSize: valueSize)
        var lruMisses = 0
        for (i, key) in trace.enumerated() {
            if i == warmup { lruMisses = 0 }
            if !lru.access(key) { lruMisses += 1 }
        }
        return EvictionResult(theta: theta, cachePercent: percent, objects: objects, valueSize: valueSize,
                              requests: measured, capacity: capacity, liveBytes: liveBytes,
                              larderMissRatio: Double(larderMisses) / Double(measured),
                              lruMissRatio: Double(lruMisses) / Double(measured), problems: Array(Set(problems)).sorted())
    }
}

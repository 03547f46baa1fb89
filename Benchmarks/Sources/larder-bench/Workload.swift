import Foundation
import CPeers

/// SplitMix64: the fixed-seed generator of every key, value and operation, so that two runs (and
/// the reader processes of one run) see the very same workload.
struct SplitMix64 {
    var state: UInt64

    init(seed: UInt64) { state = seed }

    static func mix(_ value: UInt64) -> UInt64 {
        var z = value
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        return Self.mix(state)
    }

    /// Uniform in 0..<bound.
    mutating func next(below bound: Int) -> Int {
        Int((UInt128(next()) * UInt128(bound)) >> 64)
    }

    /// Uniform in [0, 1).
    mutating func nextDouble() -> Double {
        Double(next() >> 11) * 0x1.0p-53
    }
}

/// YCSB's ZipfianGenerator (Gray et al., "Quickly generating billion-record synthetic databases"):
/// item 0 is the most popular, item i has weight 1/(i+1)^theta.
struct ZipfGenerator {
    let items: Double
    let theta: Double
    let alpha: Double
    let zetan: Double
    let eta: Double
    let secondThreshold: Double

    init(items: UInt64, theta: Double, zetan precomputed: Double? = nil) {
        self.items = Double(items)
        self.theta = theta
        alpha = 1 / (1 - theta)
        zetan = precomputed ?? Self.zeta(items, theta)
        let zeta2 = Self.zeta(2, theta)
        eta = (1 - pow(2 / Double(items), 1 - theta)) / (1 - zeta2 / zetan)
        secondThreshold = 1 + pow(0.5, theta)
    }

    static func zeta(_ n: UInt64, _ theta: Double) -> Double {
        var sum = 0.0
        for i in 1...n { sum += 1 / pow(Double(i), theta) }
        return sum
    }

    func next(_ rng: inout SplitMix64) -> UInt64 {
        let u = rng.nextDouble()
        let uz = u * zetan
        if uz < 1 { return 0 }
        if uz < secondThreshold { return 1 }
        return UInt64(items * pow(eta * u - eta + 1, alpha))
    }
}

/// YCSB's ScrambledZipfianGenerator: a Zipf 0.99 draw over 10^10 items, hashed with FNV-1a 64
/// onto the key space, so that the popular keys are spread over it (YCSB workload C's request
/// distribution).
struct ScrambledZipf {
    static let itemCount: UInt64 = 10_000_000_000
    /// YCSB's precomputed zeta(10^10, 0.99).
    static let zetan = 26.46902820178302
    let keys: Int
    let zipf = ZipfGenerator(items: itemCount, theta: 0.99, zetan: zetan)

    init(keys: Int) { self.keys = keys }

    /// YCSB's Utils.fnvhash64: FNV-1a over the 8 bytes of the value, low byte first.
    static func fnv64(_ value: UInt64) -> UInt64 {
        var hash: UInt64 = 0xCBF2_9CE4_8422_2325
        var v = value
        for _ in 0..<8 {
            hash ^= v & 0xFF
            hash &*= 1_099_511_628_211
            v >>= 8
        }
        return Int64(bitPattern: hash).magnitude
    }

    func next(_ rng: inout SplitMix64) -> Int {
        Int(Self.fnv64(zipf.next(&rng)) % UInt64(keys))
    }
}

/// The operations of one loop, in the encoding of `CPeers.h`.
enum Op {
    static let shift: UInt32 = 30
    static let indexMask: UInt32 = (1 << 30) - 1
    static func get(_ index: Int) -> UInt32 { UInt32(BENCH_OP_GET) << shift | UInt32(index) }
    static func put(_ index: Int) -> UInt32 { UInt32(BENCH_OP_PUT) << shift | UInt32(index) }
    static func delete(_ index: Int) -> UInt32 { UInt32(BENCH_OP_DEL) << shift | UInt32(index) }
}

/// The workloads of the main table.
enum Workload: String, CaseIterable, Codable, Sendable {
    case fill, read, zipf, miss, ycsbA = "ycsb-a", ycsbB = "ycsb-b", delete

    var title: String {
        switch self {
        case .fill: "fill"
        case .read: "random read"
        case .zipf: "Zipf read"
        case .miss: "miss"
        case .ycsbA: "YCSB-A"
        case .ycsbB: "YCSB-B"
        case .delete: "delete"
        }
    }

    /// Whether every get of this workload must find its key.
    var expectsHits: Bool { self != .miss }

    /// The operations: `keys` stored keys (indices 0..<keys; keys..<2*keys are never stored).
    /// Fill and delete touch every key once; the others run `count` operations.
    func operations(keys: Int, count: Int, seed: UInt64) -> [UInt32] {
        var rng = SplitMix64(seed: seed ^ UInt64(Workload.allCases.firstIndex(of: self)!) &* 0x1000_0001)
        let zipf = ScrambledZipf(keys: keys)
        switch self {
        case .fill:
            return (0..<keys).map(Op.put)
        case .read:
            return (0..<count).map { _ in Op.get(rng.next(below: keys)) }
        case .zipf:
            return (0..<count).map { _ in Op.get(zipf.next(&rng)) }
        case .miss:
            return (0..<count).map { _ in Op.get(keys + rng.next(below: keys)) }
        case .ycsbA, .ycsbB:
            let writes = self == .ycsbA ? 0.5 : 0.05
            return (0..<count).map { _ in
                let key = zipf.next(&rng)
                return rng.nextDouble() < writes ? Op.put(key) : Op.get(key)
            }
        case .delete:
            var order = Array(0..<keys)
            for i in stride(from: keys - 1, to: 0, by: -1) { order.swapAt(i, rng.next(below: i + 1)) }
            return order.map(Op.delete)
        }
    }
}

/// Keys and values, made up front so that the timed loops neither allocate nor format.
final class Dataset: @unchecked Sendable {
    let keyCount: Int
    let valueLength: Int
    let keys: UnsafeMutableRawBufferPointer
    let keyLengths: UnsafeMutableBufferPointer<UInt8>
    let values: UnsafeMutableRawBufferPointer
    let valueVariants: Int
    let valueStep: Int

    /// Keys 0..<keyCount: 16 hex digits of a bijective mix of the index (so all distinct) and
    /// 0 to 8 more letters, 16 to 24 bytes in all. Values: random bytes, 64 overlapping variants;
    /// or, given `documents`, those (each `valueLength` bytes).
    init(keyCount: Int, valueLength: Int, documents: [[UInt8]]? = nil, seed: UInt64 = 0x4C41_5244_4552) {
        self.keyCount = keyCount
        self.valueLength = valueLength
        valueVariants = documents?.count ?? 64
        valueStep = documents == nil ? 64 : valueLength
        keys = .allocate(byteCount: max(keyCount, 1) * Int(BENCH_KEY_STRIDE), alignment: 16)
        keyLengths = .allocate(capacity: max(keyCount, 1))
        let hex = Array("0123456789abcdef".utf8)
        for i in 0..<keyCount {
            let mixed = SplitMix64.mix(UInt64(i) ^ seed)
            let base = i * Int(BENCH_KEY_STRIDE)
            for d in 0..<16 { keys[base + d] = hex[Int((mixed >> (60 - 4 * UInt64(d))) & 0xF)] }
            let extra = Int(SplitMix64.mix(mixed) % 9)
            for d in 0..<extra { keys[base + 16 + d] = UInt8(ascii: "a") + UInt8(d) }
            keyLengths[i] = UInt8(16 + extra)
        }
        values = .allocate(byteCount: valueLength + (valueVariants - 1) * valueStep, alignment: 16)
        if let documents {
            for (i, document) in documents.enumerated() {
                precondition(document.count == valueLength)
                UnsafeMutableRawBufferPointer(rebasing: values[i * valueLength..<(i + 1) * valueLength]).copyBytes(from: document)
            }
            return
        }
        var rng = SplitMix64(seed: seed &+ 1)
        for i in stride(from: 0, to: values.count - 7, by: 8) {
            values.storeBytes(of: rng.next(), toByteOffset: i, as: UInt64.self)
        }
        for i in (values.count & ~7)..<values.count { values[i] = UInt8(truncatingIfNeeded: rng.next()) }
    }

    deinit {
        keys.deallocate()
        keyLengths.deallocate()
        values.deallocate()
    }

    func key(_ index: Int) -> UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(rebasing: keys[index * Int(BENCH_KEY_STRIDE)..<index * Int(BENCH_KEY_STRIDE) + Int(keyLengths[index])])
    }

    func value(_ index: Int) -> UnsafeRawBufferPointer {
        let start = (index % valueVariants) * valueStep
        return UnsafeRawBufferPointer(rebasing: values[start..<start + valueLength])
    }

    var cData: bench_data {
        bench_data(keys: keys.baseAddress!.assumingMemoryBound(to: UInt8.self), key_lens: keyLengths.baseAddress,
                   values: values.baseAddress!.assumingMemoryBound(to: UInt8.self), value_len: valueLength,
                   value_variants: valueVariants, value_step: valueStep)
    }

    /// Bytes of keys and values of keys 0..<count.
    func dataBytes(count: Int) -> Int {
        (0..<count).reduce(0) { $0 + Int(keyLengths[$1]) } + count * valueLength
    }
}

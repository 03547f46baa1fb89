import CPeers
import Foundation

/// What one timed loop measured.
struct LoopStats: Codable, Sendable {
    var ops: Int
    var opsPerSecond: Double
    var p50Nanoseconds: Double
    var p99Nanoseconds: Double
    var found: Int
    var notFound: Int
    var errors: Int
    /// Operations per second in each repetition, in the order they ran (nil in a single run's
    /// figures, and in results from before it was kept).
    var roundOpsPerSecond: [Double]? = nil

    /// The median of each figure over repetitions.
    static func median(_ runs: [LoopStats]) -> LoopStats {
        LoopStats(ops: runs.map(\.ops).reduce(0, +),
                  opsPerSecond: Stats.median(runs.map(\.opsPerSecond)),
                  p50Nanoseconds: Stats.median(runs.map(\.p50Nanoseconds)),
                  p99Nanoseconds: Stats.median(runs.map(\.p99Nanoseconds)),
                  found: runs.map(\.found).reduce(0, +), notFound: runs.map(\.notFound).reduce(0, +),
                  errors: runs.map(\.errors).reduce(0, +), roundOpsPerSecond: runs.map(\.opsPerSecond))
    }
}

enum Stats {
    static func median(_ values: [Double]) -> Double {
        guard !values.isEmpty else { return 0 }
        let sorted = values.sorted()
        let mid = sorted.count / 2
        return sorted.count % 2 == 1 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2
    }

    /// The p-quantile (0...1) of the values, nearest rank.
    static func percentile(_ values: UnsafeMutableBufferPointer<UInt64>, _ p: Double) -> Double {
        guard !values.isEmpty else { return 0 }
        let rank = min(values.count - 1, max(0, Int((Double(values.count) * p).rounded(.up)) - 1))
        return Double(values[rank])
    }
}

/// Runs timed loops with one set of buffers.
final class Meter {
    let sampleEvery: Int
    private var samples: UnsafeMutableBufferPointer<UInt64>
    let buffer: UnsafeMutableRawBufferPointer

    init(valueLength: Int, sampleEvery: Int = 16) {
        self.sampleEvery = sampleEvery
        samples = .allocate(capacity: 1)
        buffer = .allocate(byteCount: max(valueLength, 64), alignment: 64)
        buffer.initializeMemory(as: UInt8.self, repeating: 0)  // no page faults inside the loop
    }

    deinit {
        samples.deallocate()
        buffer.deallocate()
    }

    /// One loop over `ops` on `store`, for at most `maxSeconds` (0: all of them).
    func measure(_ store: Store, _ data: Dataset, _ ops: [UInt32], maxSeconds: Double) -> LoopStats {
        let needed = ops.count / sampleEvery + 2
        if samples.count < needed {
            samples.deallocate()
            samples = .allocate(capacity: needed)
            samples.initialize(repeating: 0)
        }
        let r = ops.withUnsafeBufferPointer { ops in
            store.run(data, ops, maxSeconds: maxSeconds, sampleEvery: sampleEvery, samples: samples, buffer: buffer)
        }
        var taken = UnsafeMutableBufferPointer(rebasing: samples[0..<Int(r.samples)])
        taken.sort()
        return LoopStats(ops: Int(r.ops), opsPerSecond: r.nanoseconds == 0 ? 0 : Double(r.ops) * 1e9 / Double(r.nanoseconds),
                         p50Nanoseconds: Stats.percentile(taken, 0.50), p99Nanoseconds: Stats.percentile(taken, 0.99),
                         found: Int(r.found), notFound: Int(r.not_found), errors: Int(r.errors))
    }
}

extension Meter {
    /// One loop of batched reads over the gets of `ops` (see `Store.runBatchedGets`); nil for a
    /// store without them. No latencies: a call answers several keys.
    func measureBatched(_ store: Store, _ data: Dataset, _ ops: [UInt32], maxSeconds: Double) -> LoopStats? {
        let buffers = UnsafeMutableRawBufferPointer.allocate(byteCount: Int(BENCH_BATCH) * max(data.valueLength, 64), alignment: 64)
        defer { buffers.deallocate() }
        buffers.initializeMemory(as: UInt8.self, repeating: 0)
        return ops.withUnsafeBufferPointer { store.runBatchedGets(data, $0, maxSeconds: maxSeconds, buffers: buffers) }.map(Self.stats(of:))
    }

    /// One loop of batched writes over the keys of `ops` (see `Store.runBatchedPuts`); nil for a
    /// store without them.
    func measureBatchedPuts(_ store: Store, _ data: Dataset, _ ops: [UInt32], maxSeconds: Double) -> LoopStats? {
        ops.withUnsafeBufferPointer { store.runBatchedPuts(data, $0, maxSeconds: maxSeconds) }.map(Self.stats(of:))
    }

    /// Batched removals of the keys of `ops` (see `Store.runBatchedDeletes`); nil for a store
    /// without them.
    func measureBatchedDeletes(_ store: Store, _ data: Dataset, _ ops: [UInt32]) -> LoopStats? {
        ops.withUnsafeBufferPointer { store.runBatchedDeletes(data, $0) }.map(Self.stats(of:))
    }

    private static func stats(of r: bench_result) -> LoopStats {
        return LoopStats(ops: Int(r.ops), opsPerSecond: r.nanoseconds == 0 ? 0 : Double(r.ops) * 1e9 / Double(r.nanoseconds),
                         p50Nanoseconds: 0, p99Nanoseconds: 0,
                         found: Int(r.found), notFound: Int(r.not_found), errors: Int(r.errors))
    }
}

/// The process and the machine.
enum System {
    /// A field of /proc/self/status in bytes (VmRSS, VmHWM).
    static func status(_ field: String) -> Int {
        guard let text = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return 0 }
        for line in text.split(separator: "\n") where line.hasPrefix(field + ":") {
            let number = line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first
            return (number.flatMap { Int($0) } ?? 0) * 1024
        }
        return 0
    }

    static var residentBytes: Int { status("VmRSS") }
    static var peakResidentBytes: Int { status("VmHWM") }

    /// Resets the peak (VmHWM) to the current resident size.
    static func resetPeakResident() {
        try? "5".write(toFile: "/proc/self/clear_refs", atomically: false, encoding: .utf8)
    }

    /// Bytes of disk the files under `path` take (allocated blocks, so sparse files count what
    /// they really use).
    static func allocatedBytes(_ path: String) -> Int {
        var total = 0
        guard let walker = FileManager.default.enumerator(atPath: path) else { return 0 }
        var st = stat()
        if stat(path, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG { return Int(st.st_blocks) * 512 }
        while let name = walker.nextObject() as? String {
            if lstat(path + "/" + name, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG { total += Int(st.st_blocks) * 512 }
        }
        return total
    }

    static var loadAverage: String {
        (try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8))?
            .split(separator: " ").prefix(3).joined(separator: " ") ?? "?"
    }

    static func freshDirectory(_ path: String) throws -> String {
        try? FileManager.default.removeItem(atPath: path)
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    static func seconds(_ body: () throws -> Void) rethrows -> Double {
        let start = bench_now_ns()
        try body()
        return Double(bench_now_ns() - start) / 1e9
    }
}

import CPeers
import Foundation
import Larder

/// Scale: many 100-byte entries in one file; its clean open, its recovery after kill -9, and
/// what each entry costs beyond its key and value.
struct ScaleResult: Codable, Sendable {
    var entries: Int
    var valueSize: Int
    var fillOpsPerSecond: Double
    var fileBytes: Int
    var capacity: Int
    /// Bytes of the index (8-byte slots, both tables while one drains) per live entry.
    var indexBytesPerEntry: Double
    /// Record bytes (header, alignment) beyond key and value, per live entry.
    var recordOverheadPerEntry: Double
    /// The whole file beyond keys and values, per live entry.
    var fileOverheadPerEntry: Double
    var cleanOpenMilliseconds: Double
    var cleanOpenRange: [Double]?
    var recoveryMilliseconds: Double
    var recoveredEntries: Int
    /// `forEachEntry` over the whole file, key and value length of each entry (nil in results
    /// from before it was measured).
    var listEntriesPerSecond: Double?
    var problems: [String]
}

enum Scale {
    /// The index slot counts of a Larder file, read from its meta page (docs/FORMAT.md, 2.1):
    /// the copy with the higher sequence; offset 72 active slots, 88 draining slots.
    static func indexSlots(path: String) throws -> Int {
        let file = try FileHandle(forReadingFrom: URL(fileURLWithPath: path))
        defer { try? file.close() }
        func u64(_ d: Data, _ offset: Int) -> UInt64 {
            d.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: offset, as: UInt64.self).littleEndian }
        }
        let first = try file.read(upToCount: 128) ?? Data()
        let pageSize = first.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: 24, as: UInt32.self).littleEndian }
        try file.seek(toOffset: UInt64(pageSize))
        let second = try file.read(upToCount: 128) ?? Data()
        let magic: UInt64 = 0x1A52_4544_5241_4C89
        let copies = [first, second].filter { $0.count == 128 && u64($0, 0) == magic }
        guard let meta = copies.max(by: { u64($0, 16) < u64($1, 16) }) else { throw BenchFailure("no meta page in \(path)") }
        return Int(u64(meta, 72) + u64(meta, 88))
    }

    static func measure(entries: Int, reps: Int, directory: String) throws -> ScaleResult {
        let valueSize = 100
        let data = Dataset(keyCount: entries, valueLength: valueSize)
        let dataBytes = data.dataBytes(count: entries)
        let dir = try System.freshDirectory(directory)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = Store.larderPath(in: dir)
        // Room for every record and the index, with a margin, so that the fill evicts nothing.
        let capacity = (dataBytes + entries * 120) / 4096 * 4096 + (64 << 20)
        var problems: [String] = []

        let cache = try Cache(path: path, options: .init(capacity: .bytes(capacity)))
        let meter = Meter(valueLength: valueSize)
        var fillOps = 0.0
        do {
            let ops = Workload.fill.operations(keys: entries, count: 0, seed: 0)
            let result = ops.withUnsafeBufferPointer { ops in
                let samples = UnsafeMutableBufferPointer<UInt64>.allocate(capacity: 1)
                defer { samples.deallocate() }
                return SwiftLoop.run(cache, data, ops, maxNs: 0, sampleEvery: 0, samples: samples, buffer: meter.buffer)
            }
            fillOps = Double(result.ops) * 1e9 / Double(result.nanoseconds)
            if result.errors > 0 { problems.append("fill: \(result.errors) failed") }
        }
        let stats = cache.stats
        if stats.evictions > 0 { problems.append("the fill evicted \(stats.evictions) entries") }
        var listings: [Double] = []
        for _ in 0..<max(reps, 3) {
            var listed = 0
            listings.append(try System.seconds {
                try cache.forEachEntry { _, _ in
                    listed += 1
                    return true
                }
            })
            if listed != stats.entryCount { problems.append("a listing found \(listed) entries") }
        }
        try cache.close()
        let slots = try indexSlots(path: path)
        let live = max(stats.entryCount, 1)
        // Keys and values of the live entries (all of them, as the fill evicts nothing).
        let liveData = Double(stats.liveBytes + dataBytes - entries * valueSize)

        var opens: [Double] = []
        for _ in 0..<max(reps, 5) {
            var opened: Cache?
            opens.append(try System.seconds { opened = try Cache(path: path) } * 1000)
            if opened?.count != stats.entryCount { problems.append("a clean open found \(opened?.count ?? -1) entries") }
            try opened?.close()
        }

        var recoveries: [Double] = []
        var recovered = 0
        for _ in 0..<max(1, reps) {
            let writer = try Child(["crash-writer", path])
            _ = try writer.waitForLine()
            writer.kill()
            var opened: Cache?
            recoveries.append(try System.seconds { opened = try Cache(path: path) } * 1000)
            if opened?.wasRecovered != true { problems.append("the open after kill -9 did not recover") }
            recovered = opened?.count ?? 0
            try opened?.close()
        }

        return ScaleResult(entries: stats.entryCount, valueSize: valueSize, fillOpsPerSecond: fillOps,
                           fileBytes: System.allocatedBytes(path), capacity: capacity,
                           indexBytesPerEntry: Double(slots * 8) / Double(live),
                           recordOverheadPerEntry: (Double(stats.recordBytes) - liveData) / Double(live),
                           fileOverheadPerEntry: (Double(stats.fileBytes) - liveData) / Double(live),
                           cleanOpenMilliseconds: Stats.median(opens), cleanOpenRange: [opens.min()!, opens.max()!],
                           recoveryMilliseconds: Stats.median(recoveries),
                           recoveredEntries: recovered,
                           listEntriesPerSecond: Double(stats.entryCount) / Stats.median(listings), problems: problems)
    }

    /// The child that dies: opens the file for writing, writes a little, says "ready", waits to
    /// be killed.
    static func crashWriter(path: String) throws -> Never {
        let cache = try Cache(path: path)
        for i in 0..<100 { try cache.set(Array("crash value \(i)".utf8), forKey: "crash-key-\(i)") }
        FileHandle.standardOutput.write(Data("ready\n".utf8))
        while true { sleep(60) }
    }
}

import Foundation
@_spi(Inspection) import Larder

/// How long one step of the automatic sweep holds the writer lock (`larder-bench sweep-step
/// DIRECTORY [KEYS]`): a cache of KEYS small entries, two in three expired, swept step by step.
/// Each step is timed from before it takes the locks to after it gives them back: the longest
/// wait a writer of any process can have behind a sweep.
enum SweepBench {
    static func run(directory: String, keys: Int) throws {
        try? FileManager.default.removeItem(atPath: directory)
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let cache = try Cache(path: directory + "/sweep.larder", options: .init(capacity: .megabytes(256), memory: nil))
        let past = Expiry.date(Date(timeIntervalSince1970: 1))
        for key in 0..<keys {
            try cache.set(Data(repeating: UInt8(key & 0xFF), count: 100), forKey: "key\(key)", expiry: key % 3 == 0 ? .never : past)
        }
        var times: [Double] = []
        var cursor: Int? = 0
        while let position = cursor {
            let start = DispatchTime.now().uptimeNanoseconds
            cursor = cache.sweepStep(from: position)
            times.append(Double(DispatchTime.now().uptimeNanoseconds - start) / 1e3)
        }
        let slowest = times.indices.max { times[$0] < times[$1] } ?? 0
        times.sort()
        func percentile(_ p: Double) -> Double { times[min(times.count - 1, Int(Double(times.count) * p))] }
        print(String(format: "sweep of %d entries (%d expired): %d steps of at most %d slots; per step: median %.1f µs, p99 %.1f µs, p99.9 %.1f µs, max %.1f µs (step %d)",
                     keys, keys - (keys + 2) / 3, times.count, Cache.sweepStepSlots, percentile(0.5), percentile(0.99),
                     percentile(0.999), times.last ?? 0, slowest))
        print("left: \(cache.count) entries")
        try cache.close()
    }
}

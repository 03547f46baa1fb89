import CPeers
import Foundation

/// One row of the watching table: how soon watchers of other processes wake after a write.
struct WatchResult: Codable, Sendable {
    var watchers: Int
    var writes: Int
    /// Wake-ups the worst watcher timed (coalesced writes wake it once).
    var woken: Int
    /// Microseconds from a put's start to a watcher's wake-up: the worst watcher's percentiles.
    var p50: Double
    var p99: Double
    var max: Double
    /// Percent of a core an idle watcher of a read-write handle used, waiting 2 s.
    var idleCPU: Double
}

/// Cross-process notification latency (`bench_watch_latency`): one writer, 1, 4 and 16 watcher
/// processes, a write every millisecond.
enum WatchBench {
    static let watcherCounts = [1, 4, 16]
    static let writes = 10_000

    static func measure(watchers: Int, writes: Int, directory: String) throws -> WatchResult {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        var result = bench_watch_result()
        guard bench_watch_latency(directory + "/watch.larder", Int32(watchers), Int32(writes), &result) == 0 else {
            throw BenchFailure("watch latency: could not start \(watchers) watchers")
        }
        return WatchResult(watchers: watchers, writes: writes, woken: Int(result.woken), p50: result.p50_us,
                           p99: result.p99_us, max: result.max_us, idleCPU: result.idle_cpu_percent)
    }

    /// `larder-bench watch-latency DIRECTORY [WRITES]`: the table's rows as lines.
    static func printRows(directory: String, writes: Int) throws {
        for watchers in watcherCounts {
            let r = try measure(watchers: watchers, writes: writes, directory: directory)
            print(String(format: "%d watchers, %d writes: p50 %.1f us, p99 %.1f us, max %.1f us (worst watcher, %d wake-ups); idle watcher %.4f%% of a core",
                         r.watchers, r.writes, r.p50, r.p99, r.max, r.woken, r.idleCPU))
        }
    }
}

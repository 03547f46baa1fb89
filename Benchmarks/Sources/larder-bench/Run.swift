import CPeers
import Foundation

/// Everything one run measured, and where.
struct RunResults: Codable, Sendable {
    var started = Date()
    var seconds = 0.0
    var plan = Plan()
    var label: String?
    var command = ""
    /// The Larder commit measured (`git describe` of the repository).
    var revision: String?
    var machine: [String: String] = [:]
    var loadBefore = "", loadAfter = ""
    var suites: [SuiteResult] = []
    var concurrency: [ConcurrencyResult] = []
    var eviction: [EvictionResult] = []
    var scale: ScaleResult?
    var compression: [CompressionResult] = []
    var typed: [TypedResult]? = nil
    /// The memory tier's heap bytes per object kept, beyond the value (nil: not measured).
    var typedBytesPerObject: Double? = nil
    var watch: [WatchResult]? = nil
}

enum Run {
    static func progress(_ text: String) {
        FileHandle.standardError.write(Data("[\(String(format: "%6.1f", ProcessInfo.processInfo.systemUptime.truncatingRemainder(dividingBy: 100_000)))] \(text)\n".utf8))
    }

    static func all(_ options: Options) throws -> RunResults {
        let plan = options.plan
        let start = bench_now_ns()
        var results = RunResults(plan: plan, label: options.label, command: options.command, revision: options.revision,
                                 machine: Machine.describe(), loadBefore: System.loadAverage)
        let scratch = try System.freshDirectory(options.directory)
        defer { try? FileManager.default.removeItem(atPath: scratch) }

        if plan.sections.contains("main") {
            for (valueSize, keys) in plan.sizes.map({ ($0.valueSize, $0.keys) }) {
                // Repetitions go round the stores, so that a slow minute of the machine lands on
                // every store once rather than on all repetitions of one: the ratios between stores
                // are what the targets are about. Each round also gives every store another store
                // before it (what that one leaves behind, such as freed memory the host takes back,
                // can slow the next one's writes), so that no neighbour sets a median.
                var rounds: [PeerKind: [SuiteResult]] = [:]
                for round in 0..<plan.reps {
                    let order = Plan.order(of: plan.peers.count, round: round)
                    for index in order {
                        let peer = plan.peers[index]
                        progress("main: \(peer.rawValue), \(valueSize)-byte values, \(keys) keys, round \(round + 1) of \(plan.reps)")
                        let p = SuiteParameters(peer: peer, valueSize: valueSize, keys: keys, reps: 1,
                                                seconds: plan.seconds, opsCount: plan.opsCount, directory: scratch)
                        // Each store starts with no dirty pages of the one before: the kernel's
                        // writeback of another store's files would slow (and throttle) its writes.
                        sync()
                        let r = try Suite.spawn(p)
                        for problem in r.problems { progress("  problem: \(problem)") }
                        rounds[peer, default: []].append(r)
                    }
                }
                results.suites += plan.peers.map { Suite.combine(rounds[$0]!) }
            }
        }
        if plan.sections.contains("concurrency") {
            // withValue's row too: its reads pin what they lend in the file's reader table, which
            // every lending reader of every process writes.
            for peer in plan.peers {
                progress("concurrency: \(peer.rawValue)")
                let p = ConcurrencyParameters(peer: peer, valueSize: 100, keys: plan.concurrencyKeys, reps: plan.reps,
                                              seconds: plan.concurrencySeconds, directory: scratch + "/concurrency")
                let r = try Concurrency.measure(p)
                for problem in r.problems { progress("  problem: \(problem)") }
                results.concurrency.append(r)
            }
        }
        if plan.sections.contains("eviction") {
            for theta in [0.99, 0.8] {
                for percent in [1.0, 10.0] {
                    progress("eviction: Zipf \(theta), cache \(percent)% of the data")
                    let r = try Eviction.measure(theta: theta, percent: percent, objects: plan.evictionObjects,
                                                 valueSize: plan.evictionValueSize, directory: scratch + "/eviction")
                    for problem in r.problems { progress("  problem: \(problem)") }
                    results.eviction.append(r)
                }
            }
        }
        if plan.sections.contains("scale") {
            progress("scale: \(plan.scaleEntries) entries")
            let r = try Scale.measure(entries: plan.scaleEntries, reps: plan.reps, directory: scratch + "/scale")
            for problem in r.problems { progress("  problem: \(problem)") }
            results.scale = r
        }
        if plan.sections.contains("lz4") {
            for (valueSize, keys) in plan.compressionSizes.map({ ($0.valueSize, $0.keys) }) {
                for lz4 in [false, true] {
                    progress("lz4: \(valueSize)-byte JSON values, \(lz4 ? "LZ4" : "raw")")
                    results.compression.append(try CompressionBench.measure(
                        valueSize: valueSize, keys: keys, lz4: lz4, reps: plan.reps, seconds: plan.seconds,
                        directory: scratch + "/lz4"))
                }
            }
        }
        if plan.sections.contains("typed") {
            progress("typed: \(plan.typedKeys) keys")
            results.typed = try TypedBench.measure(keys: plan.typedKeys, seconds: plan.seconds, reps: plan.reps,
                                                   directory: scratch + "/typed")
            results.typedBytesPerObject = try TypedBench.bytesPerObject(keys: plan.typedKeys, directory: scratch + "/objects")
        }
        if plan.sections.contains("watch") {
            results.watch = []
            for watchers in WatchBench.watcherCounts {
                progress("watch: \(watchers) watcher processes, \(WatchBench.writes) writes")
                results.watch?.append(try WatchBench.measure(watchers: watchers, writes: WatchBench.writes, directory: scratch + "/watch"))
            }
        }
        results.seconds = Double(bench_now_ns() - start) / 1e9
        results.loadAfter = System.loadAverage
        return results
    }
}

/// What the report says about the machine.
enum Machine {
    static func shell(_ command: String) -> String? {
        let process = Process()
        let pipe = Pipe()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        process.arguments = ["-c", command]
        process.standardOutput = pipe
        process.standardError = FileHandle.nullDevice
        guard (try? process.run()) != nil else { return nil }
        let out = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        let text = String(decoding: out, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        return process.terminationStatus == 0 && !text.isEmpty ? text : nil
    }

    static func describe() -> [String: String] {
        var m: [String: String] = [:]
        m["cpu"] = shell("grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-") ?? "?"
        m["cores"] = "\(ProcessInfo.processInfo.activeProcessorCount)"
        m["memory"] = String(format: "%.1f GiB", Double(ProcessInfo.processInfo.physicalMemory) / Double(1 << 30))
        m["kernel"] = shell("uname -sr") ?? "?"
        m["filesystem"] = shell("df -T . | awk 'NR==2 {print $2}'") ?? "?"
        m["swift"] = shell("swift --version 2>&1 | head -1") ?? "?"
        m["libraries"] = String(cString: bench_library_versions()) + ", tkrzw " + (shell("pkg-config --modversion tkrzw") ?? "?")
        return m
    }
}

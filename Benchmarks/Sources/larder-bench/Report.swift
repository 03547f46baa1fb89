import CPeers
import Foundation

/// BENCHMARKS.md and the chart, from one run's results.
struct Report {
    let results: RunResults
    var plan: Plan { results.plan }
    let analysisPath: String?
    /// Where the chart is, relative to the report.
    let chartLink: String?

    init(_ results: RunResults, analysisPath: String?, chartLink: String?) {
        self.results = results
        self.analysisPath = analysisPath
        self.chartLink = chartLink
    }

    // MARK: - Formatting

    static func rate(_ opsPerSecond: Double) -> String {
        switch opsPerSecond {
        case 0: "–"
        case 1e6...: String(format: "%.2f M", opsPerSecond / 1e6)
        case 1e4...: String(format: "%.0f K", opsPerSecond / 1e3)
        case 1e3...: String(format: "%.1f K", opsPerSecond / 1e3)
        default: String(format: "%.0f", opsPerSecond)
        }
    }

    static func micros(_ ns: Double) -> String {
        ns >= 100_000 ? String(format: "%.0f", ns / 1000) : ns >= 10_000 ? String(format: "%.1f", ns / 1000) : String(format: "%.2f", ns / 1000)
    }

    static func bytes(_ n: Int) -> String {
        let d = Double(n), kib = 1024.0, mib = kib * 1024, gib = mib * 1024
        return d >= gib ? String(format: "%.2f GiB", d / gib) : d >= mib ? String(format: "%.1f MiB", d / mib)
            : d >= kib ? String(format: "%.0f KiB", d / kib) : "\(n) B"
    }

    static func size(_ n: Int) -> String { n >= 1 << 20 ? "\(n >> 20) MiB" : n >= 1024 ? "\(n >> 10) KiB" : "\(n) B" }

    static func ratio(_ x: Double) -> String { String(format: "%.2fx", x) }

    static func table(_ header: [String], _ rows: [[String]]) -> String {
        var lines = ["| " + header.joined(separator: " | ") + " |",
                     "|" + header.enumerated().map { i, _ in i == 0 ? "---" : "---:" }.joined(separator: "|") + "|"]
        lines += rows.map { "| " + $0.joined(separator: " | ") + " |" }
        return lines.joined(separator: "\n")
    }

    // MARK: - Lookups

    func suite(_ peer: PeerKind, _ valueSize: Int) -> SuiteResult? {
        results.suites.first { $0.peer == peer && $0.valueSize == valueSize }
    }

    func opsPerSecond(_ peer: PeerKind, _ valueSize: Int, _ w: Workload) -> Double? {
        suite(peer, valueSize)?.workloads[w]?.opsPerSecond
    }

    var valueSizes: [Int] { Array(Set(results.suites.map(\.valueSize))).sorted() }

    // MARK: - Targets

    struct Target {
        var name: String
        var measured: String
        var met: Bool?
    }

    /// Larder's two main rows: its C ABI and its Swift API (`copyValue`).
    static let larderPeers: [PeerKind] = [.larderC, .larderSwift]
    /// The stores that keep their data in a file, against which the issue sets its second bar.
    static let filePeers: [PeerKind] = [.tkrzw, .lmdb, .sqlite, .files]

    /// The worst ratio of Larder (both APIs) to a yardstick over these workloads and value sizes,
    /// where `yardstick` gives the figure to divide by (nil: not measured).
    func worstRatio(_ workloads: [Workload], sizes: [Int]? = nil,
                    against yardstick: (Int, Workload) -> (Double, String)?) -> (Double, String)? {
        var worst: (Double, String)?
        for size in sizes ?? valueSizes {
            for w in workloads {
                guard let (base, baseName) = yardstick(size, w), base > 0 else { continue }
                for peer in Self.larderPeers {
                    guard let ops = opsPerSecond(peer, size, w) else { continue }
                    let r = ops / base
                    if worst == nil || r < worst!.0 {
                        worst = (r, "\(peer.rawValue), \(w.title), \(Self.size(size))\(baseName.isEmpty ? "" : " vs \(baseName)")")
                    }
                }
            }
        }
        return worst
    }

    func worstVersusCeiling(_ workloads: [Workload], sizes: [Int]? = nil) -> (Double, String)? {
        worstRatio(workloads, sizes: sizes) { size, w in opsPerSecond(.memhash, size, w).map { ($0, tableRounds(size, w)) } }
    }

    /// The hash table's own speed in each round, so that a reader sees how noise and ratio
    /// relate; empty for a single round.
    func tableRounds(_ size: Int, _ w: Workload) -> String {
        guard let rounds = suite(.memhash, size)?.workloads[w]?.roundOpsPerSecond, rounds.count > 1 else { return "" }
        return "the table at " + rounds.map { Self.rate($0) }.joined(separator: ", ") + " ops/s by round"
    }

    /// Against the fastest file-backed store of each workload and size.
    func worstVersusBestFilePeer(_ workloads: [Workload]) -> (Double, String)? {
        worstRatio(workloads) { size, w in
            Self.filePeers.compactMap { p in opsPerSecond(p, size, w).map { ($0, p.rawValue) } }.max { $0.0 < $1.0 }
        }
    }

    func targets() -> [Target] {
        var t: [Target] = []
        let reads: [Workload] = [.read, .zipf, .miss, .ycsbB], writes: [Workload] = [.fill, .ycsbA, .delete]
        if let (r, where_) = worstVersusCeiling(reads) {
            t.append(Target(name: "reads ≥ 0.9x the in-memory C hash table (random, Zipf, miss, YCSB-B)",
                            measured: "worst \(Self.ratio(r)) (\(where_))", met: r >= 0.9))
        }
        if let (r, where_) = worstVersusBestFilePeer(reads) {
            t.append(Target(name: "reads 1.5x to 2.5x the best file-backed store (what 0.9x the hash table means)",
                            measured: "worst \(Self.ratio(r)) (\(where_))", met: r >= 1.5))
        }
        let smallSizes = valueSizes.filter { $0 <= 1024 }
        var worstP99: (Double, String)?
        for size in smallSizes {
            for w in [Workload.read, .zipf, .miss] {
                for peer in Self.larderPeers {
                    guard let p99 = suite(peer, size)?.workloads[w]?.p99Nanoseconds else { continue }
                    if worstP99 == nil || p99 > worstP99!.0 { worstP99 = (p99, "\(peer.rawValue), \(w.title), \(Self.size(size))") }
                }
            }
        }
        if let (p99, where_) = worstP99 {
            t.append(Target(name: "get p99 < 2 µs (values up to 1 KiB)",
                            measured: "worst \(Self.micros(p99)) µs (\(where_))", met: p99 < 2000))
        }
        if let (r, where_) = worstVersusCeiling(writes) {
            t.append(Target(name: "writes ≥ 0.75x the in-memory C hash table (fill, YCSB-A, delete)",
                            measured: "worst \(Self.ratio(r)) (\(where_))", met: r >= 0.75))
        }
        if let (r, where_) = worstVersusBestFilePeer(writes) {
            t.append(Target(name: "writes ≥ 1.3x the best file-backed store (fill, YCSB-A, delete)",
                            measured: "worst \(Self.ratio(r)) (\(where_))", met: r >= 1.3))
        }
        let largeSizes = valueSizes.filter { $0 >= 16 << 10 }
        if let (r, where_) = worstVersusCeiling([.read, .fill], sizes: largeSizes) {
            // Throughput in bytes: the value moved per operation, counted once.
            let gbps = largeSizes.compactMap { size -> String? in
                guard let larder = opsPerSecond(.larderC, size, .read), let table = opsPerSecond(.memhash, size, .read) else { return nil }
                return String(format: "%@ reads %.1f GB/s (hash table %.1f)", Self.size(size), larder * Double(size) / 1e9, table * Double(size) / 1e9)
            }
            t.append(Target(name: "16 KiB and 1 MiB values bound by memcpy: ≥ 0.9x the hash table's reads and fills",
                            measured: "C ABI " + gbps.joined(separator: ", ") + "; worst \(Self.ratio(r)) (\(where_))", met: r >= 0.9))
        }
        for swift in [PeerKind.larderSwift, .larderSwiftLend] {
            var worst: (Double, String)?
            for size in valueSizes {
                for w in Workload.allCases {
                    guard let c = opsPerSecond(.larderC, size, w), let s = opsPerSecond(swift, size, w), s > 0 else { continue }
                    if worst == nil || c / s > worst!.0 { worst = (c / s, "\(w.title), \(Self.size(size))") }
                }
            }
            if let (r, where_) = worst {
                t.append(Target(name: "\(swift.title) within 1.3x of the C ABI",
                                measured: "worst: the C ABI \(Self.ratio(r)) as fast (\(where_))", met: r <= 1.3))
            }
        }
        for peer in [PeerKind.larderC, .larderSwift, .larderSwiftLend] {
            if let c = results.concurrency.first(where: { $0.peer == peer }), let one = c.oneProcess, let two = c.twoProcesses, one > 0 {
                t.append(Target(name: "2 reader processes ≥ 1.8x one (\(peer.title))", measured: Self.ratio(two / one), met: two / one >= 1.8))
            }
        }
        if !results.eviction.isEmpty {
            let worst = results.eviction.max { $0.larderMissRatio - $0.lruMissRatio < $1.larderMissRatio - $1.lruMissRatio }!
            t.append(Target(name: "miss ratio no worse than exact LRU",
                            measured: String(format: "worst: %.4f vs LRU %.4f (Zipf %.2f, %g%%)", worst.larderMissRatio, worst.lruMissRatio, worst.theta, worst.cachePercent),
                            met: results.eviction.allSatisfy { $0.larderMissRatio <= $0.lruMissRatio }))
        }
        if let s = results.scale {
            let tenMillion = s.entries >= 10_000_000
            t.append(Target(name: "clean open of 10M entries < 10 ms",
                            measured: String(format: "%.2f ms (%@ entries%@)", s.cleanOpenMilliseconds, "\(s.entries)", tenMillion ? "" : "; run --full for 10M"),
                            met: tenMillion ? s.cleanOpenMilliseconds < 10 : nil))
            t.append(Target(name: "index overhead ≤ 32 B/entry", measured: String(format: "%.1f B/entry", s.indexBytesPerEntry),
                            met: s.indexBytesPerEntry <= 32))
        }
        return t
    }

    // MARK: - Markdown

    func markdown() -> String {
        var out: [String] = []
        out.append("# Larder benchmarks")
        out.append("")
        if let label = results.label { out.append("> **\(label).**\n") }
        out.append("""
            Larder against what a Swift or C program would use instead, in one run on one machine: \
            SQLite, LMDB, tkrzw's HashDBM, one file per key, and an in-memory C hash table as the ceiling. \
            Every store is called one operation at a time, as a cache calls it, with no fsync. Made by \
            `\(results.command)` (\(plan.full ? "full" : "quick") mode) in \(String(format: "%.0f", results.seconds)) s; \
            medians of \(plan.reps) repetitions.
            """)
        out.append("")
        out.append("## Machine")
        out.append("")
        let m = results.machine
        out.append("""
            - CPU: \(m["cpu"] ?? "?"), \(m["cores"] ?? "?") cores; memory \(m["memory"] ?? "?"); \(m["kernel"] ?? "?"); files on \(m["filesystem"] ?? "?")
            - Larder at commit \(results.revision ?? "?"); \(m["swift"] ?? "?"); \(m["libraries"] ?? "?") (Debian packages)
            - Load average before / after: \(results.loadBefore) / \(results.loadAfter)
            - Started \(ISO8601DateFormatter().string(from: results.started))
            """)
        out.append("")
        let targets = targets()
        if !targets.isEmpty {
            out.append("## Targets")
            out.append("")
            out.append(Self.table(["target", "measured", ""], targets.map {
                [$0.name, $0.measured, $0.met.map { $0 ? "met" : "**missed**" } ?? "not measured"]
            }))
            out.append("")
        }
        if let analysisPath, let analysis = try? String(contentsOfFile: analysisPath, encoding: .utf8) {
            out.append(analysis.trimmingCharacters(in: .whitespacesAndNewlines))
            out.append("")
        }
        if let chartLink, !results.suites.isEmpty { out.append("![operations per second by store, workload and value size](\(chartLink))\n") }
        if !results.suites.isEmpty { out.append(mainSection()) }
        if results.suites.contains(where: { $0.batchedReads != nil }) { out.append(batchedReadsSection()) }
        if !results.concurrency.isEmpty { out.append(concurrencySection()) }
        if !results.eviction.isEmpty { out.append(evictionSection()) }
        if let s = results.scale { out.append(scaleSection(s)) }
        if !results.compression.isEmpty { out.append(compressionSection()) }
        if let typed = results.typed, !typed.isEmpty { out.append(typedSection(typed)) }
        if let watch = results.watch, !watch.isEmpty { out.append(watchSection(watch)) }
        out.append(methodSection())
        return out.joined(separator: "\n")
    }

    func mainSection() -> String {
        var out = ["## Throughput and latency", ""]
        out.append("""
            Operations per second (higher is better). Keys are 16 to 24 bytes; *fill* stores every key once \
            into an empty store, *random read* gets uniformly chosen keys, *Zipf read* follows YCSB-C's \
            scrambled Zipf 0.99, *miss* gets keys never stored, *YCSB-A* and *YCSB-B* are 50% and 5% updates \
            under the same Zipf, *delete* removes every key. A get copies the value into the caller's buffer. \
            *disk* is the space the store's files take after the fill and after YCSB-B (updates); *RSS* is \
            the peak resident memory the store added to its process in the first repetition \
            (memory-mapped file pages count; the kernel's page cache, which serves SQLite and the files, does not).
            """)
        out.append("")
        for size in valueSizes {
            guard let keys = results.suites.first(where: { $0.valueSize == size })?.keys else { continue }
            out.append("### \(Self.size(size)) values, \(keys) keys")
            out.append("")
            let rows = plan.peers.compactMap { peer -> [String]? in
                guard let s = suite(peer, size) else { return nil }
                return [peer.title] + Workload.allCases.map { Self.rate(s.workloads[$0]?.opsPerSecond ?? 0) }
                    + [Self.bytes(s.fillFileBytes), Self.bytes(s.fileBytes), Self.bytes(s.rssBytes)]
            }
            out.append(Self.table(["ops/s"] + Workload.allCases.map(\.title) + ["disk after fill", "after YCSB", "RSS"], rows))
            out.append("")
            let latency = plan.peers.compactMap { peer -> [String]? in
                guard let s = suite(peer, size) else { return nil }
                return [peer.title] + Workload.allCases.map { w in
                    s.workloads[w].map { "\(Self.micros($0.p50Nanoseconds)) / \(Self.micros($0.p99Nanoseconds))" } ?? "–"
                }
            }
            out.append(Self.table(["p50 / p99 µs"] + Workload.allCases.map(\.title), latency))
            out.append("")
            let problems = plan.peers.compactMap { suite($0, size) }.flatMap { s in s.problems.map { "\(s.peer.title): \($0)" } }
            if !problems.isEmpty { out.append("Problems: " + problems.joined(separator: "; ") + "\n") }
        }
        return out.joined(separator: "\n")
    }

    func batchedReadsSection() -> String {
        var out = ["## Batched reads and writes", ""]
        out.append("""
            The random reads of the main table again, \(BENCH_BATCH) keys a call: `larder_get_many` (C ABI) and \
            `withValues(forKeys:)` (Swift API, each value copied into the loop's buffer); then the same keys \
            written over, one key a call and \(BENCH_BATCH) keys a call: `larder_put_many` and `set(_:)` with \
            an array of entries; and, after the main table's deletes, every key written again (not timed) \
            and removed, half one key a call and half \(BENCH_BATCH) keys a call (`larder_delete_many`, \
            `removeValues(forKeys:)`), each half first in every other repetition. A batch starts loading the index slots and records of its keys before it reads \
            or writes them one by one, so their waits for memory overlap. Not part of the targets, which are \
            for one operation a call; the other stores have no such call (the hash table's single reads, \
            updates and deletes, the latter from the main table, are there to compare).
            """)
        out.append("")
        var rows: [[String]] = []
        for size in valueSizes {
            let operations: [(name: String, single: (PeerKind) -> Double?, batched: (PeerKind) -> Double?)] = [
                ("reads", { opsPerSecond($0, size, .read) }, { suite($0, size)?.batchedReads?.opsPerSecond }),
                ("updates", { suite($0, size)?.updates?.opsPerSecond }, { suite($0, size)?.batchedUpdates?.opsPerSecond }),
                ("deletes", { peer in peer == .memhash ? opsPerSecond(peer, size, .delete) : suite(peer, size)?.deletes?.opsPerSecond },
                 { suite($0, size)?.batchedDeletes?.opsPerSecond }),
            ]
            for operation in operations {
                let table = operation.single(.memhash)
                for peer in [PeerKind.larderC, .larderSwift] {
                    guard let single = operation.single(peer), let batched = operation.batched(peer) else { continue }
                    rows.append([Self.size(size), operation.name, peer.title, Self.rate(single), Self.rate(batched),
                                 Self.ratio(batched / single), table.map { Self.rate($0) } ?? "–",
                                 table.map { Self.ratio(batched / $0) } ?? "–"])
                }
            }
        }
        out.append(Self.table(["values", "operation", "store", "one key a call", "\(BENCH_BATCH) keys a call", "batched ÷ one",
                               "C hash table, one key a call", "batched ÷ hash table"], rows))
        out.append("")
        return out.joined(separator: "\n")
    }

    func concurrencySection() -> String {
        var out = ["## Concurrency", ""]
        out.append("""
            Random reads of 100-byte values (\(plan.concurrencyKeys) keys), summed over the readers, for \
            \(String(format: "%g", plan.concurrencySeconds)) s. Threads share one handle where the store allows it \
            (SQLite: a connection each). Reader processes open the store read-only. *With a writer*: one reader \
            thread (process) while another thread (process) updates random keys; tkrzw locks its file \
            against readers while a process writes, and the C hash table lives in one process. Larder's \
            `withValue` readers pin each value they lend in the file's reader table; read-only handles \
            (the reader processes) cannot, and lend a checked copy instead.
            """)
        out.append("")
        func optionalRatio(_ x: Double?, _ base: Double?) -> String {
            guard let x, let base else { return "–" }
            return Self.ratio(x / max(base, 1))
        }
        let rows: [[String]] = results.concurrency.map { (c: ConcurrencyResult) -> [String] in
            let threads: [String] = [Self.rate(c.oneThread), Self.rate(c.twoThreads), Self.ratio(c.twoThreads / max(c.oneThread, 1))]
            let processes: [String] = [c.oneProcess.map(Self.rate) ?? "–", c.twoProcesses.map(Self.rate) ?? "–",
                                       optionalRatio(c.twoProcesses, c.oneProcess)]
            let threadWriter: [String] = [Self.rate(c.readerWithWriter), Self.ratio(c.readerWithWriter / max(c.oneThread, 1)),
                                          Self.rate(c.writerWithReader)]
            let processWriter: [String] = [c.readerProcessWithWriter.map(Self.rate) ?? "–",
                                           optionalRatio(c.readerProcessWithWriter, c.oneProcess),
                                           c.writerProcessWithReader.map(Self.rate) ?? "–"]
            return [c.peer.title] + threads + processes + threadWriter + processWriter
        }
        out.append(Self.table(["reads/s", "1 thread", "2 threads", "2/1", "1 process", "2 processes", "2/1",
                               "thread with a writer thread", "vs alone", "writer's puts/s",
                               "process with a writer process", "vs alone", "writer's puts/s"], rows))
        out.append("")
        let problems = results.concurrency.flatMap { c in c.problems.map { "\(c.peer.title): \($0)" } }
        if !problems.isEmpty { out.append("Problems: " + problems.joined(separator: "; ") + "\n") }
        return out.joined(separator: "\n")
    }

    func evictionSection() -> String {
        var out = ["## Eviction quality", ""]
        let e = results.eviction[0]
        out.append("""
            A Zipf trace over \(e.objects) keys of \(Self.size(e.valueSize)) values (get; on a miss, put), \
            \(e.objects * 2) requests of warm-up then \(e.requests) measured, replayed through Larder's Swift API \
            at a capacity of 1% and 10% of the data, and through an exact LRU whose byte budget is Larder's live \
            value bytes at the end of the warm-up.
            """)
        out.append("")
        let rows = results.eviction.map { e in
            [String(format: "%.2f", e.theta), String(format: "%g%%", e.cachePercent), Self.bytes(e.capacity), Self.bytes(e.liveBytes),
             String(format: "%.1f%%", 100 * Double(e.liveBytes) / Double(e.capacity)),
             String(format: "%.4f", e.larderMissRatio), String(format: "%.4f", e.lruMissRatio),
             e.larderMissRatio <= e.lruMissRatio ? "yes" : "no"]
        }
        out.append(Self.table(["Zipf", "cache", "capacity", "live bytes", "live / capacity", "Larder miss ratio", "LRU miss ratio", "Larder ≤ LRU"], rows))
        out.append("")
        return out.joined(separator: "\n")
    }

    func scaleSection(_ s: ScaleResult) -> String {
        var out = ["## Scale", ""]
        out.append("\(s.entries) entries of \(s.valueSize)-byte values in one file, filled through the Swift API.\n")
        out.append(Self.table(["", ""], [
            ["fill", Self.rate(s.fillOpsPerSecond) + " puts/s"],
            ["file size (capacity)", "\(Self.bytes(s.fileBytes)) (\(Self.bytes(s.capacity)))"],
            ["clean open (median; fastest–slowest)", String(format: "%.2f ms", s.cleanOpenMilliseconds)
                + (s.cleanOpenRange.map { String(format: " (%.2f–%.2f)", $0[0], $0[1]) } ?? "")],
            ["open after kill -9 (recovery)", String(format: "%.0f ms, %d entries back", s.recoveryMilliseconds, s.recoveredEntries)],
        ] + (s.listEntriesPerSecond.map { [["listing every entry (`forEachEntry`, median)", Self.rate($0) + " entries/s"]] } ?? []) + [
            ["index bytes per entry", String(format: "%.1f", s.indexBytesPerEntry)],
            ["record bytes per entry beyond key and value", String(format: "%.1f", s.recordOverheadPerEntry)],
            ["file bytes per entry beyond key and value", String(format: "%.1f", s.fileOverheadPerEntry)],
        ]))
        out.append("")
        if !s.problems.isEmpty { out.append("Problems: " + s.problems.joined(separator: "; ") + "\n") }
        return out.joined(separator: "\n")
    }

    func compressionSection() -> String {
        var out = ["## LZ4", ""]
        out.append("""
            JSON-like values (arrays of user records with random names, numbers and dates), through the Swift \
            API: fill, then random reads (decompressed into the caller's buffer). A 256-byte value holds about \
            one record, so its field names appear once and LZ4 finds little to share; the ratio grows with the \
            number of records a value holds.

            """)
        let sizes = Array(Set(results.compression.map(\.valueSize))).sorted()
        let rows = sizes.compactMap { size -> [String]? in
            guard let raw = results.compression.first(where: { $0.valueSize == size && !$0.lz4 }),
                  let lz4 = results.compression.first(where: { $0.valueSize == size && $0.lz4 }) else { return nil }
            return [Self.size(size), String(format: "%.2f", lz4.ratio), Self.rate(raw.putOpsPerSecond), Self.rate(lz4.putOpsPerSecond),
                    Self.rate(raw.getOpsPerSecond), Self.rate(lz4.getOpsPerSecond)]
        }
        out.append(Self.table(["value", "LZ4 ratio", "puts/s raw", "puts/s LZ4", "gets/s raw", "gets/s LZ4"], rows))
        out.append("")
        return out.joined(separator: "\n")
    }

    func watchSection(_ watch: [WatchResult]) -> String {
        var out = ["## Watching across processes", ""]
        out.append("""
            One writer process puts its clock as a value every millisecond; each watcher process sleeps in \
            `larder_wait_change` (a futex on Linux) and, on waking, reads the value: the time from the put's \
            start to the wake-up, in microseconds, of the worst watcher (writes that come while a watcher \
            reads are coalesced into one wake-up). *Idle CPU*: an idle watcher of a read-write handle, \
            waiting 2 s. The write path's instructions with no watcher and with one are counted by \
            `Benchmarks/profile larder-c 100` and `LARDER_BENCH_WATCHED=1 Benchmarks/profile larder-c 100`.
            """)
        out.append("")
        let rows = watch.map { r in
            ["\(r.watchers)", "\(r.writes)", "\(r.woken)", String(format: "%.1f", r.p50), String(format: "%.1f", r.p99),
             String(format: "%.1f", r.max), String(format: "%.4f%%", r.idleCPU)]
        }
        out.append(Self.table(["watchers", "writes", "wake-ups", "p50 µs", "p99 µs", "max µs", "idle CPU"], rows))
        out.append("")
        return out.joined(separator: "\n")
    }

    func typedSection(_ typed: [TypedResult]) -> String {
        var out = ["## Typed reads and objects in memory", ""]
        out.append("""
            Typed reads of \(results.plan.typedKeys) keys through the Swift API, each way on the same values: \
            *decode every time* is `value(_:forKey:)` with no memory tier; *memory tier* answers from the decoded \
            object after checking the file (one load of its write count while nothing is written, FORMAT.md 3.4; \
            the key's record otherwise, never its value), in a tier sized to hold \
            every object (cost \(TypedBench.tierLimits(keys: results.plan.typedKeys).cost), count \(results.plan.typedKeys); the default cost limit, \
            64 MiB, holds a tenth of the 64 KiB values, and every timed read is checked to hit); *typed view* is the same \
            read through a `TypedCache`; *tier miss* has a \
            tier of one object, so that nearly every read checks, misses, reads and decodes; NSCache and a \
            Dictionary behind a mutex (`NSLock`) hold the same objects and check nothing; *Dictionary, no lock* \
            reads that Dictionary with no synchronisation at all (it never changes): how far a read that merely \
            returns the value scales on this machine. Every way hands the caller \
            the value (a copy of the struct, a reference to the object). The ways run in short alternating \
            rounds (each way on 1 thread, then on 2, in an order that turns each round); reads per second are \
            medians of the rounds, summed over the threads; the ratios are the memory tier's, medians of the \
            ratios within each round.

            """)
        let rows = typed.map { r -> [String] in
            let get = { (way: String) in r.readsPerSecond[way] ?? 0 }
            let tier = get("memory tier")
            let ratio = { (way: String) -> String in
                if let ratio = r.tierRatios?[way] { return String(format: "%.2fx", ratio) }
                return get(way) > 0 ? String(format: "%.2fx", tier / get(way)) : "-"
            }
            return [r.value, r.distribution, "\(r.threads)"] + TypedBench.ways.map { Self.rate(get($0)) }
                + [ratio("decode every time"), ratio("NSCache"), ratio("Dictionary + mutex")]
        }
        out.append(Self.table(["value", "keys", "threads"] + TypedBench.ways + ["tier / decode", "tier / NSCache", "tier / Dictionary"], rows))
        let scaling = typed.filter { $0.threads == 2 }.compactMap { two -> String? in
            if let scaling = two.tierScaling {
                let ceiling = two.ceilingScaling.map { String(format: " (Dictionary, no lock: %.2fx)", $0) } ?? ""
                return "\(two.value), \(two.distribution): \(String(format: "%.2fx", scaling))\(ceiling)"
            }
            guard let one = typed.first(where: { $0.value == two.value && $0.distribution == two.distribution && $0.threads == 1 }),
                  let a = one.readsPerSecond["memory tier"], let b = two.readsPerSecond["memory tier"], a > 0 else { return nil }
            return "\(two.value), \(two.distribution): \(String(format: "%.2fx", b / a))"
        }
        out.append("")
        out.append("Memory tier, 2 threads over 1: " + scaling.joined(separator: "; ") + ".")
        // What a read that misses the tier (a lookup, then a plain typed read) costs over the plain read.
        let misses = typed.filter { $0.threads == 1 }.compactMap { r -> String? in
            guard let decode = r.readsPerSecond["decode every time"], let miss = r.readsPerSecond["tier miss"], miss > 0 else { return nil }
            return "\(r.value), \(r.distribution): \(String(format: "%+.0f%%", (decode / miss - 1) * 100))"
        }
        out.append("")
        out.append("A read that misses the tier, against decoding every time (time per read, 1 thread): "
                   + misses.joined(separator: "; ") + ".")
        if let bytes = results.typedBytesPerObject {
            out.append("")
            out.append(String(format: "Memory the tier takes for each object it keeps, beyond the value: %.0f bytes ", bytes)
                       + "(\(results.plan.typedKeys) memory-only `Int` values with 9- to 10-byte keys; heap bytes by glibc's `mallinfo2`).")
        }
        out.append("")
        return out.joined(separator: "\n")
    }

    func methodSection() -> String {
        """
        ## How it is measured

        - `Benchmarks/` is a package of its own (users of Larder never pull in the peers). `Benchmarks/run` \
        installs what is missing (libsqlite3-dev, liblmdb-dev, libtkrzw-dev, gnuplot), builds in release mode \
        and runs `larder-bench` (quick mode: about ten minutes on 2 cores). `Benchmarks/run --full` takes the \
        10-million-entry scale test, a million-key eviction trace, twice the keys, longer loops and five \
        repetitions. `Benchmarks/run report` writes this file again from the last run's saved results (after \
        editing `Benchmarks/ANALYSIS.md`); `Benchmarks/profile PEER SIZE` counts instructions per call with \
        callgrind.
        - Every C-side store (the C hash table, SQLite, LMDB, tkrzw, one file per key, Larder's C ABI) is driven \
        by the same C loop (`Sources/CPeers/loop.c`) through one vtable; Larder's Swift API by a Swift loop \
        that mirrors it line by line (`Sources/larder-bench/SwiftLoop.swift`), reading with \
        `copyValue(forKey:into:)`, the counterpart of `larder_get`; the row *Swift, withValue* reads by \
        borrowing the value with `withValue(forKey:_:)` and copying it out. Swift only orchestrates.
        - Keys, values and operation sequences are made before the clock starts, from fixed seeds. \
        Throughput is operations over the whole loop; latency is every 16th operation timed on its own with \
        `clock_gettime(CLOCK_MONOTONIC)` (so it includes about 20 ns of clock reading).
        - Each store, value size and repetition runs in a fresh process and a fresh directory; fill and \
        delete run over all keys, the other loops for \(String(format: "%g", plan.seconds)) s each. The figures \
        are medians of \(plan.reps) repetitions, which go round the stores (every store once, then again), so \
        that a slow minute of the machine lands on one repetition of each store rather than on one store. \
        Each round takes the stores in another order, in which every store follows another store than in \
        the rounds before (what a store leaves behind, such as memory the host takes back, can slow the \
        writes of the next). Before each store, `sync()` writes back what the stores before left dirty, so \
        that no store's writes wait for another's writeback.
        - Configurations: SQLite WAL, `synchronous=OFF`, prepared statements, a `(k BLOB PRIMARY KEY, v BLOB)` \
        table; LMDB `MDB_NOSYNC | MDB_WRITEMAP`, one write transaction per put, reads through a reset/renewed \
        read transaction; tkrzw HashDBM on a memory-mapped file, buckets for twice the keys, reads through a \
        record processor that copies (no allocation); files: one per key in 256 directories, write to a \
        temporary file and rename; the C hash table: open addressing under a reader-writer lock, a malloc'd \
        copy per entry; Larder: a capacity three times the data, so the main table never evicts.

        """
    }

    // MARK: - Chart

    /// Larder in greens, the ceiling in grey, each peer a colour of its own.
    static func color(_ peer: PeerKind) -> String {
        switch peer {
        case .memhash: "#8c8c8c"
        case .larderC: "#1b7837"
        case .larderSwift: "#5aae61"
        case .larderSwiftLend: "#a6dba0"
        case .tkrzw: "#e08214"
        case .lmdb: "#2166ac"
        case .sqlite: "#762a83"
        case .files: "#d6604d"
        case .slimRecord: "#bf812d"
        }
    }

    /// A PNG of the main table: one panel per value size, ops/s on a log scale.
    func drawChart(to path: String, scratch: String) throws {
        guard !results.suites.isEmpty else { return }
        let dir = try System.freshDirectory(scratch)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let peers = plan.peers.filter { p in results.suites.contains { $0.peer == p } }
        let sizes = valueSizes
        var script = """
            set terminal pngcairo size 1600,1100 font 'Sans,10'
            set output '\(path)'
            set multiplot layout 2,2 title 'Larder vs peers: operations per second (log scale, higher is better)\(results.label.map { " — " + $0 } ?? "")'
            set style data histograms
            set style histogram clustered gap 1
            set style fill solid 0.85 border -1
            set logscale y
            set format y '10^{%L}'
            set grid ytics
            set key outside bottom center horizontal font 'Sans,8'
            set xtics nomirror
            set yrange [100:*]

            """
        for size in sizes {
            let file = "\(dir)/\(size).dat"
            var lines = ["workload " + peers.map { "\"\($0.title)\"" }.joined(separator: " ")]
            for w in Workload.allCases {
                lines.append("\"\(w.title)\" " + peers.map { String(format: "%.0f", max(opsPerSecond($0, size, w) ?? 1, 1)) }.joined(separator: " "))
            }
            try lines.joined(separator: "\n").write(toFile: file, atomically: true, encoding: .utf8)
            let keys = results.suites.first { $0.valueSize == size }?.keys ?? 0
            script += "set title '\(Self.size(size)) values, \(keys) keys'\n"
            script += "plot " + peers.enumerated().map { i, peer in
                "'\(file)' using \(i + 2):xtic(1) title columnheader(\(i + 2)) linecolor rgb '\(Self.color(peer))'"
            }.joined(separator: ", ") + "\n"
        }
        script += "unset multiplot\n"
        let scriptPath = dir + "/chart.gp"
        try script.write(toFile: scriptPath, atomically: true, encoding: .utf8)
        guard Machine.shell("gnuplot '\(scriptPath)' && echo ok") != nil else {
            throw BenchFailure("gnuplot failed on \(scriptPath)")
        }
    }
}

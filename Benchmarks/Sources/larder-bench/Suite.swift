import CPeers
import Foundation

/// The main table: every workload on one store and one value size, in a process of its own.
struct SuiteResult: Codable, Sendable {
    var peer: PeerKind
    var valueSize: Int
    var keys: Int
    var reps: Int
    var workloads: [Workload: LoopStats]
    /// The random reads again, `BENCH_BATCH` keys a call: Larder only (nil for the others, and in
    /// results from before it was measured).
    var batchedReads: LoopStats?
    /// The keys of the random reads written over, one key a call (Larder and the hash table) and
    /// `BENCH_BATCH` keys a call (Larder): nil for the other stores, and in results from before.
    var updates: LoopStats?
    var batchedUpdates: LoopStats?
    /// After the delete workload, the keys written again (not timed) and removed, half one key a
    /// call and half `BENCH_BATCH` keys a call (Larder).
    var deletes: LoopStats?
    var batchedDeletes: LoopStats?
    /// Disk the store takes after the fill, and after the read and update workloads.
    var fillFileBytes: Int
    var fileBytes: Int
    /// Peak resident memory the store added to its process (file pages it maps count), in the
    /// first repetition (later ones reuse memory the allocator kept).
    var rssBytes: Int
    var problems: [String]
}

struct SuiteParameters: Codable, Sendable {
    var peer: PeerKind
    var valueSize: Int
    var keys: Int
    var reps: Int
    /// Time limit of each read and update loop.
    var seconds: Double
    /// Operations generated for each of those loops.
    var opsCount: Int
    var directory: String
    /// The workloads to run after the fill, which always runs (the others read what it stored);
    /// nil for all. `Benchmarks/profile` counts one kind of call at a time with it (misses alone,
    /// say), which the averages over every workload mix.
    var workloads: [Workload]? = nil
}

enum Suite {
    static let seed: UInt64 = 8

    /// Runs in the child process.
    static func run(_ p: SuiteParameters) throws -> SuiteResult {
        let data = Dataset(keyCount: 2 * p.keys, valueLength: p.valueSize)
        let sizing = StoreSizing(keys: p.keys, dataBytes: data.dataBytes(count: p.keys))
        let ops = Dictionary(uniqueKeysWithValues: Workload.allCases.map {
            ($0, $0.operations(keys: p.keys, count: p.opsCount, seed: seed))
        })
        let meter = Meter(valueLength: p.valueSize)
        var runs: [Workload: [LoopStats]] = [:]
        var batchedRuns: [LoopStats] = [], updateRuns: [LoopStats] = [], batchedUpdateRuns: [LoopStats] = []
        var deleteRuns: [LoopStats] = [], batchedDeleteRuns: [LoopStats] = []
        let updates = ops[.read]!.map { Op.put(Int($0 & Op.indexMask)) }
        let measuresUpdates = [.larderC, .larderSwift, .memhash].contains(p.peer)
        var fillFileBytes: [Double] = [], fileBytes: [Double] = [], rss: [Double] = []
        var problems = Set<String>()
        for rep in 0..<p.reps {
            let directory = try System.freshDirectory("\(p.directory)/\(p.peer.rawValue)-\(p.valueSize)-\(rep)")
            defer { try? FileManager.default.removeItem(atPath: directory) }
            System.resetPeakResident()
            let baseline = System.residentBytes
            let store = try Store(p.peer, directory: directory, sizing: sizing)
            for workload in Workload.allCases where workload == .fill || p.workloads?.contains(workload) != false {
                let unbounded = workload == .fill || workload == .delete
                let stats = meter.measure(store, data, ops[workload]!, maxSeconds: unbounded ? 0 : p.seconds)
                runs[workload, default: []].append(stats)
                if stats.errors > 0 { problems.insert("\(workload.rawValue): \(stats.errors) failed operations") }
                if workload.expectsHits && stats.notFound > 0 { problems.insert("\(workload.rawValue): \(stats.notFound) keys not found") }
                if !workload.expectsHits && stats.found > 0 { problems.insert("\(workload.rawValue): \(stats.found) absent keys found") }
                if workload == .fill { fillFileBytes.append(Double(System.allocatedBytes(directory))) }
                // After the reads and updates of the main table (which follow one another as
                // they did before there were batched reads), before the deletes.
                if workload == .ycsbB, let batched = meter.measureBatched(store, data, ops[.read]!, maxSeconds: p.seconds) {
                    batchedRuns.append(batched)
                    if batched.errors > 0 || batched.notFound > 0 { problems.insert("batched reads: \(batched.errors) failed, \(batched.notFound) not found") }
                }
                if workload == .ycsbB && measuresUpdates {
                    let single = meter.measure(store, data, updates, maxSeconds: p.seconds)
                    updateRuns.append(single)
                    if single.errors > 0 { problems.insert("updates: \(single.errors) failed") }
                    if let batched = meter.measureBatchedPuts(store, data, updates, maxSeconds: p.seconds) {
                        batchedUpdateRuns.append(batched)
                        if batched.errors > 0 { problems.insert("batched updates: \(batched.errors) failed") }
                    }
                }
                if workload == .delete && store.hasBatches {
                    // The keys again (not timed), then half of them removed one a call and half
                    // BENCH_BATCH a call, from the same state: which half goes first alternates
                    // from repetition to repetition.
                    let refill = meter.measure(store, data, ops[.fill]!, maxSeconds: 0)
                    if refill.errors > 0 { problems.insert("refill before the batched deletes: \(refill.errors) failed") }
                    let deletes = ops[.delete]!
                    let half = deletes.count / 2 / Int(BENCH_BATCH) * Int(BENCH_BATCH)
                    let halves = [Array(deletes[..<half]), Array(deletes[half..<2 * half])]
                    for pass in 0..<2 {
                        let halfOps = halves[pass]
                        if (pass == 0) == (rep % 2 == 0) {
                            let single = meter.measure(store, data, halfOps, maxSeconds: 0)
                            deleteRuns.append(single)
                            if single.errors > 0 || single.notFound > 0 { problems.insert("deletes beside the batched ones: \(single.errors) failed, \(single.notFound) not found") }
                        } else if let batched = meter.measureBatchedDeletes(store, data, halfOps) {
                            batchedDeleteRuns.append(batched)
                            if batched.errors > 0 || batched.notFound > 0 { problems.insert("batched deletes: \(batched.errors) failed, \(batched.notFound) not found") }
                        }
                    }
                }
                if workload == .ycsbB {
                    fileBytes.append(Double(System.allocatedBytes(directory)))
                    rss.append(Double(max(0, System.peakResidentBytes - baseline)))
                }
            }
            store.close()
        }
        return SuiteResult(peer: p.peer, valueSize: p.valueSize, keys: p.keys, reps: p.reps,
                           workloads: runs.mapValues(LoopStats.median),
                           batchedReads: batchedRuns.isEmpty ? nil : LoopStats.median(batchedRuns),
                           updates: updateRuns.isEmpty ? nil : LoopStats.median(updateRuns),
                           batchedUpdates: batchedUpdateRuns.isEmpty ? nil : LoopStats.median(batchedUpdateRuns),
                           deletes: deleteRuns.isEmpty ? nil : LoopStats.median(deleteRuns),
                           batchedDeletes: batchedDeleteRuns.isEmpty ? nil : LoopStats.median(batchedDeleteRuns),
                           fillFileBytes: Int(Stats.median(fillFileBytes)), fileBytes: Int(Stats.median(fileBytes)),
                           rssBytes: Int(rss.first ?? 0),
                           problems: problems.sorted())
    }

    /// One result from the repetitions of one store and value size, each run on its own: the
    /// median of every figure, the resident memory of the first.
    static func combine(_ runs: [SuiteResult]) -> SuiteResult {
        var combined = runs[0]
        combined.reps = runs.map(\.reps).reduce(0, +)
        combined.workloads = Dictionary(uniqueKeysWithValues: Workload.allCases.compactMap { workload in
            let stats = runs.compactMap { $0.workloads[workload] }
            return stats.isEmpty ? nil : (workload, LoopStats.median(stats))
        })
        func median(_ figure: KeyPath<SuiteResult, LoopStats?>) -> LoopStats? {
            let all = runs.compactMap { $0[keyPath: figure] }
            return all.isEmpty ? nil : LoopStats.median(all)
        }
        combined.batchedReads = median(\.batchedReads)
        combined.updates = median(\.updates)
        combined.batchedUpdates = median(\.batchedUpdates)
        combined.deletes = median(\.deletes)
        combined.batchedDeletes = median(\.batchedDeletes)
        combined.fillFileBytes = Int(Stats.median(runs.map { Double($0.fillFileBytes) }))
        combined.fileBytes = Int(Stats.median(runs.map { Double($0.fileBytes) }))
        combined.problems = Set(runs.flatMap(\.problems)).sorted()
        return combined
    }

    /// Runs in the parent: one child per store and repetition.
    static func spawn(_ p: SuiteParameters) throws -> SuiteResult {
        let json = String(decoding: try JSONEncoder().encode(p), as: UTF8.self)
        return try Child.result(["suite", json], as: SuiteResult.self)
    }
}

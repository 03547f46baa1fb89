import Foundation
import Larder

/// Reads from two threads or two processes against one; reads while a writer writes.
struct ConcurrencyResult: Codable, Sendable {
    var peer: PeerKind
    /// Random reads per second, summed over the readers.
    var oneThread: Double
    var twoThreads: Double
    var oneProcess: Double?
    var twoProcesses: Double?
    /// One reader process while another process writes, and that writer.
    var readerProcessWithWriter: Double?
    var writerProcessWithReader: Double?
    /// One reader thread while another thread writes (updates of random keys), and that writer.
    var readerWithWriter: Double
    var writerWithReader: Double
    var problems: [String]
}

struct ConcurrencyParameters: Codable, Sendable {
    var peer: PeerKind
    var valueSize: Int
    var keys: Int
    var reps: Int
    var seconds: Double
    var directory: String
    /// For a reader process: which reader it is (its operations' seed).
    var reader: Int = 0
    /// For a child process: write (updates of random keys) instead of reading.
    var writer = false
}

enum Concurrency {
    /// Enough operations that no loop runs out before its time limit.
    static func opsPerThread(_ p: ConcurrencyParameters) -> Int { Int(max(3e6, p.seconds * 6e6)) }

    static func readOps(_ p: ConcurrencyParameters, seed: Int) -> [UInt32] {
        Workload.read.operations(keys: p.keys, count: opsPerThread(p), seed: 1000 + UInt64(seed))
    }

    static func writeOps(_ p: ConcurrencyParameters) -> [UInt32] {
        var rng = SplitMix64(seed: 77)
        return (0..<opsPerThread(p)).map { _ in Op.put(rng.next(below: p.keys)) }
    }

    static func fill(_ p: ConcurrencyParameters, _ data: Dataset) throws -> Store {
        let sizing = StoreSizing(keys: p.keys, dataBytes: data.dataBytes(count: p.keys))
        let store = try Store(p.peer, directory: try System.freshDirectory(p.directory), sizing: sizing)
        let meter = Meter(valueLength: p.valueSize)
        let stats = meter.measure(store, data, Workload.fill.operations(keys: p.keys, count: 0, seed: 0), maxSeconds: 0)
        guard stats.errors == 0 else { throw BenchFailure("\(p.peer.rawValue): the fill failed") }
        return store
    }

    /// Runs each loop on a thread of its own, all started together; returns each one's stats.
    static func threads(_ store: Store, _ p: ConcurrencyParameters, _ data: Dataset,
                        _ loops: [[UInt32]]) throws -> [LoopStats] {
        let sizing = StoreSizing(keys: p.keys, dataBytes: data.dataBytes(count: p.keys))
        let stores = try loops.indices.map { i in
            i == 0 || p.peer.sharedHandle ? store : try Store(p.peer, directory: p.directory, sizing: sizing)
        }
        nonisolated(unsafe) var results = [LoopStats?](repeating: nil, count: loops.count)
        let ready = DispatchGroup(), done = DispatchGroup(), start = DispatchSemaphore(value: 0)
        for (i, ops) in loops.enumerated() {
            ready.enter()
            done.enter()
            let thread = Thread {
                let meter = Meter(valueLength: p.valueSize)
                ready.leave()
                start.wait()
                let stats = meter.measure(stores[i], data, ops, maxSeconds: p.seconds)
                stores[i].threadDone()
                results[i] = stats
                done.leave()
            }
            thread.stackSize = 1 << 20
            thread.start()
        }
        ready.wait()
        for _ in loops { start.signal() }
        done.wait()
        for (i, s) in stores.enumerated() where i > 0 && s !== store { s.close() }
        return results.map { $0! }
    }

    /// Threads, and reads with a writer: in a child process of its own.
    static func runThreads(_ p: ConcurrencyParameters) throws -> ConcurrencyResult {
        let data = Dataset(keyCount: p.keys, valueLength: p.valueSize)
        let reads = [readOps(p, seed: 0), readOps(p, seed: 1)]
        let writes = writeOps(p)
        var one: [Double] = [], two: [Double] = [], reader: [Double] = [], writer: [Double] = []
        var problems = Set<String>()
        func check(_ stats: [LoopStats], _ what: String) {
            for s in stats where s.errors > 0 || s.notFound > 0 {
                problems.insert("\(what): \(s.errors) failed, \(s.notFound) not found")
            }
        }
        // One fill; the repetitions read it (the writer only replaces values with values of the
        // same size).
        let store = try fill(p, data)
        for _ in 0..<p.reps {
            let single = try threads(store, p, data, [reads[0]])
            let pair = try threads(store, p, data, reads)
            let mixed = try threads(store, p, data, [reads[0], writes])
            check(single + pair + mixed, "threads")
            one.append(single[0].opsPerSecond)
            two.append(pair.map(\.opsPerSecond).reduce(0, +))
            reader.append(mixed[0].opsPerSecond)
            writer.append(mixed[1].opsPerSecond)
        }
        store.close()
        try? FileManager.default.removeItem(atPath: p.directory)
        return ConcurrencyResult(peer: p.peer, oneThread: Stats.median(one), twoThreads: Stats.median(two),
                                 readerWithWriter: Stats.median(reader), writerWithReader: Stats.median(writer),
                                 problems: problems.sorted())
    }

    /// A reader process: opens the store read-only, waits for "go", reads for the time limit. A
    /// writer process opens it for writing and updates random keys instead.
    static func runReader(_ p: ConcurrencyParameters) throws -> LoopStats {
        let data = Dataset(keyCount: p.keys, valueLength: p.valueSize)
        let ops = p.writer ? writeOps(p) : readOps(p, seed: p.reader)
        let sizing = StoreSizing(keys: p.keys, dataBytes: data.dataBytes(count: p.keys))
        let store = try Store(p.peer, directory: p.directory, sizing: sizing, readOnly: !p.writer)
        let meter = Meter(valueLength: p.valueSize)
        Child.awaitGo()
        let stats = meter.measure(store, data, ops, maxSeconds: p.seconds)
        store.close()
        return stats
    }

    /// Runs child processes together (started at once, after all have opened the store);
    /// returns each one's stats.
    static func together(_ p: ConcurrencyParameters, _ roles: [(reader: Int, writer: Bool)]) throws -> [LoopStats] {
        let children = try roles.map { role in
            var q = p
            q.reader = role.reader
            q.writer = role.writer
            return try Child(["reader", String(decoding: try JSONEncoder().encode(q), as: UTF8.self)])
        }
        for child in children { _ = try child.waitForLine() }
        for child in children { child.go() }
        return try children.map { child in
            try JSONDecoder().decode(LoopStats.self, from: Data((try child.finish()).split(separator: "\n").last!.utf8))
        }
    }

    /// Reads from one process, then two at once, then one while another process writes, on a
    /// store filled (and closed) here.
    static func processes(_ p: ConcurrencyParameters) throws -> (one: Double, two: Double, reader: Double?, writer: Double?, problems: [String]) {
        var one: [Double] = [], two: [Double] = [], reader: [Double] = [], writer: [Double] = []
        var problems = Set<String>()
        let data = Dataset(keyCount: p.keys, valueLength: p.valueSize)
        try fill(p, data).close()
        func check(_ stats: [LoopStats]) {
            for s in stats where s.errors > 0 || s.notFound > 0 {
                problems.insert("processes: \(s.errors) failed, \(s.notFound) not found")
            }
        }
        for _ in 0..<p.reps {
            let single = try together(p, [(0, false)])
            let pair = try together(p, [(0, false), (1, false)])
            check(single + pair)
            one.append(single[0].opsPerSecond)
            two.append(pair.map(\.opsPerSecond).reduce(0, +))
            if p.peer.multiProcessWriter {
                let mixed = try together(p, [(0, false), (1, true)])
                check(mixed)
                reader.append(mixed[0].opsPerSecond)
                writer.append(mixed[1].opsPerSecond)
            }
        }
        // Whether misses could be evictions (the writer filling the capacity).
        if !problems.isEmpty, p.peer.isLarder, let cache = try? Cache(path: Store.larderPath(in: p.directory)) {
            let stats = cache.stats
            problems.insert("afterwards the cache holds \(stats.entryCount) of \(p.keys) keys and counts \(stats.evictions) evictions")
            try? cache.close()
        }
        try? FileManager.default.removeItem(atPath: p.directory)
        return (Stats.median(one), Stats.median(two), reader.isEmpty ? nil : Stats.median(reader),
                writer.isEmpty ? nil : Stats.median(writer), problems.sorted())
    }

    /// Runs in the parent: the thread tests in a child, the process tests from here.
    static func measure(_ p: ConcurrencyParameters) throws -> ConcurrencyResult {
        let json = String(decoding: try JSONEncoder().encode(p), as: UTF8.self)
        var result = try Child.result(["threads", json], as: ConcurrencyResult.self)
        if p.peer.multiProcess {
            let outcome = try processes(p)
            result.oneProcess = outcome.one
            result.twoProcesses = outcome.two
            result.readerProcessWithWriter = outcome.reader
            result.writerProcessWithReader = outcome.writer
            result.problems += outcome.problems
        }
        return result
    }
}

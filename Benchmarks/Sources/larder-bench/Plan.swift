import Foundation

/// A value size and how many keys hold values of that size.
struct SizedKeys: Codable, Sendable {
    var valueSize: Int
    var keys: Int
    init(_ valueSize: Int, _ keys: Int) {
        self.valueSize = valueSize
        self.keys = keys
    }
}

/// What a run measures, and how long it takes: quick (the default, a few minutes) or --full.
struct Plan: Codable, Sendable {
    var full = false
    /// Value sizes of the main table, each with its number of keys.
    var sizes = [SizedKeys(100, 200_000), SizedKeys(1024, 100_000), SizedKeys(16 << 10, 16_000), SizedKeys(1 << 20, 256)]
    var peers: [PeerKind] = [.memhash, .larderC, .larderSwift, .larderSwiftLend, .tkrzw, .lmdb, .sqlite, .files]
    var reps = 3
    /// Time limit of each read and update loop.
    var seconds = 0.3
    var opsCount = 2_000_000
    var concurrencyKeys = 200_000
    var concurrencySeconds = 0.5
    var evictionObjects = 100_000
    var evictionValueSize = 1024
    var scaleEntries = 1_000_000
    var compressionSizes = [SizedKeys(256, 100_000), SizedKeys(4096, 16_000), SizedKeys(64 << 10, 1000)]
    /// Keys of the typed-reads table (each value type).
    var typedKeys = 10_000
    var sections: Set<String> = ["main", "concurrency", "eviction", "scale", "lz4", "typed", "watch"]
    static let allSections = ["main", "concurrency", "eviction", "scale", "lz4", "typed", "watch"]

    /// The full run: the 10-million-entry scale test, a million-key eviction trace, twice the
    /// keys, longer loops and more repetitions (most of an hour on 2 cores, the file-per-key
    /// store taking the largest share).
    mutating func makeFull() {
        full = true
        sizes = [SizedKeys(100, 400_000), SizedKeys(1024, 200_000), SizedKeys(16 << 10, 32_000), SizedKeys(1 << 20, 512)]
        reps = 5
        seconds = 1
        opsCount = 5_000_000
        concurrencyKeys = 400_000
        concurrencySeconds = 2
        evictionObjects = 1_000_000
        scaleEntries = 10_000_000
        compressionSizes = [SizedKeys(256, 200_000), SizedKeys(4096, 32_000), SizedKeys(64 << 10, 2000)]
    }

    /// The order in which round `round` takes `count` stores (indices into `peers`): every
    /// `stride`-th store from the `round`-th on, with a stride that has no factor in common with
    /// `count` and grows from round to round (1, then 3, 5, 7 for eight stores). The store that
    /// runs before store `i` is then `i - stride`: another one each round, as long as there are
    /// strides to take.
    static func order(of count: Int, round: Int) -> [Int] {
        func gcd(_ a: Int, _ b: Int) -> Int { b == 0 ? a : gcd(b, a % b) }
        let strides = (1...max(count, 1)).filter { gcd($0, count) == 1 }
        let stride = strides[round % strides.count]
        return (0..<count).map { (round + $0 * stride) % count }
    }
}

/// The command line of a run.
struct Options {
    var plan = Plan()
    var output: String?
    var chart: String?
    var analysis: String?
    var label: String?
    var directory = FileManager.default.currentDirectoryPath + "/.build/bench-data"
    var command = "Benchmarks/run"
    var revision: String?

    /// The chart's path as the report links it: relative to the report's folder when inside it.
    var chartLink: String? {
        guard let chart else { return nil }
        guard let output else { return chart }
        let folder = URL(fileURLWithPath: output).deletingLastPathComponent().standardizedFileURL.path + "/"
        let path = URL(fileURLWithPath: chart).standardizedFileURL.path
        return path.hasPrefix(folder) ? String(path.dropFirst(folder.count)) : path
    }

    static let usage = """
        usage: larder-bench [--full] [--reps N] [--seconds S] [--only main,concurrency,eviction,scale,lz4,typed,watch] [--typed-keys N]
                            [--peers memhash,larder-c,larder-swift,larder-swift-lend,tkrzw,lmdb,sqlite,files,slim-record] [--sizes 100,1024,...]
                            [--scale ENTRIES]
                            [--dir SCRATCH] [--out BENCHMARKS.md] [--chart chart.png] [--analysis notes.md]
                            [--label TEXT] [--command TEXT] [--revision GIT-DESCRIBE]
        Prints a markdown report; --out also writes it to a file (and the raw results to SCRATCH.json),
        --chart draws a PNG (gnuplot).
        larder-bench report RESULTS.json [--out ...] [--chart ...] [--analysis ...]: the report again, from
        saved results (after editing the analysis).
        """

    init(_ arguments: [String]) throws {
        var rest = arguments[...]
        func value(_ flag: String) throws -> String {
            guard let v = rest.popFirst() else { throw BenchFailure("\(flag) needs a value\n\(Options.usage)") }
            return v
        }
        let wasFull = arguments.contains("--full")
        if wasFull { plan.makeFull() }
        while let flag = rest.popFirst() {
            switch flag {
            case "--full": break
            case "--quick": break
            case "--reps": plan.reps = Int(try value(flag)) ?? plan.reps
            case "--seconds": plan.seconds = Double(try value(flag)) ?? plan.seconds
            case "--only": plan.sections = Set(try value(flag).split(separator: ",").map(String.init))
            case "--peers":
                plan.peers = try value(flag).split(separator: ",").map {
                    guard let p = PeerKind(rawValue: String($0)) else { throw BenchFailure("unknown peer \($0)") }
                    return p
                }
            case "--sizes":
                let wanted = Set(try value(flag).split(separator: ",").compactMap { Int($0) })
                plan.sizes = plan.sizes.filter { wanted.contains($0.valueSize) }
            case "--typed-keys": plan.typedKeys = Int(try value(flag)) ?? plan.typedKeys
            case "--scale": plan.scaleEntries = Int(try value(flag)) ?? plan.scaleEntries
            case "--dir": directory = try value(flag)
            case "--out": output = try value(flag)
            case "--chart": chart = try value(flag)
            case "--analysis": analysis = try value(flag)
            case "--label": label = try value(flag)
            case "--command": command = try value(flag)
            case "--revision": revision = try value(flag)
            case "-h", "--help":
                print(Options.usage)
                exit(0)
            default: throw BenchFailure("unknown option \(flag)\n\(Options.usage)")
            }
        }
        for s in plan.sections where !Plan.allSections.contains(s) { throw BenchFailure("unknown section \(s)") }
    }
}

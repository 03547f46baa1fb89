import Foundation

/// What a run measures, and how long it takes: quick (the default, a few minutes) or --full.
struct Plan: Sendable {
    var full = false
    /// Value sizes of the main table, each with its number of keys.
    var sizes: [(valueSize: Int, keys: Int)] = [(100, 200_000), (1024, 100_000), (16 << 10, 16_000), (1 << 20, 256)]
    var peers: [PeerKind] = [.memhash, .larderC, .larderSwift, .tkrzw, .lmdb, .sqlite, .files]
    var reps = 3
    /// Time limit of each read and update loop.
    var seconds = 0.4
    var opsCount = 2_000_000
    var concurrencyKeys = 200_000
    var concurrencySeconds = 1.0
    var evictionObjects = 100_000
    var evictionValueSize = 1024
    var scaleEntries = 1_000_000
    var compressionSizes: [(valueSize: Int, keys: Int)] = [(256, 100_000), (4096, 16_000), (64 << 10, 1000)]
    var sections: Set<String> = ["main", "concurrency", "eviction", "scale", "lz4"]
    static let allSections = ["main", "concurrency", "eviction", "scale", "lz4"]

    mutating func makeFull() {
        full = true
        sizes = [(100, 1_000_000), (1024, 500_000), (16 << 10, 60_000), (1 << 20, 1000)]
        reps = 5
        seconds = 2
        opsCount = 10_000_000
        concurrencyKeys = 1_000_000
        concurrencySeconds = 3
        evictionObjects = 1_000_000
        scaleEntries = 10_000_000
        compressionSizes = [(256, 400_000), (4096, 60_000), (64 << 10, 4000)]
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

    static let usage = """
        usage: larder-bench [--full] [--reps N] [--seconds S] [--only main,concurrency,eviction,scale,lz4]
                            [--peers memhash,larder-c,larder-swift,tkrzw,lmdb,sqlite,files] [--sizes 100,1024,...]
                            [--dir SCRATCH] [--out BENCHMARKS.md] [--chart chart.png] [--analysis notes.md]
                            [--label TEXT] [--command TEXT]
        Prints a markdown report; --out also writes it to a file, --chart draws a PNG (gnuplot).
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
            case "--dir": directory = try value(flag)
            case "--out": output = try value(flag)
            case "--chart": chart = try value(flag)
            case "--analysis": analysis = try value(flag)
            case "--label": label = try value(flag)
            case "--command": command = try value(flag)
            case "-h", "--help":
                print(Options.usage)
                exit(0)
            default: throw BenchFailure("unknown option \(flag)\n\(Options.usage)")
            }
        }
        for s in plan.sections where !Plan.allSections.contains(s) { throw BenchFailure("unknown section \(s)") }
    }
}

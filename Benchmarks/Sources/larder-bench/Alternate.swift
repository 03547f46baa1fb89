import Foundation

/// One workload of several stores in alternating rounds in one process: each store filled once,
/// then round after round of the workload (random reads unless WORKLOAD names another), every
/// store in turn (in another order each round). A slow moment of the machine then lands on one
/// short round of every store, and ratios taken within a round hold where whole runs drift.
/// `delete` removes every key in a round, timed, and stores them again after it, untimed.
///   larder-bench alternate PEERS VALUE_SIZE KEYS ROUNDS SECONDS DIRECTORY [WORKLOAD]
///   e.g. larder-bench alternate memhash,larder-c,slim-record 100 200000 15 0.3 /tmp/alternate
///        larder-bench alternate memhash,larder-c,tkrzw 100 200000 15 0.3 /tmp/alternate ycsb-a
enum Alternate {
    static func run(_ arguments: [String]) throws {
        guard arguments.count == 6 || arguments.count == 7, let size = Int(arguments[1]), let keys = Int(arguments[2]),
              let rounds = Int(arguments[3]), let seconds = Double(arguments[4]),
              let workload = arguments.count == 7 ? Workload(rawValue: arguments[6]) : .read, workload != .fill else {
            throw BenchFailure("alternate PEERS VALUE_SIZE KEYS ROUNDS SECONDS DIRECTORY [read|zipf|miss|ycsb-a|ycsb-b|delete]")
        }
        let peers = try arguments[0].split(separator: ",").map {
            guard let peer = PeerKind(rawValue: String($0)) else { throw BenchFailure("unknown peer \($0)") }
            return peer
        }
        let data = Dataset(keyCount: 2 * keys, valueLength: size)
        let sizing = StoreSizing(keys: keys, dataBytes: data.dataBytes(count: keys))
        let fill = Workload.fill.operations(keys: keys, count: keys, seed: Suite.seed)
        let ops = workload.operations(keys: keys, count: 2_000_000, seed: Suite.seed)
        let meter = Meter(valueLength: size)
        var stores: [Store] = []
        for peer in peers {
            let directory = try System.freshDirectory("\(arguments[5])/\(peer.rawValue)")
            let store = try Store(peer, directory: directory, sizing: sizing)
            let filled = meter.measure(store, data, fill, maxSeconds: 0)
            guard filled.errors == 0 else { throw BenchFailure("\(peer.rawValue): the fill failed") }
            stores.append(store)
        }
        defer { stores.forEach { $0.close() } }
        var rates = Array(repeating: [Double](), count: peers.count)
        for round in 0..<rounds {
            for turn in 0..<peers.count {
                let index = (turn + round) % peers.count
                let stats = meter.measure(stores[index], data, ops, maxSeconds: workload == .delete ? 0 : seconds)
                guard stats.errors == 0, !workload.expectsHits || stats.notFound == 0 else {
                    throw BenchFailure("\(peers[index].rawValue): \(workload.title) failed")
                }
                rates[index].append(stats.opsPerSecond)
                if workload == .delete, meter.measure(stores[index], data, fill, maxSeconds: 0).errors != 0 {
                    throw BenchFailure("\(peers[index].rawValue): the refill failed")
                }
            }
        }
        print("\(workload.title), \(size)-byte values, \(keys) keys, \(rounds) rounds of \(seconds) s, one process")
        for (index, peer) in peers.enumerated() {
            let ratios = zip(rates[index], rates[0]).map { $0 / $1 }
            let name = peer.rawValue.padding(toLength: 14, withPad: " ", startingAt: 0)
            print(name + String(format: "median %6.2f M/s   ÷ %@ by round: median %.2fx (%.2f-%.2fx)",
                                Stats.median(rates[index]) / 1e6, peers[0].rawValue, Stats.median(ratios),
                                ratios.min() ?? 0, ratios.max() ?? 0))
        }
        print("table by round (M/s): " + rates[0].map { String(format: "%.2f", $0 / 1e6) }.joined(separator: " "))
    }
}

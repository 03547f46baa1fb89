import Foundation
import Larder

// The demo: a cache file that survives the process, with expiry and a byte limit.
let path = CommandLine.arguments.dropFirst().first ?? "demo.larder"
do {
    let cache = try Cache(path: path, options: .init(capacity: .megabytes(1)))
    let runs = (try cache.data(forKey: "runs")).map { String(decoding: $0, as: UTF8.self) } ?? "0"
    let run = (Int(runs) ?? 0) + 1
    try cache.set(Data(String(run).utf8), forKey: "runs")
    print("run \(run) of the demo on \(path)")
    if let fromC = try cache.data(forKey: "from-c") {
        print("the C example left: \(String(decoding: fromC, as: UTF8.self))")
    }

    try cache.set(Data("see you soon".utf8), forKey: "greeting", expiry: .seconds(0.2))
    print("greeting:", try cache.data(forKey: "greeting").map { String(decoding: $0, as: UTF8.self) } ?? "(none)")
    Thread.sleep(forTimeInterval: 0.3)
    print("greeting after 0.3 s:", try cache.data(forKey: "greeting").map { String(decoding: $0, as: UTF8.self) } ?? "(expired)")

    // Fill well past the capacity: the least recently used entries make way, the file stays
    // within 1 MiB, and "runs", read all along, survives.
    let blob = Data(repeating: 0x2A, count: 10_000)
    for index in 0..<500 {
        try cache.set(blob, forKey: "blob-\(index)")
        if index % 20 == 0 { _ = try cache.data(forKey: "runs") }
    }
    let stats = cache.stats
    print("after 500 puts of 10 KB: \(stats.entryCount) entries, \(stats.evictions) evictions so far, file \(stats.fileBytes) of \(stats.capacity) bytes")
    let total = try cache.withValue(forKey: "blob-499") { $0.reduce(0) { $0 + Int($1) } } ?? 0
    print("newest blob is there, read in place: byte sum \(total)")
    try cache.close()
} catch {
    print("demo failed: \(error)")
    exit(1)
}

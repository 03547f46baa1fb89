import Foundation
@_spi(Inspection) @_spi(Changes) import Larder

// The coverage-guided fuzz target (libFuzzer): every input is a cache file. The inspector behind
// `larder info`, `verify`, `dump` and `get` reads it as found; a read-only handle reads it; then
// it is opened for writing (so recovery runs on it), read, written, walked, trimmed and closed.
// All of it twice: on the file as given, and with its checksums made right (`Resealing`), so
// that a mutated length or offset reaches the checks a hostile file meets. Any crash, hang or
// sanitizer report is a bug; errors are fine. Built and run by Tests/Fuzz/run, which compiles
// with -sanitize=fuzzer and LARDER_FUZZING; an ordinary build only says how to run it.

#if LARDER_FUZZING
@_silgen_name("LLVMFuzzerRunDriver")
private func runFuzzerDriver(
    _ argc: UnsafeMutablePointer<Int32>, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>,
    _ callback: @convention(c) (UnsafePointer<UInt8>, Int) -> Int32) -> Int32

/// SwiftPM links an executable's entry point under this name; libFuzzer's driver does the rest.
@_cdecl("larder_fuzz_main")
public func fuzzMain(_ argc: Int32, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>) -> Int32 {
    var count = argc
    var arguments: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = argv
    return runFuzzerDriver(&count, &arguments) { data, size in fuzzOneInput(data, size) }
}
#else
@main
enum FuzzTargetUsage {
    static func main() {
        print("Run the fuzz target with Tests/Fuzz/run: it needs the libFuzzer build.")
    }
}
#endif

private let directory = ProcessInfo.processInfo.environment["TMPDIR"] ?? "/tmp"

/// A file of its own for each input: the corpus test runs its cases at once, and a case that
/// rewrote another's file under its open handle broke that one's promises.
private func newPath() -> String { "\(directory)/larder-fuzz-\(getpid())-\(UUID().uuidString).larder" }

/// Returns 0, or, outside the libFuzzer build (the test run over the corpus), 1 when the library
/// broke a promise on this input; the libFuzzer build stops there, as for a crash.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let file = Array(UnsafeBufferPointer(start: data, count: size))
    var broken = exercise(file)
    if let resealed = Resealing.resealed(file) { broken += exercise(resealed) }
    guard let first = broken.first else { return 0 }
    #if LARDER_FUZZING
    fatalError(first)
    #else
    FileHandle.standardError.write(Data((broken.joined(separator: "\n") + "\n").utf8))
    return 1
    #endif
}

/// Returns the promises the library broke: a value written and read back must come back as
/// written, or be refused as damaged.
private func exercise(_ file: [UInt8]) -> [String] {
    var broken: [String] = []
    let path = newPath()
    guard FileManager.default.createFile(atPath: path, contents: Data(file)) else { return broken }
    defer { unlink(path) }
    if let inspector = try? FileInspector(path: path) {
        let (_, walk) = inspector.verify()
        for entry in walk.entries.prefix(8) { _ = inspector.value(of: entry) }
        _ = inspector.lookup(key: Array("fuzz-1".utf8))
    }
    // A clean file opens read-only as it is, without recovery.
    if let reader = try? Cache(path: path, options: .init(readOnly: true)) {
        _ = readAround(reader)
        try? reader.close()
    }
    // A small capacity keeps a hostile meta page from making the file grow far.
    guard let cache = try? Cache(path: path, options: .init(capacity: .kilobytes(256))) else { return broken }
    let keys = readAround(cache)
    // The change ring is read as watchers read it: from the start, from now, from the future.
    if let now = try? cache.changeCursor {
        for start in [0, now &- 300, now &- 3, now, now &+ 7] {
            var cursor = start
            _ = try? cache.readChanges(since: &cursor, limit: 512)
        }
    }
    for index in 0..<8 {
        let value = Data(repeating: UInt8(index), count: 100 * index)
        let start = Date()
        guard (try? cache.set(value, forKey: "fuzz-\(index)")) != nil else { continue }
        do {
            let back = try cache.data(forKey: "fuzz-\(index)")
            // A file's maximum age may be a millisecond: past it (times are whole milliseconds),
            // the entry is expired, and a miss is the right answer.
            let mayHaveExpired = cache.maximumAge.map { Date().timeIntervalSince(start) + 0.002 >= $0 } ?? false
            if back != value && !(back == nil && mayHaveExpired) {
                broken.append("fuzz-\(index) read back \(back.map { "\($0.count) bytes" } ?? "missing") after a set of \(value.count)")
            }
        } catch where error.code == .corrupt {
            // Damage the file held may still be found on the way: refused, not passed on.
        } catch {
            broken.append("fuzz-\(index) read back after a set: \(error)")
        }
    }
    if let first = keys.first { _ = try? cache.removeValue(forKey: first) }
    // Many at once: keys the file held written over, then some of them removed.
    try? cache.set(keys.prefix(16).map { (key: $0, value: Data($0.reversed())) })
    _ = try? cache.removeValues(forKeys: keys.suffix(8))
    // The maintenance calls, which walk the whole index.
    _ = try? cache.removeAll(withPrefix: "fuzz-1")
    _ = try? cache.removeExpired()
    _ = try? cache.trim(toBytes: cache.totalBytes / 2)
    _ = try? cache.trim(toCount: cache.count / 2)
    _ = cache.stats.hitRatio
    try? cache.close()
    return broken
}

/// Lists up to 64 keys, then reads them one by one, lent, copied into a buffer (the usual get,
/// `lrd_entry_copy`), and all at once with a key never written.
private func readAround(_ cache: Cache) -> [[UInt8]] {
    var keys: [[UInt8]] = []
    try? cache.forEachEntry { key, _ in
        keys.append(Array(key))
        return keys.count < 64
    }
    var buffer = [UInt8](repeating: 0, count: 512)
    for key in keys {
        _ = try? cache.data(forKey: key)
        _ = try? cache.withValue(forKey: key) { $0.count }
        _ = try? buffer.withUnsafeMutableBytes { try cache.copyValue(forKey: key, into: $0) }
    }
    _ = try? cache.data(forKeys: keys + [Array("never-written".utf8)])
    return keys
}

import Foundation
import Testing
@testable @_spi(Inspection) import Larder

/// A writer killed at a random moment while it replaces and removes values of every size far below
/// the capacity, large ones in the room of dead ones (the free list): every write it had
/// acknowledged must be there after recovery, and nothing else but the one in flight.
@Suite("Killed while reusing room")
struct KilledWhileReusingRoomTests {
    /// Mostly values of 4 to 40 KB, a few lengths each, and some small ones.
    private static func length(key: Int, version: Int) -> Int {
        let draw = (key &* 31 &+ version &* 17) % 100
        if draw < 30 { return 20 + (key &* 7 &+ version) % 3000 }
        let bases = [4_100, 7_000, 12_000, 20_000, 40_000]
        return bases[(key &+ version) % bases.count] + (version % 5) * 16
    }

    private static func make(key: Int, version: Int) -> [UInt8] {
        var bytes = withUnsafeBytes(of: UInt32(key).littleEndian, Array.init)
        bytes += withUnsafeBytes(of: UInt32(version).littleEndian, Array.init)
        return bytes + pattern(key &* 7919 &+ version, count: length(key: key, version: version))
    }

    /// The version a value claims, when it is exactly what `make` produced for `key`.
    private static func check(_ bytes: [UInt8], key: Int) -> Int? {
        guard bytes.count >= 8 else { return nil }
        let storedKey = bytes[0..<4].withUnsafeBytes { Int(UInt32(littleEndian: $0.loadUnaligned(as: UInt32.self))) }
        let version = bytes[4..<8].withUnsafeBytes { Int(UInt32(littleEndian: $0.loadUnaligned(as: UInt32.self))) }
        return storedKey == key && bytes == make(key: key, version: version) ? version : nil
    }

    private static let keys = 60

    @Test(.waitsOnItsOwnThreads) func everyAcknowledgedWriteSurvives() async throws {
        let directory = TemporaryDirectory()
        let path = directory.path()
        let logPath = directory.path("acknowledged.log")
        // The last acknowledged version of each key; negative: removed.
        var acknowledged: [Int: Int] = [:]
        for round in 0..<12 {
            #expect(FileManager.default.createFile(atPath: logPath, contents: nil))
            await #expect(processExitsWith: .signal(SIGKILL)) { [path = path as String, logPath = logPath as String, round = round as Int] in
                let compression: Compression = round % 2 == 0 ? .lz4 : .none
                let cache = try Cache(path: path, options: .init(capacity: .megabytes(256), compression: compression))
                let log = open(logPath, O_WRONLY | O_APPEND)
                let delay = UInt32(300_000 + (round * 104_729) % 1_500_000)
                Thread.detachNewThread {
                    usleep(delay)
                    kill(getpid(), SIGKILL)
                }
                var generator = SplitMix(seed: UInt64(round + 1))
                var version = round * 1_000_000
                while true {
                    version += 1
                    let key = Int(generator.next() % UInt64(Self.keys))
                    let line: String
                    if generator.next() % 6 == 0 {
                        try cache.removeValue(forKey: "k\(key)")
                        line = "\(key) -\(version)\n"
                    } else {
                        try cache.set(Self.make(key: key, version: version), forKey: "k\(key)")
                        line = "\(key) \(version)\n"
                    }
                    // Logged once the write has returned: acknowledged.
                    _ = line.withCString { write(log, $0, strlen($0)) }
                }
            }
            let log = (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? ""
            var lastVersion = round * 1_000_000
            for line in log.split(separator: "\n") {
                let fields = line.split(separator: " ")
                guard fields.count == 2, let key = Int(fields[0]), let version = Int(fields[1]) else { continue }
                acknowledged[key] = version
                lastVersion = abs(version)
            }
            let inFlight = lastVersion + 1
            let cache = try Cache(path: path)
            try checkRingWalk(cache.store)
            var differing = 0
            for key in 0..<Self.keys {
                let value = try cache.bytes(forKey: "k\(key)")
                let version = value.flatMap { Self.check($0, key: key) }
                if value != nil && version == nil {
                    Issue.record("round \(round): k\(key) has a value that was never stored")
                    continue
                }
                defer { acknowledged[key] = version ?? -1 }
                guard let expected = acknowledged[key] else {
                    #expect(version == nil || version == inFlight, "round \(round): k\(key)")
                    continue
                }
                if expected < 0 ? version == nil : version == expected { continue }
                // Only the write in flight may differ: a set of the next version, or a remove.
                differing += 1
                #expect(version == inFlight || version == nil,
                        "round \(round): k\(key) is \(String(describing: version)), acknowledged \(expected)")
            }
            #expect(differing <= 1, "round \(round): \(differing) keys differ from what was acknowledged")
            try cache.close()
            let report = try FileInspector(path: path).verify().report
            #expect(report.isSound, "round \(round): \(report.problems.prefix(3).map(\.description))")
        }
    }
}

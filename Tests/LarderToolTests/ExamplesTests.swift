import Foundation
import Testing

/// Runs the example programs (Examples/offline-first, Examples/media-cache) as built by
/// `swift build` / `swift test`, found as the `larder` tool is, and checks what they print.
/// Examples/c is built and run by Tests/C (`make -C Tests/C check`) and by scripts/demo.
@Suite("Examples", .waitsOnItsOwnThreads)
struct ExamplesTests {
    /// Runs example `name` on a cache file of its own; returns its exit status and output lines.
    func run(_ name: String) throws -> (status: Int32, lines: [String]) {
        expectOwnThreads()
        let program = try #require(Larder.builtProgram(name), "\(name) is not built: run `swift build` first")
        let directory = TemporaryDirectory()
        let output = directory.url.appendingPathComponent("out")
        _ = FileManager.default.createFile(atPath: output.path, contents: nil)
        let process = Process()
        process.executableURL = program
        process.arguments = [directory.path("\(name).larder")]
        process.standardOutput = try FileHandle(forWritingTo: output)
        try process.run()
        process.waitUntilExit()
        let text = String(decoding: try Data(contentsOf: output), as: UTF8.self)
        return (process.terminationStatus, text.split(separator: "\n").map(String.init))
    }

    @Test func offlineFirstServesStaleWhileTheSourceIsDown() throws {
        let (status, lines) = try run("offline-first")
        #expect(status == 0, "\(lines)")
        let expected = [
            "1. first launch: edition 1 from the server [requests so far: 1]",
            "2. screen opened again: edition 1 from the cache [requests so far: 1]",
            "3. expired; 20 views ask at once: edition 2 for all of them [requests so far: 2]",
            "4. offline, expired: edition 2, stale: the server cannot be reached [requests so far: 3]",
            "   the screen shows it under a banner: \"Offline: showing headlines from earlier\"",
            "5. back online, pull to refresh: edition 3 from the server [requests so far: 4]",
            "6. restarted, offline: edition 3 from the cache [requests so far: 4]",
            "   stored as JSON: {\"edition\":3,\"items\":[\"Larder 3.0 released\",\"Caches: now with fewer surprises\",\"Weather: mapped, memory sunny\"]}",
            "7. offline, never loaded: the server cannot be reached [requests so far: 5]",
        ]
        #expect(Array(lines.dropFirst()) == expected)
    }

    @Test func mediaCacheEvictsTheLeastRecentlyUsedWithinItsLimit() throws {
        let (status, lines) = try run("media-cache")
        #expect(status == 0, "\(lines)")
        func line(_ prefix: String) -> String { lines.first { $0.hasPrefix(prefix) } ?? "(no line \(prefix))" }
        // Every photo downloaded once; the favorites never again.
        #expect(line("scrolled through 60 photos:").hasPrefix("scrolled through 60 photos: 60 downloads,"))
        #expect(line("scrolled through").contains(" evicted"))
        #expect(line("file ").hasSuffix("never more than the capacity: true"))
        #expect(line("favorites still on disk:") == "favorites still on disk: yes; photo 10 still on disk: no")
        #expect(line("favorites opened again:") == "favorites opened again: 0 downloads")
        // Decoded pictures stay in memory within its limit (eight), their bytes in the file; a
        // favorite is decoded again only when the file has moved its record (once a lap).
        #expect(line("pictures in memory:") == "pictures in memory: 8 (3200 KB), 36 drawn from memory, 69 decoded")
        #expect(line("favorites decoded again:") == "favorites decoded again: 0")
        #expect(line("trimmed to 500 KB:") == "trimmed to 500 KB: 13 evicted, 5 left (500 KB): 1.jpg 2.jpg 3.jpg 59.jpg 60.jpg")
        #expect(line("voice notes stored:") == "voice notes stored: 3")
        #expect(line("conversation deleted:") == "conversation deleted: 3 voice notes removed, 0 left")
    }
}

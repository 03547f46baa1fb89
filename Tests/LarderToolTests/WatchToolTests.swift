import Foundation
import Larder
import Testing

/// `larder watch` prints the changes other processes make, one JSON object a line with `--json`,
/// and with `--prefix` only those of keys under the prefix.
@Suite("larder watch", .waitsOnItsOwnThreads)
struct WatchToolTests {
    /// A `larder watch` running as a child process; its output is read on a thread of its own.
    final class RunningWatch: @unchecked Sendable {
        private let process = Process()
        private let lock = NSLock()
        private var output = Data()

        init(_ arguments: [String]) throws {
            let pipe = Pipe()
            process.executableURL = Larder.executable
            process.arguments = arguments
            process.standardOutput = pipe
            process.standardError = FileHandle.nullDevice
            try process.run()
            let reading = pipe.fileHandleForReading
            let thread = Thread { [self] in
                while true {
                    let data = reading.availableData
                    if data.isEmpty { return }
                    lock.lock()
                    output.append(data)
                    lock.unlock()
                }
            }
            thread.name = "larder watch output"
            thread.start()
        }

        /// The complete lines printed so far, each parsed as a JSON object of strings, a null
        /// left out (nil: not such an object).
        var objects: [[String: String]?] {
            lock.lock()
            let text = String(decoding: output, as: UTF8.self)
            lock.unlock()
            return text.split(separator: "\n", omittingEmptySubsequences: false).dropLast().map { line in
                guard let object = (try? JSONSerialization.jsonObject(with: Data(line.utf8))) as? [String: Any] else { return nil }
                var strings: [String: String] = [:]
                for (name, value) in object {
                    if let value = value as? String { strings[name] = value } else if !(value is NSNull) { return nil }
                }
                return strings
            }
        }

        /// The last kind printed for each key.
        var lastKinds: [String: String] {
            var last: [String: String] = [:]
            for case let object? in objects { if let key = object["key"], let kind = object["kind"] { last[key] = kind } }
            return last
        }

        /// Ends the tool if it still runs, and waits for it (this suite runs on threads of its
        /// own).
        func stop() {
            if process.isRunning { kill(process.processIdentifier, SIGKILL) }
            process.waitUntilExit()
        }

        /// Interrupts the tool as Ctrl-C does; its exit status once it has ended, nil when it
        /// still runs after a minute.
        func interrupt() async throws -> Int32? {
            kill(process.processIdentifier, SIGINT)
            for _ in 0..<3000 where process.isRunning { try await Task.sleep(for: .milliseconds(20)) }
            return process.isRunning ? nil : process.terminationStatus
        }

        /// How many times `key` was printed as `kind`.
        func count(_ kind: String, of key: String) -> Int {
            objects.filter { $0?["key"] == key && $0?["kind"] == kind }.count
        }
    }

    /// Polls `condition` without blocking a thread, for up to a minute.
    private func eventually(_ condition: () -> Bool) async throws -> Bool {
        for _ in 0..<3000 {
            if condition() { return true }
            try await Task.sleep(for: .milliseconds(20))
        }
        return condition()
    }

    @Test(.failsIfItHangs) func itPrintsTheChangesOfAnotherProcessAsJSONLines() async throws {
        let directory = TemporaryDirectory()
        let path = directory.path()
        let cache = try Cache(path: path)
        try cache.set([0], forKey: "user/old")
        let everything = try RunningWatch(["watch", path, "--json"])
        defer { everything.stop() }
        let users = try RunningWatch(["watch", path, "--json", "--prefix", "user/"])
        defer { users.stop() }

        // The watches start when the tool has opened the file: write until both print a key.
        var round = 0
        let started = try await eventually {
            round += 1
            try? cache.set([1], forKey: "user/ready\(round)")
            return [everything, users].allSatisfy { $0.lastKinds.keys.contains { $0.hasPrefix("user/ready") } }
        }
        #expect(started)

        try cache.set([1], forKey: "user/1")
        try cache.set([1], forKey: "other/1")
        try cache.set([1], forKey: "user/2")
        #expect(try await eventually { everything.lastKinds["user/2"] == "stored" && users.lastKinds["user/2"] == "stored" })
        _ = try cache.removeValue(forKey: "user/1")
        _ = try cache.removeValue(forKey: "user/old")
        #expect(try await eventually {
            [everything, users].allSatisfy { $0.lastKinds["user/1"] == "removed" && $0.lastKinds["user/old"] == "removed" }
        })
        #expect(try await eventually { everything.lastKinds["other/1"] == "stored" })

        let kinds: Set = ["stored", "removed", "evicted", "expired", "cleared", "resynced"]
        for watch in [everything, users] {
            let objects = watch.objects
            #expect(!objects.isEmpty)
            #expect(objects.allSatisfy { $0.map { kinds.contains($0["kind"] ?? "") } == true })
            // Only a clear and a resync have no key.
            #expect(objects.allSatisfy { $0?["key"] != nil || ["cleared", "resynced"].contains($0?["kind"] ?? "") })
            // A key's line carries its bytes in hex too.
            #expect(objects.allSatisfy { object in
                guard let object, let key = object["key"] else { return true }
                return object["key_hex"] == Data(key.utf8).map { String(format: "%02x", $0) }.joined()
            })
        }
        #expect(users.objects.allSatisfy { $0?["key"].map { $0.hasPrefix("user/") } ?? true })
        #expect(users.lastKinds["user/2"] == "stored")

        // The tool opens the file for writing, so writers record each key they change: a new value
        // of a key it has seen is printed as that key stored, not as a resync.
        let before = users.count("stored", of: "user/2")
        try cache.set([2], forKey: "user/2")
        #expect(try await eventually { users.count("stored", of: "user/2") == before + 1 })
        // Interrupted, it closes the file and exits with 0.
        #expect(try await users.interrupt() == 0)
    }
}

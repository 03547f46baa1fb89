import Foundation
import Larder
import Testing

/// `put`, `delete`, `clear` and `trim`: writes through the public `Cache` API.
@Suite("Writing commands", .waitsOnItsOwnThreads)
struct WritingCommandTests {
    @Test func putFromAFileAndFromStdin() throws {
        let directory = TemporaryDirectory()
        let path = directory.path()
        let source = directory.path("value.bin")
        let bytes = Data((0..<1000).map { UInt8(truncatingIfNeeded: $0 * 7) })
        try bytes.write(to: URL(fileURLWithPath: source))
        try Larder.expect(["put", "--capacity", "1M", path, "file", source], stdout: "")
        try Larder.expect(["put", path, "stdin", "-"], input: Data("from stdin".utf8), stdout: "")
        try Larder.expect(["put", path, "implicit"], input: Data("also stdin".utf8), stdout: "")
        #expect(try Larder.expect(["get", path, "file"]).stdoutData == bytes)
        try Larder.expect(["get", path, "stdin"], stdout: "from stdin")
        try Larder.expect(["get", path, "implicit"], stdout: "also stdin")
        #expect(try Larder.expect(["info", path]).stdout.contains("capacity      1 MiB\n"))
        // Through the library too: the tool wrote an ordinary cache file.
        // A capacity for a file that exists is not taken, and the tool says so.
        let resized = try Larder.expect(["put", "--capacity", "2M", path, "more"], input: Data("x".utf8), stdout: "")
        #expect(resized.stderr == "larder: \(path) exists and keeps its capacity of 1 MiB; `larder compact --capacity` changes it\n")
        let cache = try Cache(path: path)
        #expect(try cache.data(forKey: "file") == bytes)
        #expect(try cache.data(forKey: "more") == Data("x".utf8))
        #expect(cache.capacity == 1 << 20)
    }

    @Test func putWithTTLAndCompression() throws {
        let directory = TemporaryDirectory()
        let path = directory.path()
        try Larder.expect(["put", "--ttl", "3600", "--lz4", path, "k"], input: Data(repeating: 120, count: 4000))
        let line = try Larder.expect(["dump", "--json", path]).stdout
        let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as! [String: Any]
        #expect(object["compressed"] as? Bool == true)
        #expect(object["size"] as? Int == 4000)
        let ttl = (object["expires_at"] as! Int) - (object["stored_at"] as! Int)
        #expect(ttl >= 3_599_000 && ttl <= 3_601_000)
        #expect(try Larder.expect(["dump", path]).stdout.contains("  yes  in 1h    no\n"))
        #expect(try Larder.expect(["get", path, "k"]).stdoutData == Data(repeating: 120, count: 4000))
        try Larder.expect(["put", "--ttl", "0", path, "k"], status: 64)
        try Larder.expect(["put", "--capacity", "lots", path, "k"], status: 64)
        let small = try Larder.expect(["put", "--capacity", "12K", directory.path("new.larder"), "k"], status: 64)
        #expect(small.stderr.contains("--capacity must be from 64 KiB to 1 TiB, not 12 KiB"))
        #expect(!FileManager.default.fileExists(atPath: directory.path("new.larder")))
    }

    @Test func putWithASlidingWindow() throws {
        let directory = TemporaryDirectory()
        let path = directory.path()
        try Larder.expect(["put", "--ttl", "600", "--sliding", path, "k"], input: Data("v".utf8))
        let line = try Larder.expect(["dump", "--json", path]).stdout
        let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as! [String: Any]
        #expect(object["sliding"] as? Bool == true)
        let window = (object["expires_at"] as! Int) - (object["stored_at"] as! Int)
        #expect(window == 600_000)
        #expect(try Cache(path: path).entryDetails(forKey: "k")?.sliding == true)
        let refused = try Larder.expect(["put", "--sliding", path, "k"], input: Data("w".utf8), status: 64)
        #expect(refused.stderr.contains("--sliding needs --ttl"))
        try Larder.expect(["get", path, "k"], stdout: "v")
    }

    @Test func putWithABinaryKey() throws {
        let directory = TemporaryDirectory()
        let path = directory.path()
        try Larder.expect(["put", "--hex-key", path, "00ff0a"], input: Data("bin".utf8))
        #expect(try Larder.expect(["dump", "--json", path]).stdout.contains(#""key":null,"key_hex":"00ff0a""#))
        try Larder.expect(["get", "--hex-key", path, "00FF0A"], stdout: "bin")
        let cache = try Cache(path: path)
        #expect(try cache.data(forKey: [0x00, 0xFF, 0x0A]) == Data("bin".utf8))
    }

    @Test func deleteAndClear() throws {
        let directory = TemporaryDirectory()
        let path = directory.path()
        try Fixture.numbered(path, count: 3)
        try Larder.expect(["delete", path, "k1"], stdout: "")
        let again = try Larder.expect(["delete", path, "k1"], status: 1, stdout: "")
        #expect(again.stderr == "larder: no value for key k1\n")
        try Larder.expect(["get", path, "k1"], status: 1)
        try Larder.expect(["dump", path], stdout: """
            RANK  KEY  SIZE  STORED  LZ4  EXPIRES  READ
               1  k2   40 B    40 B  no   never    no
               2  k0   40 B    40 B  no   never    no
            2 entries, 80 B (80 B stored)

            """)
        try Larder.expect(["clear", path], stdout: "removed 2 entries\n")
        try Larder.expect(["dump", path], stdout: "0 entries, 0 B (0 B stored)\n")
        let missing = try Larder.expect(["clear", directory.path("none.larder")], status: 2)
        #expect(missing.stderr == "larder: \(directory.path("none.larder")): no such file (invalid argument)\n")
        #expect(!FileManager.default.fileExists(atPath: directory.path("none.larder")))
    }

    /// `trim` applies each limit it is given, in its order, and says what each removed; what it
    /// evicts are the entries least recently used, as the cache's own eviction would.
    @Test func trimAppliesEachLimitInTurn() throws {
        let directory = TemporaryDirectory()
        let path = directory.path()
        try Fixture.numbered(path, count: 6)
        let cache = try Cache(path: path)
        try cache.set(Data("soon".utf8), forKey: "soon", expiry: .seconds(0.001))
        try cache.set(Data("a".utf8), forKey: "user/1/a")
        try cache.set(Data("b".utf8), forKey: "user/1/b")
        try cache.set(Data("c".utf8), forKey: "user/10")
        // Read, so used more recently than k0 and k2..k5, which were not.
        _ = try cache.data(forKey: "k0")
        _ = try cache.data(forKey: "k1")
        try cache.close()
        Thread.sleep(forTimeInterval: 0.01)
        try Larder.expect(["trim", path, "--expired", "--older-than", "3600", "--prefix", "user/1/", "--max-entries", "3", "--max-bytes", "80"],
                          stdout: """
                              removed 1 entry that had expired
                              removed 0 entries stored more than 3600 s ago
                              removed 2 entries whose keys begin with user/1/
                              evicted 4 entries to keep at most 3
                              evicted 1 entry to keep at most 80 B of values

                              """)
        let left = try Cache(path: path)
        #expect(Set(try left.keys.map { String(decoding: $0, as: UTF8.self) }) == ["k0", "k1"])
        try left.close()
        try Larder.expect(["trim", path, "--max-bytes", "0K"], stdout: "evicted 2 entries to keep at most 0 B of values\n")
        try Larder.expect(["trim", path, "--expired"], stdout: "removed 0 entries that had expired\n")

        // Nothing to do, or a limit that cannot be meant: usage errors, and the file untouched.
        try Fixture.numbered(path, count: 2)
        let refusals = [
            []: "give at least one of",
            ["--prefix", ""]: "--prefix is empty",
            ["--older-than=-1"]: "--older-than must be zero or more seconds",
            ["--older-than", "inf"]: "--older-than must be zero or more seconds",
            ["--max-entries=-1"]: "--max-entries must be zero or more",
            ["--max-bytes", "lots"]: "--max-bytes 'lots' is not a size",
            ["--prefix", "zz", "--hex-key"]: "--prefix 'zz' is not hexadecimal",
            ["--hex-key", "--expired"]: "--hex-key applies to --prefix",
        ]
        for (arguments, reason) in refusals {
            let run = try Larder.expect(["trim", path] + arguments, status: 64, stdout: "")
            #expect(run.stderr.contains("Error: \(reason)"), "\(arguments): \(run.stderr)")
        }
        try Larder.expect(["trim", directory.path("none.larder"), "--expired"], status: 2, stdout: "")
        #expect(try Cache(path: path).count == 2)
    }

    /// Several processes may write one file (issue 5): the tool is one more of them. Only
    /// `compact`, which replaces the file, must have it to itself.
    @Test func writesWhileAnotherProcessHasTheFileOpen() throws {
        let directory = TemporaryDirectory()
        let path = directory.path()
        try Fixture.numbered(path, count: 2)
        let cache = try Cache(path: path)
        try Larder.expect(["put", path, "tool"], input: Data("from the tool".utf8))
        #expect(try cache.data(forKey: "tool") == Data("from the tool".utf8))
        try Larder.expect(["delete", path, "k0"])
        #expect(try cache.data(forKey: "k0") == nil)
        let busy = try Larder.expect(["compact", path], status: 2, stdout: "")
        #expect(busy.stderr == "larder: \(path): the cache is open in another process (busy)\n")
        try cache.set(Data("after".utf8), forKey: "k1")
        try cache.close()
        try Larder.expect(["get", path, "k1"], stdout: "after")
        #expect(try Larder.expect(["compact", path]).stdout.hasPrefix("compacted 2 entries into \(path) "))
        try Larder.expect(["get", path, "tool"], stdout: "from the tool")
    }
}

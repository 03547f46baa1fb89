import Foundation
import Larder
import Testing

/// `info`, `dump` and `get`: the reading commands, compared byte for byte.
@Suite("Reading commands", .waitsOnItsOwnThreads)
struct InspectionCommandTests {
    @Test func everyCommandHasHelp() throws {
        let run = try Larder.expect(["--help"])
        for command in ["info", "dump", "entry", "get", "put", "delete", "clear", "trim", "verify", "recover", "compact"] {
            #expect(run.stdout.contains("  \(command) "), "\(command) missing from --help")
            let help = try Larder.expect([command, "--help"])
            #expect(help.stdout.hasPrefix("OVERVIEW: "))
            #expect(help.stdout.contains("USAGE: larder \(command) "))
        }
    }

    /// docs/FORMAT.md section 9 shows this map next to the bytes it describes.
    @Test func pageMapOfTheWorkedExample() throws {
        let directory = TemporaryDirectory()
        let path = directory.path()
        try Fixture.workedExample(path)
        try Larder.expect(["dump", "--pages", path], stdout: """
            OFFSET     HEX  PAGE   BYTES  TYPE   DETAIL
                 0     0x0     0    4096  meta   copy 0, sequence 1, in use
              4096  0x1000     1    4096  meta   copy 1, sequence 1
              8192  0x2000     2    4096  state  clean, head 20544, tail 20480, span 64, next sequence 3
             12288  0x3000     3    8192  index  active, 512 slots (1 used), sequence 1
             20480  0x5000     5      64  entry  greeting: 5 B, sequence 2, live; tail
             20544  0x5040     5  241600  free   never written; head

            """)
        let json = try Larder.expect(["dump", "--pages", "--json", "--limit", "5", path])
        let lines = json.stdout.split(separator: "\n")
        #expect(lines.count == 5)
        #expect(lines[4] == #"{"offset":20480,"page":5,"size":64,"type":"entry","detail":"greeting: 5 B, sequence 2, live; tail","key":"greeting","key_hex":"6772656574696e67"}"#)
    }

    @Test func infoOfTheWorkedExample() throws {
        let directory = TemporaryDirectory()
        let path = directory.path()
        try Fixture.workedExample(path)
        let run = try Larder.expect(["info", path])
        #expect(masked(run.stdout) == """
            file          \(path)
            format        version 2 (readers need version 1)
            page size     4 KiB
            capacity      256 KiB
            count limit   none
            maximum age   none
            file size     256 KiB (262144 bytes)
            created       T
            state         clean
            entries       1
            live bytes    5 B
            stored bytes  5 B (compression ratio 1.00)
            record bytes  64 B
            index         512 slots at offset 12288
            free          235.9 KiB
            fragmented    0 B

            PAGES  COUNT    BYTES
            meta       2    8 KiB
            state      1    4 KiB
            index      2    8 KiB
            data       1    4 KiB
            dead       0      0 B
            free      58  232 KiB

            COUNTER      VALUE
            hits             0
            misses           0
            inserts          1
            updates          0
            removals         0
            evictions        0
            expirations      0
            relocations      0
            recoveries       0

            """)
    }

    @Test func infoShowsCompressionAndDeadSpace() throws {
        let directory = TemporaryDirectory()
        let path = directory.path()
        let cache = try Cache(path: path, options: .init(capacity: .kilobytes(256), compression: .lz4))
        try cache.set(Data(repeating: 65, count: 3000), forKey: "big")
        try cache.set(Data("short".utf8), forKey: "small")
        try cache.set(Data("gone".utf8), forKey: "removed")
        try cache.removeValue(forKey: "removed")
        _ = try cache.data(forKey: "small")
        try cache.close()
        let info = try Larder.expect(["info", path]).stdout
        #expect(info.contains("entries       2\n"))
        #expect(info.contains("live bytes    2.9 KiB\n"))
        #expect(info.contains("stored bytes  27 B (compression ratio 111.30)\n"))
        #expect(info.contains("fragmented    64 B\n"))
        #expect(info.contains("hits             1\n"))
        #expect(info.contains("removals         1\n"))
        try Larder.expect(["dump", path], stdout: """
            RANK  KEY       SIZE  STORED  LZ4  EXPIRES  READ
               1  small      5 B     5 B  no   never    yes
               2  big    2.9 KiB    22 B  yes  never    no
            2 entries, 2.9 KiB (27 B stored)

            """)
        #expect(try Larder.expect(["get", path, "big"]).stdoutData == Data(repeating: 65, count: 3000))
    }

    /// A table row shows the first 64 bytes of a value unless told otherwise; JSON all of it.
    @Test func dumpShortensLongValuesInItsTable() throws {
        let directory = TemporaryDirectory()
        let path = directory.path()
        let cache = try Cache(path: path, options: .init(capacity: .megabytes(1)))
        try cache.set(Data(repeating: 0x61, count: 1000), forKey: "long")
        try cache.close()
        let shortened = try Larder.expect(["dump", "--values", path]).stdout
        #expect(shortened.contains("  " + String(repeating: "a", count: 64) + " ... (936 B more)\n"))
        #expect(try Larder.expect(["dump", "--hex", "--value-bytes", "2", path]).stdout.contains("  6161 ... (998 B more)\n"))
        let everything = try Larder.expect(["dump", "--values", "--value-bytes", "0", path]).stdout
        #expect(everything.contains("  " + String(repeating: "a", count: 1000) + "\n"))
        let json = try Larder.expect(["dump", "--json", "--values", path]).stdout
        #expect(json.contains("\"value\":\"" + String(repeating: "a", count: 1000) + "\""))
        try Larder.expect(["dump", "--value-bytes", "-1", path], status: 64)
    }

    @Test func dumpFiltersAndShowsValues() throws {
        let directory = TemporaryDirectory()
        let path = directory.path()
        let cache = try Cache(path: path, options: .init(capacity: .megabytes(1)))
        for (key, value) in [("user:1", "ann"), ("user:2", "bob"), ("post:1", "hi\tthere\n"), ("user:3", "cy")] {
            try cache.set(Data(value.utf8), forKey: key)
        }
        try cache.close()
        try Larder.expect(["dump", "--prefix", "user:", "--limit", "2", "--values", path], stdout: """
            RANK  KEY     SIZE  STORED  LZ4  EXPIRES  READ  VALUE
               1  user:3   2 B     2 B  no   never    no    cy
               3  user:2   3 B     3 B  no   never    no    bob
            showing 2 of 3 entries, 8 B (8 B stored)

            """)
        try Larder.expect(["dump", "--prefix", "706f", "--hex-key", "--hex", path], stdout: """
            RANK  KEY     SIZE  STORED  LZ4  EXPIRES  READ  VALUE
               2  post:1   9 B     9 B  no   never    no    68690974686572650a
            1 entry, 9 B (9 B stored)

            """)
        try Larder.expect(["dump", "--prefix", "post", "--values", path], stdout: """
            RANK  KEY     SIZE  STORED  LZ4  EXPIRES  READ  VALUE
               2  post:1   9 B     9 B  no   never    no    hi\\x09there\\x0a
            1 entry, 9 B (9 B stored)

            """)
        try Larder.expect(["dump", "--prefix", "nothing", path], stdout: "0 entries, 0 B (0 B stored)\n")
    }

    /// The schema docs/CLI.md documents: these members, in this order, on one line per entry.
    @Test func jsonSchema() throws {
        let directory = TemporaryDirectory()
        let path = directory.path()
        let cache = try Cache(path: path, options: .init(capacity: .megabytes(1)))
        try cache.set(Data("plain".utf8), forKey: "text")
        try cache.set(Data([0, 1, 0xFE, 0xFF]), forKey: [0x00, 0xFF, 0x41], expiry: .seconds(3600))
        try cache.set(Data(repeating: 7, count: 500), forKey: "packed", compression: .lz4)
        try cache.close()
        let run = try Larder.expect(["dump", "--json", "--values", path])
        let lines = run.stdout.split(separator: "\n", omittingEmptySubsequences: false)
        #expect(lines.count == 4 && lines[3].isEmpty)
        let names = ["key", "key_hex", "rank", "size", "stored_size", "record_size", "compressed", "expires_at", "expired",
                     "stored_at", "read", "sequence", "offset", "intact", "value", "value_hex"]
        for line in lines.dropLast() {
            // Members in the documented order.
            let found = line.matches(of: /"([a-z_]+)":/).map { String($0.1) }.filter(names.contains)
            #expect(found == names)
            #expect(try JSONSerialization.jsonObject(with: Data(line.utf8)) is [String: Any])
        }
        #expect(masked(String(lines[0])) == #"{"key":"packed","key_hex":"7061636b6564","rank":1,"size":500,"stored_size":12,"record_size":80,"compressed":true,"expires_at":null,"sliding":false,"expired":false,"stored_at":T,"read":false,"sequence":4,"offset":20608,"intact":true,"value":"\#(String(repeating: "\\u0007", count: 500))","value_hex":"\#(String(repeating: "07", count: 500))"}"#)
        let binary = try JSONSerialization.jsonObject(with: Data(lines[1].utf8)) as! [String: Any]
        #expect(binary["key"] is NSNull)
        #expect(binary["key_hex"] as? String == "00ff41")
        #expect(binary["value"] is NSNull)
        #expect(binary["value_hex"] as? String == "0001feff")
        let expires = binary["expires_at"] as! Int, stored = binary["stored_at"] as! Int
        #expect(expires - stored >= 3_599_000 && expires - stored <= 3_601_000)
        #expect(masked(String(lines[2])) == #"{"key":"text","key_hex":"74657874","rank":3,"size":5,"stored_size":5,"record_size":64,"compressed":false,"expires_at":null,"sliding":false,"expired":false,"stored_at":T,"read":false,"sequence":2,"offset":20480,"intact":true,"value":"plain","value_hex":"706c61696e"}"#)
        let plain = try Larder.expect(["dump", "--json", "--limit", "1", path]).stdout
        #expect(!plain.contains("value") && plain.hasSuffix("\"intact\":true}\n"))
    }

    @Test func binaryKeysAreShownSafely() throws {
        let directory = TemporaryDirectory()
        let path = directory.path()
        let cache = try Cache(path: path, options: .init(capacity: .megabytes(1)))
        try cache.set(Data("one".utf8), forKey: [0x00, 0xFF, 0x41, 0x5C, 0x1B])
        try cache.set(Data("two".utf8), forKey: "café ☕")
        try cache.close()
        try Larder.expect(["dump", path], stdout: """
            RANK  KEY              SIZE  STORED  LZ4  EXPIRES  READ
               1  café ☕            3 B     3 B  no   never    no
               2  \\x00\\xffA\\\\\\x1b   3 B     3 B  no   never    no
            2 entries, 6 B (6 B stored)

            """)
        try Larder.expect(["get", "--hex-key", path, "00ff415c1b"], stdout: "one")
        try Larder.expect(["get", path, "café ☕"], stdout: "two")
    }

    /// Characters that do not show as themselves are escaped too: a bidirectional override, a
    /// zero-width space, a no-break space (each could make one key look like another).
    @Test func invisibleCharactersInKeysAreEscaped() throws {
        let directory = TemporaryDirectory()
        let path = directory.path()
        let cache = try Cache(path: path, options: .init(capacity: .megabytes(1)))
        try cache.set(Data("x".utf8), forKey: "a\u{202E}b\u{200B}c\u{00A0}d é")
        try cache.close()
        let shown = try Larder.expect(["dump", path]).stdout
        #expect(shown.contains(#"a\xe2\x80\xaeb\xe2\x80\x8bc\xc2\xa0d é"#), "\(shown)")
    }

    /// Flags that would be ignored are refused: the output would not be what was asked for.
    @Test func dumpRefusesFlagsThatDoNotApply() throws {
        let directory = TemporaryDirectory()
        let path = directory.path()
        try Cache(path: path).set(Data("x".utf8), forKey: "k")
        for flags in [["--pages", "--prefix", "k"], ["--pages", "--values"], ["--pages", "--hex"], ["--hex-key"]] {
            let run = try Larder.expect(["dump"] + flags + [path], status: 64)
            #expect(run.stderr.contains("Usage: larder dump"), "\(run.stderr)")
        }
    }

    @Test func getWritesTheExactBytes() throws {
        let directory = TemporaryDirectory()
        let path = directory.path()
        let value = Data((0..<256).map { UInt8($0) } + [0, 0, 10])
        let cache = try Cache(path: path, options: .init(capacity: .megabytes(1)))
        try cache.set(value, forKey: "bytes")
        try cache.set(Data("soon".utf8), forKey: "brief", expiry: .seconds(0.05))
        try cache.close()
        #expect(try Larder.expect(["get", path, "bytes"]).stdoutData == value)
        let missing = try Larder.expect(["get", path, "absent"], status: 1, stdout: "")
        #expect(missing.stderr == "larder: no value for key absent\n")
        Thread.sleep(forTimeInterval: 0.1)
        let expired = try Larder.expect(["get", path, "brief"], status: 1, stdout: "")
        #expect(expired.stderr == "larder: the value for key brief has expired\n")
        try Larder.expect(["dump", path], stdout: """
            RANK  KEY     SIZE  STORED  LZ4  EXPIRES  READ
               1  brief    4 B     4 B  no   expired  no
               2  bytes  259 B   259 B  no   never    no
            2 entries, 263 B (263 B stored)

            """)
    }

    @Test func readingCommandsWorkWhileAnotherProcessHasTheFileOpen() throws {
        let directory = TemporaryDirectory()
        let path = directory.path()
        let cache = try Cache(path: path, options: .init(capacity: .megabytes(1)))
        try cache.set(Data("v".utf8), forKey: "k")
        try cache.sync()
        try Larder.expect(["get", path, "k"], stdout: "v")
        #expect(try Larder.expect(["info", path]).stdout.contains("state         not closed cleanly (changed by a process that has it open, or left by a crash)\n"))
        #expect(try Larder.expect(["dump", path]).stdout.hasSuffix("1 entry, 1 B (1 B stored)\n"))
        try Larder.expect(["verify", path], stdout: """
            \(path): no damage found
            note: not closed cleanly: a process that has it open changed it, or one crashed; the next read-write open recovers it
            2 records checked, 1 entry reachable, 1012 KiB walked

            """)
        try cache.close()
    }

    @Test func errorsGoToStderrWithStatus2() throws {
        let directory = TemporaryDirectory()
        let missing = try Larder.expect(["info", directory.path("none.larder")], status: 2, stdout: "")
        // In the words every command uses for a missing file.
        #expect(missing.stderr == "larder: \(directory.path("none.larder")): no such file (invalid argument)\n")
        for command in ["dump", "get", "verify", "compact"] {
            let arguments = [command, directory.path("none.larder")] + (command == "get" ? ["k"] : [])
            #expect(try Larder.expect(arguments, status: 2, stdout: "").stderr == missing.stderr)
        }
        try Larder.expect(["recover", directory.path("none.larder"), directory.path("out.larder")], status: 2, stdout: "")
        let text = directory.path("notes.txt")
        try Data("just some text, long enough to look at".utf8).write(to: URL(fileURLWithPath: text))
        let foreign = try Larder.expect(["dump", text], status: 2, stdout: "")
        #expect(foreign.stderr == "larder: \(text): not a Larder cache file (incompatible file)\n")
        let empty = directory.path("empty.larder")
        #expect(FileManager.default.createFile(atPath: empty, contents: nil))
        #expect(try Larder.expect(["verify", empty], status: 2).stderr == "larder: \(empty): the file is empty, not a cache (invalid argument)\n")
        let usage = try Larder.expect(["get", directory.path()], status: 64)
        #expect(usage.stderr.contains("Missing expected argument '<key>'"))
        #expect(try Larder.expect(["get", "--hex-key", directory.path(), "xyz"], status: 64).stderr.contains("is not hexadecimal"))
    }
}

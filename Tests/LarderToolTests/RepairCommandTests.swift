import Foundation
import Larder
import Testing

/// `verify`, `recover` and `compact` on sound and damaged files.
@Suite("Verifying and repairing", .waitsOnItsOwnThreads)
struct RepairCommandTests {
    @Test func aSoundFileVerifies() throws {
        let directory = TemporaryDirectory()
        let path = directory.path()
        try Fixture.numbered(path)
        try Larder.expect(["verify", path], stdout: """
            \(path): no damage found
            6 records checked, 5 entries reachable, 1.0 MiB walked

            """)
    }

    /// A fresh `Fixture.numbered` file with `change` applied at the offset of `k3`'s record.
    private func numberedFile(damagingK3 change: (inout [UInt8], Int) -> Void) throws -> (TemporaryDirectory, String, Int) {
        let directory = TemporaryDirectory()
        let path = directory.path()
        try Fixture.numbered(path)
        let offset = try Fixture.offset(of: "k3", in: path)
        try patch(path) { change(&$0, offset) }
        return (directory, path, offset)
    }

    @Test func aDamagedValueIsNamed() throws {
        let (directory, path, offset) = try numberedFile { bytes, offset in bytes[offset + 48 + 2 + 10] ^= 0x55 }
        defer { withExtendedLifetime(directory) {} }
        try Larder.expect(["verify", path], status: 1, stdout: """
            \(path): damaged, 1 problem
            OFFSET  PAGE  KEY  PROBLEM
             \(offset)     5  k3   data checksum mismatch
            6 records checked, 5 entries reachable, 1.0 MiB walked

            """)
        let get = try Larder.expect(["get", path, "k3"], status: 2, stdout: "")
        #expect(get.stderr == "larder: \(path): the value for key k3 is damaged: data checksum mismatch at offset \(offset) (corrupt file)\n")
        try Larder.expect(["get", path, "k2"], stdout: String(decoding: Fixture.value(2), as: UTF8.self))
    }

    @Test func aDamagedHeaderIsNamed() throws {
        // The stored length changes: the header checksum fails.
        let (directory, path, offset) = try numberedFile { bytes, offset in bytes[offset + 10] ^= 0x01 }
        defer { withExtendedLifetime(directory) {} }
        try Larder.expect(["verify", path], status: 1, stdout: """
            \(path): damaged, 2 problems
            OFFSET  PAGE  KEY            PROBLEM
              8192     2  -              the shared state counts 5 entries; the index reaches 4
             \(offset)     5  k3 (probably)  unreadable record (96 bytes between tail and head)
            5 records checked, 4 entries reachable, 1.0 MiB walked

            """)
    }

    @Test func aTruncatedFileIsNamed() throws {
        let (directory, path, offset) = try numberedFile { bytes, offset in bytes.removeSubrange((offset + 50)...) }
        defer { withExtendedLifetime(directory) {} }
        try Larder.expect(["verify", path], status: 1, stdout: """
            \(path): damaged, 3 problems
            OFFSET  PAGE  KEY  PROBLEM
             \(offset)     5  -    active index slot 223 points here: no entry record that checks out is there
             \(offset + 50)     5  -    the file is truncated: \(offset + 50) bytes on disk, the meta page says 1069056
             \(offset + 96)     5  -    active index slot 189 points here: no entry record that checks out is there
            4 records checked, 3 entries reachable, 8.3 KiB walked

            """)
        #expect(try Larder.expect(["info", path]).stdout.contains("state         truncated (needs recovery)\n"))
    }

    @Test func damagedMetaPages() throws {
        let directory = TemporaryDirectory()
        let path = directory.path()
        try Fixture.numbered(path)
        try patch(path) { $0[4096 + 40] ^= 1 }
        let one = try Larder.expect(["verify", path], status: 1).stdout
        #expect(one.contains("  4096     1  -    meta copy 1: checksum mismatch\n"))
        try patch(path) { $0[40] ^= 1 }
        try Larder.expect(["verify", path], status: 1, stdout: "\(path): damaged\nboth meta pages are damaged\n")
        let recover = try Larder.expect(["recover", path], status: 2)
        #expect(recover.stderr == "larder: \(path): both meta pages are damaged (corrupt file)\n")
    }

    @Test func recoverDropsDamagedRecordsAndReportsThem() throws {
        let directory = TemporaryDirectory()
        let path = directory.path()
        let out = directory.path("out.larder")
        try Fixture.numbered(path, count: 6)
        let k1 = try Fixture.offset(of: "k1", in: path)
        let k4 = try Fixture.offset(of: "k4", in: path)
        try patch(path) {
            $0[k1 + 60] ^= 0xFF
            $0[k4 + 20] ^= 0xFF
        }
        let before = try Data(contentsOf: URL(fileURLWithPath: path))
        try Larder.expect(["recover", path, out], stdout: """
            recovered 4 entries into \(out) (1.0 MiB before, 1.0 MiB now)
            dropped 2 damaged records:
            OFFSET  KEY            REASON
             \(k1)  k1             data checksum mismatch
             \(k4)  k4 (probably)  unreadable record (96 bytes)

            """)
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == before, "recover changed its source")
        try Larder.expect(["verify", out], status: 0)
        let cache = try Cache(path: out)
        for index in [0, 2, 3, 5] { #expect(try cache.data(forKey: "k\(index)") == Fixture.value(index)) }
        #expect(try cache.data(forKey: "k1") == nil && cache.data(forKey: "k4") == nil)
        try cache.close()
        // Recency order survives: the newest entry is still ranked first.
        #expect(try Larder.expect(["dump", "--limit", "1", out]).stdout.contains("   1  k5 "))
        let exists = try Larder.expect(["recover", path, out], status: 2)
        #expect(exists.stderr == "larder: \(out): the file exists; pass --force to replace it (invalid argument)\n")
        try Larder.expect(["recover", "--force", path, out])
        try Larder.expect(["recover", path])
        #expect(FileManager.default.fileExists(atPath: path + ".recovered"))
        // A copy that cannot be written is reported under the name given, not the temporary one.
        let nowhere = directory.path("missing/out.larder")
        let unwritable = try Larder.expect(["recover", path, nowhere], status: 2)
        #expect(unwritable.stderr == "larder: \(nowhere): writing the copy: open: No such file or directory (I/O error)\n")
    }

    @Test func compactKeepsEntriesExpiryAndCompression() throws {
        let directory = TemporaryDirectory()
        let path = directory.path()
        let cache = try Cache(path: path, options: .init(capacity: .megabytes(4)))
        for index in 0..<300 { try cache.set(Data(repeating: UInt8(index % 200), count: 2000), forKey: "k\(index)") }
        for index in 0..<300 where index % 3 != 0 { try cache.removeValue(forKey: "k\(index)") }
        try cache.set(Data(repeating: 1, count: 5000), forKey: "packed", compression: .lz4)
        try cache.set(Data("later".utf8), forKey: "ttl", expiry: .seconds(3600))
        try cache.set(Data("gone".utf8), forKey: "brief", expiry: .seconds(0.05))
        try cache.close()
        let before = try Larder.expect(["dump", "--json", path]).stdout
        Thread.sleep(forTimeInterval: 0.1)
        let run = try Larder.expect(["compact", path])
        #expect(run.stdout.hasPrefix("compacted 102 entries into \(path) "))
        #expect(run.stdout.hasSuffix("left out 1 expired entry\ndropped nothing\n"))
        try Larder.expect(["verify", path])
        let after = try Larder.expect(["dump", "--json", path]).stdout
        func records(_ text: String) throws -> [String: [String: Any]] {
            var result: [String: [String: Any]] = [:]
            for line in text.split(separator: "\n") {
                let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as! [String: Any]
                result[object["key"] as! String] = object
            }
            return result
        }
        let old = try records(before), new = try records(after)
        #expect(Set(new.keys) == Set(old.keys).subtracting(["brief"]))
        for (key, entry) in new {
            for member in ["size", "stored_size", "compressed", "expires_at", "rank"] where member != "rank" || key != "brief" {
                if member == "rank" { continue }
                #expect("\(entry[member]!)" == "\(old[key]![member]!)", "\(key).\(member)")
            }
        }
        #expect(new["packed"]?["compressed"] as? Bool == true)
        let reopened = try Cache(path: path)
        #expect(try reopened.data(forKey: "k3") == Data(repeating: 3, count: 2000))
        #expect(reopened.capacity == 4 << 20)
    }

    @Test func compactWithASmallerCapacityKeepsTheNewestEntries() throws {
        let directory = TemporaryDirectory()
        let path = directory.path()
        let cache = try Cache(path: path, options: .init(capacity: .megabytes(8)))
        for index in 0..<500 { try cache.set(Data(repeating: UInt8(index % 251), count: 8000), forKey: "k\(index)") }
        try cache.close()

        let run = try Larder.expect(["compact", "--capacity", "1M", path])
        let lines = run.stdout.split(separator: "\n")
        let kept = try #require(lines.first.flatMap { Int($0.split(separator: " ")[1]) })
        #expect(kept > 50 && kept < 500)
        #expect(lines.contains("left out \(500 - kept) older entries the new capacity cannot hold"))
        try Larder.expect(["verify", path])
        let reopened = try Cache(path: path)
        #expect(reopened.capacity == 1 << 20)
        #expect(reopened.count == kept)
        for index in (500 - kept)..<500 {
            #expect(try reopened.data(forKey: "k\(index)") == Data(repeating: UInt8(index % 251), count: 8000))
        }
        #expect(try reopened.data(forKey: "k\(499 - kept)") == nil)
        try Larder.expect(["compact", "--capacity", "lots", path], status: 64)
        // Refused before any work, as a usage error, not as a failure to write the copy.
        let small = try Larder.expect(["compact", "--capacity", "12K", path], status: 64, stdout: "")
        #expect(small.stderr.contains("--capacity must be from 64 KiB to 1 TiB, not 12 KiB"))
        #expect(try Cache(path: path).capacity == 1 << 20)
    }

    /// `compact` refuses a file with another hard link, and says why: not that the file is open
    /// elsewhere (before, every refusal of that kind read "open in another process").
    @Test func compactSaysWhyItRefusesAHardLinkedFile() throws {
        let directory = TemporaryDirectory()
        let path = directory.path()
        try Cache(path: path).close()
        try FileManager.default.linkItem(atPath: path, toPath: directory.path("other-name.larder"))
        let run = try Larder.expect(["compact", path], status: 2, stdout: "")
        #expect(run.stderr == "larder: \(path): the file has 2 hard links; the others would keep the old file (busy)\n")
    }

    /// A cache that wrapped many times, evicted, relocated, grew its index and was cleared once.
    @Test func aHeavilyUsedFileVerifiesAndRecoversWhole() throws {
        let directory = TemporaryDirectory()
        let path = directory.path()
        let cache = try Cache(path: path, options: .init(capacity: .kilobytes(512)))
        var noise = Noise()
        for round in 0..<6 {
            for index in 0..<1500 {
                let key = "key-\((index * 7 + round) % 2000)"
                // Every fourth value compresses well; the others do not compress at all.
                let value = index % 4 == 0 ? Data(repeating: UInt8(index % 251), count: 40 + index % 700)
                                           : noise.bytes(40 + index % 700)
                try cache.set(value, forKey: key, compression: index % 4 == 0 ? .lz4 : Compression.none)
                if index % 5 == 0 { _ = try cache.data(forKey: "key-\(index / 2)") }
                if index % 11 == 0 { try cache.removeValue(forKey: "key-\(index / 3)") }
            }
            if round == 2 { try cache.removeAll() }
        }
        let count = cache.count
        try cache.close()
        let stats = try Cache(path: path, options: .init(readOnly: true)).stats
        #expect(stats.evictions > 0 && stats.relocations > 0)
        let verify = try Larder.expect(["verify", path])
        #expect(verify.stdout.hasPrefix("\(path): no damage found\n"))
        // A header, a line per entry, and the totals.
        let dump = try Larder.expect(["dump", path]).stdout.split(separator: "\n", omittingEmptySubsequences: false)
        #expect(dump.count == count + 3 && dump.last == "")
        #expect(dump.dropLast().last?.hasPrefix("\(count) entries, ") == true, "\(dump.suffix(2))")
        #expect(try Larder.expect(["info", path]).stdout.contains("entries       \(count)\n"))
        let out = directory.path("copy.larder")
        let recovered = try Larder.expect(["recover", path, out]).stdout
        #expect(recovered.hasPrefix("recovered \(count) entries"))
        try Larder.expect(["verify", out])
    }
}

/// Bytes that do not compress (xorshift), the same every run.
struct Noise {
    private var state: UInt64 = 0x9E37_79B9_7F4A_7C15

    mutating func bytes(_ count: Int) -> Data {
        Data((0..<count).map { _ in
            state ^= state << 13
            state ^= state >> 7
            state ^= state << 17
            return UInt8(truncatingIfNeeded: state)
        })
    }
}

/// Damaged and hostile files are input: every reading command answers with a status, never a crash.
@Suite("Hostile files", .waitsOnItsOwnThreads)
struct HostileFileTests {
    @Test func randomDamageNeverCrashesTheTool() throws {
        let directory = TemporaryDirectory()
        let original = directory.path("original.larder")
        try Fixture.numbered(original, count: 30)
        let pristine = try [UInt8](Data(contentsOf: URL(fileURLWithPath: original)))
        var noise = Noise()
        for trial in 0..<12 {
            var bytes = pristine
            let random = [UInt8](noise.bytes(64))
            switch trial % 3 {
            case 0: // bytes anywhere in the header pages and the first records
                for index in stride(from: 0, to: 32, by: 2) {
                    bytes[(Int(random[index]) << 8 | Int(random[index + 1])) % 24576] = random[index + 32]
                }
            case 1: // cut anywhere
                bytes.removeSubrange((Int(random[0]) << 8 | Int(random[1]))...)
            default: // one meta copy and the shared state
                bytes[4096 + Int(random[0]) % 128] ^= 0xFF
                bytes[8192 + 192 + Int(random[1]) % 64] ^= random[2] | 1
            }
            let path = directory.path("damaged-\(trial).larder")
            try Data(bytes).write(to: URL(fileURLWithPath: path))
            for arguments in [["verify", path], ["info", path], ["dump", "--values", path], ["dump", "--pages", path],
                              ["get", path, "k7"], ["recover", path, directory.path("out-\(trial).larder")]] {
                let run = try Larder.run(arguments)
                #expect([0, 1, 2].contains(run.status), "\(arguments) (trial \(trial)): \(run.stderr)")
            }
        }
    }
}

import Foundation
import Larder
import Testing

/// `Cache.entryDetails(forKey:)` and `larder entry` against `larder dump --json`: the same entries,
/// the same numbers, under the same names.
@Suite("Entry details", .waitsOnItsOwnThreads)
struct EntryDetailsToolTests {
    @Test func detailsMatchDumpJSON() throws {
        let directory = TemporaryDirectory()
        let path = directory.path()
        let cache = try Cache(path: path, options: .init(capacity: .megabytes(1), compression: .lz4, memory: nil))
        try cache.set(Data("plain".utf8), forKey: "short", expiry: .never)
        try cache.set(Data(repeating: 7, count: 4000), forKey: "squeezed", expiry: .seconds(3600))
        try cache.set(Data(repeating: 1, count: 300), forKey: "raw", compression: Compression.none)
        _ = try cache.data(forKey: "short")
        try cache.sync()

        let lines = try Larder.expect(["dump", "--json", path]).stdout.split(separator: "\n")
        #expect(lines.count == 3)
        for line in lines {
            let dumped = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
            let key = try #require(dumped["key"] as? String)
            let details = try #require(try cache.entryDetails(forKey: key))
            #expect(details.size == dumped["size"] as? Int, "\(key)")
            #expect(details.storedSize == dumped["stored_size"] as? Int, "\(key)")
            #expect(details.recordSize == dumped["record_size"] as? Int, "\(key)")
            #expect(details.compressed == dumped["compressed"] as? Bool, "\(key)")
            #expect(details.read == dumped["read"] as? Bool, "\(key)")
            #expect(milliseconds(details.storedAt) == dumped["stored_at"] as? Int, "\(key)")
            #expect(details.expiresAt.map(milliseconds) == dumped["expires_at"] as? Int, "\(key)")
            // The tool's own command prints the very line dump prints.
            #expect(try Larder.expect(["entry", "--json", path, key]).stdout == line + "\n")
        }
        // What the lines must show, so that the comparison above cannot pass on empty fields.
        #expect(try cache.entryDetails(forKey: "squeezed")?.compressed == true)
        #expect(try cache.entryDetails(forKey: "squeezed")?.expiresAt != nil)
        #expect(try cache.entryDetails(forKey: "short")?.read == true)
        #expect(try cache.entryDetails(forKey: "raw")?.read == false)
        try cache.close()
    }

    @Test func entryOfAMissingKeyExitsWithOne() throws {
        let directory = TemporaryDirectory()
        let path = directory.path()
        try Cache(path: path, options: .init(capacity: .megabytes(1))).close()
        let run = try Larder.expect(["entry", path, "absent"], status: 1)
        #expect(run.stderr.contains("no entry for key absent"))
    }

    private func milliseconds(_ date: Date) -> Int {
        Int((date.timeIntervalSince1970 * 1000).rounded())
    }
}

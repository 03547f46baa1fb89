import Foundation
import Testing
import CLarderSupport
@_spi(Inspection) @testable import Larder

/// A damaged or hostile file is input: it gets an error or a repair, never a crash or a wrong value.
/// The tests are split by area, one file each (DamagedFileTests+Area.swift); this one holds the
/// helpers they share.
@Suite("Bad input and damaged files")
struct DamagedFileTests {
    func makeCache(_ path: String, entries: Int = 200) throws {
        let cache = try Cache(at: path, capacity: 2 << 20)
        for key in 0..<entries { try cache.set(VersionedValue.make(key: key, version: 1), forKey: "k\(key)") }
        try cache.close()
    }

    func rewrite(_ path: String, _ change: (inout [UInt8]) -> Void) throws {
        var bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: path)))
        change(&bytes)
        try Data(bytes).write(to: URL(fileURLWithPath: path))
    }

    /// Re-encodes meta copy `copy` after `change`, with a valid checksum: a hostile file.
    func rewriteMeta(_ path: String, copy: Int, _ change: (inout Meta) -> Void) throws {
        try rewrite(path) { bytes in
            let encodedCopy = Array(bytes[(copy * 4096)..<(copy * 4096 + Meta.encodedSize)])
            var meta = try! encodedCopy.withUnsafeBytes { Meta.decode($0) }.get()
            change(&meta)
            var encoded = [UInt8](repeating: 0, count: Meta.encodedSize)
            encoded.withUnsafeMutableBytes { meta.encode(into: $0) }
            bytes.replaceSubrange((copy * 4096)..<(copy * 4096 + Meta.encodedSize), with: encoded)
        }
    }

    /// The meta copies of a file that decode, in page order.
    func metaCopies(_ bytes: [UInt8]) -> [Meta] {
        (0..<FileLayout.metaPageCount).compactMap { copy in
            try? Array(bytes[(copy * 4096)..<(copy * 4096 + Meta.encodedSize)]).withUnsafeBytes { Meta.decode($0) }.get()
        }
    }

    /// The meta copy a reader takes: the valid one with the higher sequence.
    func newestMeta(_ bytes: [UInt8]) -> Meta {
        metaCopies(bytes).max { $0.sequence < $1.sequence }!
    }

    /// Opens the file once more: it is trusted as it is (no recovery), and `k<key>` holds `version`.
    func expectOpensWithoutRecovery(_ path: String, key: Int, version: Int) throws {
        let cache = try Cache(path: path)
        #expect(!cache.wasRecovered)
        #expect(VersionedValue.check(try #require(try cache.bytes(forKey: "k\(key)")), key: key) == version)
    }

    func store(_ value: UInt64, at offset: Int, in bytes: inout [UInt8]) {
        for byte in 0..<8 { bytes[offset + byte] = UInt8(truncatingIfNeeded: value >> (8 * byte)) }
    }

    /// The offset of the record header in front of the only occurrence of `key` in the file.
    /// The offset of the entry record of `key`: where the key's bytes follow a header that names
    /// an entry with a key of that length (the same bytes may also lie in a random seed, a time
    /// stored in a header, or a value).
    func recordOffset(ofKey key: String, in bytes: [UInt8]) -> Int {
        let pattern = Array(key.utf8)
        let start = (RecordHeader.size...(bytes.count - pattern.count)).first { at in
            let header = at - RecordHeader.size
            return bytes[at..<(at + pattern.count)].elementsEqual(pattern)
                && bytes[header] == 0x4C && bytes[header + 1] == 0x52 && bytes[header + 2] == RecordKind.entry.rawValue
                && Int(bytes[header + 6]) | Int(bytes[header + 7]) << 8 == pattern.count
        }!
        return start - RecordHeader.size
    }

    /// Recomputes the header checksum of the record at `offset` after a change to its fields:
    /// a hostile header that passes every check but its values.
    func resealHeader(at offset: Int, in bytes: inout [UInt8]) {
        let seed = newestMeta(bytes).checksumSeed
        let checksum = bytes.withUnsafeBytes { lrd_crc32c_record_header(seed, $0.baseAddress! + offset) }
        for byte in 0..<4 { bytes[offset + 44 + byte] = UInt8(truncatingIfNeeded: checksum >> (8 * byte)) }
    }

    /// The inspector behind `larder verify` finds no damage in the file.
    func expectVerifiesSound(_ path: String) throws {
        let report = try FileInspector(path: path).verify().report
        #expect(report.isSound, "\(report.problems)")
    }

    func expectError(_ code: LarderError.Code, opening path: String, readOnly: Bool = false) {
        do {
            _ = try Cache(path: path, options: .init(readOnly: readOnly))
            Issue.record("opened a file that should be refused")
        } catch {
            #expect(error.code == code, "\(error)")
        }
    }

    /// Every value that can be read is exactly a version written for its key.
    func expectOnlyValidValues(_ cache: Cache, keys: Int = 200) throws {
        for key in 0..<keys {
            do {
                guard let value = try cache.bytes(forKey: "k\(key)") else { continue }
                #expect(VersionedValue.check(value, key: key) != nil, "k\(key)")
            } catch {
                #expect(error.code == .corrupt)
            }
        }
    }
}

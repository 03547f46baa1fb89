import Foundation
import Testing
@_spi(Inspection) @testable import Larder

/// The two meta copies: damaged, hostile, of a newer format, numbered near the limit.
extension DamagedFileTests {
    /// A clear writes both meta copies, each made durable: with one, the meta write after next
    /// would go over the only copy on disk that holds the clear, and a power cut tearing it
    /// would bring a copy from before the clear back in force.
    @Test func aClearIsInBothMetaCopies() throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(path: directory.path())
        for index in 0..<10 { try cache.set([UInt8(index)], forKey: "k\(index)") }
        let before = newestMeta(try [UInt8](Data(contentsOf: URL(fileURLWithPath: directory.path())))).firstValidSequence
        try cache.removeAll()
        let copies = metaCopies(try [UInt8](Data(contentsOf: URL(fileURLWithPath: directory.path()))))
        #expect(copies.count == 2)
        #expect(copies.allSatisfy { $0.firstValidSequence > before })
    }

    @Test func aFileOfANewerFormatIsRefused() throws {
        let directory = TemporaryDirectory()
        try makeCache(directory.path())
        for copy in 0..<2 { try rewriteMeta(directory.path(), copy: copy) { $0.readVersion = 99; $0.writeVersion = 99 } }
        expectError(.incompatible, opening: directory.path())
    }

    /// The newest meta copy needs a newer reader, the older one does not: the file is refused
    /// (FORMAT.md 2.5), not opened with the older copy, which no longer describes it.
    @Test func aFileWhoseNewestMetaCopyIsOfANewerFormatIsRefused() throws {
        let directory = TemporaryDirectory()
        try makeCache(directory.path())
        let copies = metaCopies(try [UInt8](Data(contentsOf: URL(fileURLWithPath: directory.path()))))
        let newest = copies[0].sequence >= copies[1].sequence ? 0 : 1
        try rewriteMeta(directory.path(), copy: newest) { $0.readVersion = FileLayout.formatVersion + 1; $0.writeVersion = FileLayout.formatVersion + 1 }
        expectError(.incompatible, opening: directory.path())
        #expect(throws: LarderError.self) { try FileInspector(path: directory.path()) }
    }

    @Test func aFileWrittenByANewerCompatibleWriterOpensReadOnly() throws {
        let directory = TemporaryDirectory()
        try makeCache(directory.path())
        for copy in 0..<2 { try rewriteMeta(directory.path(), copy: copy) { $0.writeVersion = FileLayout.formatVersion + 1 } }
        let cache = try Cache(path: directory.path())
        #expect(try cache.bytes(forKey: "k3").flatMap { VersionedValue.check($0, key: 3) } == 1)
        let refusal = #expect(throws: LarderError.self) { try cache.set([1], forKey: "x") }
        #expect(refusal?.code == .readOnly)
        #expect(refusal?.message.contains("newer Larder") == true)
    }

    @Test func oneDamagedMetaCopyIsSurvived() throws {
        let directory = TemporaryDirectory()
        try makeCache(directory.path())
        for copy in 0..<2 {
            let path = directory.path("copy\(copy).larder")
            try FileManager.default.copyItem(atPath: directory.path(), toPath: path)
            try rewrite(path) { bytes in
                for index in (copy * 4096)..<(copy * 4096 + 128) { bytes[index] ^= 0x5A }
            }
            let cache = try Cache(path: path)
            #expect(try cache.bytes(forKey: "k7").flatMap { VersionedValue.check($0, key: 7) } == 1, "meta copy \(copy) damaged")
        }
    }

    @Test func aNewestMetaCopyWithBadValuesFallsBackToTheOlderOne() throws {
        let directory = TemporaryDirectory()
        try makeCache(directory.path())
        let bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: directory.path())))
        let sequences = (0..<2).map { copy in
            Array(bytes[(copy * 4096)..<(copy * 4096 + Meta.encodedSize)]).withUnsafeBytes { try! Meta.decode($0).get().sequence }
        }
        let newest = sequences[0] > sequences[1] ? 0 : 1
        try rewriteMeta(directory.path(), copy: newest) { $0.fileSize = $0.capacity + 4096 }
        let cache = try Cache(path: directory.path())
        #expect(try cache.bytes(forKey: "k9").flatMap { VersionedValue.check($0, key: 9) } == 1)
    }

    /// A handle that takes up the view again after another process changed the file takes only a
    /// meta copy it could have opened with: one of a newer format is refused, not passed over for
    /// the older copy (what the newer writer wrote since would be misread); one naming pages past
    /// the end of the file, which no writer leaves, is damage. Before, it took either, and its
    /// next access to the index they named, past the file's end, was `SIGBUS` (found by review).
    @Test(arguments: [(readVersion: FileLayout.formatVersion + 1, refusal: LarderError.Code.incompatible), (readVersion: UInt32(1), refusal: .corrupt)])
    func aViewTakenUpAgainIgnoresMetaCopiesItCouldNotOpenWith(readVersion: UInt32, refusal: LarderError.Code) throws {
        let directory = TemporaryDirectory()
        let path = directory.path()
        try makeCache(path)
        // A capacity the file has not grown to: the reader maps 16 MiB of a file of about 2.
        let mapped = 16 << 20
        for copy in 0..<2 { try rewriteMeta(path, copy: copy) { $0.capacity = mapped } }
        let copies = metaCopies(try [UInt8](Data(contentsOf: URL(fileURLWithPath: path))))
        let newest = copies[0].sequence >= copies[1].sequence ? 0 : 1
        let reader = try Cache(path: path, options: .init(readOnly: true))
        #expect(try reader.bytes(forKey: "k3").flatMap { VersionedValue.check($0, key: 3) } == 1)

        // The other copy becomes the newest, naming an index 8 MiB in, and the change counter
        // moves, as a writer of another process would leave them.
        var hostile = copies[newest]
        hostile.sequence += 1
        hostile.readVersion = readVersion
        hostile.fileSize = mapped
        hostile.activeIndex.offset = mapped / 2
        var encoded = [UInt8](repeating: 0, count: Meta.encodedSize)
        encoded.withUnsafeMutableBytes { hostile.encode(into: $0) }
        let handle = try #require(FileHandle(forUpdatingAtPath: path))
        try handle.seek(toOffset: UInt64((1 - newest) * 4096))
        try handle.write(contentsOf: encoded)
        try handle.seek(toOffset: UInt64(2 * 4096 + 264))
        let counter = try #require(try handle.read(upToCount: 8)).withUnsafeBytes { $0.loadUnaligned(as: UInt64.self) }
        try handle.seek(toOffset: UInt64(2 * 4096 + 264))
        try handle.write(contentsOf: withUnsafeBytes(of: counter + 1) { Data($0) })
        try handle.close()

        #expect(errorCode { _ = try reader.bytes(forKey: "k3") } == refusal)
    }

    @Test func bothMetaCopiesDamagedIsAnError() throws {
        let directory = TemporaryDirectory()
        try makeCache(directory.path())
        try rewrite(directory.path()) { bytes in
            bytes[20] ^= 1
            bytes[4096 + 20] ^= 1
        }
        expectError(.corrupt, opening: directory.path())
    }

    @Test func hostileMetaValuesWithValidChecksumsAreRefused() throws {
        let changes: [(inout Meta) -> Void] = [
            { $0.pageSize = 3000 }, { $0.capacity = 1 << 50 }, { $0.fileSize = $0.capacity + 4096 },
            { $0.fileSize = 4096 }, { $0.activeIndex.offset = 1 << 40 }, { $0.activeIndex.slotCount = 1000 },
            { $0.activeIndex = .none }, { $0.drainingIndex = IndexLocation(offset: 4096 * 3 + 1, slotCount: 512) },
            // Numbers that a writer would count on from, or add to, past the end of 64 bits.
            { $0.sequence = .max }, { $0.firstValidSequence = .max },
            { $0.activeIndex.offset = 0x7FFF_FFFF_FFFF_F000 },
        ]
        for (index, change) in changes.enumerated() {
            let directory = TemporaryDirectory()
            try makeCache(directory.path())
            for copy in 0..<2 { try rewriteMeta(directory.path(), copy: copy, change) }
            expectError(.corrupt, opening: directory.path())
            _ = index
        }
    }

    /// The meta sequences a writer would count on from near the limit (a hostile file): the sole
    /// writer's open renumbers the copies 1 and 2, and what a clear wrote after that stays. Before,
    /// a writer that opened at 2^61 - 1 wrote a copy the next open passed over for the older one,
    /// and a clear came undone.
    @Test func metaSequencesNearTheLimitAreRenumberedAtOpen() throws {
        let directory = TemporaryDirectory()
        let path = directory.path()
        try makeCache(path)
        let trusted = RecordHeader.trustedSequenceLimit
        try rewriteMeta(path, copy: 0) { $0.sequence = trusted - 2 }
        try rewriteMeta(path, copy: 1) { $0.sequence = trusted - 1 }
        func sequences() throws -> [UInt64] {
            let copies = metaCopies(try [UInt8](Data(contentsOf: URL(fileURLWithPath: path))))
            #expect(copies.count == FileLayout.metaPageCount)
            return copies.map(\.sequence)
        }
        do {
            let cache = try Cache(path: path)
            #expect(!cache.wasRecovered)
            try cache.removeAll() // its meta copy takes sequence 2^61
            try cache.close()
        }
        do {
            let cache = try Cache(path: path)
            #expect(try sequences().allSatisfy { $0 <= 4 })
            #expect(try cache.bytes(forKey: "k1") == nil)
            try cache.set(VersionedValue.make(key: 1, version: 2), forKey: "k1")
            try cache.close()
        }
        // Recovery reads the same copy: the clear holds, the later value is there.
        try rewrite(path) { bytes in bytes[2 * 4096 + 12] = 0 }
        let cache = try Cache(path: path)
        #expect(cache.wasRecovered)
        #expect(try cache.bytes(forKey: "k2") == nil)
        #expect(VersionedValue.check(try #require(try cache.bytes(forKey: "k1")), key: 1) == 2)
    }
}

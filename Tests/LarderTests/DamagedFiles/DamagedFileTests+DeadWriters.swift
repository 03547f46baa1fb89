import Foundation
import Testing
@_spi(Inspection) @testable import Larder

/// A writer that died in the middle of a change to the index.
extension DamagedFileTests {
    /// A clean file with an odd index epoch (a rearrangement in progress, which no clean file can
    /// have): every miss waited five seconds for it to end. The sole writer's open ends it.
    @Test func anOddIndexEpochInACleanFileIsEndedAtOpen() throws {
        let directory = TemporaryDirectory()
        let path = directory.path()
        try makeCache(path)
        try rewrite(path) { bytes in store(41, at: 2 * 4096 + 272, in: &bytes) }
        let cache = try Cache(path: path)
        #expect(!cache.wasRecovered)
        let epoch = try [UInt8](Data(contentsOf: URL(fileURLWithPath: path)))[(2 * 4096 + 272)..<(2 * 4096 + 280)]
            .withUnsafeBytes { UInt64(littleEndian: $0.loadUnaligned(as: UInt64.self)) }
        #expect(epoch == 42)
        #expect(try cache.bytes(forKey: "absent") == nil)
    }

    /// A clean file whose index segment is damaged, opened read-only while no read-write handle
    /// has it: an error at once, which says how to repair it, rather than a wait for a writer to
    /// change the meta page (none can while the reader opens); a read-write open then recovers it.
    @Test
    func aReadOnlyOpenOfADamagedIndexNoWriterCanChangeFailsAtOnce() throws {
        let directory = TemporaryDirectory()
        let path = directory.path()
        try makeCache(path)
        try rewrite(path) { bytes in
            let index = newestMeta(bytes).activeIndex.offset
            bytes[index + RecordHeader.Field.kind] = 0x7F
        }
        // The message is the open's own, not that of a view that never settled (after 5 s).
        let refusal = #expect(throws: LarderError.self) { try Cache(at: path, readOnly: true) }
        #expect(refusal?.code == .corrupt)
        #expect(refusal?.message.contains("open it read-write once") == true)
        #expect(try Cache(path: path).bytes(forKey: "k7").flatMap { VersionedValue.check($0, key: 7) } == 1)
    }

    /// An odd index epoch that no writer will end (its writer died mid-change), met by a
    /// read-only handle that opened while another read-write handle had the file open, which
    /// could still be moving the key: its first miss waits out its patience; later misses do not
    /// wait for the same change again, and hits are not held up at all. (The other handle is a
    /// lock of another descriptor of this process, which counts as another process's.)
    @Test
    func aChangeOfADeadWriterHoldsUpOnlyTheFirstMissOfAReader() throws {
        try expectOneWaitForADeadWritersChange { (reader: Cache) throws in
            #expect(try reader.bytes(forKey: "absent") == nil)
        } then: { (reader: Cache) throws in
            for attempt in 0..<100 { #expect(try reader.bytes(forKey: "absent-\(attempt)") == nil) }
            #expect(try reader.bytes(forKey: "k7").flatMap { VersionedValue.check($0, key: 7) } == 1)
            #expect(reader.stats.misses == 101)
        }
    }

    /// The same change met by a read-only handle that opened while no read-write handle had the
    /// file open: nothing can end or continue the change before a writer opens the file, so not
    /// even the first miss waits. (Before, it waited out the readers' patience.)
    @Test
    func aChangeNoWriterCanEndHoldsUpNoMissOfAReader() throws {
        let fastest = try fastestOfThreeReaders(writerOpen: false) { (reader: Cache) throws in
            for attempt in 0..<10 { #expect(try reader.bytes(forKey: "absent-\(attempt)") == nil) }
        }
        #expect(fastest < .milliseconds(Int64(CacheStore.readPatience) / 2))
    }

    /// The same dead writer's change, met by listings: a listing needs no settled epoch when the
    /// slots it reads hold still (a dead writer moves none), so it lists every key at once.
    @Test
    func aListingOfADeadWritersFileListsEveryKeyAtOnce() throws {
        let fastest = try fastestOfThreeReaders(writerOpen: true) { (reader: Cache) throws in
            #expect(Set(try reader.keys.map { String(decoding: $0, as: UTF8.self) }) == Set((0..<200).map { "k\($0)" }))
        }
        #expect(fastest < .milliseconds(Int64(CacheStore.readPatience) / 2))
    }

    /// How long the fastest of three runs of `body` took, each with a reader of a file of its own
    /// whose writer died mid-change (`readerOfAFileWhoseWriterDiedMidChange`). A wait for the
    /// change holds up every run for the readers' patience; a loaded machine may hold up one.
    /// Each reader then still finds its values.
    private func fastestOfThreeReaders(writerOpen: Bool, _ body: (Cache) throws -> Void) throws -> Duration {
        let clock = ContinuousClock()
        var fastest = Duration.seconds(3600)
        for _ in 0..<3 {
            let (directory, reader, writer) = try readerOfAFileWhoseWriterDiedMidChange(writerOpen: writerOpen)
            defer {
                _ = directory
                writer?.close()
            }
            let start = clock.now
            try body(reader)
            fastest = min(fastest, clock.now - start)
            #expect(try reader.bytes(forKey: "k7").flatMap { VersionedValue.check($0, key: 7) } == 1)
        }
        return fastest
    }

    /// A read-only handle on a file of 200 keys whose index epoch a writer that died left odd
    /// (and the directory that holds it). With `writerOpen`, another read-write handle has the
    /// file open, as far as locks tell (a descriptor of this process holding the writers byte,
    /// returned to be kept open).
    private func readerOfAFileWhoseWriterDiedMidChange(writerOpen: Bool) throws -> (TemporaryDirectory, Cache, FileDescriptor?) {
        let directory = TemporaryDirectory()
        let path = directory.path()
        try makeCache(path)
        try rewrite(path) { bytes in store(41, at: 2 * 4096 + 272, in: &bytes) }
        var writer: FileDescriptor?
        if writerOpen {
            writer = try FileDescriptor.open(path, create: false, readOnly: false, permissions: 0)
            #expect(try writer!.lock(byte: CacheStore.LockByte.writers, .shared, wait: false))
        }
        return (directory, try Cache(at: path, readOnly: true), writer)
    }

    /// With a reader of such a file, another read-write handle open: runs `first`, which must
    /// wait out the readers' patience, then `then`, which must not wait for the same change again.
    private func expectOneWaitForADeadWritersChange(_ first: (Cache) throws -> Void, then: (Cache) throws -> Void) throws {
        let (directory, reader, writer) = try readerOfAFileWhoseWriterDiedMidChange(writerOpen: true)
        defer {
            _ = directory
            writer?.close()
        }
        let clock = ContinuousClock()
        var start = clock.now
        try first(reader)
        #expect(clock.now - start >= .milliseconds(Int64(CacheStore.readPatience) / 2))
        start = clock.now
        try then(reader)
        #expect(clock.now - start < .milliseconds(Int64(CacheStore.readPatience) / 2))
    }
}

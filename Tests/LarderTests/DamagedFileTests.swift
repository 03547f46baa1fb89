import Foundation
import Testing
import CLarderSupport
@_spi(Inspection) @testable import Larder
import larder_fuzz

/// A damaged or hostile file is input: it gets an error or a repair, never a crash or a wrong value.
@Suite("Bad input and damaged files")
struct DamagedFileTests {
    private func makeCache(_ path: String, entries: Int = 200) throws {
        let cache = try Cache(at: path, capacity: 2 << 20)
        for key in 0..<entries { try cache.set(VersionedValue.make(key: key, version: 1), forKey: "k\(key)") }
        try cache.close()
    }

    private func rewrite(_ path: String, _ change: (inout [UInt8]) -> Void) throws {
        var bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: path)))
        change(&bytes)
        try Data(bytes).write(to: URL(fileURLWithPath: path))
    }

    /// Re-encodes meta copy `copy` after `change`, with a valid checksum: a hostile file.
    private func rewriteMeta(_ path: String, copy: Int, _ change: (inout Meta) -> Void) throws {
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
    private func metaCopies(_ bytes: [UInt8]) -> [Meta] {
        (0..<FileLayout.metaPageCount).compactMap { copy in
            try? Array(bytes[(copy * 4096)..<(copy * 4096 + Meta.encodedSize)]).withUnsafeBytes { Meta.decode($0) }.get()
        }
    }

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

    /// The meta copy a reader takes: the valid one with the higher sequence.
    private func newestMeta(_ bytes: [UInt8]) -> Meta {
        metaCopies(bytes).max { $0.sequence < $1.sequence }!
    }

    /// Opens the file once more: it is trusted as it is (no recovery), and `k<key>` holds `version`.
    private func expectOpensWithoutRecovery(_ path: String, key: Int, version: Int) throws {
        let cache = try Cache(path: path)
        #expect(!cache.wasRecovered)
        #expect(VersionedValue.check(try #require(try cache.bytes(forKey: "k\(key)")), key: key) == version)
    }

    private func store(_ value: UInt64, at offset: Int, in bytes: inout [UInt8]) {
        for byte in 0..<8 { bytes[offset + byte] = UInt8(truncatingIfNeeded: value >> (8 * byte)) }
    }

    /// The offset of the record header in front of the only occurrence of `key` in the file.
    /// The offset of the entry record of `key`: where the key's bytes follow a header that names
    /// an entry with a key of that length (the same bytes may also lie in a random seed, a time
    /// stored in a header, or a value).
    private func recordOffset(ofKey key: String, in bytes: [UInt8]) -> Int {
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
    private func resealHeader(at offset: Int, in bytes: inout [UInt8]) {
        let seed = newestMeta(bytes).checksumSeed
        let checksum = bytes.withUnsafeBytes { lrd_crc32c_record_header(seed, $0.baseAddress! + offset) }
        for byte in 0..<4 { bytes[offset + 44 + byte] = UInt8(truncatingIfNeeded: checksum >> (8 * byte)) }
    }

    /// The inspector behind `larder verify` finds no damage in the file.
    private func expectVerifiesSound(_ path: String) throws {
        let report = try FileInspector(path: path).verify().report
        #expect(report.isSound, "\(report.problems)")
    }

    private func expectError(_ code: LarderError.Code, opening path: String, readOnly: Bool = false) {
        do {
            _ = try Cache(path: path, options: .init(readOnly: readOnly))
            Issue.record("opened a file that should be refused")
        } catch {
            #expect(error.code == code, "\(error)")
        }
    }

    /// Every value that can be read is exactly a version written for its key.
    private func expectOnlyValidValues(_ cache: Cache, keys: Int = 200) throws {
        for key in 0..<keys {
            do {
                guard let value = try cache.bytes(forKey: "k\(key)") else { continue }
                #expect(VersionedValue.check(value, key: key) != nil, "k\(key)")
            } catch {
                #expect(error.code == .corrupt)
            }
        }
    }

    /// A program that mixes the two APIs (or passes a Swift error's code on to C code) relies on
    /// each `LarderError.Code` being the status of include/larder.h that has its name, for every
    /// error status the header defines. The tests cannot import the header (only LarderC does),
    /// so they read its definitions.
    @Test func everyErrorCodeIsTheCStatusOfItsName() throws {
        let header = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("../../include/larder.h").standardized
        var defined: [String: Int32] = [:]
        for line in try String(contentsOf: header, encoding: .utf8).split(separator: "\n") {
            guard let match = line.wholeMatch(of: /#define (LARDER_[A-Z_]+) \(?(-?[0-9]+)\)?/),
                  let value = Int32(match.2) else { continue }
            defined[String(match.1)] = value
        }
        let codes: [String: LarderError.Code] = [
            "LARDER_INVALID_ARGUMENT": .invalidArgument, "LARDER_TOO_LARGE": .tooLarge, "LARDER_IO": .io,
            "LARDER_CORRUPT": .corrupt, "LARDER_INCOMPATIBLE": .incompatible, "LARDER_READ_ONLY": .readOnly,
            "LARDER_NO_MEMORY": .noMemory, "LARDER_FULL": .full, "LARDER_CLOSED": .closed, "LARDER_BUSY": .busy,
        ]
        // The error statuses are the negative ones; OK, NOT_FOUND and BUFFER_TOO_SMALL are answers.
        #expect(Set(defined.filter { $0.value < 0 }.keys) == Set(codes.keys))
        for (name, code) in codes {
            #expect(defined[name] == code.rawValue, "\(name) is \(defined[name].map(String.init) ?? "not defined"), .\(code) is \(code.rawValue)")
        }
        #expect(Set(codes.values.map(\.description)).count == codes.count)
    }

    @Test func badKeysAreRejectedAndLoseNothing() throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(path: directory.path())
        try cache.set([1], forKey: "keep")
        for (key, code) in [([UInt8](), LarderError.Code.invalidArgument), ([UInt8](repeating: 1, count: 4097), .tooLarge)] {
            #expect(throws: LarderError.self) { try cache.set([2], forKey: key) }
            #expect(errorCode { _ = try cache.data(forKey: key) } == code)
            #expect(errorCode { _ = try cache.removeValue(forKey: key) } == code)
            #expect(!cache.contains(key))
        }
        #expect(try cache.bytes(forKey: "keep") == [1])
    }

    @Test func badOptionsAreRejected() throws {
        let directory = TemporaryDirectory()
        for pageSize in [0, 1000, 2048, 4095, 131072] {
            #expect(throws: LarderError.self) { try Cache(at: directory.path(), pageSize: pageSize) }
        }
        for capacity in [-1, 0, 4096, 60_000] {
            #expect(throws: LarderError.self) { try Cache(at: directory.path(), capacity: capacity) }
        }
        #expect(throws: LarderError.self) { try Cache(path: "") }
        #expect(throws: LarderError.self) { try Cache(path: directory.url.path) }
        #expect(throws: LarderError.self) { try Cache(path: directory.path("no/such/dir.larder")) }
    }

    @Test func aForeignFileIsRefusedAndLeftAlone() throws {
        let directory = TemporaryDirectory()
        let text = Data(String(repeating: "not a cache\n", count: 1000).utf8)
        try text.write(to: URL(fileURLWithPath: directory.path()))
        expectError(.incompatible, opening: directory.path())
        #expect(try Data(contentsOf: URL(fileURLWithPath: directory.path())) == text)
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
        try rewriteMeta(directory.path(), copy: newest) { $0.readVersion = 2; $0.writeVersion = 2 }
        expectError(.incompatible, opening: directory.path())
        #expect(throws: LarderError.self) { try FileInspector(path: directory.path()) }
    }

    @Test func aFileWrittenByANewerCompatibleWriterOpensReadOnly() throws {
        let directory = TemporaryDirectory()
        try makeCache(directory.path())
        for copy in 0..<2 { try rewriteMeta(directory.path(), copy: copy) { $0.writeVersion = 2 } }
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

    /// A file of at most 128 zero bytes holds nothing to lose: the marker's write cut short by a
    /// power cut that kept the file's new length, not its bytes.
    @Test(arguments: [0, 1, 127, 128])
    func aShortFileOfZerosIsAnUnfinishedCreation(length: Int) throws {
        let directory = TemporaryDirectory()
        try Data(count: length).write(to: URL(fileURLWithPath: directory.path()))
        try Cache(path: directory.path()).set([1], forKey: "a")
        #expect(try Cache(path: directory.path()).bytes(forKey: "a") == [1])
    }

    @Test func aCreationThatNeverFinishedIsStartedOver() throws {
        // The creator marked the file and extended it, then died before the meta pages.
        let directory = TemporaryDirectory()
        try Data(FileLayout.creationMarker + [UInt8](repeating: 0, count: 64 * 1024 - 128))
            .write(to: URL(fileURLWithPath: directory.path()))
        #expect(throws: LarderError.self) { try FileInspector(path: directory.path()) }
        #expect { try Cache(path: directory.path(), options: .init(readOnly: true)) } throws: { error in
            (error as? LarderError)?.code == .incompatible
        }
        let cache = try Cache(path: directory.path())
        try cache.set([1], forKey: "a")
        try cache.close()
        #expect(try Cache(path: directory.path()).bytes(forKey: "a") == [1])
    }

    /// A creation that fails once the file is marked (here the file may not grow: a file size
    /// limit) leaves the marker, and the next open creates the file anew.
    @Test(.failsIfItHangs) func aCreationCutShortLeavesItsMarker() async throws {
        let directory = TemporaryDirectory()
        let path = directory.path()
        await #expect(processExitsWith: .success) { [path = path as String] in
            signal(SIGXFSZ, SIG_IGN)
            var limit = rlimit(rlim_cur: 64 * 1024, rlim_max: 64 * 1024)
            setrlimit(Int32(RLIMIT_FSIZE.rawValue), &limit)
            guard (try? Cache(path: path)) == nil else { exit(1) }
            let first = try [UInt8](Data(contentsOf: URL(fileURLWithPath: path)).prefix(128))
            exit(first == FileLayout.creationMarker ? 0 : 2)
        }
        #expect { try FileInspector(path: path) } throws: { error in
            (error as? LarderError)?.message.contains("creation did not finish") == true
        }
        try Cache(path: path).set([1], forKey: "a")
        #expect(try Cache(path: path).bytes(forKey: "a") == [1])
    }

    /// Only an empty file or one a creation marked is formatted: a file of zeros at the path (a
    /// disk image, a sparse file, a typo) is not a cache whose creation was cut short, and stays
    /// as it was.
    @Test(arguments: [Array(repeating: UInt8(0), count: 64 * 1024), Array(repeating: 0, count: 129),
                      Array(repeating: 0, count: 200) + Array("important".utf8), Array(repeating: 0, count: 100) + [1]])
    func aFileThatStartsWithZerosIsNotFormatted(contents: [UInt8]) throws {
        let directory = TemporaryDirectory()
        try Data(contents).write(to: URL(fileURLWithPath: directory.path()))
        #expect { try Cache(path: directory.path()) } throws: { error in
            (error as? LarderError)?.code == .incompatible
        }
        #expect(try [UInt8](Data(contentsOf: URL(fileURLWithPath: directory.path()))) == contents)
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
    @Test(arguments: [(readVersion: UInt32(2), refusal: LarderError.Code.incompatible), (readVersion: UInt32(1), refusal: .corrupt)])
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

    /// A clean file whose live totals cannot be right (a hostile shared-state page: fewer live
    /// bytes than its entries hold) is rebuilt on open; before, replacing a value took a total
    /// below zero and trapped (found by the fuzzer).
    @Test func impossibleLiveTotalsInACleanFileAreRebuilt() throws {
        let directory = TemporaryDirectory()
        let path = directory.path()
        try makeCache(path)
        // liveStoredBytes and liveRecordBytes of the shared state (page 2, offsets 240 and 248).
        try rewrite(path) { bytes in
            for index in (2 * 4096 + 240)..<(2 * 4096 + 256) { bytes[index] = 0 }
        }
        let cache = try Cache(path: path)
        #expect(cache.wasRecovered)
        for key in 0..<200 { try cache.set(VersionedValue.make(key: key, version: 2), forKey: "k\(key)") }
        try expectOnlyValidValues(cache, keys: 200)
        #expect(cache.stats.storedBytes > 0)
    }

    /// A clean file whose index has no empty slot left, although its entry count says there is
    /// room (a hostile file: the slots are not checksummed, the count is): a write rebuilds the
    /// index from the records and loses nothing. Before, the insert trapped ("hash table full").
    /// With 385 entries the index has just doubled, and the write meets the full table while
    /// moving slots out of the old one.
    @Test(arguments: [10, 385])
    func anIndexWithNoRoomLeftIsRebuiltByTheNextWrite(entries: Int) throws {
        let directory = TemporaryDirectory()
        let path = directory.path()
        try makeCache(path, entries: entries)
        try rewrite(path) { bytes in
            let meta = newestMeta(bytes)
            #expect(meta.drainingIndex.exists == (entries == 385))
            // Every slot an entry of its own tag, pointing into the header pages (never a record).
            let slots = meta.activeIndex.offset + IndexSegment.slotsOffset
            for index in 0..<meta.activeIndex.slotCount {
                store(HashTable.slot(tag: UInt32(index + 1), offset: 4096), at: slots + 8 * index, in: &bytes)
            }
        }
        let cache = try Cache(path: path)
        try cache.set(VersionedValue.make(key: entries, version: 1), forKey: "k\(entries)")
        #expect(cache.stats.recoveries == 1)
        #expect(cache.stats.entryCount == entries + 1)
        for key in 0...entries {
            let value = try #require(try cache.bytes(forKey: "k\(key)"), "k\(key)")
            #expect(VersionedValue.check(value, key: key) == 1)
        }
    }

    /// Sequence numbers no writer may count on from, in the shared state of a clean file (the
    /// end of 64 bits, or just past the trusted limit) or in a record header of a file to recover
    /// (the end of 64 bits, or the limit recovery keeps): writers counted past UInt64.max and
    /// trapped. The state is implausible and rebuilt; the record is dropped; nothing else is lost.
    @Test(arguments: [("state", UInt64.max), ("state", RecordHeader.trustedSequenceLimit + 1),
                      ("record", UInt64.max), ("record", RecordHeader.recoverableSequenceLimit)])
    func sequenceNumbersThatCannotBeCountedOnAreNotTrusted(place: String, sequence: UInt64) throws {
        let directory = TemporaryDirectory()
        let path = directory.path()
        try makeCache(path)
        try rewrite(path) { bytes in
            if place == "state" {
                store(sequence, at: 2 * 4096 + 216, in: &bytes)
            } else {
                let offset = recordOffset(ofKey: "k7", in: bytes)
                store(sequence, at: offset + RecordHeader.Field.sequence, in: &bytes)
                resealHeader(at: offset, in: &bytes)
                bytes[2 * 4096 + 12] = 0 // the clean flag: recovery runs
            }
        }
        let cache = try Cache(path: path)
        #expect(cache.wasRecovered)
        #expect(try cache.bytes(forKey: "k7") == (place == "state" ? VersionedValue.make(key: 7, version: 1) : nil))
        for key in 0..<200 where place == "state" || key != 7 {
            let value = try #require(try cache.bytes(forKey: "k\(key)"), "k\(key)")
            #expect(VersionedValue.check(value, key: key) == 1)
        }
        for key in 0..<200 { try cache.set(VersionedValue.make(key: key, version: 2), forKey: "k\(key)") }
        try expectOnlyValidValues(cache)
    }

    /// A clean file whose meta page's first valid sequence lies above the shared state's next
    /// sequence (found by the fuzzer): every record written from then on was void, stored and
    /// never found. The open recovers it; what it held survives, and writes are found again.
    @Test func aFirstValidSequenceAboveTheNextIsRecovered() throws {
        let directory = TemporaryDirectory()
        let path = directory.path()
        try makeCache(path)
        let next = try [UInt8](Data(contentsOf: URL(fileURLWithPath: path)))[(2 * 4096 + 216)..<(2 * 4096 + 224)]
            .reversed().reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        for copy in 0..<2 { try rewriteMeta(path, copy: copy) { $0.firstValidSequence = next + 1_000 } }
        // The inspector judges it as the open does.
        let problems = try FileInspector(path: path).verify().report.problems
        #expect(problems.contains { "\($0)".contains("next sequence \(next), first valid \(next + 1_000)") }, "\(problems)")
        let cache = try Cache(path: path)
        #expect(cache.wasRecovered)
        try cache.set([7], forKey: "after")
        #expect(try cache.bytes(forKey: "after") == [7])
        try expectOnlyValidValues(cache)
    }

    /// A clean file whose next sequence is at the trusted limit: writers count on past it (their
    /// records stay valid and readable), the next open finds the state implausible and recovers,
    /// and the one after does not: recovery leaves numbers the next open trusts. (Recovery drops
    /// the records numbered past its own limit, which only such a hostile file can hold.)
    @Test func writersCountingOnFromTheTrustedLimitLeaveAFileThatOpens() throws {
        let directory = TemporaryDirectory()
        let path = directory.path()
        try makeCache(path)
        try rewrite(path) { bytes in store(RecordHeader.trustedSequenceLimit, at: 2 * 4096 + 216, in: &bytes) }
        do {
            let cache = try Cache(path: path)
            #expect(!cache.wasRecovered)
            // Enough new keys to double the index: a segment numbered past the limit too.
            for key in 200..<800 { try cache.set(VersionedValue.make(key: key, version: 1), forKey: "k\(key)") }
            for key in 0..<800 {
                #expect(VersionedValue.check(try #require(try cache.bytes(forKey: "k\(key)")), key: key) == 1)
            }
            try cache.close()
        }
        do {
            let cache = try Cache(path: path)
            #expect(cache.wasRecovered)
            try expectOnlyValidValues(cache, keys: 800)
            try cache.set(VersionedValue.make(key: 1, version: 3), forKey: "k1")
            try cache.close()
        }
        try expectOpensWithoutRecovery(path, key: 1, version: 3)
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

    /// A first valid sequence past the trusted limit (both copies): the open recovers, which
    /// lowers it, and the next open trusts the file. Before, recovery counted on from it, and
    /// every open after a write recovered again.
    @Test func aFirstValidSequencePastTheTrustedLimitIsRecoveredOnce() throws {
        let directory = TemporaryDirectory()
        let path = directory.path()
        try makeCache(path)
        for copy in 0..<2 { try rewriteMeta(path, copy: copy) { $0.firstValidSequence = RecordHeader.trustedSequenceLimit + 1 } }
        do {
            let cache = try Cache(path: path)
            #expect(cache.wasRecovered)
            // Every record is older than the first valid sequence: the file says it was cleared.
            #expect(try cache.bytes(forKey: "k3") == nil)
            try cache.set(VersionedValue.make(key: 3, version: 2), forKey: "k3")
            try cache.close()
        }
        try expectOpensWithoutRecovery(path, key: 3, version: 2)
    }

    #if os(Linux)
    /// A header resealed to say that its 9 MB value is compressed and decodes to 2 GiB: a
    /// process that cannot get that much memory (an address space limited to 512 MiB more than it
    /// uses) still verifies the file (the inspector behind `larder verify` cannot tell whether
    /// the value decodes, and says nothing of it), and a read of the key fails with `.noMemory`.
    /// Both stopped the process before.
    @Test(.failsIfItHangs, .needsPlainMalloc) func aValueClaimingMoreMemoryThanThereIsStopsNoProcess() async throws {
        let directory = TemporaryDirectory()
        let path = directory.path()
        let cache = try Cache(at: path, capacity: 32 << 20)
        var generator = SplitMix(seed: 3)
        try cache.set((0..<(9 << 20)).map { _ in UInt8(truncatingIfNeeded: generator.next()) }, forKey: "large")
        try cache.set([1, 2, 3], forKey: "small")
        try cache.close()
        try rewrite(path) { bytes in
            let offset = recordOffset(ofKey: "large", in: bytes)
            bytes[offset + RecordHeader.Field.flags] |= RecordHeader.compressedFlag
            for byte in 0..<4 { bytes[offset + RecordHeader.Field.rawLength + byte] = UInt8(truncatingIfNeeded: 0x7E00_0000 >> (8 * byte)) }
            resealHeader(at: offset, in: &bytes)
        }

        await #expect(processExitsWith: .success) { [path = path as String] in
            let statm = try String(contentsOfFile: "/proc/self/statm", encoding: .utf8)
            let used = Int(statm.split(separator: " ")[0])! * Int(sysconf(Int32(_SC_PAGESIZE)))
            var limit = rlimit()
            getrlimit(Int32(RLIMIT_AS.rawValue), &limit)
            limit.rlim_cur = rlim_t(used + (512 << 20))
            guard setrlimit(Int32(RLIMIT_AS.rawValue), &limit) == 0 else { exit(10) }
            let report = try FileInspector(path: path).verify().report
            guard report.isSound else { exit(11) }
            let cache = try Cache(path: path)
            do {
                _ = try cache.data(forKey: "large")
                exit(12)
            } catch {
                guard (error as? LarderError)?.code == .noMemory else { exit(13) }
            }
            exit(try cache.bytes(forKey: "small") == [1, 2, 3] ? 0 : 14)
        }
    }
    #endif

    /// Readers accept keys of up to 65,535 bytes (FORMAT.md 1.3) although writers write at most
    /// 4,096: enumerating such a record copied its key into a 4 KiB buffer (a trap; in a build
    /// without checks, a heap overflow). Its longer key no longer hashes to its slot's tag, so the
    /// listing now passes it, and lists the others.
    @Test func aRecordWithAKeyLongerThanWritersWriteIsEnumeratedSafely() throws {
        let directory = TemporaryDirectory()
        let path = directory.path()
        let cache = try Cache(at: path, capacity: 2 << 20)
        for key in 0..<10 { try cache.set([UInt8](repeating: UInt8(key), count: 2000), forKey: "long-key-\(key)") }
        try cache.close()
        try rewrite(path) { bytes in
            let offset = recordOffset(ofKey: "long-key-3", in: bytes)
            // Key length 5,000: the record now runs over its successors, within the file.
            bytes[offset + RecordHeader.Field.keyLength] = 0x88
            bytes[offset + RecordHeader.Field.keyLength + 1] = 0x13
            resealHeader(at: offset, in: &bytes)
        }
        let reopened = try Cache(path: path)
        var lengths: [Int] = []
        try reopened.forEachEntry { key, _ in
            lengths.append(key.count)
            return true
        }
        #expect(lengths == Array(repeating: "long-key-0".utf8.count, count: 9))
        #expect(try reopened.bytes(forKey: "long-key-3") == nil)
        #expect(try reopened.bytes(forKey: "long-key-4") == [UInt8](repeating: 4, count: 2000))
    }

    /// A header of kind 3 (index segment) whose checksum holds, where no segment can be: not on
    /// a page boundary, and 75 bytes long. The inspector's walk stepped over it by its length,
    /// lost the record boundaries behind it, and `compact` then dropped every entry.
    @Test func aSegmentHeaderWhereNoSegmentCanBeHidesNoRecordBehindIt() throws {
        let directory = TemporaryDirectory()
        let path = directory.path()
        let cache = try Cache(at: path, capacity: 2 << 20)
        for key in 0..<30 { try cache.set([UInt8](repeating: UInt8(key), count: 100), forKey: "key-\(key)") }
        try cache.close()
        try rewrite(path) { bytes in
            let offset = recordOffset(ofKey: "key-1", in: bytes)
            bytes[offset + RecordHeader.Field.kind] = RecordKind.indexSegment.rawValue
            bytes[offset + RecordHeader.Field.keyLength] = 0
            bytes[offset + RecordHeader.Field.keyLength + 1] = 0
            bytes[offset + RecordHeader.Field.storedLength] = 27
            bytes[offset + RecordHeader.Field.rawLength] = 27
            resealHeader(at: offset, in: &bytes)
        }
        let expected = Set((0..<30).filter { $0 != 1 }.map { Array("key-\($0)".utf8) })
        #expect(Set(try FileInspector(path: path).walk().entries.map(\.key)) == expected)
        let report = try FileInspector.compact(path: path)
        #expect(Set(report.kept.map(\.key)) == expected)
        #expect(try Cache(path: path).bytes(forKey: "key-29") == [UInt8](repeating: 29, count: 100))
    }

    /// The tail of a clean file meets a segment header where no segment can be (not page
    /// aligned, no slot count), whose length reaches exactly to a later record: it is damage,
    /// and the file is rebuilt from its records. Before, the tail stepped over it, over live
    /// entries it never took out of the index or the counts, which the head then wrote over.
    @Test func theTailTakesASegmentHeaderWhereNoSegmentCanBeAsDamage() throws {
        let directory = TemporaryDirectory()
        let path = directory.path()
        do {
            let cache = try Cache(at: path, capacity: 2 << 20)
            for key in 0..<30 { try cache.set([UInt8](repeating: UInt8(key), count: 100), forKey: "key-\(key)") }
            try cache.close()
        }
        try rewrite(path) { bytes in
            let offset = recordOffset(ofKey: "key-1", in: bytes)
            let length = recordOffset(ofKey: "key-10", in: bytes) - offset - RecordHeader.size
            bytes[offset + RecordHeader.Field.kind] = RecordKind.indexSegment.rawValue
            bytes[offset + RecordHeader.Field.keyLength] = 0
            bytes[offset + RecordHeader.Field.keyLength + 1] = 0
            store(UInt64(length) | UInt64(length) << 32, at: offset + RecordHeader.Field.storedLength, in: &bytes)
            resealHeader(at: offset, in: &bytes)
        }
        let cache = try Cache(path: path)
        #expect(!cache.wasRecovered, "the file was taken as it is")
        // Enough to take the ring round twice: the tail passes every record written before.
        for key in 0..<4_000 { try cache.set(pattern(key, count: 1_000), forKey: "new-\(key)") }
        let keys = (0..<30).map { "key-\($0)" } + (0..<4_000).map { "new-\($0)" }
        let readable = try keys.filter { try cache.bytes(forKey: $0) != nil }.count
        #expect(cache.count == readable, "every entry counted can be read")
        #expect(cache.stats.recoveries >= 1)
    }

    /// A file whose entry "big" has a header that runs 64 bytes into the index segment placed
    /// right after it, with a valid header checksum (and, with `dataSealed`, a data checksum
    /// that holds over the bytes it claims); `clean` false leaves the file to be recovered.
    private func makeFileWithAnEntryRunningIntoItsIndex(_ path: String, dataSealed: Bool = false, clean: Bool = true) throws {
        do {
            let cache = try Cache(at: path, capacity: 8 << 20)
            let loadLimit = HashTable.loadLimit(slotCount: HashTable.minimumSlotCount)
            for key in 0..<(loadLimit - 1) { try cache.set([UInt8(key & 0xFF)], forKey: "k\(key)") }
            try cache.set(pattern(1, count: 5_000), forKey: "big")
            // The index doubles: its new segment goes at the head, right after "big".
            try cache.set([1], forKey: "trigger")
            try cache.close()
        }
        try rewrite(path) { bytes in
            let island = newestMeta(bytes).activeIndex.offset
            let offset = recordOffset(ofKey: "big", in: bytes)
            #expect(island > offset, "the segment lies after the entry")
            let stored = island + 64 - offset - RecordHeader.size - 3
            store(UInt64(stored) | UInt64(stored) << 32, at: offset + RecordHeader.Field.storedLength, in: &bytes)
            if dataSealed {
                let seed = newestMeta(bytes).checksumSeed
                let checksum = bytes.withUnsafeBytes { lrd_crc32c(seed, $0.baseAddress! + offset + RecordHeader.size, 3 + stored) }
                for byte in 0..<4 {
                    bytes[offset + RecordHeader.Field.dataChecksum + byte] = UInt8(truncatingIfNeeded: checksum >> (8 * byte))
                }
            }
            resealHeader(at: offset, in: &bytes)
            if !clean { bytes[2 * 4096 + 12] &= ~1 }
        }
    }

    /// A hostile file with a valid header every 48 bytes, each claiming data to the ring's end
    /// and failing its data checksum, is recovered (and verified) in time linear in the ring:
    /// each failed check read the rest of the ring, some 6 minutes for this 32 MiB one before
    /// recovery bounded the bytes its failed checks may read (FORMAT.md 7.4, step 3).
    @Test(.failsIfItRunsLongerThan(.seconds(60))) func headersClaimingTheRestOfTheRingDoNotMakeRecoveryQuadratic() throws {
        let directory = TemporaryDirectory()
        let path = directory.path()
        do {
            let cache = try Cache(at: path, capacity: 64 << 20)
            for key in 0..<32 { try cache.set(pattern(key, count: 1 << 20), forKey: "k\(key)") }
            try cache.close()
        }
        try rewrite(path) { bytes in
            let meta = newestMeta(bytes)
            let ringEnd = meta.fileSize
            #expect(ringEnd >= 32 << 20)
            var offset = recordOffset(ofKey: "k0", in: bytes)
            var headers = 0
            while offset + RecordHeader.size + 16 <= ringEnd {
                let stored = ringEnd - offset - RecordHeader.size - 16
                for byte in offset..<(offset + RecordHeader.size) { bytes[byte] = 0 }
                store(RecordHeader.Word0.compose(kind: .entry, flags: 0, keyLength: 1) | RecordHeader.Word0.liveBit,
                      at: offset, in: &bytes)
                store(UInt64(stored) | UInt64(stored) << 32, at: offset + RecordHeader.Field.storedLength, in: &bytes)
                store(10, at: offset + RecordHeader.Field.sequence, in: &bytes)
                resealHeader(at: offset, in: &bytes)
                offset += RecordHeader.size
                headers += 1
            }
            #expect(headers > 600_000)
            bytes[2 * 4096 + 12] &= ~1 // the clean flag: recovery runs
        }
        #expect(!(try FileInspector(path: path).verify().report.isSound))
        let cache = try Cache(path: path)
        #expect(cache.wasRecovered)
        #expect(cache.count == 0)
        try cache.set([1], forKey: "after")
        #expect(try cache.bytes(forKey: "after") == [1])
    }

    /// The room of a dead entry is never taken where it would reach into an index segment,
    /// whatever the entry's header claimed (FORMAT.md 6.8). Before, a large entry whose hostile
    /// header ran into the segment placed after it left, once replaced, a room over the segment,
    /// which the next large value took.
    @Test func aDeadRoomReachingIntoAnIndexSegmentIsNotTaken() throws {
        let directory = TemporaryDirectory()
        let path = directory.path()
        try makeFileWithAnEntryRunningIntoItsIndex(path)
        let cache = try Cache(path: path)
        try cache.set(pattern(2, count: 5_000), forKey: "big")
        // A value the size of the room claimed (its size class), which would take it.
        try cache.set(pattern(3, count: 8_140), forKey: "other")
        #expect(cache.store.recordsPlacedInDeadRoom == 0)
        #expect(try cache.bytes(forKey: "other") == pattern(3, count: 8_140))
        #expect(try cache.bytes(forKey: "k7") == [7])
    }

    /// The tail of a clean file meets an entry whose header runs into the index segment after
    /// it: damage, and the file is rebuilt (which keeps no such entry), rather than the entry
    /// relocated, hostile bytes and all, and a step into the segment's slots.
    @Test func theTailTakesAnEntryRunningIntoAnIndexSegmentAsDamage() throws {
        let directory = TemporaryDirectory()
        let path = directory.path()
        try makeFileWithAnEntryRunningIntoItsIndex(path, dataSealed: true)
        do {
            let cache = try Cache(path: path)
            #expect(!cache.wasRecovered, "the file was taken as it is")
            // Read, so that the tail would relocate it rather than evict it.
            #expect(try cache.bytes(forKey: "big") != nil)
            // Until the tail has met the entry (the first rebuild), with a hundred keys written
            // over and over at the head: the index, which is not to grow, keeps its segment
            // where it is.
            cache.store.reusesDeadRoom = false
            for round in 0..<2_000 where cache.stats.recoveries == 0 {
                try cache.set(pattern(round, count: 16 << 10), forKey: "new-\(round % 100)")
            }
            #expect(cache.stats.recoveries == 1)
            #expect(try cache.bytes(forKey: "big") == nil)
            try cache.close()
        }
        try expectVerifiesSound(path)
    }

    /// Recovery keeps no entry that runs into an index segment, even one whose checksums hold
    /// (FORMAT.md 7.4, step 3): it keeps the segment whole instead, and the file it leaves
    /// verifies. Before, it kept the entry, missed the segment's start, and wrote padding into it.
    @Test func recoveryKeepsNoEntryRunningIntoAnIndexSegment() throws {
        let directory = TemporaryDirectory()
        let path = directory.path()
        try makeFileWithAnEntryRunningIntoItsIndex(path, dataSealed: true, clean: false)
        do {
            let cache = try Cache(path: path)
            #expect(cache.wasRecovered)
            #expect(try cache.bytes(forKey: "big") == nil)
            #expect(try cache.bytes(forKey: "k7") == [7])
            #expect(try cache.bytes(forKey: "trigger") == [1])
            try cache.close()
        }
        try expectVerifiesSound(path)
    }

    /// A clean file whose entry count is lower than its index holds: removals take the count
    /// below zero, which `removeAll` turned into a trap when adding it to the statistics.
    @Test func anEntryCountTooLowInACleanFileNeverTraps() throws {
        let directory = TemporaryDirectory()
        let path = directory.path()
        try makeCache(path, entries: 20)
        try rewrite(path) { bytes in store(0, at: 2 * 4096 + 224, in: &bytes) }
        let cache = try Cache(path: path)
        #expect(try cache.removeValue(forKey: "k3"))
        try cache.removeAll()
        #expect(try cache.bytes(forKey: "k4") == nil)
        try cache.set(VersionedValue.make(key: 4, version: 2), forKey: "k4")
        #expect(VersionedValue.check(try #require(try cache.bytes(forKey: "k4")), key: 4) == 2)
    }

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
        let (directory, reader, _) = try readerOfAFileWhoseWriterDiedMidChange(writerOpen: false)
        defer { _ = directory }
        let clock = ContinuousClock()
        let start = clock.now
        for attempt in 0..<10 { #expect(try reader.bytes(forKey: "absent-\(attempt)") == nil) }
        #expect(clock.now - start < .milliseconds(Int64(CacheStore.readPatience) / 2))
        #expect(try reader.bytes(forKey: "k7").flatMap { VersionedValue.check($0, key: 7) } == 1)
    }

    /// The same dead writer's change, met by listings: a listing needs no settled epoch when the
    /// slots it reads hold still (a dead writer moves none), so it lists every key at once.
    @Test
    func aListingOfADeadWritersFileListsEveryKeyAtOnce() throws {
        let (directory, reader, writer) = try readerOfAFileWhoseWriterDiedMidChange(writerOpen: true)
        defer {
            _ = directory
            writer?.close()
        }
        let clock = ContinuousClock()
        let start = clock.now
        #expect(Set(try reader.keys.map { String(decoding: $0, as: UTF8.self) }) == Set((0..<200).map { "k\($0)" }))
        #expect(clock.now - start < .milliseconds(Int64(CacheStore.readPatience) / 2))
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

    /// The inspector (`larder info`, `verify`, `dump`) on a file cut short before its data area:
    /// an empty ring, not a reversed range (a trap).
    @Test func theInspectorTakesAFileCutShortBeforeItsDataArea() throws {
        let directory = TemporaryDirectory()
        let path = directory.path()
        try makeCache(path)
        try rewrite(path) { bytes in bytes.removeSubrange((3 * 4096 - 1000)...) }
        let inspector = try FileInspector(path: path)
        #expect(inspector.walk().entries.isEmpty)
    }

    @Test func damageWhereTheTailStandsIsRepairedAndWritesGoOn() throws {
        let directory = TemporaryDirectory()
        let path = directory.path()
        do {
            // Fill past the capacity so that the tail stands among entries, then close.
            let cache = try Cache(at: path, capacity: 1 << 20)
            for key in 0..<400 { try cache.set(VersionedValue.make(key: key, version: 1), forKey: "k\(key)") }
            try cache.close()
        }
        // Smash the record at the tail (its offset is in the shared state, at 4096 * 2 + 200).
        try rewrite(path) { bytes in
            let tail = bytes[(2 * 4096 + 200)..<(2 * 4096 + 208)].withUnsafeBytes { Int(UInt64(littleEndian: $0.loadUnaligned(as: UInt64.self))) }
            for index in tail..<(tail + 48) { bytes[index] ^= 0xA5 }
        }
        let cache = try Cache(path: path)
        #expect(!cache.wasRecovered)
        for key in 400..<800 { try cache.set(VersionedValue.make(key: key, version: 1), forKey: "k\(key)") }
        #expect(cache.stats.recoveries == 1)
        try expectOnlyValidValues(cache, keys: 800)
        #expect(try cache.bytes(forKey: "k799").flatMap { VersionedValue.check($0, key: 799) } == 1)
    }

    /// A meta page whose draining index is the active one: used as it is, the first clean close
    /// marked the shared segment dead, and read-only opens then refused the file.
    @Test func overlappingIndexSegmentsAreRebuiltBySoleWriter() throws {
        let directory = TemporaryDirectory()
        let path = directory.path()
        try makeCache(path)
        for copy in 0..<2 { try rewriteMeta(path, copy: copy) { $0.drainingIndex = $0.activeIndex } }
        let cache = try Cache(path: path)
        #expect(cache.wasRecovered)
        #expect(try cache.bytes(forKey: "k3").flatMap { VersionedValue.check($0, key: 3) } == 1)
        try cache.close()
        let reader = try Cache(at: path, readOnly: true)
        #expect(reader.count == 200)
        #expect(try reader.bytes(forKey: "k199").flatMap { VersionedValue.check($0, key: 199) } == 1)
    }

    /// A draining segment that shares bytes with the active one (a hostile meta page naming a
    /// valid segment header a page before the active segment) is no island to recovery
    /// (FORMAT.md 7.4, step 5). Before, recovery skipped it whole, landed inside the active
    /// segment, never met its start, and wrote padding into its slots.
    @Test func recoveryTakesNoDrainingSegmentOverlappingTheActiveOne() throws {
        let directory = TemporaryDirectory()
        let path = directory.path()
        let keys = HashTable.loadLimit(slotCount: HashTable.minimumSlotCount) + 1
        do {
            // The index doubles: its new segment goes at the head, after the records.
            let cache = try Cache(at: path, capacity: 8 << 20)
            for key in 0..<keys { try cache.set(VersionedValue.make(key: key, version: 1), forKey: "k\(key)") }
            try cache.close()
        }
        var overlapping = IndexLocation.none
        try rewrite(path) { bytes in
            let active = newestMeta(bytes).activeIndex
            overlapping = IndexLocation(offset: active.offset - 4096, slotCount: HashTable.minimumSlotCount)
            let header = overlapping.offset
            let segmentBytes = IndexSegment.byteCount(slotCount: overlapping.slotCount, pageSize: 4096)
            #expect(header + segmentBytes > active.offset, "the segment reaches into the active one")
            bytes.replaceSubrange(header..<(header + RecordHeader.size), with: repeatElement(0, count: RecordHeader.size))
            store(RecordHeader.Word0.compose(kind: .indexSegment, flags: 0, keyLength: 0) | RecordHeader.Word0.liveBit, at: header, in: &bytes)
            store(UInt64(segmentBytes - RecordHeader.size) | UInt64(overlapping.slotCount) << 32,
                  at: header + RecordHeader.Field.storedLength, in: &bytes)
            store(1, at: header + RecordHeader.Field.sequence, in: &bytes)
            resealHeader(at: header, in: &bytes)
        }
        for copy in 0..<2 { try rewriteMeta(path, copy: copy) { $0.drainingIndex = overlapping } }
        do {
            let cache = try Cache(path: path)
            #expect(cache.wasRecovered)
            // Only the record the hostile header was written over is lost.
            let readable = try (0..<keys).filter { key in
                try cache.bytes(forKey: "k\(key)").flatMap { VersionedValue.check($0, key: key) } == 1
            }
            #expect(readable.count >= keys - 1)
            try cache.close()
        }
        try expectVerifiesSound(path)
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

    @Test func aDamagedValueIsAnErrorForItsKeyOnly() throws {
        let directory = TemporaryDirectory()
        try makeCache(directory.path())
        let target = VersionedValue.make(key: 42, version: 1)
        try rewrite(directory.path()) { bytes in
            let start = bytes.firstRange(of: target)!.lowerBound
            bytes[start + 20] ^= 0xFF
        }
        let cache = try Cache(path: directory.path())
        do {
            _ = try cache.bytes(forKey: "k42")
            Issue.record("a damaged value was returned")
        } catch {
            #expect(error.code == .corrupt)
        }
        #expect(try cache.bytes(forKey: "k41").flatMap { VersionedValue.check($0, key: 41) } == 1)
        // Overwriting the damaged entry repairs it.
        try cache.set(VersionedValue.make(key: 42, version: 2), forKey: "k42")
        #expect(try cache.bytes(forKey: "k42").flatMap { VersionedValue.check($0, key: 42) } == 2)
    }

    /// A hostile header that passes its checksum but claims a value running past the end of the
    /// file: no read follows it out of the file; its key reads as absent, every other key as
    /// written.
    @Test func aHeaderClaimingBytesPastTheFileIsNotFollowed() throws {
        let directory = TemporaryDirectory()
        let path = directory.path()
        try makeCache(path)
        let size = try FileManager.default.attributesOfItem(atPath: path)[.size] as! Int
        try rewrite(path) { bytes in
            let offset = recordOffset(ofKey: "k7", in: bytes)
            let length = UInt64(size - offset)
            store(length | length << 32, at: offset + RecordHeader.Field.storedLength, in: &bytes)
            resealHeader(at: offset, in: &bytes)
        }
        let cache = try Cache(path: path)
        #expect(try cache.data(forKey: "k7") == nil)
        var buffer = [UInt8](repeating: 0, count: 64)
        #expect(try buffer.withUnsafeMutableBytes { try cache.copyValue(forKey: "k7", into: $0) } == nil)
        #expect(try cache.bytes(forKey: "k7") == nil)
        #expect(!cache.contains("k7"))
        for key in 0..<200 where key != 7 {
            #expect(VersionedValue.check(try #require(try cache.bytes(forKey: "k\(key)")), key: key) == 1)
        }
    }

    /// A compressed entry whose header claims a raw length its block could never produce (none,
    /// or more than 255 bytes for each stored byte) is not a valid record: its key reads as
    /// absent. Before, a read first set aside the claimed length (up to 4 GiB, which traps where
    /// memory is short) and then reported the value damaged, and `copyValue` reported its length.
    @Test(arguments: [UInt64(0), UInt64(UInt32.max)])
    func aCompressedEntryClaimingAnImpossibleRawLengthIsNotRead(rawLength: UInt64) throws {
        let directory = TemporaryDirectory()
        let path = directory.path()
        do {
            let cache = try Cache(at: path, capacity: 2 << 20)
            try cache.set([UInt8](repeating: 7, count: 1000), forKey: "packed", compression: .lz4)
            try cache.set([1, 2, 3], forKey: "other")
            try cache.close()
        }
        try rewrite(path) { bytes in
            let offset = recordOffset(ofKey: "packed", in: bytes)
            let lengths = offset + RecordHeader.Field.storedLength
            let stored = UInt64(bytes[lengths]) | UInt64(bytes[lengths + 1]) << 8
            #expect(stored < 100, "the value was stored compressed")
            store(stored | rawLength << 32, at: lengths, in: &bytes)
            resealHeader(at: offset, in: &bytes)
        }
        let cache = try Cache(path: path)
        #expect(try cache.data(forKey: "packed") == nil)
        var buffer = [UInt8](repeating: 0, count: 64)
        #expect(try buffer.withUnsafeMutableBytes { try cache.copyValue(forKey: "packed", into: $0) } == nil)
        #expect(try cache.withValue(forKey: "packed") { $0.count } == nil)
        #expect(try cache.data(forKey: "other") == Data([1, 2, 3]))
    }

    /// The statistics' counters come from the file: whatever values they hold, the hit ratio
    /// is a ratio, never a trap (before, hits and misses were added as integers).
    @Test func countersOfAnyValueGiveAHitRatio() throws {
        let directory = TemporaryDirectory()
        let path = directory.path()
        try makeCache(path)
        try rewrite(path) { bytes in
            store(UInt64.max, at: 2 * 4096 + 320, in: &bytes)
            store(1, at: 2 * 4096 + 328, in: &bytes)
        }
        let ratio = try Cache(path: path).stats.hitRatio
        #expect(ratio >= 0 && ratio <= 1)
    }

    /// A clean file may claim as many entries as its bytes could hold, far more than its index
    /// has slots: an eviction sets aside room for the entries the index holds, not for the count
    /// claimed (before, a sparse 1 TiB file made `trim` reserve some 500 GB, and trap). A writer
    /// reserves the holes of a sparse file when it opens it: on a disk with less than a terabyte
    /// free, the open is refused as full, at once, without taking what the disk has.
    @Test func anEntryCountFarAboveTheIndexDoesNotSizeAnEviction() throws {
        let directory = TemporaryDirectory()
        let path = directory.path()
        try makeCache(path)
        let size = 1 << 40
        let dataStart = FileLayout.dataStart(pageSize: 4096)
        for copy in 0..<2 { try rewriteMeta(path, copy: copy) { $0.capacity = size; $0.fileSize = size } }
        let state = 2 * 4096
        let handle = try #require(FileHandle(forUpdatingAtPath: path))
        try handle.truncate(atOffset: UInt64(size))
        let ring = size - dataStart
        for (field, value) in [(208, ring), (248, ring), (224, ring / RecordHeader.size)] {
            try handle.seek(toOffset: UInt64(state + field))
            try handle.write(contentsOf: withUnsafeBytes(of: UInt64(value)) { Data($0) })
        }
        try handle.close()
        let opened = Result { () throws(LarderError) in try Cache(path: path) }
        if case .failure(let error) = opened, error.code == .full {
            var disk = statvfs()
            #expect(statvfs(path, &disk) == 0 && Int(disk.f_bavail) * Int(disk.f_frsize) < size)
            #expect(unreservedBytes(in: path) > size - (1 << 30), "the refused open took disk space")
            return
        }
        let cache = try opened.get()
        #expect(!cache.wasRecovered, "the file was taken as it is")
        _ = try cache.trim(toCount: 1)
        #expect(try cache.bytes(forKey: "k1") == nil)
    }

    /// The copying reads (`data`, `copyValue`, and so `larder_get`) take a short path first and
    /// leave a checksum mismatch to the careful one: either way a damaged value is an error, and
    /// counts as neither a hit nor a miss. Lengths on both sides of the short checksum's limit.
    @Test(arguments: [1, 9, 100, 255, 256, 300, 5000])
    func aDamagedValueIsAnErrorThroughTheCopyingReads(valueLength: Int) throws {
        let directory = TemporaryDirectory()
        let key = "key-of-twenty-bytes!"
        do {
            let cache = try Cache(at: directory.path(), capacity: 2 << 20)
            try cache.set(pattern(7, count: valueLength), forKey: key)
            try cache.set([1, 2, 3], forKey: "other")
            try cache.close()
        }
        try rewrite(directory.path()) { bytes in
            let valueStart = bytes.firstRange(of: Array(key.utf8))!.upperBound
            bytes[valueStart + valueLength - 1] ^= 0x40
        }
        let cache = try Cache(path: directory.path())
        let before = cache.stats
        do {
            _ = try cache.data(forKey: key)
            Issue.record("data(forKey:) returned a damaged value")
        } catch {
            #expect(error.code == .corrupt)
        }
        var buffer = [UInt8](repeating: 0, count: valueLength)
        do {
            _ = try buffer.withUnsafeMutableBytes { try cache.copyValue(forKey: key, into: $0) }
            Issue.record("copyValue(forKey:into:) returned a damaged value")
        } catch let error as LarderError {
            #expect(error.code == .corrupt)
        }
        #expect(cache.stats.hits == before.hits && cache.stats.misses == before.misses)
        #expect(try cache.data(forKey: "other") == Data([1, 2, 3]))
    }

    @Test func aZeroedStatePageIsRebuilt() throws {
        let directory = TemporaryDirectory()
        try makeCache(directory.path())
        try rewrite(directory.path()) { bytes in
            for index in (2 * 4096)..<(3 * 4096) { bytes[index] = 0 }
        }
        let cache = try Cache(path: directory.path())
        #expect(cache.wasRecovered)
        #expect(cache.count == 200)
        try expectOnlyValidValues(cache)
    }

    @Test func randomDamageAnywhereNeverCrashesOrLies() throws {
        // Deterministic: flip bytes at many places, open, read everything, write a little.
        var generator = SplitMix(seed: 0xDA3A6E)
        let directory = TemporaryDirectory()
        let original = directory.path("original.larder")
        try makeCache(original)
        let size = try FileManager.default.attributesOfItem(atPath: original)[.size] as! Int
        for round in 0..<40 {
            let path = directory.path("damaged\(round).larder")
            try FileManager.default.copyItem(atPath: original, toPath: path)
            try rewrite(path) { bytes in
                for _ in 0..<(1 + round % 8) {
                    let start = Int(generator.next() % UInt64(size))
                    for index in start..<min(size, start + 1 + Int(generator.next() % 64)) {
                        bytes[index] = round % 3 == 0 ? 0 : UInt8(truncatingIfNeeded: generator.next())
                    }
                }
            }
            guard let cache = try? Cache(path: path) else { continue }
            try expectOnlyValidValues(cache)
            for key in 0..<50 { try? cache.set(VersionedValue.make(key: key, version: 2), forKey: "k\(key)") }
            try expectOnlyValidValues(cache)
            try? cache.close()
        }
    }

    @Test func garbageDataAreaWithAValidMetaOpensEmpty() throws {
        var generator = SplitMix(seed: 7)
        let directory = TemporaryDirectory()
        try makeCache(directory.path())
        try rewrite(directory.path()) { bytes in
            for index in (2 * 4096)..<bytes.count { bytes[index] = UInt8(truncatingIfNeeded: generator.next()) }
        }
        let cache = try Cache(path: directory.path())
        #expect(cache.count == 0)
        try expectOnlyValidValues(cache)
        try cache.set([1], forKey: "fresh")
        #expect(try cache.bytes(forKey: "fresh") == [1])
    }
}

/// A small deterministic generator for tests.
struct SplitMix: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// Every file of the fuzz corpus (hand-made damage, and inputs the fuzzer once crashed on) goes
/// through the fuzz target's operations in the ordinary test run too.
@Suite("Fuzz corpus")
struct FuzzCorpusTests {
    static var corpus: [URL] {
        let directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("../Fuzz/corpus").standardized
        return ((try? FileManager.default.contentsOfDirectory(at: directory, includingPropertiesForKeys: nil)) ?? [])
            .sorted { $0.lastPathComponent < $1.lastPathComponent }
    }

    @Test func theCorpusIsThere() {
        #expect(Self.corpus.count >= 12)
    }

    @Test(arguments: corpus)
    func openingReadingAndWritingADamagedFileNeverCrashes(file: URL) throws {
        let bytes = try [UInt8](Data(contentsOf: file))
        #expect(bytes.withUnsafeBufferPointer { fuzzOneInput($0.baseAddress!, $0.count) } == 0)
    }
}

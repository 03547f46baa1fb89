import Foundation
import Testing
import CLarderSupport
@_spi(Inspection) @testable import Larder

/// Index segments: full, misplaced, overlapping, or reached into by a record.
extension DamagedFileTests {
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
    /// With `overTheSegment` the header runs over the whole segment, up to "trigger" after it.
    /// With `removed`, "big" is removed before the close: a dead entry, counted out by its true
    /// length; `resealed` false leaves its header checksum as it was.
    private func makeFileWithAnEntryRunningIntoItsIndex(_ path: String, dataSealed: Bool = false, clean: Bool = true,
                                                        removed: Bool = false, resealed: Bool = true,
                                                        overTheSegment: Bool = false) throws {
        do {
            let cache = try Cache(at: path, capacity: 8 << 20)
            let loadLimit = HashTable.loadLimit(slotCount: HashTable.minimumSlotCount)
            for key in 0..<(loadLimit - 1) { try cache.set([UInt8(key & 0xFF)], forKey: "k\(key)") }
            try cache.set(pattern(1, count: 5_000), forKey: "big")
            // The index doubles: its new segment goes at the head, right after "big".
            try cache.set([1], forKey: "trigger")
            if removed { #expect(try cache.removeValue(forKey: "big")) }
            try cache.close()
        }
        try rewrite(path) { bytes in
            let island = newestMeta(bytes).activeIndex.offset
            let offset = recordOffset(ofKey: "big", in: bytes)
            #expect(island > offset, "the segment lies after the entry")
            let end = overTheSegment ? recordOffset(ofKey: "trigger", in: bytes) : island + 64
            #expect(end > island)
            let stored = end - offset - RecordHeader.size - 3
            store(UInt64(stored) | UInt64(stored) << 32, at: offset + RecordHeader.Field.storedLength, in: &bytes)
            if dataSealed {
                let seed = newestMeta(bytes).checksumSeed
                let checksum = bytes.withUnsafeBytes { lrd_crc32c(seed, $0.baseAddress! + offset + RecordHeader.size, 3 + stored) }
                for byte in 0..<4 {
                    bytes[offset + RecordHeader.Field.dataChecksum + byte] = UInt8(truncatingIfNeeded: checksum >> (8 * byte))
                }
            }
            if resealed { resealHeader(at: offset, in: &bytes) }
            if !clean { bytes[2 * 4096 + 12] &= ~1 }
        }
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

    /// The tail of a clean file meets a dead entry whose header runs into the index segment
    /// after it, its checksum resealed or not: the walk over dead entries stops at the segment,
    /// and the general step takes the entry as damage. A walk not bounded by the segment passed
    /// the entry and the whole segment behind it, unseen.
    @Test(arguments: [true, false], [false, true])
    func theTailTakesADeadEntryRunningIntoAnIndexSegmentAsDamage(resealed: Bool, overTheSegment: Bool) throws {
        let directory = TemporaryDirectory()
        let path = directory.path()
        try makeFileWithAnEntryRunningIntoItsIndex(path, removed: true, resealed: resealed, overTheSegment: overTheSegment)
        let keys = HashTable.loadLimit(slotCount: HashTable.minimumSlotCount) - 1
        let value = 16 << 10
        do {
            let cache = try Cache(path: path)
            #expect(!cache.wasRecovered)
            cache.store.reusesDeadRoom = false
            // Four times the capacity of 8 MiB: the tail passes every record written before.
            for round in 0..<2_000 { try cache.set(pattern(round, count: value), forKey: "new-\(round % 100)") }
            // Found once, as damage: not passed, over the segment or into it.
            #expect(cache.stats.recoveries == 1)
            #expect(try cache.bytes(forKey: "big") == nil)
            for key in 0..<keys {
                let kept = try cache.bytes(forKey: "k\(key)")
                #expect(kept == nil || kept == [UInt8(key & 0xFF)], "k\(key)")
            }
            for round in 1_900..<2_000 {
                #expect(try cache.bytes(forKey: "new-\(round % 100)") == pattern(round, count: value), "new-\(round % 100)")
            }
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
}

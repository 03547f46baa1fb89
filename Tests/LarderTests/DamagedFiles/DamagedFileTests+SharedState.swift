import Foundation
import Testing
@_spi(Inspection) @testable import Larder

/// The shared state of a clean file: totals, counts and sequence numbers that cannot be right.
extension DamagedFileTests {
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
}

/// The change ring (FORMAT.md 3.3) is never trusted: garbage in its slots and a change number
/// that jumps about cost a watcher a look at the cache, never a wrong key or a wait for ever.
extension DamagedFileTests {
    @Test(.failsIfItHangs) func aDamagedChangeRingIsIgnoredByWatches() async throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(path: directory.path())
        try cache.set([1], forKey: "k")
        let store = cache.entry.store
        let ring = store.changes
        let watched = WatchingTests.collect(try cache.changes(forKey: "k")) { $0.last == CacheChange(.removed, key: Data("k".utf8)) }
        let everything = WatchingTests.collect(try cache.changes()) { $0.contains { $0.kind == .resynced } }
        // Slots of every kind, 0 and 7 among them, half with stamps that match a change number,
        // then the number moved far ahead.
        let size = ChangeRing.slotSize
        let slots = store.file.mutableBytes(at: store.pageSize + ChangeRing.slotsPageOffset, count: ChangeRing.slotCount * size)
        for slot in 0..<ChangeRing.slotCount {
            slots.storeBytes(of: UInt64(slot) &* 0x9E37_79B9_7F4A_7C15 | UInt64(slot & 7), toByteOffset: slot * size, as: UInt64.self)
            let stamp = slot % 2 == 0 ? UInt64(slot + 1) : UInt64(slot) &* 0x2545_F491_4F6C_DD1D
            slots.storeBytes(of: stamp, toByteOffset: slot * size + 8, as: UInt64.self)
        }
        let state = store.file.mutableBytes(at: 2 * store.pageSize, count: store.pageSize)
        state.storeBytes(of: ring.nextNumber &+ 100_000, toByteOffset: ChangeRing.numberField, as: UInt64.self)
        ring.wakeWatchers()
        guard case .lost = ring.changes(since: 0) else {
            Issue.record("a stretch of garbage was read as changes")
            return
        }
        #expect(await everything.value.last == CacheChange(.resynced, key: nil))
        _ = try cache.removeValue(forKey: "k")
        #expect(await watched.value.last == CacheChange(.removed, key: Data("k".utf8)))
    }
}

import Foundation
import Testing
@testable @_spi(Inspection) import Larder

/// Below its capacity a cache reuses the room of replaced and removed values instead of growing
/// its file to the capacity first, and evicts nothing to do so.
@Suite("Reusing room below the capacity")
struct SpaceReuseTests {
    /// Stores a value of `length` bytes for `key` (named `k<key>`), in the cache and in `model`.
    private static func set(_ key: Int, version: Int, length: Int, in cache: Cache,
                            model: inout [Int: [UInt8]]) throws {
        let value = versionedBytes(key: key, version: version, length: length)
        try cache.set(value, forKey: "k\(key)")
        model[key] = value
    }

    /// The cache must hold `model` exactly, having evicted nothing; a copy taken while it is
    /// open, which is what a crash leaves, must recover to `model` exactly too; and once closed,
    /// its file must be sound to the verifier (span from tail to head, counts, index, checksums).
    private func expectKeptExactly(_ model: [Int: [UInt8]], in cache: Cache, _ directory: TemporaryDirectory) throws {
        #expect(cache.stats.evictions == 0)
        #expect(cache.count == model.count)
        for (key, value) in model { #expect(try cache.bytes(forKey: "k\(key)") == value, "k\(key)") }
        let copy = directory.path("crashed.larder")
        try FileManager.default.copyItem(atPath: directory.path(), toPath: copy)
        try cache.close()
        let report = try FileInspector(path: directory.path()).verify().report
        #expect(report.isSound, "\(report.problems.prefix(3).map(\.description))")
        #expect(report.notes.isEmpty, "\(report.notes)")
        let recovered = try Cache(path: copy)
        #expect(recovered.wasRecovered)
        #expect(recovered.count == model.count)
        for (key, value) in model {
            #expect(try recovered.bytes(forKey: "k\(key)") == value, "k\(key) after recovery")
        }
    }

    @Test("small values replaced over and over keep the file near twice its live data, far below the capacity")
    func replacedValuesReuseTheirRoom() throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(at: directory.path(), capacity: 256 << 20)
        // Values of one size: written where the ring puts them, not over the ones they replace.
        cache.store.rewritesInPlace = false
        // Records below the free list's minimum: the ring itself reuses their room.
        let keys = 800, length = 2 << 10
        var model: [Int: [UInt8]] = [:]
        var generator = SplitMix(seed: 11)
        // 32,000 values of 2 KiB: 64 MB written, 1.6 MB live at any time.
        for step in 0..<32_000 {
            let key = step < keys ? step : Int(generator.next() % UInt64(keys))
            try Self.set(key, version: step, length: length, in: cache, model: &model)
        }
        #expect(cache.fileBytes <= 8 << 20, "the file grew to \(cache.fileBytes) bytes")
        #expect(cache.stats.relocations > 0)
        #expect(cache.store.recordsPlacedInDeadRoom == 0)
        try expectKeptExactly(model, in: cache, directory)
    }

    /// More than `placed` records went into the room of dead ones, nothing was relocated, and the
    /// file stayed within 3 MiB: nothing grows for the updates.
    private func expectUpdatesTookDeadRoom(in cache: Cache, placedMoreThan placed: Int) {
        #expect(cache.store.recordsPlacedInDeadRoom > placed)
        #expect(cache.stats.relocations == 0)
        #expect(cache.fileBytes <= 3 << 20, "the file grew to \(cache.fileBytes) bytes")
    }

    @Test("a large value takes the room of one replaced or removed before it: the file stays at its live data")
    func largeValuesTakeTheRoomOfDeadOnes() throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(at: directory.path(), capacity: 256 << 20)
        let keys = 100
        var model: [Int: [UInt8]] = [:]
        var generator = SplitMix(seed: 12)
        // 4,000 values of 16 KiB, a few bytes more or less (keys and values of several lengths,
        // records of two sizes), some removed and stored again: 64 MB written, 1.6 MB live at
        // any time.
        for step in 0..<4_000 {
            let key = step < keys ? step : Int(generator.next() % UInt64(keys))
            if step >= keys && generator.next() % 10 == 0 {
                try cache.removeValue(forKey: "k\(key)")
                model[key] = nil
                continue
            }
            let length = (16 << 10) - Int(generator.next() % 16)
            try Self.set(key, version: step, length: length, in: cache, model: &model)
        }
        // The fill's 1.6 MB and at most one growth step more.
        expectUpdatesTookDeadRoom(in: cache, placedMoreThan: 3_000)
        try expectKeptExactly(model, in: cache, directory)
    }

    @Test("a large value stored compressed takes the room of one replaced before it")
    func compressedValuesTakeTheRoomOfDeadOnes() throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(path: directory.path(), options: .init(capacity: .megabytes(256), compression: .lz4))
        var model: [Int: [UInt8]] = [:]
        var generator = SplitMix(seed: 13)
        // Values of 48 KiB that compress to about 12 KiB (a quarter of random bytes, four times):
        // LZ4's bound for them is 48 KiB, far more than the room a compressed one leaves.
        for step in 0..<2_000 {
            let key = step < 100 ? step : Int(generator.next() % 100)
            let quarter = pattern(key &* 1_000_003 &+ step, count: 12 << 10)
            let value = quarter + quarter + quarter + quarter
            try cache.set(value, forKey: "k\(key)")
            model[key] = value
        }
        #expect(cache.stats.compressionRatio > 3)
        // The fill's 1.2 MB and a growth step.
        expectUpdatesTookDeadRoom(in: cache, placedMoreThan: 1_500)
        try expectKeptExactly(model, in: cache, directory)
    }

    @Test("room that a reader is lending is not reused while the pin lasts")
    func pinnedRoomIsNotReused() throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(at: directory.path(), capacity: 64 << 20)
        var model: [Int: [UInt8]] = [:]
        for key in 0..<4 {
            try Self.set(key, version: 0, length: 16 << 10, in: cache, model: &model)
        }
        // Pin key 0's record, as a reader of another process lending it would, then replace
        // key 0 (its record dies, its room is listed) and the others again and again.
        let found = try #require(Array("k0".utf8).withUnsafeBytes { cache.store.lookup($0, hash: KeyHash($0)) })
        let pinnedRange = found.offset..<(found.offset + found.header.totalSize)
        let lent = Array(cache.store.file.bytes(at: pinnedRange.lowerBound, count: pinnedRange.count))
        let pin = try #require(cache.store.readers.pin(start: pinnedRange.lowerBound, end: pinnedRange.upperBound))
        for step in 1...40 {
            try Self.set(step % 4, version: step, length: 16 << 10, in: cache, model: &model)
        }
        // Its key and value; the header's state byte says dead now.
        #expect(Array(cache.store.file.bytes(at: pinnedRange.lowerBound, count: pinnedRange.count))
                    .dropFirst(RecordHeader.size) == lent.dropFirst(RecordHeader.size))
        #expect(cache.store.recordsPlacedInDeadRoom > 0)
        cache.store.readers.unpin(pin)
        try expectKeptExactly(model, in: cache, directory)
    }

    @Test("values of every size, replaced and removed at random, are all kept until the file is full", arguments: [UInt64(21), 22, 23, 24, 25, 26])
    func mixedSizesLoseNothingBelowTheCapacity(seed: UInt64) throws {
        let directory = TemporaryDirectory()
        let capacity = 512 << 20
        let cache = try Cache(at: directory.path(), capacity: capacity)
        var model: [Int: [UInt8]] = [:]
        var generator = SplitMix(seed: seed)
        for step in 0..<3_000 {
            let key = Int(generator.next() % 300)
            if generator.next() % 5 == 0 {
                try cache.removeValue(forKey: "k\(key)")
                model[key] = nil
                continue
            }
            // From 8 bytes to 64 KiB, each power of two as likely as the next: records far
            // larger than the room left in front of the head meet the tail.
            let length = 8 << Int(generator.next() % 14) + Int(generator.next() % 4096)
            try Self.set(key, version: step, length: length, in: cache, model: &model)
            // Records placed in the room of dead ones (the free list) and at the head must all
            // stay where the tail's walk reaches them.
            try checkRingWalk(cache.store)
        }
        // About 27 MB written, a tenth of it live at the end.
        #expect(cache.fileBytes <= 12 << 20, "the file grew to \(cache.fileBytes) bytes")
        try expectKeptExactly(model, in: cache, directory)
    }

    @Test("a file that has come round below its capacity grows again when its live data does")
    func aWrappedFileGrowsForMoreLiveData() throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(at: directory.path(), capacity: 256 << 20)
        let length = 20 << 10
        var model: [Int: [UInt8]] = [:]
        var generator = SplitMix(seed: 31)
        for step in 0..<1_000 {
            let key = Int(generator.next() % 50)
            try Self.set(key, version: step, length: length, in: cache, model: &model)
        }
        let churned = cache.fileBytes
        // 20 MB written, 1 MB live: the head has come round.
        #expect(churned <= 4 << 20, "the file grew to \(churned) bytes")
        // Then 20 MB of new keys, many times what the file held.
        for key in 50..<1_050 {
            try Self.set(key, version: 0, length: length, in: cache, model: &model)
        }
        #expect(cache.fileBytes > churned + (19 << 20))
        try expectKeptExactly(model, in: cache, directory)
    }

    @Test("a large live record that the head has no room to move is kept where it is, not evicted")
    func aRecordThatCannotMoveIsPassedWhereItLies() throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(at: directory.path(), capacity: 256 << 20)
        // Values of one size: written where the ring puts them, not over the ones they replace.
        cache.store.rewritesInPlace = false
        var model: [Int: [UInt8]] = [:]
        try Self.set(1_000, version: 0, length: 200 << 10, in: cache, model: &model)
        var generator = SplitMix(seed: 5)
        // Values of 3 KiB on 20 keys (too small for the free list: the ring reuses their room):
        // the room kept in front of the head for them is less than 200 KiB when the tail first
        // comes to the large record.
        for step in 0..<8_000 {
            let key = Int(generator.next() % 20)
            try Self.set(key, version: step, length: 3 << 10, in: cache, model: &model)
        }
        // Passed once; after that the room kept in front of the head takes it.
        #expect(cache.store.recordsPassedInPlace == 1)
        #expect(cache.store.lapsGivenUp == 0)
        #expect(cache.fileBytes <= 4 << 20, "the file grew to \(cache.fileBytes) bytes")
        try expectKeptExactly(model, in: cache, directory)
    }

    @Test("a put that meets more live records than it may move or pass gives up the lap and grows the file")
    func aMostlyLiveLapIsGivenUp() throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(at: directory.path(), capacity: 1 << 30)
        var model: [Int: [UInt8]] = [:]
        // 60,000 small values side by side, then values of 8 KiB replaced on 20 keys (with the
        // free list off): a lap of the ring meets the small ones as a run of live records
        // longer than the puts that meet it may relocate, and then pass where they lie.
        for key in 0..<60_000 {
            try Self.set(key, version: 0, length: 40, in: cache, model: &model)
        }
        var generator = SplitMix(seed: 5)
        // Large records that find no listed room take the ring's way, as here.
        cache.store.reusesDeadRoom = false
        for step in 0..<3_000 {
            let key = 60_000 + Int(generator.next() % 20)
            try Self.set(key, version: step, length: 8 << 10, in: cache, model: &model)
        }
        #expect(cache.store.recordsPassedInPlace > 0)
        #expect(cache.store.lapsGivenUp > 0)
        try expectKeptExactly(model, in: cache, directory)
    }

    @Test("recovery that relocates records while placing its index stays in one bracket of the index epoch")
    func recoveryBracketsItsOwnRelocations() throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(at: directory.path(), capacity: 64 << 20)
        // Values of one size: written where the ring puts them, not over the ones they replace.
        cache.store.rewritesInPlace = false
        var model: [Int: [UInt8]] = [:]
        var generator = SplitMix(seed: 41)
        // 350 keys: more than recovery puts in a table of the initial 512 slots, so it places a
        // new segment at the head, and makes room for it at the tail. Values of 3 KiB, which the
        // ring reuses the room of (not the free list), so that the tail has records to move.
        for step in 0..<2_700 {
            let key = step < 350 ? step : Int(generator.next() % 350)
            try Self.set(key, version: step, length: 3 << 10, in: cache, model: &model)
        }
        let copy = directory.path("crashed.larder")
        try FileManager.default.copyItem(atPath: directory.path(), toPath: copy)
        let relocationsBefore = cache.stats.relocations
        let epochBefore = try Self.indexEpoch(ofFileAt: copy)
        let recovered = try Cache(path: copy)
        #expect(recovered.wasRecovered)
        #expect(recovered.stats.relocations > relocationsBefore, "recovery relocated nothing")
        // Made odd once when recovery began, moved on once when it ended: readers of other
        // processes looked again on every miss in between.
        #expect(recovered.store.state.indexEpoch == epochBefore + 2)
        for (key, value) in model { #expect(try recovered.bytes(forKey: "k\(key)") == value, "k\(key)") }
    }

    /// A rebuild is one long bracket of the index epoch: on a large file it moves the epoch on
    /// to a new odd value every 64 MiB it scans, so that readers of other processes do not take
    /// it for a writer that died in its bracket (which leaves one odd value standing).
    @Test func aLongRebuildShowsItIsAlive() throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(at: directory.path(), capacity: 256 << 20)
        for key in 0..<800 { try cache.set([UInt8](repeating: UInt8(key % 251), count: 100_000), forKey: "k\(key)") }
        let copy = directory.path("crashed.larder")
        try FileManager.default.copyItem(atPath: directory.path(), toPath: copy)
        let epochBefore = try Self.indexEpoch(ofFileAt: copy)
        let recovered = try Cache(path: copy)
        #expect(recovered.wasRecovered)
        // 80 MB of records: one move on the way, besides the rebuild's own begin and end.
        #expect(recovered.store.state.indexEpoch == epochBefore + 4)
        #expect(try recovered.bytes(forKey: "k789") == [UInt8](repeating: UInt8(789 % 251), count: 100_000))
    }

    /// The index epoch as the file holds it (shared-state page, 4 KiB pages).
    private static func indexEpoch(ofFileAt path: String) throws -> UInt64 {
        let handle = try #require(FileHandle(forReadingAtPath: path))
        defer { try? handle.close() }
        try handle.seek(toOffset: UInt64(FileLayout.statePage * 4096 + SharedState.Field.indexEpoch))
        let bytes = try #require(try handle.read(upToCount: 8))
        return bytes.withUnsafeBytes { UInt64(littleEndian: $0.loadUnaligned(as: UInt64.self)) }
    }
}

import Foundation
import Testing
@_spi(Inspection) @testable import Larder

/// Values that say which key and which version they belong to, so that after a crash any value
/// read can be checked to be a complete version once written for its key.
enum VersionedValue {
    /// Keys from here on get values of 12 KiB and more (records the free list takes).
    static let largeKeys = 100_000

    static func make(key: Int, version: Int) -> [UInt8] {
        var bytes = withUnsafeBytes(of: UInt32(key).littleEndian, Array.init)
        bytes += withUnsafeBytes(of: UInt32(version).littleEndian, Array.init)
        let length = (key &* 31 &+ version &* 17) % 3000 + (key >= largeKeys ? 12_000 : 0)
        return bytes + pattern(key &* 7919 &+ version, count: length)
    }

    /// The keys among `keys` whose value in `cache` (under "k" and the key) is not exactly what
    /// `make` produced for `version`: lost, damaged or of another version.
    static func keys(_ keys: Range<Int>, notAt version: Int, in cache: Cache) throws -> [Int] {
        try keys.filter { key in try cache.bytes(forKey: "k\(key)").flatMap { check($0, key: key) } != version }
    }

    /// The version a value claims, when the value is exactly what `make` produced for `key`.
    static func check(_ bytes: [UInt8], key: Int) -> Int? {
        guard bytes.count >= 8 else { return nil }
        let storedKey = bytes[0..<4].withUnsafeBytes { Int(UInt32(littleEndian: $0.loadUnaligned(as: UInt32.self))) }
        let version = bytes[4..<8].withUnsafeBytes { Int(UInt32(littleEndian: $0.loadUnaligned(as: UInt32.self))) }
        return storedKey == key && bytes == make(key: key, version: version) ? version : nil
    }
}

@Suite("Recovery")
struct RecoveryTests {
    /// A copy taken while the cache is open is what a crash leaves: the clean flag is not set.
    private func snapshotOfOpenCache(_ directory: TemporaryDirectory, _ fill: (Cache) throws -> Void) throws -> String {
        let cache = try Cache(at: directory.path(), capacity: 4 << 20)
        try fill(cache)
        let copy = directory.path("crashed.larder")
        try FileManager.default.copyItem(atPath: directory.path(), toPath: copy)
        try cache.close()
        return copy
    }

    /// Five hundred keys at version 1, every fifth at version 2 since, every seventh removed.
    private func writeVersionsAndRemovals(_ cache: Cache) throws {
        for key in 0..<500 { try cache.set(VersionedValue.make(key: key, version: 1), forKey: "k\(key)") }
        for key in 0..<500 where key % 5 == 0 { try cache.set(VersionedValue.make(key: key, version: 2), forKey: "k\(key)") }
        for key in 0..<500 where key % 7 == 0 { try cache.removeValue(forKey: "k\(key)") }
    }

    @Test func aFileLeftOpenIsRebuiltWithEveryEntry() throws {
        let directory = TemporaryDirectory()
        let copy = try snapshotOfOpenCache(directory, writeVersionsAndRemovals)
        let cache = try Cache(path: copy)
        #expect(cache.wasRecovered)
        #expect(cache.stats.recoveries == 1)
        var present = 0
        for key in 0..<500 {
            let value = try cache.bytes(forKey: "k\(key)")
            if key % 7 == 0 {
                #expect(value == nil, "removed k\(key) came back")
                continue
            }
            present += 1
            #expect(value.flatMap { VersionedValue.check($0, key: key) } == (key % 5 == 0 ? 2 : 1), "k\(key)")
        }
        #expect(cache.count == present)
        // And it is a working cache afterwards.
        try cache.set([1], forKey: "after")
        #expect(try cache.bytes(forKey: "after") == [1])
    }

    /// A file left by a crash, opened read-only, is read as it is: each value is the one last
    /// written for its key, or none; and the reader changes none of its bytes (recovery is left
    /// to the next read-write open).
    @Test func aFileLeftOpenReadReadOnlyGivesValidValuesAndStaysAsItWas() throws {
        let directory = TemporaryDirectory()
        let copy = try snapshotOfOpenCache(directory, writeVersionsAndRemovals)
        let before = try Data(contentsOf: URL(fileURLWithPath: copy))
        let found = try readEverythingReadOnly(path: copy, keys: (0..<500).map { "k\($0)" })
        for key in 0..<500 {
            guard let value = found["k\(key)"] else { continue }
            #expect(key % 7 != 0, "removed k\(key) came back")
            #expect(VersionedValue.check(value, key: key) == (key % 5 == 0 ? 2 : 1), "k\(key)")
        }
        #expect(!found.isEmpty)
        let after = try Data(contentsOf: URL(fileURLWithPath: copy))
        #expect(after == before, "\(firstChange(from: before, to: after))")
        // Still a crash's file: the next read-write open recovers it.
        #expect(try Cache(path: copy).wasRecovered)
    }

    /// Opening a clean file waits for no disk; the first write makes the file unclean, durably,
    /// before it changes anything.
    @Test func anOpenThatOnlyReadsLeavesTheFileCleanAndTheFirstWriteDoesNot() throws {
        let directory = TemporaryDirectory()
        let first = try Cache(at: directory.path(), capacity: 4 << 20)
        try first.set([1, 2, 3], forKey: "kept")
        try first.close()

        let cache = try Cache(path: directory.path())
        #expect(try cache.bytes(forKey: "kept") == [1, 2, 3])
        let afterReads = directory.path("after-reads.larder")
        try FileManager.default.copyItem(atPath: directory.path(), toPath: afterReads)
        try cache.set([4], forKey: "new")
        let afterWrite = directory.path("after-write.larder")
        try FileManager.default.copyItem(atPath: directory.path(), toPath: afterWrite)
        try cache.close()

        let readOnlyCrash = try Cache(path: afterReads)
        #expect(!readOnlyCrash.wasRecovered)
        #expect(try readOnlyCrash.bytes(forKey: "kept") == [1, 2, 3])
        let writerCrash = try Cache(path: afterWrite)
        #expect(writerCrash.wasRecovered)
        #expect(try writerCrash.bytes(forKey: "kept") == [1, 2, 3])
        #expect(try writerCrash.bytes(forKey: "new") == [4])
    }

    @Test func aRebuiltCacheThatHadWrappedKeepsOnlyValidValues() throws {
        let directory = TemporaryDirectory()
        let copy = try snapshotOfOpenCache(directory) { cache in
            for round in 0..<4 {
                for key in 0..<1_000 { try cache.set(VersionedValue.make(key: key, version: round), forKey: "k\(key)") }
            }
        }
        let cache = try Cache(path: copy)
        #expect(cache.wasRecovered)
        var found = 0
        for key in 0..<1_000 {
            guard let value = try cache.bytes(forKey: "k\(key)") else { continue }
            found += 1
            #expect(VersionedValue.check(value, key: key) == 3, "k\(key) is not its newest version")
        }
        #expect(found == cache.count)
        #expect(found > 0)
        for key in 0..<2_000 { try cache.set(VersionedValue.make(key: key, version: 9), forKey: "k\(key)") }
        #expect(try cache.bytes(forKey: "k1999").flatMap { VersionedValue.check($0, key: 1999) } == 9)
    }

    @Test func aRevivedOlderRecordLosesToTheNewerOne() throws {
        // Power loss can leave an overwritten record without its "dead" mark; the sequence
        // number must decide.
        let directory = TemporaryDirectory()
        let old = VersionedValue.make(key: 1, version: 1)
        let copy = try snapshotOfOpenCache(directory) { cache in
            try cache.set(old, forKey: "k1")
            try cache.set(VersionedValue.make(key: 1, version: 2), forKey: "k1")
        }
        var bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: copy)))
        let valueStart = try #require(bytes.firstRange(of: old)).lowerBound
        let recordStart = valueStart - RecordHeader.size - 2
        #expect(bytes[recordStart + RecordHeader.Field.state] == 0)
        bytes[recordStart + RecordHeader.Field.state] = 1
        try Data(bytes).write(to: URL(fileURLWithPath: copy))
        let cache = try Cache(path: copy)
        #expect(try cache.bytes(forKey: "k1").flatMap { VersionedValue.check($0, key: 1) } == 2)
        #expect(cache.count == 1)
    }

    /// A power cut that kept the record pages a grown ring had written, but not the meta copy
    /// naming the grown size, leaves live records past the ring's end, numbered above anything
    /// recovery then hands out. Taken back in when the ring grows again, they won over later,
    /// synced writes of their keys at the next recovery: recovery now cuts them off.
    @Test func recordsLeftPastTheRingsEndDoNotComeBack() throws {
        let directory = TemporaryDirectory()
        let path = directory.path()
        let cache = try Cache(at: path, capacity: 16 << 20)
        try cache.set(VersionedValue.make(key: 1, version: 1), forKey: "k1")
        try cache.sync()
        let small = cache.fileBytes
        let metaBefore = try [UInt8](Data(contentsOf: URL(fileURLWithPath: path)).prefix(2 * 4096))
        var filler = 0
        while cache.fileBytes == small {
            try cache.set(pattern(filler, count: 1_000), forKey: "f\(filler)")
            filler += 1
        }
        let grown = cache.fileBytes
        // Well past the end of the small ring, and past what one more growth's first records take.
        for _ in 0..<300 {
            try cache.set(pattern(filler, count: 1_000), forKey: "f\(filler)")
            filler += 1
        }
        #expect(cache.fileBytes == grown)
        let newer = VersionedValue.make(key: 1, version: 2)
        try cache.set(newer, forKey: "k1")
        // The crash: this copy of the open file, with the meta copies of before the growth.
        let crashed = directory.path("crashed.larder")
        var bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: path)))
        try cache.close()
        bytes.replaceSubrange(0..<metaBefore.count, with: metaBefore)
        let newerAt = try #require(bytes.firstRange(of: newer)).lowerBound
        #expect(newerAt > small)
        try Data(bytes).write(to: URL(fileURLWithPath: crashed))

        // Recovered: the small ring, without version 2. Version 3 is written and synced, and the
        // ring grows again, its head short of where version 2 lies.
        var reopened = try Cache(path: crashed)
        #expect(reopened.wasRecovered)
        // (Version 1 is there, or lost: the copy holds its record marked dead by the overwrite.)
        let recovered = try reopened.bytes(forKey: "k1")
        #expect(recovered == nil || recovered.flatMap { VersionedValue.check($0, key: 1) } == 1)
        try reopened.set(VersionedValue.make(key: 1, version: 3), forKey: "k1")
        try reopened.sync()
        var more = 0
        while reopened.fileBytes == small {
            try reopened.set(pattern(more, count: 1_000), forKey: "g\(more)")
            more += 1
        }
        #expect(reopened.fileBytes >= newerAt)
        // Another crash, and recovery over the grown ring: version 3 stands.
        let again = directory.path("again.larder")
        try FileManager.default.copyItem(atPath: crashed, toPath: again)
        try reopened.close()
        reopened = try Cache(path: again)
        #expect(reopened.wasRecovered)
        #expect(try reopened.bytes(forKey: "k1").flatMap { VersionedValue.check($0, key: 1) } == 3)
    }

    @Test func aTruncatedFileOpensWithWhatSurvived() throws {
        let directory = TemporaryDirectory()
        let copy = try snapshotOfOpenCache(directory) { cache in
            for key in 0..<2_000 { try cache.set(VersionedValue.make(key: key, version: 1), forKey: "k\(key)") }
        }
        let size = try FileManager.default.attributesOfItem(atPath: copy)[.size] as! Int
        // Cut just after a record that lies within one page, past the middle of the file: every
        // record that ends before the cut survives, that one in the last, partial page too (the
        // file is extended to the page's end, not cut back to the page before).
        let records = try FileInspector(path: copy).verify().walk.entries
        let inTornPage = try #require(records.first { $0.isLive && $0.offset >= size / 2
            && ($0.offset + $0.recordSize + 8) / 4096 == $0.offset / 4096 })
        let cut = inTornPage.offset + inTornPage.recordSize + 8
        let wholeBelowTheCut = Set(records.filter { $0.isLive && $0.offset + $0.recordSize <= cut }
            .map { String(decoding: $0.key, as: UTF8.self) })
        #expect(wholeBelowTheCut.count > 500)
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: copy))
        try handle.truncate(atOffset: UInt64(cut))
        try handle.close()
        let cache = try Cache(path: copy)
        var found = 0
        var lost: [String] = []
        for key in 0..<2_000 {
            guard let value = try cache.bytes(forKey: "k\(key)") else {
                if wholeBelowTheCut.contains("k\(key)") { lost.append("k\(key)") }
                continue
            }
            found += 1
            #expect(VersionedValue.check(value, key: key) == 1)
        }
        #expect(found == cache.count)
        #expect(lost.isEmpty, "\(lost.count) records that lay wholly below the cut were lost, \(lost.prefix(5)) among them")
        try cache.set([1], forKey: "after")
        #expect(try cache.bytes(forKey: "after") == [1])
    }

    @Test(.waitsOnItsOwnThreads) func aProcessKilledWhileWritingLeavesAFileThatReopensWithValidValues() async throws {
        let directory = TemporaryDirectory()
        let path = directory.path()
        for round in 0..<3 {
            await #expect(processExitsWith: .signal(SIGKILL)) { [path = path as String, round = round as Int] in
                let cache = try Cache(path: path, options: .init(capacity: .megabytes(2)))
                let deadline = Date(timeIntervalSinceNow: 0.05 + 0.05 * Double(round))
                var version = round * 1_000_000
                while true {
                    for key in 0..<200 {
                        version += 1
                        try cache.set(VersionedValue.make(key: key, version: version), forKey: "k\(key)")
                        if key % 50 == 0 { _ = try cache.removeValue(forKey: "k\(key + 1)") }
                    }
                    if Date() > deadline { kill(getpid(), SIGKILL) }
                }
            }
            let cache = try Cache(path: path)
            #expect(cache.wasRecovered)
            var found = 0
            for key in 0..<200 {
                guard let value = try cache.bytes(forKey: "k\(key)") else { continue }
                found += 1
                #expect(VersionedValue.check(value, key: key) != nil, "k\(key) holds bytes never written for it")
            }
            #expect(found == cache.count)
            try cache.close()
        }
    }
}

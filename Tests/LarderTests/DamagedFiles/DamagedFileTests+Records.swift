import Foundation
import Testing
@_spi(Inspection) @testable import Larder

/// Records and values: hostile headers, damaged values, a ring cut short.
extension DamagedFileTests {
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

    /// A hostile file with a valid header every 48 bytes, each claiming data to the ring's end
    /// and failing its data checksum, is recovered (and verified) in time linear in the ring:
    /// each failed check read the rest of the ring, some 6 minutes for this 32 MiB one before
    /// recovery bounded the bytes its failed checks may read (FORMAT.md 7.4, step 3). The bound
    /// is a minute of this thread's CPU time, which other work on the machine does not stretch.
    @Test func headersClaimingTheRestOfTheRingDoNotMakeRecoveryQuadratic() throws {
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
        let cpuBefore = threadCPUSeconds()
        #expect(!(try FileInspector(path: path).verify().report.isSound))
        let cache = try Cache(path: path)
        let cpu = threadCPUSeconds() - cpuBefore
        #expect(cpu < 60, "verifying and recovering took \(cpu) s of CPU time")
        #expect(cache.wasRecovered)
        #expect(cache.count == 0)
        try cache.set([1], forKey: "after")
        #expect(try cache.bytes(forKey: "after") == [1])
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
}

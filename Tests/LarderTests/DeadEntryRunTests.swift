import CLarderSupport
import Testing
@testable import Larder

/// `lrd_dead_entries`, the tail's walk over a run of dead entries in one C call, makes the
/// format's checks again, apart from `RecordHeader.read`, which the tail's general step uses. It
/// must pass only what that step passes as a dead entry: a header it took that the step refuses
/// would move the tail by a length no one checked, past live entries still in the index.
@Suite("Dead entry run")
struct DeadEntryRunTests {
    private let seed: UInt32 = 0x8765_4321

    /// Records laid out as FORMAT.md 4 says in 16-byte-aligned memory, zeroed after them.
    private final class Ring {
        static let size = 4096
        let bytes = UnsafeMutableRawPointer.allocate(byteCount: size, alignment: 16)
        init() { bytes.initializeMemory(as: UInt8.self, repeating: 0, count: Self.size) }
        deinit { bytes.deallocate() }
    }

    /// Writes an entry at `offset` (dead unless `live`) and returns its total size.
    @discardableResult
    private func entry(in ring: Ring, at offset: Int = 0, keyLength: Int = 18, storedLength: Int = 100,
                       rawLength: Int? = nil, flags: UInt8 = 0, sequence: UInt64 = 5, live: Bool = false) -> Int {
        let raw = ring.bytes + offset
        var word0 = RecordHeader.Word0.compose(kind: .entry, flags: flags, keyLength: keyLength)
        if live { word0 |= RecordHeader.Word0.liveBit }
        raw.storeBytes(of: word0.littleEndian, toByteOffset: 0, as: UInt64.self)
        let lengths = UInt64(storedLength) | UInt64(rawLength ?? storedLength) << 32
        raw.storeBytes(of: lengths.littleEndian, toByteOffset: 8, as: UInt64.self)
        raw.storeBytes(of: sequence.littleEndian, toByteOffset: 16, as: UInt64.self)
        raw.storeBytes(of: UInt64(1_700_000_000_000).littleEndian, toByteOffset: 32, as: UInt64.self)
        for index in 0..<(keyLength + storedLength) {
            raw.storeBytes(of: UInt8(truncatingIfNeeded: index &* 37 &+ 11), toByteOffset: RecordHeader.size + index, as: UInt8.self)
        }
        let data = lrd_crc32c(seed, raw + RecordHeader.size, keyLength + storedLength)
        raw.storeBytes(of: data.littleEndian, toByteOffset: 40, as: UInt32.self)
        raw.storeBytes(of: lrd_crc32c_record_header(seed, raw).littleEndian, toByteOffset: 44, as: UInt32.self)
        return RecordHeader.entrySize(keyLength: keyLength, storedLength: storedLength)
    }

    private func walk(_ ring: Ring, room: Int = Ring.size, budget: Int = .max) -> Int {
        Int(lrd_dead_entries(ring.bytes, UInt64(room), UInt64(budget), seed))
    }

    /// What the general step passes as a dead entry at offset 0 within `room`, with a state of 0
    /// (another state that is not live is dead to it too; the walk leaves those to it).
    private func stepPasses(_ ring: Ring, room: Int = Ring.size) -> Int? {
        guard let header = RecordHeader.read(from: ring.bytes, at: 0, limit: room, seed: seed),
              header.kind == .entry, !header.isLive, ring.bytes.load(fromByteOffset: 4, as: UInt8.self) == 0
        else { return nil }
        return header.totalSize
    }

    /// Both ways the walk can take, as a CPU with CRC instructions and one without: one way at a
    /// time, since the switch is global.
    @Test(.serialized, arguments: [true, false])
    func passesTheDeadEntriesTheGeneralStepPasses(hardware: Bool) {
        let usesHardware = lrd_dead_entries_allow_hardware(hardware ? 1 : 0) != 0
        defer { lrd_dead_entries_allow_hardware(1) }
        #expect(hardware || !usesHardware)
        // Plain and compressed headers, every bit of each flipped on its own: the access byte is
        // the one change both take.
        let headers: [(storedLength: Int, rawLength: Int, flags: UInt8)] = [(100, 100, 0), (100, 3000, 1), (100, 100, 4)]
        for (storedLength, rawLength, flags) in headers {
            for byte in 0..<RecordHeader.size {
                for bit in 0..<8 {
                    let ring = Ring()
                    entry(in: ring, storedLength: storedLength, rawLength: rawLength, flags: flags)
                    ring.bytes.storeBytes(of: ring.bytes.load(fromByteOffset: byte, as: UInt8.self) ^ (1 << bit),
                                          toByteOffset: byte, as: UInt8.self)
                    #expect(walk(ring) == stepPasses(ring) ?? 0, "flags \(flags), byte \(byte), bit \(bit)")
                }
            }
        }
        // Lengths the checksum covers but the checks refuse, and a compressed length just within them.
        let cases: [(keyLength: Int, storedLength: Int, rawLength: Int, flags: UInt8, sequence: UInt64)] = [
            (0, 100, 100, 0, 5), (18, 100, 101, 0, 5), (18, 100, 100 * 255 + 17, 1, 5), (18, 100, 100 * 255 + 16, 1, 5),
            (18, 0, 10, 1, 5), (18, 100, 0, 1, 5), (18, 100, 100, 0, 1 << 62), (18, 100, 100, 0, (1 << 62) - 1),
        ]
        for (keyLength, storedLength, rawLength, flags, sequence) in cases {
            let ring = Ring()
            entry(in: ring, keyLength: keyLength, storedLength: storedLength, rawLength: rawLength, flags: flags,
                  sequence: sequence)
            #expect(walk(ring) == stepPasses(ring) ?? 0, "\(keyLength), \(storedLength), \(rawLength), \(sequence)")
        }
        // A live entry, and records that end past the room.
        let live = Ring()
        entry(in: live, live: true)
        #expect(walk(live) == 0)
        let whole = entry(in: Ring())
        for room in [whole - 16, whole - 1, whole, RecordHeader.size - 1, RecordHeader.size, 0] {
            let ring = Ring()
            entry(in: ring)
            #expect(walk(ring, room: room) == stepPasses(ring, room: room) ?? 0, "room \(room)")
        }
    }

    @Test func passesARunUntilSomethingElseOrItsBudget() {
        let ring = Ring()
        let first = entry(in: ring)
        let second = entry(in: ring, at: first, keyLength: 5, storedLength: 700)
        let third = entry(in: ring, at: first + second, keyLength: 30, storedLength: 20)
        entry(in: ring, at: first + second + third, live: true)
        #expect(walk(ring) == first + second + third)
        // Before each record, the bytes passed so far are below the budget.
        #expect(walk(ring, budget: 1) == first)
        #expect(walk(ring, budget: first) == first)
        #expect(walk(ring, budget: first + 1) == first + second)
        #expect(walk(ring, budget: 0) == 0)
        // Each record within the room.
        #expect(walk(ring, room: first + second + third - 1) == first + second)
        // A record whose header fails its checksum ends the run where it starts.
        ring.bytes.storeBytes(of: UInt8(9), toByteOffset: first + 8, as: UInt8.self)
        #expect(walk(ring) == first)
        #expect(lrd_dead_entries(ring.bytes + 8, 4000, .max, seed) == 0)
    }

    /// The walk's room ends at the first index segment after the tail, or at the tail itself
    /// when a segment holds it: it never passes a record into a segment, whatever its header says.
    @Test func theWalksRoomEndsAtAnIndexSegment() throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(at: directory.path(), capacity: 8 << 20)
        var meta = cache.store.meta
        let ringStart = cache.store.ringStart
        let slots = HashTable.minimumSlotCount
        let length = IndexSegment.byteCount(slotCount: slots, pageSize: meta.pageSize)
        let first = 64 << 10, second = 256 << 10, limit = 1 << 20
        #expect(first + length < second)

        meta.activeIndex = IndexLocation(offset: first, slotCount: slots)
        meta.drainingIndex = .none
        let one = RingLayout(meta: meta, ringStart: ringStart)
        #expect(one.islandFreeEnd(from: ringStart, limit: limit) == first, "before the segment")
        #expect(one.islandFreeEnd(from: first - 16, limit: limit) == first, "just before the segment")
        #expect(one.islandFreeEnd(from: first, limit: limit) == first, "at the segment's start")
        #expect(one.islandFreeEnd(from: first + 16, limit: limit) == first + 16, "in the segment")
        #expect(one.islandFreeEnd(from: first + length - 16, limit: limit) == first + length - 16, "at its last bytes")
        #expect(one.islandFreeEnd(from: first + length, limit: limit) == limit, "at the segment's end")
        #expect(one.islandFreeEnd(from: second, limit: limit) == limit, "after the segment")
        #expect(one.islandFreeEnd(from: ringStart, limit: first - 32) == first - 32, "a limit before the segment")
        #expect(one.islandFreeEnd(from: ringStart, limit: first) == first, "a limit at its start")

        // Two segments, either one active: the first after the offset bounds the room.
        for (active, draining) in [(first, second), (second, first)] {
            meta.activeIndex = IndexLocation(offset: active, slotCount: slots)
            meta.drainingIndex = IndexLocation(offset: draining, slotCount: slots)
            let two = RingLayout(meta: meta, ringStart: ringStart)
            #expect(two.islandFreeEnd(from: ringStart, limit: limit) == first, "before both, active \(active)")
            #expect(two.islandFreeEnd(from: first + 16, limit: limit) == first + 16, "in the first, active \(active)")
            #expect(two.islandFreeEnd(from: first + length, limit: limit) == second, "between, active \(active)")
            #expect(two.islandFreeEnd(from: second + 16, limit: limit) == second + 16, "in the second, active \(active)")
            #expect(two.islandFreeEnd(from: second + length, limit: limit) == limit, "after both, active \(active)")
            #expect(two.islandFreeEnd(from: first + length, limit: second - 16) == second - 16,
                    "a limit before the second, active \(active)")
            #expect(two.islandFreeEnd(from: ringStart, limit: first - 16) == first - 16,
                    "a limit before both, active \(active)")
        }
    }

    /// Below the capacity, the dead entries that replaced and removed values leave are passed
    /// by the walk, not only by the general step, and every value stays as last written.
    @Test func replacedAndRemovedValuesArePassedInRuns() throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(at: directory.path(), capacity: 256 << 20)
        // Written where the ring puts them, so that replaced values leave dead entries behind.
        cache.store.rewritesInPlace = false
        let keys = 200
        var model: [Int: [UInt8]] = [:]
        var generator = SplitMix(seed: 11)
        for step in 0..<6_000 {
            let key = step < keys ? step : Int(generator.next() % UInt64(keys))
            if step >= keys, step % 5 == 0 {
                #expect(try cache.removeValue(forKey: "k\(key)") == (model[key] != nil), "k\(key)")
                model[key] = nil
            } else {
                let value = versionedBytes(key: key, version: step, length: 300)
                try cache.set(value, forKey: "k\(key)")
                model[key] = value
            }
        }
        #expect(cache.fileBytes < 256 << 20)
        #expect(cache.stats.recoveries == 0)
        #expect(cache.stats.evictions == 0)
        #expect(cache.store.bytesPassedInRuns > 0)
        for key in 0..<keys { #expect(try cache.bytes(forKey: "k\(key)") == model[key], "k\(key)") }
    }

    /// A dead entry near the tail whose length was made to cover the live entry after it, its
    /// checksum left as it was: reclaiming must find the ring damaged there and rebuild it, not
    /// pass the live entry by that length and lose it. Below the capacity reclaiming ahead of need
    /// meets it (runs of dead entries); at the capacity, making room for a put (one at a time).
    @Test(arguments: [false, true]) func aDeadEntryWhoseLengthWasChangedIsRebuiltNotPassed(atCapacity: Bool) throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(at: directory.path(), capacity: atCapacity ? 256 << 10 : 256 << 20)
        // Written where the ring puts them, so that replaced values leave dead entries behind.
        cache.store.rewritesInPlace = false
        let keys = 200
        var model: [Int: [UInt8]] = [:]
        func set(_ key: Int, _ version: Int) throws {
            let value = versionedBytes(key: key, version: version, length: 300)
            try cache.set(value, forKey: "k\(key)")
            model[key] = value
        }
        var generator = SplitMix(seed: 5)
        for step in 0..<4_000 { try set(step < keys ? step : Int(generator.next() % UInt64(keys)), step) }
        #expect(cache.stats.recoveries == 0)
        #expect(atCapacity == (cache.fileBytes == 256 << 10))

        // The first dead entry from the tail followed by a live one.
        let store = cache.store
        let seed = store.meta.checksumSeed
        var offset = store.state.tail
        var damaged: (offset: Int, next: RecordHeader)?
        while offset != store.state.head {
            if let padding = RecordHeader.paddingLength(in: store.file, at: offset, limit: store.ringEnd) {
                offset = offset + padding == store.ringEnd ? store.ringStart : offset + padding
                continue
            }
            guard let header = RecordHeader.read(from: store.file, at: offset, limit: store.ringEnd, seed: seed) else { break }
            let next = offset + header.totalSize
            if header.kind == .entry, !header.isLive,
               let following = RecordHeader.read(from: store.file, at: next, limit: store.ringEnd, seed: seed),
               following.kind == .entry, following.isLive {
                damaged = (offset, following)
                break
            }
            offset = next
        }
        let (deadOffset, live) = try #require(damaged)
        try store.withWriterLock { () throws(LarderError) in
            // Stored and raw length alike: the checksum is the one check left to fail.
            let lengths = store.file.mutableBytes(at: deadOffset + RecordHeader.Field.storedLength, count: 8)
            let grown = UInt64(live.totalSize) | UInt64(live.totalSize) << 32
            lengths.storeBytes(of: (UInt64(littleEndian: lengths.load(as: UInt64.self)) &+ grown).littleEndian, as: UInt64.self)
        }

        for step in 4_000..<8_000 { try set(Int(generator.next() % UInt64(keys)), step) }
        #expect(cache.stats.recoveries == 1)
        // At the capacity entries are evicted for room: those kept hold their last values.
        #expect(atCapacity || cache.stats.evictions == 0)
        for (key, value) in model {
            let kept = try cache.bytes(forKey: "k\(key)")
            #expect(kept == value || atCapacity && kept == nil, "k\(key)")
        }
    }
}

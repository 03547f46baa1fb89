import CLarderSupport

/// The kinds of record in the ring. Every byte of the ring belongs to one record.
enum RecordKind: UInt8 {
    /// A key and its value.
    case entry = 1
    /// Space skipped over (before a wrap, an index segment, or left by recovery).
    case padding = 2
    /// A hash-table segment: the index lives in the ring, in its own pages.
    case indexSegment = 3
}

/// The 48-byte header in front of every entry and index segment (padding uses a 16-byte form).
///
/// ```
/// off size field
///  0   2   magic 0x524C ("LR")
///  2   1   kind (RecordKind)
///  3   1   flags: bit 0 = value is LZ4-compressed, bit 1 = written inside the span
///  4   1   state: 1 = live, 0 = dead            (changes in place; not checksummed)
///  5   1   access: bit 0 = read since last pass (changes in place; not checksummed)
///  6   2   key length
///  8   4   stored length (value bytes as stored)
/// 12   4   raw length (value bytes after decompression)
/// 16   8   sequence number
/// 24   8   expiry, ms since the Unix epoch, 0 = never
/// 32   8   time stored, ms since the Unix epoch
/// 40   4   CRC32C of key ++ stored value
/// 44   4   CRC32C of bytes 0-3 ++ 6-43
/// ```
struct RecordHeader: Equatable {
    var kind: RecordKind
    var flags: UInt8
    var isLive: Bool
    /// Bits 1-7 of the access byte: how far reads have pushed a sliding entry's expiry
    /// (FORMAT.md 4.8). As read with the header; kept when the record is relocated. (Beside the
    /// other bytes: the header stays 68 bytes, as every copy of it on the read path costs.)
    var slideCount: UInt8 = 0
    var keyLength: Int
    var storedLength: Int
    var rawLength: Int
    var sequence: UInt64
    var expiresAt: UInt64
    var storedAt: UInt64
    var dataChecksum: UInt32

    static let size = 48
    static let magic: UInt16 = 0x524C
    /// Record and meta sequence numbers a reader accepts are below this (FORMAT.md 4.1).
    static let sequenceLimit: UInt64 = 1 << 62
    /// A writer counts on only from numbers at most half the limit, checked when it opens a file:
    /// no count from there reaches the limit (2^61 writes at ten million a second take 7,000
    /// years), so what it writes stays valid whatever a hostile file held.
    static let trustedSequenceLimit: UInt64 = 1 << 61
    /// The highest next sequence a writer counts on from after taking the writer lock, checked
    /// each time. No one hold of the lock writes 2^32 records, so every number it takes stays
    /// below the limit, whatever the shared state held.
    static let heldSequenceLimit: UInt64 = sequenceLimit - (1 << 32)
    /// Recovery keeps only records numbered below half of that again, so that the numbers it
    /// leaves, its own index segment's among them, are trusted at the next open: a hostile record
    /// near the trusted limit cannot make every open recover.
    static let recoverableSequenceLimit: UInt64 = 1 << 60
    static let paddingSize = 16
    static let compressedFlag: UInt8 = 1
    /// The entry was written inside the span (in the room of a dead entry, or over the entry it
    /// replaced), not at the head: recovery does not put the head after it.
    static let placedInSpanFlag: UInt8 = 2
    /// The entry's expiry slides: reads push it back (FORMAT.md 4.8).
    static let slidingFlag: UInt8 = 4
    /// The largest slide count (7 bits).
    static let maximumSlideCount: UInt8 = 127

    enum Field {
        static let magic = 0, kind = 2, flags = 3, state = 4, access = 5, keyLength = 6
        static let storedLength = 8, rawLength = 12, sequence = 16, expiresAt = 24, storedAt = 32
        static let dataChecksum = 40, headerChecksum = 44
        /// Padding: total length at 8, its bitwise complement at 12.
        static let paddingLength = 8, paddingCheck = 12
    }

    /// Total bytes an entry occupies in the ring, header and alignment included. Lengths of a
    /// header (below 2^16 and 2^32) cannot overflow the sum, so it runs unchecked on the read
    /// path; a writer refuses a value of 2^32 bytes or more whatever size this gives it
    /// (`placement`).
    @inline(__always)
    static func entrySize(keyLength: Int, storedLength: Int) -> Int {
        (size &+ keyLength &+ storedLength &+ FileLayout.recordAlignment &- 1) & ~(FileLayout.recordAlignment &- 1)
    }

    var isCompressed: Bool { flags & RecordHeader.compressedFlag != 0 }
    var wasPlacedInSpan: Bool { flags & RecordHeader.placedInSpanFlag != 0 }
    var isSliding: Bool { flags & RecordHeader.slidingFlag != 0 }

    /// A sliding entry's window in milliseconds (its expiry less its time stored), and the step
    /// by which a read pushes its expiry: an eighth of the window, at least 1 ms.
    var slideWindow: UInt64 { expiresAt > storedAt ? expiresAt - storedAt : 1 }
    var slideStep: UInt64 { max(1, (slideWindow + 7) / 8) }

    /// When the entry expires now: its expiry, pushed back by reads for a sliding entry.
    var effectiveExpiry: UInt64 { expiry(slideCount: slideCount) }

    /// When the entry expires with `slideCount` pushes: its expiry, pushed for a sliding entry.
    func expiry(slideCount: UInt8) -> UInt64 {
        isSliding ? expiresAt &+ UInt64(slideCount) &* slideStep : expiresAt
    }

    /// The slide count a read at `now` sets, so that the entry lives at least a window from now.
    func slideCount(forReadAt now: UInt64) -> UInt8 {
        let wanted = now &+ slideWindow
        guard wanted > expiresAt else { return 0 }
        return UInt8(min(UInt64(RecordHeader.maximumSlideCount), (wanted - expiresAt + slideStep - 1) / slideStep))
    }

    /// Total bytes of the record in the ring.
    @inline(__always)
    var totalSize: Int {
        kind == .entry ? RecordHeader.entrySize(keyLength: keyLength, storedLength: storedLength)
                       : RecordHeader.size &+ storedLength
    }

    /// Whether the entry is expired at `now`: by its own expiry, or by the file's maximum age in
    /// milliseconds (0: none; FORMAT.md 4.5). An entry stored after `now` (another clock) is not
    /// over age.
    func isExpired(now: UInt64, maximumAge: UInt64) -> Bool {
        (expiresAt != 0 && expiry(slideCount: slideCount) <= now) || isOverAge(now: now, maximumAge: maximumAge)
    }

    /// Whether the entry was stored `maximumAge` milliseconds or more before `now` (0: no limit).
    func isOverAge(now: UInt64, maximumAge: UInt64) -> Bool {
        RecordHeader.isOverAge(storedAt: storedAt, now: now, maximumAge: maximumAge)
    }

    @inline(__always)
    static func isOverAge(storedAt: UInt64, now: UInt64, maximumAge: UInt64) -> Bool {
        maximumAge != 0 && storedAt <= now && now - storedAt >= maximumAge
    }

    /// `isExpired(now:maximumAge:)` now: the one check every read and write makes. An entry
    /// without an expiry, in a file without a maximum age, is answered by one predictable
    /// compare (as the expiry alone was), and the clock is read only for the others.
    @inline(__always)
    func isExpiredNow(maximumAge: UInt64) -> Bool {
        guard expiresAt | maximumAge != 0 else { return false }
        return isExpired(now: SystemCall.nowMilliseconds(), maximumAge: maximumAge)
    }

    /// `isExpiredNow` for an entry that does not slide, from its expiry and time stored alone.
    @inline(__always)
    static func isExpiredNow(expiresAt: UInt64, storedAt: UInt64, maximumAge: UInt64) -> Bool {
        guard expiresAt | maximumAge != 0 else { return false }
        let now = SystemCall.nowMilliseconds()
        return (expiresAt != 0 && expiresAt <= now) || isOverAge(storedAt: storedAt, now: now, maximumAge: maximumAge)
    }

    /// The first millisecond at which `isExpiredNow(expiresAt:storedAt:maximumAge:)` holds, for
    /// an entry that does not slide; `.max` for never.
    static func deadline(expiresAt: UInt64, storedAt: UInt64, maximumAge: UInt64) -> UInt64 {
        var deadline = expiresAt != 0 ? expiresAt : .max
        // Past the end of the clock's range, the age is never reached.
        let (aged, overflow) = storedAt.addingReportingOverflow(maximumAge)
        if maximumAge != 0 && !overflow { deadline = min(deadline, aged) }
        return deadline
    }

    /// The first 8 bytes as one little-endian word. They change only as a whole (atomically), so
    /// that a reader's compare-and-swap of the access bit lands only where the word is exactly the
    /// one it read: in that record, or (rarely) in one of the same kind, flags and key length that
    /// took its place, which then gets a second chance it did not earn.
    enum Word0 {
        static let stateShift: UInt64 = 32
        static let accessShift: UInt64 = 40
        static let liveBit: UInt64 = 1 << 32
        static let visitedBit: UInt64 = 1 << 40
        /// Bits 41-47: the slide count of a sliding entry.
        static let slideShift: UInt64 = 41
        /// The sliding flag (4.2) in the flags byte.
        static let slidingBit = UInt64(RecordHeader.slidingFlag) << 24

        static func compose(kind: RecordKind, flags: UInt8, keyLength: Int) -> UInt64 {
            UInt64(RecordHeader.magic) | UInt64(kind.rawValue) << 16 | UInt64(flags) << 24 | UInt64(keyLength) << 48
        }

        /// Whether `word` (as stored, little-endian) starts a live entry with a key of
        /// `keyLength` bytes: magic, kind, state and key length, whatever the flags and access bit.
        @inline(__always)
        static func isLiveEntry(_ word: UInt64, keyLength: Int) -> Bool {
            let significant: UInt64 = 0xFFFF_00FF_00FF_FFFF
            let expected = compose(kind: .entry, flags: 0, keyLength: keyLength) | liveBit
            return UInt64(littleEndian: word) & significant == expected
        }
    }

    /// Writes the header at `offset`; the key and value must already be in place after it when
    /// `dataChecksum` was computed from them. The state byte becomes live last, with release
    /// ordering: a reader that sees it live sees the whole record. A `visited` record has its
    /// access bit set in that same store (a record written over the entry it replaces).
    ///
    /// The range is checked once; the header checksum is computed from the values in registers
    /// (the same bytes `headerChecksum` reads back), not from the file.
    func write(to file: MappedFile, at offset: Int, seed: UInt32, visited: Bool = false) {
        precondition(offset & 7 == 0, "bad record offset")
        let record = file.mutableBytes(at: offset, count: RecordHeader.size).baseAddress!
        let word0 = Word0.compose(kind: kind, flags: flags, keyLength: keyLength)
        let lengths = UInt64(UInt32(storedLength)) | UInt64(UInt32(rawLength)) << 32
        // The header as it will lie in the file, checksummed by the function readers use. Both
        // checksums start from the file's random seed (meta page), so bytes that a user stores
        // as a value can never pass for a record header of this file during a recovery scan.
        var image = (word0.littleEndian, lengths.littleEndian, sequence.littleEndian, expiresAt.littleEndian,
                     storedAt.littleEndian, UInt64(dataChecksum).littleEndian)
        let checksum = withUnsafeBytes(of: &image) { lrd_crc32c_record_header(seed, $0.baseAddress) }
        lrd_store_release_u64(record, word0.littleEndian)
        // The key and value (stored before) become visible no later than any field below: a
        // reader that sees this header's fields (ordered by its acquire fence in `read`) sees
        // this record's key, not the bytes of the record it replaces.
        lrd_fence_release()
        record.storeBytes(of: lengths.littleEndian, toByteOffset: Field.storedLength, as: UInt64.self)
        record.storeBytes(of: sequence.littleEndian, toByteOffset: Field.sequence, as: UInt64.self)
        record.storeBytes(of: expiresAt.littleEndian, toByteOffset: Field.expiresAt, as: UInt64.self)
        record.storeBytes(of: storedAt.littleEndian, toByteOffset: Field.storedAt, as: UInt64.self)
        record.storeBytes(of: (UInt64(dataChecksum) | UInt64(checksum) << 32).littleEndian,
                          toByteOffset: Field.dataChecksum, as: UInt64.self)
        // A plain store, not a read-modify-write: until the record is live no one else writes
        // its first word (a reader's access-bit swap expects the live bit).
        if isLive {
            lrd_store_release_u64(record, (word0 | Word0.liveBit | (visited ? Word0.visitedBit : 0)
                                           | UInt64(slideCount) << Word0.slideShift).littleEndian)
        }
    }

    /// Reads and checks the header at `offset`: magic, kind, header checksum, and that the record
    /// lies inside `[offset, limit)`. Returns nil for anything else, whatever the bytes are.
    ///
    /// Each of the six words is loaded once, the first with acquiring order, and checked and
    /// decoded from what was loaded: a writer of another process reusing the place meanwhile can
    /// make the checksum fail, never yield a header mixing two records.
    static func read(from file: MappedFile, at offset: Int, limit: Int, seed: UInt32) -> RecordHeader? {
        // `[0, file.size)` is mapped at `viewBase`; `read` checks the record against the limit.
        read(from: file.viewBase, at: offset, limit: min(limit, file.size), seed: seed)
    }

    /// `read(from:at:limit:seed:)` for a caller that knows `[0, limit)` of the map at `base` to
    /// be file (a `ReadView`).
    ///
    /// - Parameters:
    ///   - liveEntryKeyLength: when given, anything but a live entry with a key of this length is
    ///     turned down on its first word, before the checksum is computed (a lookup).
    ///   - valueFollows: with `liveEntryKeyLength`, the caller reads the value of such an entry
    ///     next (a get, not a put looking for the entry it replaces).
    @inline(__always)
    static func read(from base: UnsafeRawPointer, at offset: Int, limit: Int, seed: UInt32,
                     liveEntryKeyLength: Int? = nil, valueFollows: Bool = false) -> RecordHeader? {
        guard offset & (FileLayout.recordAlignment - 1) == 0, offset >= 0, offset <= limit &- size else { return nil }
        let bytes = base + offset
        // Each word is loaded from the map once (atomically, so never twice), and checked and
        // decoded from its register: a writer of another process reusing the place meanwhile can
        // make the checksum fail, never yield a header mixing two records.
        let word = UInt64(littleEndian: lrd_load_acquire_u64(bytes))
        let lengthsWord = lrd_load_relaxed_u64(bytes + 8)
        let kind: RecordKind
        if let liveEntryKeyLength {
            // Magic, kind, state and key length, in one compare.
            guard Word0.isLiveEntry(word.littleEndian, keyLength: liveEntryKeyLength) else { return nil }
            kind = .entry
            if valueFollows {
                // The key and value lines start loading now, not one by one as the checks reach
                // them (a 1 KiB value is 16 more lines). The stored length is not checked yet, but
                // a hint never faults and covers at most 2 KiB.
                let storedLength = UInt64(UInt32(truncatingIfNeeded: UInt64(littleEndian: lengthsWord)))
                lrd_prefetch_following(bytes, UInt64(size + liveEntryKeyLength) &+ storedLength)
            }
        } else {
            guard UInt16(truncatingIfNeeded: word) == magic,
                  let found = RecordKind(rawValue: UInt8(truncatingIfNeeded: word >> 16)), found != .padding else { return nil }
            kind = found
        }
        var image = (word.littleEndian, lengthsWord, lrd_load_relaxed_u64(bytes + 16),
                     lrd_load_relaxed_u64(bytes + 24), lrd_load_relaxed_u64(bytes + 32), lrd_load_relaxed_u64(bytes + 40))
        // Key and value bytes read after this are at least as new as the fields just loaded
        // (the writer's release fence in `write`): never those of a record this one replaced.
        lrd_fence_acquire()
        let lengths = UInt64(littleEndian: image.1)
        let checksums = UInt64(littleEndian: image.5)
        guard UInt32(truncatingIfNeeded: checksums >> 32)
                == withUnsafeBytes(of: &image, { lrd_crc32c_record_header(seed, $0.baseAddress) }) else { return nil }
        let header = RecordHeader(
            kind: kind,
            flags: UInt8(truncatingIfNeeded: word >> 24),
            isLive: UInt8(truncatingIfNeeded: word >> Word0.stateShift) == 1,
            slideCount: UInt8(truncatingIfNeeded: word >> Word0.slideShift) & RecordHeader.maximumSlideCount,
            keyLength: Int(word >> 48),
            storedLength: Int(UInt32(truncatingIfNeeded: lengths)),
            rawLength: Int(lengths >> 32),
            sequence: UInt64(littleEndian: image.2),
            expiresAt: UInt64(littleEndian: image.3),
            storedAt: UInt64(littleEndian: image.4),
            dataChecksum: UInt32(truncatingIfNeeded: checksums))
        guard offset &+ header.totalSize <= limit, header.sequence < sequenceLimit else { return nil }
        if kind == .entry {
            guard header.keyLength > 0 else { return nil }
            guard header.isCompressed ? LZ4Codec.mayDecompress(header.storedLength, to: header.rawLength)
                                      : header.rawLength == header.storedLength else { return nil }
        }
        return header
    }

    /// The header of a live entry as the words it was checked in, decoded where used (`header`):
    /// a writer's lookup hands it on, and the delete that reads a few fields pays for no others.
    struct EntryWords {
        /// The first word as a number (magic, kind, flags, state, access, key length).
        let first: UInt64
        /// The stored length (low half) and the raw length (high half).
        let lengths: UInt64
        let sequence: UInt64
        let expiresAt: UInt64
        let storedAt: UInt64
        let dataChecksum: UInt32

        var header: RecordHeader {
            @inline(__always) get {
                RecordHeader(kind: .entry, flags: UInt8(truncatingIfNeeded: first >> 24), isLive: true,
                             slideCount: UInt8(truncatingIfNeeded: first >> Word0.slideShift) & maximumSlideCount,
                             keyLength: Int(first >> 48), storedLength: Int(UInt32(truncatingIfNeeded: lengths)),
                             rawLength: Int(lengths >> 32), sequence: sequence, expiresAt: expiresAt, storedAt: storedAt,
                             dataChecksum: dataChecksum)
            }
        }
    }

    /// Writer: the header of the live entry at `record` (`offset` in the map), whose first word,
    /// `word` as stored, passed `Word0.isLiveEntry` for `keyLength`; nil unless the rest of `read`'s
    /// checks hold and its number is at least `firstValidSequence`.
    ///
    /// For the holder of the writer lock: no other writer changes the header meanwhile, and
    /// readers change only its access byte, which the checksum leaves out. So the checksum is
    /// computed from `word`, the two words loaded here and the rest of the header in the map
    /// (`lrd_record_header_holds`), and the fields are loaded after it.
    /// `offset` is at most `limit - size`.
    @inline(__always)
    static func liveEntry(at record: UnsafeRawPointer, offset: Int, word: UInt64, keyLength: Int, limit: Int,
                          seed: UInt32, firstValidSequence: UInt64, valueFollows: Bool) -> EntryWords? {
        func load(_ field: Int) -> UInt64 { UInt64(littleEndian: lrd_load_relaxed_u64(record + field)) }
        let lengths = load(Field.storedLength)
        let storedLength = Int(UInt32(truncatingIfNeeded: lengths)), rawLength = Int(lengths >> 32)
        if valueFollows { lrd_prefetch_following(record, UInt64(size &+ keyLength &+ storedLength)) }
        let checksums = load(Field.dataChecksum)
        guard lrd_record_header_holds(seed, record, word, lengths.littleEndian, checksums.littleEndian) != 0 else { return nil }
        let first = UInt64(littleEndian: word)
        let sequence = load(Field.sequence)
        guard keyLength > 0, offset &+ entrySize(keyLength: keyLength, storedLength: storedLength) <= limit,
              sequence < sequenceLimit, sequence >= firstValidSequence,
              first & (UInt64(compressedFlag) << 24) != 0
                ? LZ4Codec.mayDecompress(storedLength, to: rawLength) : rawLength == storedLength
        else { return nil }
        return EntryWords(first: first, lengths: lengths, sequence: sequence, expiresAt: load(Field.expiresAt),
                          storedAt: load(Field.storedAt), dataChecksum: UInt32(truncatingIfNeeded: checksums))
    }

    /// Whether the key and value bytes of the entry at `offset` match `dataChecksum`.
    func dataIsIntact(in file: MappedFile, at offset: Int, seed: UInt32) -> Bool {
        dataIsIntact(record: file.bytes(at: offset, count: totalSize).baseAddress!, seed: seed)
    }

    /// `dataIsIntact(in:at:seed:)` for a record whose bytes the caller knows to be in the file.
    func dataIsIntact(record: UnsafeRawPointer, seed: UInt32) -> Bool {
        lrd_crc32c(seed, record + RecordHeader.size, keyLength + storedLength) == dataChecksum
    }

    // MARK: - Padding

    /// The longest single padding record; longer stretches get several.
    static let maximumPaddingLength = 1 << 30

    /// Marks `[offset, offset + length)` as skipped space. `length` is a positive multiple of 16.
    static func writePadding(to file: MappedFile, at offset: Int, length: Int) {
        precondition(length >= paddingSize && length % FileLayout.recordAlignment == 0)
        var start = offset
        var remaining = length
        while remaining > maximumPaddingLength {
            writePaddingRecord(to: file, at: start, length: maximumPaddingLength)
            start += maximumPaddingLength
            remaining -= maximumPaddingLength
        }
        writePaddingRecord(to: file, at: start, length: remaining)
    }

    private static func writePaddingRecord(to file: MappedFile, at offset: Int, length: Int) {
        file.storeRelease64(Word0.compose(kind: .padding, flags: 0, keyLength: 0).littleEndian, at: offset)
        file.store(UInt32(length), at: offset + Field.paddingLength)
        file.store(~UInt32(length), at: offset + Field.paddingCheck)
    }

    /// The length of the padding record at `offset`, or nil when there is none that fits `limit`.
    static func paddingLength(in file: MappedFile, at offset: Int, limit: Int) -> Int? {
        guard file.contains(offset, paddingSize), offset + paddingSize <= limit,
              file.load(UInt16.self, at: offset + Field.magic) == magic,
              file.load(UInt8.self, at: offset + Field.kind) == RecordKind.padding.rawValue else { return nil }
        let length = file.load(UInt32.self, at: offset + Field.paddingLength)
        guard file.load(UInt32.self, at: offset + Field.paddingCheck) == ~length else { return nil }
        let total = Int(length)
        guard total >= paddingSize, total % FileLayout.recordAlignment == 0, offset + total <= limit else { return nil }
        return total
    }

    // MARK: - In-place state changes

    /// Marks the record at `offset` dead. Must happen before its bytes may be reused: readers of
    /// other processes check the state after copying a value.
    static func markDead(in file: MappedFile, at offset: Int) {
        file.fetchAnd64((~(UInt64(0xFF) << Word0.stateShift)).littleEndian, at: offset)
    }

    /// `markDead(in:at:)` for a record whose header the caller knows to lie in the map.
    @inline(__always)
    static func markDead(_ record: UnsafeMutableRawPointer) {
        _ = lrd_fetch_and_u64(record, (~(UInt64(0xFF) << Word0.stateShift)).littleEndian)
    }

    /// Sets the record at `offset` live again. Only for a writer that marked it dead to write
    /// over it (FORMAT.md 6.9), found it lent, and wrote nothing into it: its bytes are as they
    /// were, so readers that saw it dead meanwhile look again and find it as it was.
    static func markLiveAgain(in file: MappedFile, at offset: Int) {
        file.fetchOr64(Word0.liveBit.littleEndian, at: offset)
    }

    static func wasVisited(in file: MappedFile, at offset: Int) -> Bool {
        UInt64(littleEndian: file.loadAcquire64(at: offset)) & Word0.visitedBit != 0
    }

    /// Called by readers, without the writer lock, with the record's place in the map: sets the
    /// access bit with one compare-and-swap of the first word, expecting it exactly as `header`
    /// describes it. If the record was replaced in the meantime the swap fails and nothing is
    /// written. A record already marked is left alone: no locked instruction, and no store that
    /// would dirty its page (read-mostly workloads would otherwise write pages back to disk).
    /// Called by readers of a sliding entry at `now`, without the writer lock, before their final
    /// re-check: sets the access bit and pushes the slide count up to what the read asks for, with
    /// compare-and-swaps of the first word that expect it live, of `header`'s kind, flags and key
    /// length (FORMAT.md 4.8). Gives up when the word is another's, or already pushed as far.
    static func pushExpiry(_ record: UnsafeMutableRawPointer, header: RecordHeader, now: UInt64) {
        let wanted = UInt64(header.slideCount(forReadAt: now))
        let identity = Word0.compose(kind: header.kind, flags: header.flags, keyLength: header.keyLength) | Word0.liveBit
        let identityMask: UInt64 = 0xFFFF_00FF_FFFF_FFFF
        var word = UInt64(littleEndian: lrd_load_acquire_u64(record))
        while word & identityMask == identity {
            let count = word >> Word0.slideShift & UInt64(maximumSlideCount)
            if count >= wanted && word & Word0.visitedBit != 0 { return }
            let pushed = word & ~(UInt64(0xFF) << Word0.accessShift) | Word0.visitedBit | max(count, wanted) << Word0.slideShift
            if lrd_cas_u64(record, word.littleEndian, pushed.littleEndian) != 0 { return }
            word = UInt64(littleEndian: lrd_load_acquire_u64(record))
        }
    }

    /// Writer: marks the sliding entry at `record`, found expired as `header` describes it, dead
    /// if it is still expired at `now` by the slide count its first word holds, in one
    /// compare-and-swap: a reader's push that lands first keeps it live (FORMAT.md 4.8).
    /// Returns whether the entry is dead (it was marked, or found so).
    static func markDeadIfStillExpired(_ record: UnsafeMutableRawPointer, header: RecordHeader, now: UInt64,
                                       maximumAge: UInt64) -> Bool {
        var word = UInt64(littleEndian: lrd_load_acquire_u64(record))
        while word & Word0.liveBit != 0 {
            var current = header
            current.slideCount = UInt8(truncatingIfNeeded: word >> Word0.slideShift) & maximumSlideCount
            guard current.isExpired(now: now, maximumAge: maximumAge) else { return false }
            let dead = word & ~(UInt64(0xFF) << Word0.stateShift)
            if lrd_cas_u64(record, word.littleEndian, dead.littleEndian) != 0 { return true }
            word = UInt64(littleEndian: lrd_load_acquire_u64(record))
        }
        return true
    }

    @inline(__always)
    static func markVisited(_ record: UnsafeMutableRawPointer, header: RecordHeader) {
        markVisited(record, kind: header.kind, flags: header.flags, keyLength: header.keyLength)
    }

    /// `markVisited` for a live entry checked with `flags` and `keyLength`.
    @inline(__always)
    static func markVisited(_ record: UnsafeMutableRawPointer, kind: RecordKind = .entry, flags: UInt8, keyLength: Int) {
        if UInt64(littleEndian: lrd_load_acquire_u64(record)) & Word0.visitedBit != 0 { return }
        let expected = Word0.compose(kind: kind, flags: flags, keyLength: keyLength) | Word0.liveBit
        _ = lrd_cas_u64(record, expected.littleEndian, (expected | Word0.visitedBit).littleEndian)
    }
}

extension RecordHeader.EntryWords {
    /// The words of `header`, that of a live entry.
    init(_ header: RecordHeader) {
        assert(header.kind == .entry && header.isLive)
        typealias Word0 = RecordHeader.Word0
        self.init(first: Word0.compose(kind: .entry, flags: header.flags, keyLength: header.keyLength) | Word0.liveBit
                      | UInt64(header.slideCount) << Word0.slideShift,
                  lengths: UInt64(UInt32(truncatingIfNeeded: header.storedLength))
                      | UInt64(UInt32(truncatingIfNeeded: header.rawLength)) << 32,
                  sequence: header.sequence, expiresAt: header.expiresAt, storedAt: header.storedAt,
                  dataChecksum: header.dataChecksum)
    }
}

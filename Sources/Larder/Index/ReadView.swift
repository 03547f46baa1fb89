import CLarderSupport

/// What a lookup reads the file through, taken once per operation: where the map is, how much of
/// it is file, the index tables, and the meta-page change counter they belong to. Every field is a
/// plain value, so a lookup keeps them in registers instead of reloading them from the store.
///
/// A view can be out of date, never unsafe: the mapping never moves and the file never shrinks
/// while it is open, so `[0, limit)` stays readable for the store's life, and the tables are index
/// segments in the map (or the store's empty placeholder). Every offset read from the file is
/// checked against `limit` before it is followed. Whether what was read through a view still
/// holds is the reader's check at the end (`isUnchanged`): its `changeCounter` must
/// still be the file's.
struct ReadView {
    let base: UnsafeMutableRawPointer
    /// Bytes of the file this view reads: `[0, limit)` is mapped and backed by the file.
    let limit: Int
    let ringStart: Int
    let seed: UInt32
    let firstValidSequence: UInt64
    let active: HashTable
    let draining: HashTable?
    /// The shared state's change counter when the meta copy behind this view was taken.
    let changeCounter: UInt64
    /// The file's maximum age in milliseconds (0: none): older entries count as expired. Set in
    /// the views readers take (`publishView`); a writer's own lookups (`currentView`) leave it 0
    /// and take the limit from `CacheStore.limits`, which saves their every write the copy.
    var maximumAge: UInt64 = 0

    /// Finds the live entry for `key`, checking its header, bounds and key bytes (not the value's
    /// checksum: callers that hand out the value do that).
    ///
    /// - Parameters:
    ///   - migrationCursor: how far the draining table has been moved into the active one.
    ///   - valueFollows: the caller reads the entry's value next (the lines of a record over 256
    ///     bytes then start loading early).
    @inline(__always)
    func lookup(_ key: UnsafeRawBufferPointer, hash: KeyHash, migrationCursor: Int,
                valueFollows: Bool = false) -> FoundEntry? {
        // The loop of `probe`, written out: a lookup inlines a whole header check, and through
        // `probe`'s two searches a delete took 74 instructions more (6efac2f's shape kept).
        var inDraining = false
        var tablesLeft = 1
        if let draining {
            inDraining = draining.home(ofTag: hash.tag) >= migrationCursor
            tablesLeft = 2
            (inDraining ? active : draining).prefetchHome(ofTag: hash.tag)
        }
        while tablesLeft > 0 {
            let table = inDraining ? draining! : active
            var header: RecordHeader?
            var offset = 0
            if let slotIndex = table.find(tag: hash.tag, where: { candidate in
                header = entryHeader(at: candidate, key: key, valueFollows: valueFollows)
                offset = candidate
                return header != nil
            }), let header {
                return FoundEntry(offset: offset, header: header, inDraining: inDraining, slotIndex: slotIndex)
            }
            inDraining.toggle()
            tablesLeft -= 1
        }
        return nil
    }

    /// Writer: the live entry of `key` at `offset`, whose slot is `slotIndex` of the active
    /// table, or nil for anything else. For the holder of the writer lock, under which no record
    /// changes but for its access byte: the first word and the key bytes (inside `limit`) are
    /// compared before the header is checked whole (`RecordHeader.liveEntry`), and without a call.
    @inline(__always)
    func writerEntry(of key: UnsafeRawBufferPointer, at offset: Int, slotIndex: Int, valueFollows: Bool) -> FoundEntry? {
        // `offset` is a slot's: a multiple of 16, at least 0.
        guard offset >= ringStart, offset <= limit &- (RecordHeader.size &+ key.count) else { return nil }
        let record = base + offset
        let word = lrd_load_acquire_u64(record)
        guard RecordHeader.Word0.isLiveEntry(word, keyLength: key.count),
              UnsafeRawBufferPointer(start: record + RecordHeader.size, count: key.count).sameBytes(as: key),
              let words = RecordHeader.liveEntry(at: record, offset: offset, word: word, keyLength: key.count, limit: limit,
                                                 seed: seed, firstValidSequence: firstValidSequence, valueFollows: valueFollows)
        else { return nil }
        return FoundEntry(offset: offset, words: words, inDraining: false, slotIndex: slotIndex)
    }

    /// What `copyEntry` found: the record's offset, and what `lrd_entry_copy` made of it.
    struct EntryCopy {
        let offset: Int
        /// The entry's sequence number, as its checked header gave it.
        let sequence: UInt64
        /// Status (bits 0-7), flags (8-15) and the value's length (32-63): `lrd_entry_outcome`.
        let outcome: UInt64

        /// Whether the value was copied and its checksum holds over the copy.
        var isCopied: Bool { UInt8(truncatingIfNeeded: outcome) == UInt8(LRD_ENTRY_COPIED) }
        var flags: UInt8 { UInt8(truncatingIfNeeded: outcome >> 8) }
        /// The value's length as callers see it.
        var length: Int { Int(outcome >> 32) }
    }

    /// The usual read of `key`'s value into `buffer`: the probe of `lookup`, with each record
    /// whose slot has the key's tag checked and copied by one call (`lrd_entry_copy`: the header
    /// whole, the key, then the value with its checksum). Nil when no live entry has the key; an
    /// entry the call did not copy (compressed, too long, expired, failing its checksum) comes
    /// back uncopied, for the careful read. The caller re-checks the record (`isUnchanged`).
    @inline(__always)
    func copyEntry(_ key: UnsafeRawBufferPointer, hash: KeyHash, migrationCursor: Int,
                   into buffer: UnsafeMutableRawBufferPointer) -> EntryCopy? {
        probe(hash, migrationCursor: migrationCursor) { offset -> EntryCopy? in
            // `offset < limit`: the room passed is positive; the call checks it holds a header.
            guard offset >= ringStart, offset < limit else { return nil }
            let result = lrd_entry_copy(base + offset, UInt64(limit &- offset), seed, firstValidSequence,
                                        key.baseAddress, key.count, buffer.baseAddress, buffer.count, maximumAge)
            guard UInt8(truncatingIfNeeded: result.outcome) != UInt8(LRD_ENTRY_OTHER) else { return nil }
            return EntryCopy(offset: offset, sequence: result.sequence, outcome: result.outcome)
        }?.found
    }

    /// The first record along `hash`'s probe sequences that `match` takes, with where its slot is.
    @inline(__always)
    private func probe<Found>(_ hash: KeyHash, migrationCursor: Int, _ match: (_ offset: Int) -> Found?)
        -> (found: Found, offset: Int, inDraining: Bool, slotIndex: Int)? {
        // While the index grows, most keys are still where the migration cursor has not been:
        // looking there first saves a probe of the other table (a cache miss) on most hits.
        // Either order finds the key; both tables are searched before a miss.
        func search(_ table: HashTable) -> (found: Found, offset: Int, slotIndex: Int)? {
            var found: Found?
            var offset = 0
            guard let slotIndex = table.find(tag: hash.tag, where: { candidate in
                found = match(candidate)
                offset = candidate
                return found != nil
            }), let found else { return nil }
            return (found, offset, slotIndex)
        }
        // No migration (the usual case): one table, without the second loop's state (which cost
        // a get some 20 instructions of spills).
        guard let draining else {
            return search(active).map { ($0.found, $0.offset, false, $0.slotIndex) }
        }
        var inDraining = draining.home(ofTag: hash.tag) >= migrationCursor
        // A miss probes both tables: the second one's first slot starts loading now, so that its
        // cache miss overlaps the first table's instead of following it.
        (inDraining ? active : draining).prefetchHome(ofTag: hash.tag)
        for _ in 0..<2 {
            if let hit = search(inDraining ? draining : active) { return (hit.found, hit.offset, inDraining, hit.slotIndex) }
            inDraining.toggle()
        }
        return nil
    }

    /// Starts loading the slots where `hash`'s probe sequences begin (a hint; reads nothing).
    @inline(__always)
    func prefetchHomes(of hash: KeyHash) {
        active.prefetchHome(ofTag: hash.tag)
        draining?.prefetchHome(ofTag: hash.tag)
    }

    /// Starts loading the record that the first slot of `hash`'s tag names, among the few slots
    /// from its home in each table (a hint: the slot is not checked against the key, nor the
    /// record against anything, so a wrong guess costs a load and nothing else).
    @inline(__always)
    func prefetchRecord(of hash: KeyHash) {
        prefetchRecord(of: hash, in: active)
        if let draining { prefetchRecord(of: hash, in: draining) }
    }

    @inline(__always)
    private func prefetchRecord(of hash: KeyHash, in table: HashTable) {
            var index = table.home(ofTag: hash.tag)
            for _ in 0..<4 {
                let slot = table[index]
                if slot == HashTable.empty { break }
                if HashTable.tag(of: slot) == hash.tag {
                    let offset = HashTable.offset(of: slot)
                    if offset < limit { lrd_prefetch(base + offset) }
                    break
                }
                index &+= 1
            }
    }

    /// The header of the live entry for `key` at `offset`, or nil for anything else. The first
    /// word rules out other records before the header's checksum is computed; the header is then
    /// read and checked whole, and only then are the key bytes compared: a writer may replace the
    /// record meanwhile, and the reader's final check (same sequence number, still live) vouches
    /// only for bytes read after the header it names.
    @inline(__always)
    private func entryHeader(at offset: Int, key: UnsafeRawBufferPointer, valueFollows: Bool) -> RecordHeader? {
        guard let header = entryHeader(at: offset, keyLength: key.count, valueFollows: valueFollows),
              UnsafeRawBufferPointer(start: base + offset + RecordHeader.size, count: key.count).sameBytes(as: key)
        else { return nil }
        return header
    }

    /// The header of the live, valid entry at `offset`, or nil for anything else.
    ///
    /// - Parameters:
    ///   - keyLength: when given, the length the entry's key must have.
    ///   - valueFollows: with `keyLength`, the caller reads the entry's value next.
    @inline(__always)
    func entryHeader(at offset: Int, keyLength: Int? = nil, valueFollows: Bool = false) -> RecordHeader? {
        guard offset >= ringStart,
              let header = RecordHeader.read(from: base, at: offset, limit: limit, seed: seed,
                                             liveEntryKeyLength: keyLength, valueFollows: valueFollows),
              header.kind == .entry, header.isLive, header.sequence >= firstValidSequence else { return nil }
        return header
    }

    /// Whether the record at `offset`, numbered `sequence` when it was checked, still is what it
    /// was: live, same sequence number, and no meta change since the view was taken. Writers never
    /// change a live record's bytes; they mark it dead first, or (clearing) move the change counter
    /// first, with a fence, so an unchanged record means the bytes read meanwhile were its own.
    @inline(__always)
    func isUnchanged(at offset: Int, sequence: UInt64, state: SharedState) -> Bool {
        lrd_fence_acquire()
        let record = base + offset
        let word = UInt64(littleEndian: lrd_load_acquire_u64(record))
        return word & RecordHeader.Word0.liveBit != 0
            && UInt64(littleEndian: record.loadUnaligned(fromByteOffset: RecordHeader.Field.sequence, as: UInt64.self))
                == sequence
            && state.changeCounter == changeCounter
    }

    /// The keys of the live entries whose hash (`KeyHash.value`) has the bits of `hashBits`
    /// above the low 3: how a watcher names the key of a change the change ring gives by hash
    /// (FORMAT.md 3.3). Each key is checked against the hash after it is copied, so a record
    /// written over meanwhile yields nothing.
    func liveKeys(hashedAs hashBits: UInt64) -> [[UInt8]] {
        let tag = UInt32(truncatingIfNeeded: hashBits >> 36)
        var keys: [[UInt8]] = []
        for table in [active] + (draining.map { [$0] } ?? []) {
            _ = table.find(tag: tag) { offset in
                if let header = entryHeader(at: offset) {
                    let key = [UInt8](UnsafeRawBufferPointer(start: base + offset + RecordHeader.size, count: header.keyLength))
                    if key.withUnsafeBytes({ KeyHash($0).value }) & ~7 == hashBits, !keys.contains(key) { keys.append(key) }
                }
                return false
            }
        }
        return keys
    }

    /// The stored bytes of the entry `found` (its key is before them).
    @inline(__always)
    func storedValue(of found: FoundEntry) -> UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(start: base + found.offset + RecordHeader.size + found.header.keyLength,
                               count: found.header.storedLength)
    }

    /// Copies the stored bytes of the entry `found` for `key` to `destination` (room for them), and
    /// returns the data checksum of `key` ++ the copy: one pass, and the checksum is of the bytes
    /// copied, whatever the map holds meanwhile.
    @inline(__always)
    func copyStoredValue(of found: FoundEntry, key: UnsafeRawBufferPointer,
                         to destination: UnsafeMutableRawPointer?) -> UInt32 {
        lrd_crc32c_then_copy(seed, key.baseAddress, key.count, destination,
                             storedValue(of: found).baseAddress, found.header.storedLength)
    }

    /// Whether `key` and the value bytes of the entry `found` match its data checksum: the
    /// caller's key, not the bytes of the record's, so that a value passes only as the value of
    /// the key asked for, whatever a writer of another process does to the record meanwhile.
    func dataIsIntact(_ found: FoundEntry, key: UnsafeRawBufferPointer) -> Bool {
        lrd_crc32c(lrd_crc32c(seed, key.baseAddress, key.count), storedValue(of: found).baseAddress, found.header.storedLength)
            == found.header.dataChecksum
    }
}

/// A live entry a lookup found.
struct FoundEntry {
    /// Where its record is: a header that lies in the map, as the lookup checked.
    let offset: Int
    /// Its header as checked, decoded where used.
    let words: RecordHeader.EntryWords
    /// Whether its slot is in the draining table.
    let inDraining: Bool
    let slotIndex: Int

    var header: RecordHeader {
        @inline(__always) get { words.header }
    }
}

extension FoundEntry {
    init(offset: Int, header: RecordHeader, inDraining: Bool, slotIndex: Int) {
        self.init(offset: offset, words: RecordHeader.EntryWords(header), inDraining: inDraining, slotIndex: slotIndex)
    }
}

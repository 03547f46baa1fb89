import CLarderSupport

/// Writes: each runs under the exclusive in-process lock and the writer lock (`withWriterLock`).
extension CacheStore {
    /// Stores `value` for `key`, replacing any earlier value, compressed with LZ4 when `compress`
    /// is set and it saves space. Evicts what it must to make room. The record's time stored and
    /// the deadline of `expiry` come from one reading of the clock, unless `storedAt` gives the
    /// time stored (when a loaded value's load began, milliseconds since the Unix epoch).
    func put(key: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer, compress: Bool,
             expiry: Expiry, storedAt: UInt64? = nil) throws(LarderError) {
        try validateKey(key)
        // The index slot this put looks at starts loading now, so that its cache miss overlaps
        // the hashing and the checks instead of following them.
        let hash = KeyHash(key)
        active.prefetchHome(ofTag: hash.tag)
        draining?.prefetchHome(ofTag: hash.tag)
        // Before the placement: a migration step that meets a damaged index rebuilds it, which
        // may move the index segments the placement works around.
        try stepMigration()
        // Refuses a value that cannot fit before any entry changes, so that it loses nothing.
        let (size, compressing) = try placement(keyLength: key.count, valueLength: value.count, compress: compress)
        let now = SystemCall.nowMilliseconds()
        let storedAt = storedAt ?? now
        let deadline = expiry.deadline(now: now, storedAt: storedAt)
        let entry = NewEntry(key: key, value: value, stored: value, flags: expiry.flags(now: now, deadline: deadline),
                             compressing: compressing, storedAt: storedAt, expiresAt: deadline,
                             isFromThisMap: readers.mayBeLending && (file.mapsAnyOf(key) || file.mapsAnyOf(value)))
        // A replaced entry whose room takes the new record is written over (FORMAT.md 6.9): no
        // room taken at the head, nothing evicted, no slot changed.
        let replaced = lookupToReplace(key, hash: hash)
        if let replaced, let room = roomInPlace(of: replaced, for: entry, size: size),
           rewrite(replaced, in: room, with: entry) {
            changes.record(hash: hash.value, kind: .stored)
            return
        }
        // A new key in a file at its standing count limit (none: one compare).
        if replaced == nil && limits.value.isAtCountLimit(entryCount: state.entryCount) { try makeRoomInCountLimit(forPlacing: size) }
        try place(entry, size: size, hash: hash, replacing: replaced != nil)
        changes.record(hash: hash.value, kind: .stored)
    }

    /// Places `entry`, a record of `size` bytes (LZ4's bound when compressing), where the ring
    /// and the free list give room, then points the index at it: the rest of `put`.
    ///
    /// - Parameter replaced: whether a live entry of the key was found before the placement.
    @inline(__always)
    private func place(_ entry: NewEntry, size: Int, hash: KeyHash, replacing replaced: Bool) throws(LarderError) {
        try place(entry, size: size, hash: hash, replacing: replaced, isRetry: false)
    }

    /// `place`, with `isRetry` set for the second placement after a recovery that dropped the
    /// first. Most puts need neither room in the index nor compression: one test, inline.
    @inline(__always)
    private func place(_ entry: NewEntry, size: Int, hash: KeyHash, replacing replaced: Bool,
                       isRetry: Bool) throws(LarderError) {
        let recoveries = state.counter(.recoveries)
        if state.entryCount < active.loadLimit && !entry.compressing {
            try placeRecord(entry, size: size, hash: hash, replacing: replaced, isRetry: isRetry, recoveries: recoveries)
        } else {
            try placeAfterPreparing(entry, size: size, hash: hash, replacing: replaced, isRetry: isRetry, recoveries: recoveries)
        }
    }

    /// `place` when the index must grow first, or the value is to be compressed (ahead, when a
    /// room of its compressed size may be listed).
    @inline(never)
    private func placeAfterPreparing(_ entry: NewEntry, size: Int, hash: KeyHash, replacing replaced: Bool,
                                     isRetry: Bool, recoveries: UInt64) throws(LarderError) {
        var entry = entry, size = size
        let key = entry.key, value = entry.value
        if state.entryCount >= active.loadLimit {
            try ensureIndexRoom()
            // A new index segment in the ring may now be in the way.
            (size, entry.compressing) = try placement(keyLength: key.count, valueLength: value.count, compress: entry.compressing)
        }
        if entry.compressing, let ahead = allocator.value.compressedAhead(value, keyLength: key.count, size: size) {
            entry.stored = ahead.stored
            entry.flags |= ahead.flags
            entry.compressing = false
            size = RecordHeader.entrySize(keyLength: key.count, storedLength: entry.stored.count)
        }
        try placeRecord(entry, size: size, hash: hash, replacing: replaced, isRetry: isRetry, recoveries: recoveries)
    }

    /// The rest of `place`: the room, the record, the index. `recoveries` is the count of
    /// recoveries when the placement began.
    @inline(never)
    private func placeRecord(_ entry: NewEntry, size: Int, hash: KeyHash, replacing replaced: Bool,
                             isRetry: Bool, recoveries: UInt64) throws(LarderError) {
        let key = entry.key
        // Below the capacity a large record takes the room of one replaced or removed before it
        // when there is such room; otherwise it goes at the head.
        let deadRoom = allocator.value.takeDeadRoom(for: size)
        let reserved = deadRoom?.size ?? allocator.value.footprint(ofRecord: size)
        let offset: Int
        if let deadRoom { offset = deadRoom.offset } else { offset = try reserve(reserved) }
        // Within what was reserved, even if making room rebuilt the ring and moved the index.
        let (header, taken) = writeEntry(entry, at: offset, within: reserved, inSpan: deadRoom != nil, room: deadRoom)
        if deadRoom == nil {
            advanceHead(past: taken)
        } else {
            testHooks.recordsPlacedInDeadRoom += 1
        }

        // The record is complete; only now does the index point at it. The entry replaced is
        // looked for again: making room may have moved or evicted it. A key that was absent is
        // still absent unless a recovery while making room brought an older record of it back.
        let slot = HashTable.slot(tag: hash.tag, offset: offset)
        let recovered = state.counter(.recoveries) != recoveries
        if let old = replaced || recovered ? lookup(key, hash: hash) : nil {
            // A reader of another process may hold the old slot and find its record dead
            // before it sees the new one: the epoch makes it look again instead of missing.
            beginIndexChange()
            (old.inDraining ? draining! : active)[old.slotIndex] = slot
            RecordHeader.markDead(in: file, at: old.offset)
            endIndexChange()
            allocator.value.rememberDeadRoom(at: old.offset, header: old.header)
            removeFromLiveCounts(old.header)
            state.add(1, to: .updates)
        } else if insertIntoIndex(slot) != nil {
            state.entryCount &+= 1
            state.add(1, to: .inserts)
        } else {
            // No empty slot although the count says there is room: the index is damaged (a
            // hostile file). Recovery makes a new one from the records, this one among them,
            // unless its number came from a next sequence recovery does not trust (FORMAT.md
            // 7.4): written again, it takes a number the rebuilt file trusts.
            try rebuild()
            if let kept = lookup(key, hash: hash), kept.header.sequence == header.sequence { return }
            guard !isRetry, !entry.isFromThisMap else {
                throw LarderError(.corrupt, "the index was damaged and has been rebuilt; the value was not stored", path: path)
            }
            try place(entry, size: size, hash: hash, replacing: lookup(key, hash: hash) != nil, isRetry: true)
            return
        }
        addToLiveCounts(header)
    }

    /// What a put stores: the key, the value as given and as it goes into the record (compressed
    /// ahead, or not yet), and how.
    struct NewEntry {
        let key: UnsafeRawBufferPointer
        let value: UnsafeRawBufferPointer
        var stored: UnsafeRawBufferPointer
        var flags: UInt8
        /// Whether the value is still to be compressed, straight into the record.
        var compressing: Bool
        /// The header's times (FORMAT.md 4.1).
        let storedAt: UInt64
        let expiresAt: UInt64
        /// Whether the caller's key or value lies in this file's map (lent by `withValue` of
        /// another handle on the file): it may be the very record written over, and is moved as
        /// `memmove` moves. Only a lend hands out the map's bytes, and it pins their record
        /// first: with no pin counted, the addresses are not compared.
        let isFromThisMap: Bool
    }

    /// Writes `entry` as a live record at `offset`, in at most `reserved` bytes (what was set
    /// aside for it: LZ4's bound when compressing, or the room it takes), and returns its header
    /// and the bytes it takes (its room, or its footprint within `reserved`).
    /// The key is copied there first unless it is there already (`keyInPlace`). A record placed
    /// `inSpan` (not at the head) is flagged so. `room` is the room the record stands in (nil at
    /// the head: its footprint within `reserved`): the rest of it becomes padding before the
    /// header is written, so that the ring walks from the record to what followed the room.
    @inline(__always)
    private func writeEntry(_ entry: NewEntry, at offset: Int, within reserved: Int, keyInPlace: Bool = false,
                            inSpan: Bool, visited: Bool = false, room: (offset: Int, size: Int)?) -> (header: RecordHeader, taken: Int) {
        guard !entry.compressing && !entry.isFromThisMap else {
            return writeEntryCopying(entry, at: offset, within: reserved, keyInPlace: keyInPlace, inSpan: inSpan,
                                     visited: visited, room: room)
        }
        let key = entry.key, stored = entry.stored
        let record = file.mutableBytes(at: offset, count: reserved).baseAddress!
        let flags = entry.flags | (inSpan ? RecordHeader.placedInSpanFlag : 0)
        // The usual write: the rest of the room becomes padding first (`padRest`), then one call
        // writes the key, the value and their checksum, and the header last (`lrd_entry_write`).
        let keyLength = key.count, storedLength = stored.count, rawLength = entry.value.count
        let totalSize = RecordHeader.entrySize(keyLength: keyLength, storedLength: storedLength)
        precondition(offset & 7 == 0 && totalSize <= reserved, "bad record placement")
        let taken = room?.size ?? min(reserved, allocator.value.footprint(ofRecord: totalSize))
        allocator.value.padRest(of: (room?.offset ?? offset, taken), after: totalSize)
        let sequence = takeSequence()
        let dataChecksum = lrd_entry_write(
            record, seed, UInt32(flags) | (visited ? LRD_ENTRY_VISITED : 0), keyInPlace ? nil : key.baseAddress, keyLength,
            stored.baseAddress, UInt64(UInt32(truncatingIfNeeded: storedLength)) | UInt64(UInt32(truncatingIfNeeded: rawLength)) << 32,
            sequence, entry.expiresAt, entry.storedAt)
        let header = RecordHeader(
            kind: .entry, flags: flags, isLive: true, keyLength: keyLength, storedLength: storedLength,
            rawLength: rawLength, sequence: sequence, expiresAt: entry.expiresAt,
            storedAt: entry.storedAt, dataChecksum: dataChecksum)
        return (header, taken)
    }

    /// `writeEntry` for a value compressed straight into the record, or bytes that may come out
    /// of this map: out of line, so that the usual write stays small enough to inline.
    @inline(never)
    private func writeEntryCopying(_ entry: NewEntry, at offset: Int, within reserved: Int, keyInPlace: Bool,
                                   inSpan: Bool, visited: Bool, room: (offset: Int, size: Int)?) -> (header: RecordHeader, taken: Int) {
        let key = entry.key, stored = entry.stored
        let record = file.mutableBytes(at: offset, count: reserved).baseAddress!
        var flags = entry.flags | (inSpan ? RecordHeader.placedInSpanFlag : 0)
        let keyStart = record + RecordHeader.size
        let valueStart = keyStart + key.count
        // Moved as memmove does: the caller's bytes may come out of this very map (lent by
        // `withValue` of another handle on the file).
        if !keyInPlace { keyStart.copyMemory(from: key.baseAddress!, byteCount: key.count) }
        // The checksum is of the bytes as they lie in the record: the key read back from it,
        // the value computed from the words copied there (one pass), or read back from the
        // record for a compressed value and for bytes that come out of this map.
        var storedLength = stored.count
        let dataChecksum: UInt32
        if entry.compressing, let compressed = LZ4Codec.compress(
            entry.value, into: UnsafeMutableRawBufferPointer(start: valueStart, count: reserved - RecordHeader.size - key.count)) {
            storedLength = compressed
            flags |= RecordHeader.compressedFlag
            dataChecksum = lrd_crc32c(seed, keyStart, key.count + compressed)
        } else {
            if storedLength > 0 { valueStart.copyMemory(from: stored.baseAddress!, byteCount: storedLength) }
            dataChecksum = lrd_crc32c(seed, keyStart, key.count + storedLength)
        }
        // The record takes only the room of the stored form, even when LZ4's bound was reserved.
        let header = RecordHeader(
            kind: .entry, flags: flags, isLive: true, keyLength: key.count, storedLength: storedLength,
            rawLength: entry.value.count, sequence: takeSequence(), expiresAt: entry.expiresAt,
            storedAt: entry.storedAt, dataChecksum: dataChecksum)
        let used = room ?? (offset, min(reserved, allocator.value.footprint(ofRecord: header.totalSize)))
        allocator.value.padRest(of: used, after: header.totalSize)
        header.write(to: file, at: offset, seed: seed, visited: visited)
        return (header, used.size)
    }

    /// Adds a new live record to the counts.
    @inline(__always)
    func addToLiveCounts(_ header: RecordHeader) { state.addToLiveCounts(header) }

    /// Takes a record that is no longer live out of the counts.
    @inline(__always)
    func removeFromLiveCounts(_ header: RecordHeader) { state.removeFromLiveCounts(header) }

    // MARK: - Replacing in place

    /// The room `entry`, a record of `size` bytes (LZ4's bound when compressing), is to be
    /// written over `old` in, the live entry of its key: old's record, and unless that is just
    /// the size, the padding after it as well (left by a shorter value written over a longer
    /// one), if the record fits. Nil when it does not, and when the caller's bytes come out of
    /// this map (they could be old's own). Only records below the free list's minimum, in the
    /// room of one: a reader of another process that looks for the key meanwhile waits for the
    /// rewrite, which stays short, and larger ones have the free list (`takeDeadRoom`), which
    /// keeps the old record readable until the new one is complete (and would not find the room
    /// of a large record that a small one had taken).
    @inline(__always)
    private func roomInPlace(of old: FoundEntry, for entry: NewEntry, size: Int) -> (offset: Int, size: Int)? {
        guard size < FreeList.minimumRecordSize, old.header.totalSize < FreeList.minimumRecordSize, rewritesInPlace,
              !entry.isFromThisMap else { return nil }
        let recordSize = old.header.totalSize
        // A shorter record takes the padding too, so that the rest of the room becomes one
        // padding record, whole again for a longer value later.
        let room = size == recordSize ? recordSize
            : allocator.value.roomSize(at: old.offset, recordSize: recordSize, largestPadding: .max) ?? recordSize
        // Never over an index segment, whatever a damaged file's headers say.
        guard size <= room, !layout.overlapsIsland(old.offset, old.offset + room) else { return nil }
        return (old.offset, room)
    }

    /// Writes `entry` in `room`, that of `old`, the live entry of the same key (FORMAT.md 6.9): old
    /// is marked dead, then its key and value are written over with the new ones, the rest of the
    /// room becomes padding, and a new header is written that is visited (the write is the
    /// entry's latest use: at the capacity, the tail relocates it rather than evicting it). The
    /// slot stays as it is. All of it within the index epoch: a reader of another process that
    /// finds the record dead or half written looks again rather than miss, and one that read the
    /// old record finds its sequence number gone when it re-checks.
    ///
    /// Returns false, having written nothing, when a reader of any process lends old's bytes
    /// (checked once it is dead, as 7.7.5 asks): old is then live again, as it was, and the
    /// caller places the entry elsewhere, the usual way, which may fail without losing old.
    private func rewrite(_ old: FoundEntry, in room: (offset: Int, size: Int), with entry: NewEntry) -> Bool {
        beginIndexChange()
        RecordHeader.markDead(in: file, at: old.offset)
        // The check's sequentially consistent fence also keeps every byte written below from
        // being seen before the dead mark: a reader that took old's header as live then fails
        // its re-check, and never checks new bytes against the old header.
        if allocator.value.isPinned(room.offset, room.size) {
            RecordHeader.markLiveAgain(in: file, at: old.offset)
            endIndexChange()
            return false
        }
        let header = writeEntry(entry, at: old.offset, within: room.size, keyInPlace: true, inSpan: true, visited: true, room: room).header
        endIndexChange()
        state.replaceInLiveCounts(old.header, with: header)
        state.add(1, to: .updates)
        return true
    }

    /// The ring bytes a record of this key and value takes (LZ4's bound when compressing), and
    /// whether it is compressed: compression is given up when its bound does not fit but the raw
    /// value does. Finishes an index migration whose second segment is in the way.
    /// - Throws: `.tooLarge` when the record can never fit.
    @inline(__always)
    private func placement(keyLength: Int, valueLength: Int, compress: Bool) throws(LarderError) -> (size: Int, compress: Bool) {
        // The usual put, inline: uncompressed, and it fits.
        let size = RecordHeader.entrySize(keyLength: keyLength, storedLength: valueLength)
        if !compress && valueLength <= UInt32.max && size <= largestPlaceableRecord { return (size, false) }
        return try placementOutOfLine(keyLength: keyLength, valueLength: valueLength, compress: compress)
    }

    @inline(never)
    private func placementOutOfLine(keyLength: Int, valueLength: Int, compress: Bool) throws(LarderError) -> (size: Int, compress: Bool) {
        var compress = compress && valueLength <= LZ4Codec.maximumInputSize
        var size = RecordHeader.entrySize(keyLength: keyLength,
                                          storedLength: compress ? LZ4Codec.bound(valueLength) : valueLength)
        var largest = largestPlaceableRecord
        if size > largest && draining != nil {
            try stepMigration(slots: HashTable.maximumSlotCount)
            largest = largestPlaceableRecord
        }
        if compress && size > largest {
            compress = false
            size = RecordHeader.entrySize(keyLength: keyLength, storedLength: valueLength)
        }
        guard valueLength <= UInt32.max, size <= largest else {
            throw LarderError(.tooLarge, "a value of \(valueLength) bytes does not fit this cache (capacity \(capacity) bytes; the largest record it can place is \(largest) bytes)", path: path)
        }
        return (size, compress)
    }

    /// Removes the entry for `key`. Returns whether there was a live, unexpired one.
    @inline(__always)
    func remove(key: UnsafeRawBufferPointer) throws(LarderError) -> Bool {
        try validateKey(key)
        let hash = KeyHash(key)
        guard let found = lookup(key, hash: hash) else { return false }
        let expired = found.header.isExpiredNow(maximumAge: maximumAge)
        removeEntry(found, counter: expired ? .expirations : .removals)
        // Hashed again, out of line, only for a watcher: keeping `hash` across the removal would
        // cost every delete.
        if changes.isWatched { recordWatchedChange(of: key, kind: expired ? .expired : .removed) } else { changes.skip() }
        allocator.value.rememberDeadRoom(at: found.offset, header: found.header)
        return !expired
    }

    /// Appends a change of `key` to the ring while a watcher is counted: hashes it, out of line.
    @inline(never)
    private func recordWatchedChange(of key: UnsafeRawBufferPointer, kind: ChangeRing.Kind) {
        changes.append(hash: KeyHash(key).value, kind: kind)
    }

    /// Empties the cache in time independent of its size: records written before now are void
    /// from here on (`firstValidSequence`), and the ring starts over as empty.
    /// Returns how many entries there were (expired ones not yet reclaimed included).
    func removeAll() throws(LarderError) -> Int {
        let removed = state.entryCount
        let oldDraining = meta.drainingIndex
        meta.drainingIndex = .none
        meta.firstValidSequence = state.nextSequence
        index.value.removeAll()
        // Both copies, each durable: with one, the meta write after next would go over the only
        // copy on disk that holds the clear, and a power cut tearing it, the other copy not yet
        // written back, would bring the cleared entries back (FORMAT.md 6.6).
        try writeMeta(durable: true)
        try writeMeta(durable: true)
        allocator.value.deadRooms.list.removeAll()
        if oldDraining.exists { RecordHeader.markDead(in: file, at: oldDraining.offset) }
        state.add(UInt64(clamping: removed), to: .removals)
        state.entryCount = 0
        state.liveRawBytes = 0
        state.liveStoredBytes = 0
        state.liveRecordBytes = 0
        state.spanBytes = 0
        state.tail = state.head
        changes.record(hash: 0, kind: .cleared)
        return removed
    }
}

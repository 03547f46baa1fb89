import CLarderSupport

/// Writes: each runs under the exclusive in-process lock and the writer lock (`withWriterLock`).
extension CacheStore {
    /// Stores `value` for `key`, replacing any earlier value, compressed with LZ4 when `compress`
    /// is set and it saves space. Evicts what it must to make room. The record's time stored and
    /// the deadline of `expiry` come from one reading of the clock.
    func put(key: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer, compress: Bool,
             expiry: Expiry) throws(LarderError) {
        try validateKey(key)
        // The index slot this put will look at once its record is written starts loading now,
        // so that its cache miss overlaps the placement and the copy instead of following them.
        let hash = KeyHash(key)
        active.prefetchHome(ofTag: hash.tag)
        draining?.prefetchHome(ofTag: hash.tag)
        // Before the placement: a migration step that meets a damaged index rebuilds it, which
        // may move the index segments the placement works around.
        try stepMigration()
        // Refuses a value that cannot fit before any entry changes, so that it loses nothing.
        var (size, compressing) = try placement(keyLength: key.count, valueLength: value.count, compress: compress)
        if state.entryCount >= active.loadLimit {
            try ensureIndexRoom()
            // A new index segment in the ring may now be in the way.
            (size, compressing) = try placement(keyLength: key.count, valueLength: value.count, compress: compressing)
        }
        var stored = value
        var flags: UInt8 = 0
        if compressing, let ahead = compressedAhead(value, keyLength: key.count, size: size) {
            (stored, flags) = ahead
            compressing = false
            size = RecordHeader.entrySize(keyLength: key.count, storedLength: stored.count)
        }
        // Below the capacity a large record takes the room of one replaced or removed before it
        // when there is such room; otherwise it goes at the head.
        let deadRoom = takeDeadRoom(for: size)
        let reserved = deadRoom?.size ?? footprint(ofRecord: size)
        let offset: Int
        if let deadRoom { offset = deadRoom.offset } else { offset = try reserve(reserved) }

        // Compression goes straight into the ring: the room reserved is LZ4's bound, the record
        // takes only what the compressed form needs.
        let record = file.mutableBytes(at: offset, count: size).baseAddress!
        let keyStart = record + RecordHeader.size
        let valueStart = keyStart + key.count
        // The checksum is of the bytes as they lie in the record: computed from the words copied
        // there (one pass), or (nil) read back from the record for a compressed value and for
        // bytes that come out of this very map (lent by `withValue` of another handle on the
        // file), which are moved as memmove does, whatever the overlap.
        let onePass = !file.mapsAnyOf(key) && !file.mapsAnyOf(stored)
        var checksum: UInt32?
        if onePass {
            checksum = lrd_crc32c_then_copy(seed, nil, 0, keyStart, key.baseAddress!, key.count)
        } else {
            keyStart.copyMemory(from: key.baseAddress!, byteCount: key.count)
        }
        var storedLength = stored.count
        if compressing, let compressed = LZ4Codec.compress(value, into: UnsafeMutableRawBufferPointer(start: valueStart, count: size - RecordHeader.size - key.count)) {
            storedLength = compressed
            flags = RecordHeader.compressedFlag
            checksum = nil
        } else if stored.count > 0 {
            if let keyChecksum = checksum {
                checksum = lrd_crc32c_then_copy(keyChecksum, nil, 0, valueStart, stored.baseAddress!, stored.count)
            } else {
                valueStart.copyMemory(from: stored.baseAddress!, byteCount: stored.count)
            }
        }
        let dataChecksum = checksum ?? lrd_crc32c(seed, keyStart, key.count + storedLength)
        // The record takes only the room of the stored form, even when LZ4's bound was reserved
        // (the rest stays free in front of the head).
        size = RecordHeader.entrySize(keyLength: key.count, storedLength: storedLength)
        let now = SystemCall.nowMilliseconds()
        let header = RecordHeader(
            kind: .entry, flags: flags, isLive: true, keyLength: key.count, storedLength: storedLength,
            rawLength: value.count, sequence: takeSequence(), expiresAt: expiry.deadline(now: now),
            storedAt: now, dataChecksum: dataChecksum)
        // Within what was reserved, even if making room rebuilt the ring and moved the index.
        let room = deadRoom ?? (offset, min(reserved, footprint(ofRecord: size)))
        padRest(of: room, after: size)
        header.write(to: file, at: offset, seed: seed)
        if deadRoom == nil {
            advanceHead(past: room.size)
        } else {
            deadRooms.pointee.placedCount += 1
        }

        // The record is complete; only now does the index point at it.
        let slot = HashTable.slot(tag: hash.tag, offset: offset)
        if let old = lookup(key, hash: hash) {
            // A reader of another process may hold the old slot and find its record dead
            // before it sees the new one: the epoch makes it look again instead of missing.
            beginIndexChange()
            (old.inDraining ? draining! : active)[old.slotIndex] = slot
            RecordHeader.markDead(in: file, at: old.offset)
            endIndexChange()
            rememberDeadRoom(at: old.offset, header: old.header)
            state.liveRawBytes &-= old.header.rawLength
            state.liveStoredBytes &-= old.header.storedLength
            state.liveRecordBytes &-= old.header.totalSize
            state.add(1, to: .updates)
        } else if active.insert(slot) != nil {
            state.entryCount &+= 1
            state.add(1, to: .inserts)
        } else {
            // No empty slot although the count says there is room: the index is damaged (a
            // hostile file). Recovery makes a new one from the records, this one among them.
            try rebuild()
            return
        }
        state.liveRawBytes &+= value.count
        state.liveStoredBytes &+= storedLength
        state.liveRecordBytes &+= size
    }

    /// The ring bytes a record of this key and value takes (LZ4's bound when compressing), and
    /// whether it is compressed: compression is given up when its bound does not fit but the raw
    /// value does. Finishes an index migration whose second segment is in the way.
    /// - Throws: `.tooLarge` when the record can never fit.
    private func placement(keyLength: Int, valueLength: Int, compress: Bool) throws(LarderError) -> (size: Int, compress: Bool) {
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
    func remove(key: UnsafeRawBufferPointer) throws(LarderError) -> Bool {
        try validateKey(key)
        guard let found = lookup(key, hash: KeyHash(key)) else { return false }
        let expired = found.header.isExpiredNow
        removeEntry(found, counter: expired ? .expirations : .removals)
        rememberDeadRoom(at: found.offset, header: found.header)
        return !expired
    }

    /// Empties the cache in time independent of its size: records written before now are void
    /// from here on (`firstValidSequence`), and the ring starts over as empty.
    func removeAll() throws(LarderError) {
        let oldDraining = meta.drainingIndex
        meta.drainingIndex = .none
        draining = nil
        state.migrationCursor = 0
        meta.firstValidSequence = state.nextSequence
        beginIndexChange()
        active.clear()
        endIndexChange()
        try writeMeta(durable: true)
        deadRooms.pointee.list.removeAll()
        if oldDraining.exists { RecordHeader.markDead(in: file, at: oldDraining.offset) }
        state.add(UInt64(clamping: state.entryCount), to: .removals)
        state.entryCount = 0
        state.liveRawBytes = 0
        state.liveStoredBytes = 0
        state.liveRecordBytes = 0
        state.spanBytes = 0
        state.tail = state.head
    }
}

import CLarderSupport

/// Writes: each runs under the exclusive in-process lock and the writer lock (`withWriterLock`).
extension CacheStore {
    /// Stores `value` for `key`, replacing any earlier value, compressed with LZ4 when `compress`
    /// is set and it saves space. Evicts what it must to make room. The record's time stored and
    /// the deadline of `expiry` come from one reading of the clock.
    func put(key: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer, compress: Bool,
             expiry: Expiry) throws(LarderError) {
        try validateKey(key)
        let hash = KeyHash(key)
        try stepMigration()
        // First the index's room: growing it places a new segment in the ring, which changes what
        // the largest record that fits is.
        if state.entryCount >= active.loadLimit { try ensureIndexRoom() }
        var compress = compress && value.count <= LZ4Codec.maximumInputSize
        var size = RecordHeader.entrySize(keyLength: key.count,
                                          storedLength: compress ? LZ4Codec.bound(value.count) : value.count)
        var largest = largestPlaceableRecord
        if size > largest && draining != nil {
            // A second index segment may be what is in the way; finishing the growth removes it.
            try stepMigration(slots: HashTable.maximumSlotCount)
            largest = largestPlaceableRecord
        }
        if compress && size > largest {
            // Room for LZ4's worst case is not there; the raw value may still fit.
            compress = false
            size = RecordHeader.entrySize(keyLength: key.count, storedLength: value.count)
        }
        guard value.count <= UInt32.max, size <= largest else {
            throw LarderError(.tooLarge, "a value of \(value.count) bytes does not fit this cache (capacity \(capacity) bytes; the largest record it can place is \(largest) bytes)", path: path)
        }
        let offset = try reserve(size)

        // Compression goes straight into the ring: the room reserved is LZ4's bound, the record
        // takes only what the compressed form needs.
        let record = file.mutableBytes(at: offset, count: size).baseAddress!
        let keyStart = record + RecordHeader.size
        let valueStart = keyStart + key.count
        keyStart.copyMemory(from: key.baseAddress!, byteCount: key.count)
        var storedLength = value.count
        var flags: UInt8 = 0
        if compress, let compressed = LZ4Codec.compress(value, into: UnsafeMutableRawBufferPointer(start: valueStart, count: size - RecordHeader.size - key.count)) {
            storedLength = compressed
            flags = RecordHeader.compressedFlag
        } else if value.count > 0 {
            valueStart.copyMemory(from: value.baseAddress!, byteCount: value.count)
        }
        // The record takes only the room of the stored form, even when LZ4's bound was reserved
        // (the rest stays free in front of the head).
        size = RecordHeader.entrySize(keyLength: key.count, storedLength: storedLength)
        let checksum = lrd_crc32c(seed, keyStart, key.count + storedLength)
        let now = SystemCall.nowMilliseconds()
        let header = RecordHeader(
            kind: .entry, flags: flags, isLive: true, keyLength: key.count, storedLength: storedLength,
            rawLength: value.count, sequence: takeSequence(), expiresAt: expiry.deadline(now: now),
            storedAt: now, dataChecksum: checksum)
        header.write(to: file, at: offset, seed: seed)
        advanceHead(past: size)

        // The record is complete; only now does the index point at it.
        let slot = HashTable.slot(tag: hash.tag, offset: offset)
        if let old = lookup(key, hash: hash) {
            // A reader of another process may hold the old slot and find its record dead
            // before it sees the new one: the epoch makes it look again instead of missing.
            state.beginIndexChange()
            (old.inDraining ? draining! : active)[old.slotIndex] = slot
            RecordHeader.markDead(in: file, at: old.offset)
            state.endIndexChange()
            state.liveRawBytes -= old.header.rawLength
            state.liveStoredBytes -= old.header.storedLength
            state.liveRecordBytes -= old.header.totalSize
            state.add(1, to: .updates)
        } else {
            active.insert(slot)
            state.entryCount += 1
            state.add(1, to: .inserts)
        }
        state.liveRawBytes += value.count
        state.liveStoredBytes += storedLength
        state.liveRecordBytes += size
    }

    /// Removes the entry for `key`. Returns whether there was a live, unexpired one.
    func remove(key: UnsafeRawBufferPointer) throws(LarderError) -> Bool {
        try validateKey(key)
        guard let found = lookup(key, hash: KeyHash(key)) else { return false }
        let expired = found.header.isExpiredNow
        removeEntry(found, counter: expired ? .expirations : .removals)
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
        state.beginIndexChange()
        active.clear()
        state.endIndexChange()
        try writeMeta(durable: true)
        if oldDraining.exists { RecordHeader.markDead(in: file, at: oldDraining.offset) }
        state.add(UInt64(state.entryCount), to: .removals)
        state.entryCount = 0
        state.liveRawBytes = 0
        state.liveStoredBytes = 0
        state.liveRecordBytes = 0
        state.spanBytes = 0
        state.tail = state.head
    }
}

import CLarderSupport

/// Writes: each runs under the exclusive lock.
extension CacheStore {
    /// Stores `value` (already encoded: compressed when `flags` says so, `rawLength` bytes once
    /// decoded) for `key`, replacing any earlier value. Evicts what it must to make room.
    func put(key: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer, rawLength: Int, flags: UInt8,
             expiresAt: UInt64) throws(LarderError) {
        try checkWritable()
        try validateKey(key)
        let size = RecordHeader.entrySize(keyLength: key.count, storedLength: value.count)
        if size > largestPlaceableRecord && draining != nil {
            // A second index segment may be what is in the way; finishing the growth removes it.
            try stepMigration(slots: HashTable.maximumSlotCount)
        }
        guard value.count <= UInt32.max, rawLength <= UInt32.max, size <= largestPlaceableRecord else {
            throw LarderError(.tooLarge, "a value of \(value.count) bytes does not fit this cache (capacity \(capacity) bytes; the largest record it can place is \(largestPlaceableRecord) bytes)", path: path)
        }
        let hash = KeyHash(key)
        try stepMigration()
        try ensureIndexRoom()
        let offset = try reserve(size)

        file.copy(key, to: offset + RecordHeader.size)
        file.copy(value, to: offset + RecordHeader.size + key.count)
        let header = RecordHeader(
            kind: .entry, flags: flags, isLive: true, keyLength: key.count, storedLength: value.count,
            rawLength: rawLength, sequence: takeSequence(), expiresAt: expiresAt,
            storedAt: SystemCall.nowMilliseconds(),
            dataChecksum: file.checksum(offset + RecordHeader.size, key.count + value.count, chaining: seed))
        header.write(to: file, at: offset, seed: seed)
        advanceHead(past: size)

        // The record is complete; only now does the index point at it.
        let slot = HashTable.slot(tag: hash.tag, offset: offset)
        if let old = lookup(key, hash: hash) {
            (old.inDraining ? draining! : active)[old.slotIndex] = slot
            RecordHeader.markDead(in: file, at: old.offset)
            state.liveRawBytes -= old.header.rawLength
            state.liveStoredBytes -= old.header.storedLength
            state.liveRecordBytes -= old.header.totalSize
            state.add(1, to: .updates)
        } else {
            active.insert(slot)
            state.entryCount += 1
            state.add(1, to: .inserts)
        }
        state.liveRawBytes += rawLength
        state.liveStoredBytes += value.count
        state.liveRecordBytes += size
    }

    /// Removes the entry for `key`. Returns whether there was a live, unexpired one.
    func remove(key: UnsafeRawBufferPointer) throws(LarderError) -> Bool {
        try checkWritable()
        try validateKey(key)
        guard let found = lookup(key, hash: KeyHash(key)) else { return false }
        let expired = found.header.isExpired(now: SystemCall.nowMilliseconds())
        removeEntry(at: found.offset, header: found.header, counter: expired ? .expirations : .removals)
        return !expired
    }

    /// Empties the cache in time independent of its size: records written before now are void
    /// from here on (`firstValidSequence`), and the ring starts over as empty.
    func removeAll() throws(LarderError) {
        try checkWritable()
        let oldDraining = meta.drainingIndex
        meta.drainingIndex = .none
        draining = nil
        state.migrationCursor = 0
        meta.firstValidSequence = state.nextSequence
        active.clear()
        try writeMeta()
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

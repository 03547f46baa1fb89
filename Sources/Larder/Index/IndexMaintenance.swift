/// The index as a whole: the active table, and while it grows, the table being drained into it.
///
/// Growth is incremental: when the active table reaches its `loadLimit`, a table twice
/// its size is allocated in the ring and becomes active; the old one is drained into it a few
/// slots per write (`migrationStep` slots). Lookups consult both tables, the one the migration
/// cursor says holds the key first. No write ever pauses for work proportional to the number of entries.
extension CacheStore {
    /// Slots moved per write. While two tables exist every miss probes both, so the migration
    /// should end soon after the growth: 128 slots end it within about 1% of the writes the new
    /// table takes before it grows again. A step costs a few thousand instructions.
    static let migrationStep = 128

    /// A live entry found by key.
    struct FoundEntry {
        let offset: Int
        let header: RecordHeader
        /// Whether its slot is in the draining table.
        let inDraining: Bool
        let slotIndex: Int
    }

    /// Reader: finds the live entry for `key` (see `ReadView.lookup`).
    func lookup(_ key: UnsafeRawBufferPointer, hash: KeyHash) -> FoundEntry? {
        currentView.lookup(key, hash: hash, migrationCursor: state.migrationCursor)
    }

    /// Writer: `lookup` for a put, which may write its value over the entry found: the entry's
    /// lines start loading as soon as its first word shows it is the key's.
    func lookupToReplace(_ key: UnsafeRawBufferPointer, hash: KeyHash) -> FoundEntry? {
        currentView.lookup(key, hash: hash, migrationCursor: state.migrationCursor, valueFollows: true)
    }

    /// Reader: the header of the live, valid entry at `offset`, or nil for anything else.
    func entryHeader(at offset: Int) -> RecordHeader? {
        currentView.entryHeader(at: offset)
    }

    func keyBytes(at offset: Int, header: RecordHeader) -> UnsafeRawBufferPointer {
        file.bytes(at: offset + RecordHeader.size, count: header.keyLength)
    }

    /// Points the slot holding exactly `old` at `new` (same tag, new place).
    func repointIndex(from old: UInt64, to new: UInt64) {
        let index = cacheIndex
        index.repoint(from: old, to: new)
    }

    /// Removes the slot holding exactly `slot`. Returns whether there was one.
    func removeFromIndex(_ slot: UInt64) -> Bool {
        let index = cacheIndex
        guard let place = index.find(exactly: slot) else { return false }
        removeSlot(at: place.index, inDraining: place.inDraining)
        return true
    }

    /// Empties slot `index` of the active table (shifting its cluster back) or of the draining one
    /// (a tombstone).
    func removeSlot(at index: Int, inDraining: Bool) {
        if inDraining {
            draining!.removeLeavingTombstone(at: index)
        } else {
            // Shifting moves other keys back a slot: readers that miss meanwhile look again.
            beginIndexChange()
            active.removeShifting(at: index)
            endIndexChange()
        }
    }

    /// Moves the next few slots of the draining table into the active one.
    func stepMigration(slots: Int = CacheStore.migrationStep) throws(LarderError) {
        guard let old = draining else { return }
        var cursor = state.migrationCursor
        let end = min(old.slotCount, cursor + slots)
        // The epoch brackets the moves; a step that finds nothing to move changes no slot.
        var moving = false
        while cursor < end {
            let slot = old[cursor]
            if HashTable.isEntry(slot) {
                if !moving {
                    beginIndexChange()
                    moving = true
                }
                guard active.insert(slot) != nil else {
                    // The active table is full of slots the count does not know: a damaged index
                    // (a hostile file), which recovery makes anew from the records.
                    endIndexChange()
                    try rebuild()
                    return
                }
                old.removeLeavingTombstone(at: cursor)
            }
            cursor += 1
        }
        if moving { endIndexChange() }
        state.migrationCursor = cursor
        if cursor == old.slotCount {
            let location = meta.drainingIndex
            meta.drainingIndex = .none
            cacheIndex = cacheIndex.withoutDraining()
            state.migrationCursor = 0
            try writeMeta()
            // Only now, with the meta page no longer naming it, is the old segment free space.
            RecordHeader.markDead(in: file, at: location.offset)
        }
    }

    /// Makes sure one more key fits in the active table: grows the index (allocating a bigger
    /// segment in the ring), or when it may not grow further, evicts from the tail.
    func ensureIndexRoom() throws(LarderError) {
        while state.entryCount + 1 > active.loadLimit {
            if draining != nil {
                try stepMigration(slots: HashTable.maximumSlotCount)
                continue
            }
            let slotCount = active.slotCount * 2
            let bytes = IndexSegment.byteCount(slotCount: slotCount, pageSize: pageSize)
            guard slotCount <= HashTable.maximumSlotCount, bytes <= (capacity - ringStart) / 3 else {
                var noRelocation = ReclaimBudget.none
                while state.entryCount + 1 > active.loadLimit && state.spanBytes > 0 {
                    try reclaimTailRecord(budget: &noRelocation, unrelocated: .evict)
                }
                return
            }
            let offset = try reserve(bytes, alignment: pageSize)
            IndexSegment.format(in: file, at: offset, slotCount: slotCount, byteCount: bytes,
                                sequence: takeSequence(), now: SystemCall.nowMilliseconds(), seed: seed)
            advanceHead(past: bytes)
            meta.drainingIndex = meta.activeIndex
            meta.activeIndex = IndexLocation(offset: offset, slotCount: slotCount)
            state.migrationCursor = 0
            try writeMeta()
            try attachTables()
        }
    }
}

/// The index wired to the other parts: a writer's lookups through the store's view, the end of a
/// migration and the growth of the index, which the ring and the meta page take part in. The
/// index's own work is `IndexMaintainer`'s (Index/IndexMaintainer.swift).
extension CacheStore {
    typealias FoundEntry = Larder.FoundEntry

    /// Writer: finds the live entry for `key` (see `ReadView.lookup`).
    func lookup(_ key: UnsafeRawBufferPointer, hash: KeyHash) -> FoundEntry? {
        lookup(key, hash: hash, valueFollows: false)
    }

    /// Writer: `lookup` for a put, which may write its value over the entry found. One that ends
    /// at an empty slot (a new key) notes it, so that the put's insert need not probe again
    /// (`insertIntoIndex`); any other forgets the slot noted before.
    @inline(__always)
    func lookupToReplace(_ key: UnsafeRawBufferPointer, hash: KeyHash) -> FoundEntry? {
        let tables = index.value.tables
        guard tables.draining == nil, let first = tables.active.firstSlot(ofTag: hash.tag) else {
            index.value.forgetVacancy()
            return lookupCarefully(key, hash: hash, valueFollows: true)
        }
        guard first.slot != HashTable.empty else {
            index.value.noteVacancy(at: first.index, tag: hash.tag)
            return nil
        }
        index.value.forgetVacancy()
        return lookup(key, hash: hash, at: HashTable.offset(of: first.slot), slotIndex: first.index, valueFollows: true)
    }

    /// Without a migration (the usual case), inline: the first slot of the key's tag in the
    /// active table, and its record checked (`ReadView.writerEntry`). Only the fields of the view
    /// the check reads are loaded, after the probe. Anything else (a migration, no entry of the
    /// key at that slot: a tag shared, a damaged record) goes to `lookup` of the view, which
    /// checks every candidate, out of line.
    @inline(__always)
    private func lookup(_ key: UnsafeRawBufferPointer, hash: KeyHash, valueFollows: Bool) -> FoundEntry? {
        let tables = index.value.tables
        guard tables.draining == nil else { return lookupCarefully(key, hash: hash, valueFollows: valueFollows) }
        var offset = 0
        guard let slotIndex = tables.active.find(tag: hash.tag, where: { candidate in
            offset = candidate
            return true
        }) else { return nil }
        return lookup(key, hash: hash, at: offset, slotIndex: slotIndex, valueFollows: valueFollows)
    }

    /// The entry of `key` at `offset`, the record of slot `slotIndex` of the active table, the
    /// first of its tag; else the careful lookup.
    @inline(__always)
    private func lookup(_ key: UnsafeRawBufferPointer, hash: KeyHash, at offset: Int, slotIndex: Int,
                        valueFollows: Bool) -> FoundEntry? {
        if let found = currentView.writerEntry(of: key, at: offset, slotIndex: slotIndex, valueFollows: valueFollows) {
            return found
        }
        return lookupCarefully(key, hash: hash, valueFollows: valueFollows)
    }

    @inline(never)
    private func lookupCarefully(_ key: UnsafeRawBufferPointer, hash: KeyHash, valueFollows: Bool) -> FoundEntry? {
        index.value.lookup(key, hash: hash, in: currentView, valueFollows: valueFollows)
    }

    /// Reader: the header of the live, valid entry at `offset`, or nil for anything else.
    func entryHeader(at offset: Int) -> RecordHeader? {
        currentView.entryHeader(at: offset)
    }

    func keyBytes(at offset: Int, header: RecordHeader) -> UnsafeRawBufferPointer {
        file.bytes(at: offset + RecordHeader.size, count: header.keyLength)
    }

    /// Puts `slot`, of a new key, in the active table: at the empty slot the put's lookup met
    /// when no slot has changed since, else at the first empty slot of its probe sequence.
    /// Returns nil when the table has none (a damaged index).
    @inline(__always)
    func insertIntoIndex(_ slot: UInt64) -> Int? {
        index.value.insert(slot)
    }

    /// Points the slot holding exactly `old` at `new` (same tag, new place).
    func repointIndex(from old: UInt64, to new: UInt64) {
        index.value.repoint(from: old, to: new)
    }

    /// Removes the slot holding exactly `slot`. Returns whether there was one.
    func removeFromIndex(_ slot: UInt64) -> Bool {
        index.value.remove(exactly: slot)
    }

    /// Empties slot `index` of the active table or of the draining one.
    @inline(__always)
    func removeSlot(at slotIndex: Int, inDraining: Bool) {
        index.value.removeSlot(at: slotIndex, inDraining: inDraining)
    }

    /// Brackets a rearrangement of index slots with the index epoch (`IndexMaintainer.beginChange`).
    @inline(__always)
    func beginIndexChange() { index.value.beginChange() }

    @inline(__always)
    func endIndexChange() { index.value.endChange() }

    /// Moves the next few slots of the draining table into the active one.
    @inline(__always)
    func stepMigration(slots: Int = IndexMaintainer.migrationStep) throws(LarderError) {
        guard index.value.draining != nil else { return }
        try migrate(slots: slots)
    }

    private func migrate(slots: Int) throws(LarderError) {
        switch index.value.migrate(slots: slots) {
        case .moved:
            return
        case .damaged:
            try rebuild()
        case .finished:
            let location = meta.drainingIndex
            meta.drainingIndex = .none
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
            guard let next = index.value.nextSegment(pageSize: pageSize, ringBytes: capacity - ringStart) else {
                var noRelocation = ReclaimBudget.none
                while state.entryCount + 1 > active.loadLimit && state.spanBytes > 0 {
                    try reclaimTailRecord(budget: &noRelocation, unrelocated: .evict)
                }
                return
            }
            let offset = try reserve(next.bytes, alignment: pageSize)
            IndexSegment.format(in: file, at: offset, slotCount: next.slotCount, byteCount: next.bytes,
                                sequence: takeSequence(), now: SystemCall.nowMilliseconds(), seed: seed)
            advanceHead(past: next.bytes)
            meta.drainingIndex = meta.activeIndex
            meta.activeIndex = IndexLocation(offset: offset, slotCount: next.slotCount)
            index.value.startMigration()
            try writeMeta()
            try attachTables()
        }
    }
}

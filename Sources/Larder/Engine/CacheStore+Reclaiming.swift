/// Reclaiming at the tail, wired to the index: the tail reclaimer (`TailReclaimer`) decides for
/// the record at the tail and moves the tail; the store takes entries out of the index, points
/// it at relocated ones, and rebuilds a damaged ring. Removal lives here too, since puts,
/// deletes, sweeps and maintenance remove entries the same way.
extension CacheStore {
    typealias ReclaimBudget = TailReclaimer.Budget
    typealias UnrelocatedRecord = TailReclaimer.UnrelocatedRecord

    /// The reclaimer for one step, with the meta copy's figures as they are now.
    private var reclaimer: TailReclaimer {
        TailReclaimer(firstValidSequence: meta.firstValidSequence, maximumAge: maximumAge, pageSize: pageSize)
    }

    /// Processes the record at the tail and moves the tail past it. Returns the bytes the tail
    /// passed, or 0 when it moved to the ring's start, rebuilt a damaged ring, or left a record.
    @discardableResult
    func reclaimTailRecord(budget: inout ReclaimBudget, unrelocated: UnrelocatedRecord) throws(LarderError) -> Int {
        // A dead entry, what the tail meets most, is passed without a step.
        let passed = TailReclaimer.passDeadEntries(&allocator.value, budget: 1)
        if passed > 0 {
            testHooks.bytesPassedInRuns &+= passed
            return passed
        }
        return try stepTailRecord(budget: &budget, unrelocated: unrelocated)
    }

    /// `reclaimTailRecord` for a record that is not a dead entry the walk passes: the tail
    /// reclaimer's general step. For a caller that has just tried the walk there.
    func stepTailRecord(budget: inout ReclaimBudget, unrelocated: UnrelocatedRecord) throws(LarderError) -> Int {
        let tail = state.tail
        let reclaimer = reclaimer
        switch reclaimer.step(&allocator.value, budget: &budget, unrelocated: unrelocated) {
        case .passed(let bytes):
            return bytes
        case .passedInPlace(let size):
            testHooks.recordsPassedInPlace += 1
            return size
        case .gaveUpLap(let bytes):
            testHooks.lapsGivenUp += 1
            return bytes
        case .damaged:
            try rebuild()
            return 0
        case .remove(let header, let counter):
            removeEntry(at: tail, header: header, counter: counter)
            reclaimer.passRemoved(&allocator.value, at: tail, size: header.totalSize)
            return header.totalSize
        case .relocate(let header):
            relocate(from: tail, header: header, by: reclaimer)
            return header.totalSize
        }
    }

    /// Copies the live record at `offset` to the head (with a new sequence number and its access
    /// bit clear), points the index at the copy, and retires the original.
    private func relocate(from offset: Int, header: RecordHeader, by reclaimer: TailReclaimer) {
        let destination = reclaimer.copyToHead(&allocator.value, from: offset, header: header, sequence: takeSequence())
        let key = file.bytes(at: offset + RecordHeader.size, count: header.keyLength)
        let tag = KeyHash(key).tag
        beginIndexChange()
        repointIndex(from: HashTable.slot(tag: tag, offset: offset), to: HashTable.slot(tag: tag, offset: destination))
        RecordHeader.markDead(in: file, at: offset)
        endIndexChange()
        reclaimer.passRelocated(&allocator.value, from: offset, size: header.totalSize, to: destination)
    }

    /// Writer: evicts at the tail until a new entry keeps the file within its count limit
    /// (Eviction/CountLimit.swift).
    @inline(never)
    func makeRoomInCountLimit(forPlacing size: Int) throws(LarderError) {
        var budget = ReclaimBudget(forPlacing: size)
        budget.relocatesUnread = false
        // Every step passes a record or relocates one within the budget; a damaged ring is
        // rebuilt on the way (`reclaimTailRecord`). Bounded as a placement is (FORMAT.md 6.4).
        var steps = 4 * (ringEnd - ringStart) / FileLayout.recordAlignment + 64
        while limits.value.isAtCountLimit(entryCount: state.entryCount) && state.spanBytes > 0 {
            try reclaimTailRecord(budget: &budget, unrelocated: .evict)
            steps -= 1
            if steps == 0 { throw LarderError(.corrupt, "the ring holds more entries than it can walk", path: path) }
        }
    }

    /// Takes the live entry at `offset` out of the index and the counts, and marks it dead.
    func removeEntry(at offset: Int, header: RecordHeader, counter: SharedState.Counter) {
        let key = file.bytes(at: offset + RecordHeader.size, count: header.keyLength)
        let hash = KeyHash(key)
        let removed = removeFromIndex(HashTable.slot(tag: hash.tag, offset: offset))
        retire(at: offset, header: header, counting: removed ? counter : nil)
        if removed {
            changes.record(hash: hash.value, kind: counter == .evictions ? .evicted : counter == .expirations ? .expired : .removed)
        }
    }

    /// Removes the entry a lookup just found, whose slot is known: no hashing, no search.
    func removeEntry(_ found: FoundEntry, counter: SharedState.Counter) {
        removeSlot(at: found.slotIndex, inDraining: found.inDraining)
        uncount(found.header, counter: counter)
        // The lookup that found the entry checked that its record lies in the map.
        RecordHeader.markDead(file.viewBase + found.offset)
    }

    /// Marks the entry at `offset`, already out of the index, dead; takes it out of the counts
    /// when it was in the index (`counter` not nil).
    private func retire(at offset: Int, header: RecordHeader, counting counter: SharedState.Counter?) {
        if let counter { uncount(header, counter: counter) }
        RecordHeader.markDead(in: file, at: offset)
    }

    /// Takes a live entry that leaves the index out of the counts, and counts it under `counter`.
    @inline(__always)
    private func uncount(_ header: RecordHeader, counter: SharedState.Counter) {
        state.entryCount &-= 1
        removeFromLiveCounts(header)
        state.add(1, to: counter)
    }

    func takeSequence() -> UInt64 {
        let sequence = state.nextSequence
        // Below the limit when the file was opened; wrapping, if another process broke that,
        // voids records instead of trapping.
        state.nextSequence = sequence &+ 1
        return sequence
    }
}

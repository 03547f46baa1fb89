/// Placement: making room at the head, where the allocator's moves meet reclaiming at the tail
/// (Eviction/TailReclaimer.swift), recovery and the growth of the file. The allocator
/// (`RingAllocator`) decides; this wires it to the parts only the store holds.
extension CacheStore {
    /// Moves the head past a record of `size` bytes just written at it.
    @inline(__always)
    func advanceHead(past size: Int) {
        allocator.value.advanceHead(past: size)
    }

    /// The largest record that can ever be placed (see `RingLayout`).
    var largestPlaceableRecord: Int { allocator.value.largestPlaceableRecord }

    /// Makes `size` bytes at the head free, starting at a multiple of `alignment`, and returns
    /// that offset. The caller writes the record there and then calls `advanceHead(past:)`.
    ///
    /// Once the head has come round behind the tail, the tail is kept `slack(for: size)` bytes
    /// ahead of what the head needs, so that a record read since the tail last passed finds room
    /// to be relocated. Below the capacity, once the placement has spent its relocation budget,
    /// the record goes wherever it fits.
    ///
    /// Inlined into its callers: with the rest out of line (`reserveMakingRoom`,
    /// `RingAllocator.roomKeepsSlack`) it stays within the 64 blocks up to which Swift 6.3
    /// inlines a function marked `@inline(__always)` into a large caller such as `placeRecord`.
    @inline(__always)
    func reserve(_ size: Int, alignment: Int = FileLayout.recordAlignment) throws(LarderError) -> Int {
        precondition(size > 0 && size % FileLayout.recordAlignment == 0)
        #if DEBUG
        if !testHooks.takesHeadRoomFirst { return try reserveMakingRoom(size, alignment: alignment) }
        #endif
        // Most placements: room free at the head, nothing to reclaim (one look at the state).
        if let start = allocator.value.headRoom(for: size, alignment: alignment) { return start }
        return try reserveMakingRoom(size, alignment: alignment)
    }

    /// The general case of `reserve`: reclaims, jumps, wraps or grows until the room is there.
    @inline(never)
    private func reserveMakingRoom(_ size: Int, alignment: Int) throws(LarderError) -> Int {
        var budget = ReclaimBudget(forPlacing: size)
        // The first test of reclaimAhead's loop, before its call: most placements reclaim nothing ahead.
        if allocator.value.isBelowCapacity && !allocator.value.headIsBehindTail && state.spanBytes > 0
            && allocator.value.garbageOutweighsLiveData { try reclaimAhead(of: size) }
        // Bounds on the work, so that a damaged ring can never make this spin, nor readers who
        // lend out ranges all round the ring: each lap passes every island once.
        var steps = 0
        let stepLimit = 4 * (ringEnd - ringStart) / FileLayout.recordAlignment + 64
        var jumps = 0
        let jumpLimit = 8 * (readers.slotCount + 2)
        var rebuilt = false
        while true {
            steps += 1
            if jumps > jumpLimit && !readers.isEmpty {
                throw LarderError(.busy, "zero-copy reads lend out records all round the cache; no room for \(size) bytes until they end", path: path)
            }
            if steps > stepLimit {
                // Head, tail and span out of step with the ring (a process that broke the format
                // while this one had the file open): rebuilt from the records, once.
                guard !rebuilt else {
                    throw LarderError(.corrupt, "the ring is inconsistent (no progress while making room)", path: path)
                }
                try rebuild()
                rebuilt = true
                steps = 0
                continue
            }
            let head = state.head
            let start = FileLayout.alignUp(head, alignment)
            let (limit, obstacle) = allocator.value.freeRun(from: head)
            if start + size <= limit {
                if (allocator.value.isBelowCapacity && (!allocator.value.headIsBehindTail || budget.relocationBytes <= 0))
                    || state.spanBytes == 0 || allocator.value.gapBytes >= size + allocator.value.slack(for: size) {
                    if start > head { allocator.value.pad(from: head, to: start) }
                    return start
                }
                try reclaimTailRecord(budget: &budget, unrelocated: unrelocatedRecords)
                continue
            }
            switch obstacle {
            case .tail:
                try reclaimTailRecord(budget: &budget, unrelocated: unrelocatedRecords)
            case .island(let islandStart, let islandEnd):
                jumps += 1
                allocator.value.jump(from: head, over: islandStart, to: islandEnd)
            case .ringEnd:
                if allocator.value.isBelowCapacity {
                    try passDeadRecords(untilRoomBehindTailFor: size, from: head)
                    if !allocator.value.roomBehindTail(for: size, from: head) {
                        try growFile(toFit: start + size)
                        continue
                    }
                }
                allocator.value.wrap(from: head)
            }
        }
    }

    /// What making room does with a live record at the tail that it cannot relocate: below the
    /// capacity the file may still grow, so nothing is evicted for room.
    private var unrelocatedRecords: UnrelocatedRecord { allocator.value.isBelowCapacity ? .keep : .evict }

    /// Below the capacity, with the head at the ring's end: passes the dead records and padding
    /// at the tail, which costs no copy, until wrapping would leave room for a record of `size`
    /// and its slack, or a live record is at the tail. The file grows only if that is not enough.
    private func passDeadRecords(untilRoomBehindTailFor size: Int, from head: Int) throws(LarderError) {
        var budget = ReclaimBudget.none
        while state.spanBytes > 0, !allocator.value.roomBehindTail(for: size, from: head),
              try reclaimTailRecord(budget: &budget, unrelocated: .leave) > 0 {}
    }

    /// Below the capacity, before the head has come round behind the tail, when more of the
    /// span is garbage than live data, reclaims records at the tail before the head needs their
    /// room (once behind the tail, the head makes its room as at the capacity): dead ones are
    /// passed, live ones relocated to the head, as many record bytes as four times the record
    /// being placed (and always one record, however large, so that a large live record cannot
    /// hold the tail back for good).
    /// Without it the file would grow to its capacity before anything freed was used again: a
    /// cache of 100 MB whose values are replaced all the time would take all of a 1 GB
    /// capacity, in fresh pages. With it, the freed room collects behind the tail, and once it
    /// can take the next record when the head reaches the ring's end, the head wraps there
    /// instead of growing the file (`roomBehindTail`). The file then settles at two to two and
    /// a half times its live data, and updates of random keys relocate about one record in
    /// seven (one in twenty in a file of three times); large records mostly take the room of
    /// dead ones instead (`takeDeadRoom`). Stops at a record that cannot be relocated without
    /// growing the file.
    private func reclaimAhead(of size: Int) throws(LarderError) {
        var remaining = max(4 * size, 4 << 10)
        var budget = ReclaimBudget.unlimitedRelocation
        while remaining > 0, state.spanBytes > 0, allocator.value.garbageOutweighsLiveData {
            // Most records met here are dead entries: a run of them is passed in one go, as far
            // as these tests would let it go one record at a time.
            let passable = min(remaining, state.spanBytes, allocator.value.deadBytesPassable)
            var passed = TailReclaimer.passDeadEntries(&allocator.value, budget: passable)
            testHooks.bytesPassedInRuns &+= passed
            if passed == 0 {
                passed = try stepTailRecord(budget: &budget, unrelocated: .leave)
                if passed == 0 { return }
            }
            remaining -= passed
        }
    }

    /// Grows the file (`RingAllocator.growthTarget`) so that it reaches at least `needed`.
    private func growFile(toFit needed: Int) throws(LarderError) {
        let target = allocator.value.growthTarget(toFit: needed, pageSize: pageSize)
        try file.grow(to: target)
        meta.fileSize = target
        // The put that grows the file writes at the head next: warming starts before it does.
        pageWarmer?.fileGrew(head: state.head)
        // During recovery, before the index is placed, the meta page is not yet valid; recovery's
        // own final write records the size.
        if meta.activeIndex.exists { try writeMeta() }
    }
}

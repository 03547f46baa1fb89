/// Eviction: what happens to the record at the tail when the head needs its space.
///
/// The policy is CLOCK over the ring (second chance, as in memcached's and CacheLib's FIFO
/// variants): a read sets the record's access bit without any lock; when the tail reaches a
/// live record, an expired one is dropped, one that was read since the tail last passed is
/// copied to the head with the bit cleared, and one that was not is evicted. A key read all the
/// time is therefore never evicted; the least recently used go first. While the live data is
/// well below capacity (after removals), unread records are relocated too, so that removing
/// entries frees room without evicting others. Below the capacity nothing is evicted to make
/// room: a live record that cannot be relocated is passed where it lies, and after a long run of
/// them the rest of the ring is passed too and the file grows. Relocation and passing are
/// bounded per write, so one put never does work proportional to the cache size.
extension CacheStore {
    /// What one placement may do at the tail beyond passing dead records.
    struct ReclaimBudget {
        /// Record bytes it may relocate, bounded by the put's own size. Below the capacity a
        /// placement may move one record more, whatever its size: a record larger than the
        /// budget would otherwise never move.
        var relocationBytes: Int
        /// Live records it may pass where they lie below the capacity (`passInPlace`), each a
        /// header read, before it gives up the lap (`passRestOfRing`).
        var passesInPlace: Int
        /// Whether unread records are relocated too (below the capacity or the compaction
        /// threshold). A count limit relocates only read ones: relocating keeps the count.
        var relocatesUnread = true

        init(forPlacing size: Int) {
            relocationBytes = max(8 * size, 64 << 10)
            passesInPlace = 256
        }

        private init(relocationBytes: Int, passesInPlace: Int) {
            self.relocationBytes = relocationBytes
            self.passesInPlace = passesInPlace
        }

        static let none = ReclaimBudget(relocationBytes: 0, passesInPlace: 0)
        static let unlimitedRelocation = ReclaimBudget(relocationBytes: .max, passesInPlace: 0)
    }

    /// What reclaiming does with a live, unexpired record at the tail that it does not relocate.
    enum UnrelocatedRecord {
        /// Evicts it: the file is at its capacity, or an entry must go to make room in the index.
        case evict
        /// Keeps it where it lies: the file is below its capacity. The head passes it
        /// (`passInPlace`), or, once the placement may pass no more, passes everything from it
        /// to the ring's end, and the file grows next (`passRestOfRing`).
        case keep
        /// Leaves it at the tail, and the tail where it is: reclaiming ahead of need stops there.
        case leave
    }

    /// Processes the record at the tail and moves the tail past it. Returns the bytes the tail
    /// passed, or 0 when it moved to the ring's start, rebuilt a damaged ring, or left a record.
    @discardableResult
    func reclaimTailRecord(budget: inout ReclaimBudget, unrelocated: UnrelocatedRecord) throws(LarderError) -> Int {
        let tail = state.tail
        if tail >= ringEnd {
            // Only a damaged state gets here: the tail belongs at the ring's start then.
            moveTail(to: ringStart, consumed: 0)
            return 0
        }
        if let length = RecordHeader.paddingLength(in: file, at: tail, limit: ringEnd) {
            moveTail(to: tail + length, consumed: length)
            return length
        }
        // A segment header counts only where a segment can be (FORMAT.md 4.7), and an entry only
        // clear of the index segments: stepping over a hostile length would pass live entries
        // without taking them out of the index, or land inside a segment.
        guard let header = RecordHeader.read(from: file, at: tail, limit: ringEnd, seed: seed),
              header.kind == .entry ? !layout.overlapsIsland(tail, tail + header.totalSize)
                                    : IndexSegment.isWellFormed(header, at: tail, pageSize: pageSize) else {
            // Damage where the tail stands: rebuild everything from the records that check out.
            // The caller's loop looks at the new state afterwards.
            try rebuild()
            return 0
        }
        let size = header.totalSize
        if header.kind == .entry && header.isLive && header.sequence >= meta.firstValidSequence {
            let belowCapacity = ringEnd < capacity
            let withinBudget = belowCapacity ? budget.relocationBytes > 0 : budget.relocationBytes >= size
            if header.isExpiredNow(maximumAge: maximumAge)
                && SlidingExpiry.claimExpired(in: file, at: tail, header: header, maximumAge: maximumAge) {
                removeEntry(at: tail, header: header, counter: .expirations)
            } else if withinBudget,
                      belowCapacity && budget.relocatesUnread || RecordHeader.wasVisited(in: file, at: tail)
                        || budget.relocatesUnread && state.liveRecordBytes <= allocator.value.compactionThreshold,
                      allocator.value.makeRunAtHead(of: size) {
                budget.relocationBytes -= size
                relocate(from: tail, header: header)
                return size
            } else {
                switch unrelocated {
                case .leave:
                    return 0
                case .keep where budget.passesInPlace > 0 && passInPlace(at: tail, size: size):
                    budget.passesInPlace -= 1
                    return size
                case .keep where passRestOfRing():
                    return ringEnd - tail
                case .keep, .evict:
                    removeEntry(at: tail, header: header, counter: .evictions)
                }
            }
        }
        moveTail(to: tail + size, consumed: size)
        return size
    }

    /// Below the capacity, with the head come round behind the tail, keeps the live record of
    /// `size` bytes at the tail where it lies, as if relocated onto itself, when the head has no
    /// room to take it or the placement has spent its relocation budget (and the record it
    /// places did not fit in front of the head): the head comes up to the tail (padding the free
    /// bytes in front of it) and both pass the record. It keeps its sequence number and access
    /// bit. False when the head cannot reach the tail.
    private func passInPlace(at tail: Int, size: Int) -> Bool {
        guard allocator.value.moveHeadUpToTail() else { return false }
        testHooks.recordsPassedInPlace += 1
        allocator.value.notePassedInPlace(size: size)
        // The span, the whole ring since the head reached the tail, keeps its length.
        state.head = tail + size
        moveTail(pastRecordAt: tail, size: size)
        return true
    }

    /// Below the capacity, with the head come round behind the tail, gives up this lap of the
    /// ring when a placement has passed as many live records in place as it may and meets one
    /// more (the ring is mostly live there): the head comes up to the tail
    /// (padding the free bytes in front of it), and then the head and the tail both pass
    /// everything from there to the ring's end where it lies, so that the head stands at the
    /// ring's end, where the file grows, and the tail at its start. Nothing is copied or
    /// evicted, at once, however much of the ring is live: the live data has outgrown the file.
    /// Until the tail comes round again, the padded bytes and the garbage passed stay unused.
    /// False when the head cannot reach the tail.
    private func passRestOfRing() -> Bool {
        guard allocator.value.moveHeadUpToTail() else { return false }
        testHooks.lapsGivenUp += 1
        allocator.value.deadRooms.list.tailPassed(ringEnd - state.tail)
        // The span, the whole ring since the head reached the tail, keeps its length.
        state.head = ringEnd
        state.tail = ringStart
        return true
    }

    /// Moves the tail past the live record of `size` bytes at `offset` (relocated, or passed in
    /// place) while the head takes its length: the span keeps its length.
    private func moveTail(pastRecordAt offset: Int, size: Int) {
        allocator.value.deadRooms.list.tailPassed(size)
        state.tail = offset + size >= ringEnd ? ringStart : offset + size
    }

    private func moveTail(to offset: Int, consumed: Int) {
        allocator.value.deadRooms.list.tailPassed(consumed)
        state.spanBytes = max(0, state.spanBytes - consumed)
        state.tail = offset >= ringEnd ? ringStart : offset
        if state.spanBytes == 0 {
            // An empty ring: let the tail sit at the head.
            state.tail = state.head
            allocator.value.deadRooms.list.removeAll()
        }
    }

    /// Copies the live record at `offset` to the head (with a new sequence number and its access
    /// bit clear), points the index at the copy, and retires the original.
    private func relocate(from offset: Int, header: RecordHeader) {
        let size = header.totalSize
        let destination = state.head
        // Key and value only: the header is written after them, as every header is (FORMAT.md
        // 4.3). Copied with them, the original's live first word and sequence would stand at the
        // destination before its key and value had arrived, and a reader of another process
        // holding a slot that named the destination once could take it for a whole record.
        file.mutableBytes(at: destination + RecordHeader.size, count: size - RecordHeader.size)
            .copyMemory(from: file.bytes(at: offset + RecordHeader.size, count: size - RecordHeader.size))
        var moved = header
        moved.sequence = takeSequence()
        // At the head now, wherever the original was written.
        moved.flags &= ~RecordHeader.placedInSpanFlag
        moved.write(to: file, at: destination, seed: seed)
        let key = file.bytes(at: offset + RecordHeader.size, count: header.keyLength)
        let tag = KeyHash(key).tag
        beginIndexChange()
        repointIndex(from: HashTable.slot(tag: tag, offset: offset), to: HashTable.slot(tag: tag, offset: destination))
        RecordHeader.markDead(in: file, at: offset)
        endIndexChange()
        state.add(1, to: .relocations)
        // The head advances and the tail passes the original: the span keeps its length.
        state.head = destination + size
        moveTail(pastRecordAt: offset, size: size)
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
        retire(at: found.offset, header: found.header, counting: counter)
    }

    /// Marks the entry at `offset`, already out of the index, dead; takes it out of the counts
    /// when it was in the index (`counter` not nil).
    private func retire(at offset: Int, header: RecordHeader, counting counter: SharedState.Counter?) {
        if let counter {
            state.entryCount &-= 1
            removeFromLiveCounts(header)
            state.add(1, to: counter)
        }
        RecordHeader.markDead(in: file, at: offset)
    }

    func takeSequence() -> UInt64 {
        let sequence = state.nextSequence
        // Below the limit when the file was opened; wrapping, if another process broke that,
        // voids records instead of trapping.
        state.nextSequence = sequence &+ 1
        return sequence
    }
}

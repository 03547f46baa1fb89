import CLarderSupport

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
///
/// `TailReclaimer` decides for the record at the tail and moves the tail cursor (in the shared
/// state, through the ring allocator). What needs the index (removing or repointing an entry)
/// or the whole file (a rebuild) it hands back as a `Step`; the store does that part
/// (Engine/CacheStore+Reclaiming.swift). One value serves one step: it holds the meta copy's
/// figures the step reads.
///
/// Invariants, checked in debug builds after each move of the tail by `checkInvariants`: the
/// tail stays in `[ringStart, ringEnd)`, or at the head when the span is empty; the span is never
/// negative. A tail that passes `n` bytes of records takes `n` off the span, unless the head
/// takes them at once (relocation, passing in place), when the span keeps its length.
struct TailReclaimer {
    /// Records with a lower sequence number were voided by a clear (`Meta.firstValidSequence`).
    let firstValidSequence: UInt64
    /// The file's standing maximum age in milliseconds (0: none).
    let maximumAge: UInt64
    let pageSize: Int

    /// What one placement may do at the tail beyond passing dead records.
    struct Budget {
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

        static let none = Budget(relocationBytes: 0, passesInPlace: 0)
        static let unlimitedRelocation = Budget(relocationBytes: .max, passesInPlace: 0)
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

    /// What a step did, or what the store must do to finish it.
    enum Step {
        /// The tail passed this many bytes (0: it moved to the ring's start, or left a record).
        case passed(Int)
        /// The tail and the head passed the live record of this size where it lies.
        case passedInPlace(Int)
        /// The tail and the head passed the rest of the ring, this many bytes, where it lies.
        case gaveUpLap(Int)
        /// The record at the tail does not check out: the ring must be rebuilt.
        case damaged
        /// The live entry at the tail must leave the index, counted under `counter`; then
        /// `passRemoved` moves the tail past it.
        case remove(RecordHeader, counter: SharedState.Counter)
        /// The live entry at the tail goes to the head, where a run of its size is free:
        /// `copyToHead`, then the index moves to the copy, then `passRelocated`.
        case relocate(RecordHeader)
    }

    /// Looks at the record at the tail: passes padding and dead records, and decides for a live
    /// entry within `budget`. Inlined: the store's switch over the result then folds away.
    @inline(__always)
    func step(_ ring: inout RingAllocator, budget: inout Budget, unrelocated: UnrelocatedRecord) -> Step {
        // Read through `ring.file` each time: a local copy of the reference may cost a retain.
        let state = ring.state
        let ringStart = ring.ringStart, ringEnd = ring.ringEnd
        let tail = state.tail
        if tail >= ringEnd {
            // Only a damaged state gets here: the tail belongs at the ring's start then.
            Self.moveTail(&ring, to: ringStart, consumed: 0)
            return .passed(0)
        }
        if let length = RecordHeader.paddingLength(in: ring.file, at: tail, limit: ringEnd) {
            Self.moveTail(&ring, to: tail + length, consumed: length)
            return .passed(length)
        }
        // A segment header counts only where a segment can be (FORMAT.md 4.7), and an entry only
        // clear of the index segments: stepping over a hostile length would pass live entries
        // without taking them out of the index, or land inside a segment.
        guard let header = RecordHeader.read(from: ring.file, at: tail, limit: ringEnd, seed: ring.seed),
              header.kind == .entry ? !ring.layout.overlapsIsland(tail, tail + header.totalSize)
                                    : IndexSegment.isWellFormed(header, at: tail, pageSize: pageSize) else {
            // Damage where the tail stands: rebuild everything from the records that check out.
            // The caller's loop looks at the new state afterwards.
            return .damaged
        }
        let size = header.totalSize
        if header.kind == .entry && header.isLive && header.sequence >= firstValidSequence {
            let belowCapacity = ring.isBelowCapacity
            let withinBudget = belowCapacity ? budget.relocationBytes > 0 : budget.relocationBytes >= size
            if header.isExpiredNow(maximumAge: maximumAge)
                && SlidingExpiry.claimExpired(in: ring.file, at: tail, header: header, maximumAge: maximumAge) {
                return .remove(header, counter: .expirations)
            } else if withinBudget,
                      belowCapacity && budget.relocatesUnread || RecordHeader.wasVisited(in: ring.file, at: tail)
                        || budget.relocatesUnread && state.liveRecordBytes <= ring.compactionThreshold,
                      ring.makeRunAtHead(of: size) {
                budget.relocationBytes -= size
                return .relocate(header)
            } else {
                switch unrelocated {
                case .leave:
                    return .passed(0)
                case .keep where budget.passesInPlace > 0 && passInPlace(&ring, at: tail, size: size):
                    budget.passesInPlace -= 1
                    return .passedInPlace(size)
                case .keep where passRestOfRing(&ring):
                    return .gaveUpLap(ringEnd - tail)
                case .keep, .evict:
                    return .remove(header, counter: .evictions)
                }
            }
        }
        Self.moveTail(&ring, to: tail + size, consumed: size)
        return .passed(size)
    }

    /// Passes the run of dead entries at the tail, as `step` passes each, while fewer than
    /// `budget` bytes are passed (1: one entry), and returns the bytes passed. The run ends
    /// before anything else (padding, a live entry, an index segment, damage), which `step` then
    /// decides on, and at the ring's end, an index segment or the head. Needs none of the meta
    /// copy's figures: no reclaimer, no decoded header, no `Step` per record.
    @inline(__always)
    static func passDeadEntries(_ ring: inout RingAllocator, budget: Int) -> Int {
        let state = ring.state
        let tail = state.tail, head = state.head
        // `read`'s limit, and no stretch that `step` would refuse (an island) or that would
        // change what a caller's budget assumes: the islands in the gap, which change only when
        // the tail passes one's start or the head (a tail at the head passes nothing here).
        guard tail >= 0, budget > 0 else { return 0 }
        let end = min(ring.ringEnd, ring.file.size)
        let limit = ring.layout.islandFreeEnd(from: tail, limit: tail > head ? end : min(end, head))
        guard limit > tail else { return 0 }
        let passed = Int(truncatingIfNeeded: lrd_dead_entries(ring.file.viewBase + tail, UInt64(limit &- tail),
                                                              UInt64(budget), ring.seed))
        if passed > 0 { moveTail(&ring, to: tail &+ passed, consumed: passed) }
        return passed
    }

    /// Moves the tail past the entry of `size` bytes at `offset`, taken out of the index.
    func passRemoved(_ ring: inout RingAllocator, at offset: Int, size: Int) {
        Self.moveTail(&ring, to: offset + size, consumed: size)
    }

    /// Below the capacity, with the head come round behind the tail, keeps the live record of
    /// `size` bytes at the tail where it lies, as if relocated onto itself, when the head has no
    /// room to take it or the placement has spent its relocation budget (and the record it
    /// places did not fit in front of the head): the head comes up to the tail (padding the free
    /// bytes in front of it) and both pass the record. It keeps its sequence number and access
    /// bit. False when the head cannot reach the tail.
    private func passInPlace(_ ring: inout RingAllocator, at tail: Int, size: Int) -> Bool {
        guard ring.moveHeadUpToTail() else { return false }
        ring.notePassedInPlace(size: size)
        // The span, the whole ring since the head reached the tail, keeps its length.
        ring.state.head = tail + size
        moveTail(&ring, pastRecordAt: tail, size: size)
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
    private func passRestOfRing(_ ring: inout RingAllocator) -> Bool {
        guard ring.moveHeadUpToTail() else { return false }
        let state = ring.state
        ring.deadRooms.list.tailPassed(ring.ringEnd - state.tail)
        // The span, the whole ring since the head reached the tail, keeps its length.
        state.head = ring.ringEnd
        state.tail = ring.ringStart
        return true
    }

    /// Copies the live record at `offset` to the head, with the sequence number `sequence` and
    /// its access bit clear, and returns where. The original stays live until the index points
    /// at the copy.
    func copyToHead(_ ring: inout RingAllocator, from offset: Int, header: RecordHeader, sequence: UInt64) -> Int {
        let size = header.totalSize
        let destination = ring.state.head
        // Key and value only: the header is written after them, as every header is (FORMAT.md
        // 4.3). Copied with them, the original's live first word and sequence would stand at the
        // destination before its key and value had arrived, and a reader of another process
        // holding a slot that named the destination once could take it for a whole record.
        ring.file.mutableBytes(at: destination + RecordHeader.size, count: size - RecordHeader.size)
            .copyMemory(from: ring.file.bytes(at: offset + RecordHeader.size, count: size - RecordHeader.size))
        var moved = header
        moved.sequence = sequence
        // At the head now, wherever the original was written.
        moved.flags &= ~RecordHeader.placedInSpanFlag
        moved.write(to: ring.file, at: destination, seed: ring.seed)
        return destination
    }

    /// Counts the relocation of the record of `size` bytes at `offset` to `destination`, whose
    /// original the index no longer names: the head advances and the tail passes the original,
    /// so the span keeps its length.
    func passRelocated(_ ring: inout RingAllocator, from offset: Int, size: Int, to destination: Int) {
        ring.state.add(1, to: .relocations)
        ring.state.head = destination + size
        moveTail(&ring, pastRecordAt: offset, size: size)
    }

    /// Moves the tail past the live record of `size` bytes at `offset` (relocated, or passed in
    /// place) while the head takes its length: the span keeps its length.
    private func moveTail(_ ring: inout RingAllocator, pastRecordAt offset: Int, size: Int) {
        ring.deadRooms.list.tailPassed(size)
        ring.state.tail = offset + size >= ring.ringEnd ? ring.ringStart : offset + size
        Self.checkInvariants(ring)
    }

    @inline(__always)
    private static func moveTail(_ ring: inout RingAllocator, to offset: Int, consumed: Int) {
        let state = ring.state
        ring.deadRooms.list.tailPassed(consumed)
        state.spanBytes = max(0, state.spanBytes - consumed)
        state.tail = offset >= ring.ringEnd ? ring.ringStart : offset
        if state.spanBytes == 0 {
            // An empty ring: let the tail sit at the head.
            state.tail = state.head
            ring.deadRooms.list.removeAll()
        }
        Self.checkInvariants(ring)
    }

    @inline(__always)
    private static func checkInvariants(_ ring: borrowing RingAllocator) {
        #if DEBUG
        let state = ring.state
        precondition(state.spanBytes >= 0, "a negative span")
        precondition(state.spanBytes == 0 ? state.tail == state.head
                                          : state.tail >= ring.ringStart && state.tail < ring.ringEnd,
                     "the tail left the ring")
        #endif
    }
}

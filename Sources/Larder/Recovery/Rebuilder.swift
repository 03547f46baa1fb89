/// Recovery: rebuilding everything but the records themselves.
///
/// Runs when a file was not closed cleanly (a crash, `kill -9`, power loss) or its shared state is
/// implausible. The records are self-describing and checksummed, so the ring is scanned from
/// start to end: each record whose header and data checksums hold is kept (for a key seen twice,
/// the higher sequence number wins), everything else becomes padding. The head goes after the
/// newest record written at the head (not one flagged as written inside the span), the tail to
/// the oldest live one, and a fresh index is filled. The time is one sequential read of the file
/// plus one checksum pass over its records.
///
/// A `Rebuilder` is one rebuild's walk of the ring, and what it has found so far: the live
/// entries (newest of each key), the newest record written at the head, the highest sequence
/// number. It works on the file and the shared state only. `rebuild(_:)` makes one, and places
/// the ring and the index from what it found: that takes the store's meta copy, ring allocator
/// and index as well.
///
/// Invariants, checked in debug builds by `checkInvariants()`:
/// - `ringStart <= coveredUpTo <= position`: every byte before `coveredUpTo` is a kept record, an
///   island or padding;
/// - `newest.sequence <= highestSequence`, and `newest.end` lies in the ring.
struct Rebuilder {
    /// How much of the ring a rebuild scans between two moves of the index epoch: about a tenth
    /// of a second here, well within a reader's patience.
    static let signOfLifeBytes = 64 << 20

    private let file: MappedFile
    private let state: SharedState
    private let ringStart: Int, ringEnd: Int, pageSize: Int
    private let seed: UInt32
    private let firstValidSequence: UInt64
    /// Index segments the meta page names and whose headers hold: skipped whole.
    private let islands: [IndexLocation]
    private let islandBytes: [Range<Int>]
    /// The live entries kept, one per key.
    private let scratch = ScratchTable()
    /// The newest record written at the head (not one flagged as written inside the span).
    private var newest: (sequence: UInt64, end: Int)
    /// The highest sequence number of any record kept; the next one follows it.
    private var highestSequence: UInt64 = 0
    private var position: Int
    private var coveredUpTo: Int
    private var dataChecks: DataCheckBudget
    /// Where the walk next moves the index epoch on (see `signOfLifeBytes`).
    private var nextSignOfLife: Int

    /// A walk of the ring of `file` as `meta` describes it, from `ringStart`.
    private init(file: MappedFile, state: SharedState, meta: Meta, ringStart: Int, islands: [IndexLocation]) {
        self.file = file
        self.state = state
        self.ringStart = ringStart
        ringEnd = meta.fileSize
        pageSize = meta.pageSize
        seed = meta.checksumSeed
        firstValidSequence = meta.firstValidSequence
        self.islands = islands
        islandBytes = islands.map { $0.bytes(pageSize: meta.pageSize) }
        newest = (0, ringStart)
        position = ringStart
        coveredUpTo = ringStart
        dataChecks = DataCheckBudget(ringBytes: ringEnd - ringStart)
        // A rebuild is one long bracket: it moves the epoch on to the next odd value as it goes,
        // so that readers of other processes can tell it from a writer that died in one, which
        // leaves one odd value standing (FORMAT.md 7.7.3).
        nextSignOfLife = ringStart + Rebuilder.signOfLifeBytes
    }

    /// Rebuilds `store` from its records, under the writer lock.
    ///
    /// - Throws: `.corrupt` when called while a rebuild runs (damage it cannot repair is then an
    ///   error, not a loop), and what placing the index or flushing throws.
    static func rebuild(_ store: CacheStore) throws(LarderError) {
        guard store.index.value.beginRebuild() else {
            throw LarderError(.corrupt, "the ring is still inconsistent after recovery", path: store.path)
        }
        let state = store.state
        // Records past the ring's end would come back when it grows again (MappedFile).
        try store.file.discard(past: store.ringEnd)
        // Recovery pads over whatever fails its checks: the listed rooms among it too.
        store.allocator.value.deadRooms.list.removeAll()
        // Readers of other processes that miss while the index is rebuilt look again.
        state.beginIndexChange()
        defer {
            state.endIndexChange()
            store.index.value.endRebuild()
            // Any entry may have changed: watchers look at the cache itself.
            store.changes.record(hash: 0, kind: .rebuilt)
        }
        let counters = state.isFormatted ? SharedState.Counter.allCases.map { state.counter($0) } : nil
        // Numbers handed out before stay handed out, even those of records lost since: a reader
        // may remember one (FORMAT.md 4.1, 7.7.8).
        let formerNext = state.isFormatted && state.nextSequence <= RecordHeader.recoverableSequenceLimit ? state.nextSequence : 0
        state.format()
        // Formatting cleared the flags: until this rebuild has finished, the file needs repair,
        // whatever happens to it or to this process.
        state.needsRepair = true
        if let counters {
            for (counter, value) in zip(SharedState.Counter.allCases, counters) { state.add(value, to: counter) }
        }
        state.add(1, to: .recoveries)

        // Index segments the meta page names and whose headers hold are skipped whole; a
        // draining one that shares bytes with the active one (a hostile file) is none.
        let meta = store.meta
        var islands: [IndexLocation] = []
        for location in meta.indexSegmentsOverlap ? [meta.activeIndex] : [meta.activeIndex, meta.drainingIndex]
        where IndexSegment.table(in: store.file, at: location, pageSize: store.pageSize, seed: store.seed) != nil {
            islands.append(location)
        }
        var rebuilder = Rebuilder(file: store.file, state: state, meta: meta, ringStart: store.ringStart, islands: islands)
        rebuilder.scan()
        rebuilder.placeRing(afterNewestEndingAt: rebuilder.newest.sequence > 0 ? rebuilder.headEnd() : rebuilder.ringStart)
        // Counted on from next: no higher than what recovery keeps (FORMAT.md 4.1). Every record
        // below the old value is dead by now, every one above the new one dropped. Never lower
        // than the number the shared state had reached, when that was below the limit.
        store.meta.firstValidSequence = min(store.meta.firstValidSequence, RecordHeader.recoverableSequenceLimit)
        state.nextSequence = max(rebuilder.highestSequence + 1, store.meta.firstValidSequence, 2, formerNext)
        do throws(LarderError) {
            try rebuilder.placeIndex(in: store)
        } catch {
            // The scratch table may stand in as the index and is about to be freed: until the
            // next rebuild (the file still needs repair), the index is the empty placeholder.
            store.index.value.detach()
            throw error
        }
        try store.file.flush()
        state.needsRepair = false
    }

    /// Head after the newest record; tail at the first live entry after it in ring order, so
    /// that the oldest records are the first to be reclaimed.
    private func placeRing(afterNewestEndingAt head: Int) {
        var firstAfterHead = Int.max
        var firstOverall = Int.max
        scratch.forEachSlot { slot in
            let offset = HashTable.offset(of: slot)
            if offset >= head { firstAfterHead = min(firstAfterHead, offset) }
            firstOverall = min(firstOverall, offset)
        }
        state.head = head
        guard firstOverall != Int.max else {
            state.tail = head
            state.spanBytes = 0
            return
        }
        let tail = firstAfterHead != Int.max ? firstAfterHead : firstOverall
        state.tail = tail
        if tail == head {
            state.spanBytes = ringEnd - ringStart
        } else if tail < head {
            state.spanBytes = head - tail
        } else {
            state.spanBytes = (ringEnd - tail) + (head - ringStart)
        }
    }

    /// Puts the collected entries into an index segment of `store`: the old active one when it is
    /// big enough, else a new one allocated at the head (evicting from the tail if need be). The
    /// segments in `islands` may be reused; the others are no index.
    private func placeIndex(in store: CacheStore) throws(LarderError) {
        var slotCount = HashTable.minimumSlotCount
        // Two thirds of the load limit: room to grow before the next doubling.
        while scratch.count > HashTable.loadLimit(slotCount: slotCount) * 2 / 3 && slotCount < HashTable.maximumSlotCount {
            slotCount *= 2
        }
        while slotCount > HashTable.minimumSlotCount
                && IndexSegment.byteCount(slotCount: slotCount, pageSize: pageSize) > (store.capacity - ringStart) / 3 {
            slotCount /= 2
        }
        // Segments that are not valid are no islands: the ring may use their space.
        // A draining index that shares bytes with the active one (a hostile file) is no index:
        // retiring it would mark the active segment dead.
        if !islands.contains(store.meta.drainingIndex) || store.meta.indexSegmentsOverlap { store.meta.drainingIndex = .none }
        if !islands.contains(store.meta.activeIndex) { store.meta.activeIndex = .none }
        // The old segments stay islands, untouched, until the meta page no longer names them:
        // other processes may still be looking through them.
        var retired = [store.meta.drainingIndex].filter(\.exists)
        let activeIndex = store.meta.activeIndex
        if activeIndex.exists, activeIndex.slotCount >= slotCount,
           let table = IndexSegment.table(in: file, at: activeIndex, pageSize: pageSize, seed: seed) {
            store.index.value.replace(with: table)
        } else {
            // The scratch table stands in as the index while the ring makes room, so that any
            // eviction this causes is reflected in it.
            store.index.value.replace(with: scratch.table)
            let bytes = IndexSegment.byteCount(slotCount: slotCount, pageSize: pageSize)
            let offset = try store.reserve(bytes, alignment: pageSize)
            IndexSegment.format(in: file, at: offset, slotCount: slotCount, byteCount: bytes,
                                sequence: store.takeSequence(), now: SystemCall.nowMilliseconds(), seed: seed)
            store.advanceHead(past: bytes)
            if store.meta.activeIndex.exists { retired.append(store.meta.activeIndex) }
            let location = IndexLocation(offset: offset, slotCount: slotCount)
            guard let table = IndexSegment.table(in: file, at: location, pageSize: pageSize, seed: seed) else {
                throw LarderError(.corrupt, "could not place a new index segment", path: store.path)
            }
            store.meta.activeIndex = location
            store.index.value.replace(with: table)
        }
        store.meta.drainingIndex = .none
        let active = store.active
        active.clear()
        let limit = active.loadLimit
        var placed = 0
        scratch.forEachSlot { slot in
            // Below the limit, the table just cleared has room.
            if placed < limit, active.insert(slot) != nil {
                placed += 1
            } else if let header = store.entryHeader(at: HashTable.offset(of: slot)) {
                // More entries than the largest allowed index holds: the surplus is dropped.
                RecordHeader.markDead(in: file, at: HashTable.offset(of: slot))
                state.removeFromLiveCounts(header)
                state.entryCount &-= 1
            }
        }
        try store.writeMeta()
        for segment in retired { RecordHeader.markDead(in: file, at: segment.offset) }
    }

    private func padGap(upTo end: Int) {
        if end > coveredUpTo { RecordHeader.writePadding(to: file, at: coveredUpTo, length: end - coveredUpTo) }
    }

    /// Walks the ring from its start to its end once: keeps each record whose checks hold, pads
    /// over everything else.
    private mutating func scan() {
        while position + RecordHeader.paddingSize <= ringEnd {
            if position >= nextSignOfLife {
                state.beginIndexChange()
                nextSignOfLife = position + Rebuilder.signOfLifeBytes
            }
            if let island = islands.first(where: { $0.offset == position }) {
                padGap(upTo: position)
                if let header = RecordHeader.read(from: file, at: position, limit: ringEnd, seed: seed),
                   header.sequence > newest.sequence, header.sequence < RecordHeader.recoverableSequenceLimit {
                    newest = (header.sequence, position + header.totalSize)
                    highestSequence = max(highestSequence, header.sequence)
                }
                position += IndexSegment.byteCount(slotCount: island.slotCount, pageSize: pageSize)
                coveredUpTo = position
                continue
            }
            // A record numbered where writers never count (a hostile file) is dropped: the next
            // sequence is counted on from the newest one kept. So is an entry that runs into an
            // island (a hostile length): the island is kept whole.
            guard let header = RecordHeader.read(from: file, at: position, limit: ringEnd, seed: seed),
                  header.kind == .entry, header.sequence < RecordHeader.recoverableSequenceLimit,
                  !islandBytes.contains(where: { $0.overlaps(position..<(position + header.totalSize)) }),
                  dataChecks.dataIsIntact(header, in: file, at: position, seed: seed) else {
                position += FileLayout.recordAlignment
                continue
            }
            padGap(upTo: position)
            let size = header.totalSize
            highestSequence = max(highestSequence, header.sequence)
            if header.sequence > newest.sequence && !header.wasPlacedInSpan { newest = (header.sequence, position + size) }
            if header.isLive && header.sequence >= firstValidSequence {
                keepNewest(at: position, header: header)
            } else {
                RecordHeader.markDead(in: file, at: position)
            }
            position += size
            coveredUpTo = position
        }
        padGap(upTo: ringEnd)

        checkInvariants()
    }

    /// Adds the live entry at `offset` to `scratch`, unless a newer record of the same key is
    /// there already; the loser is marked dead.
    private func keepNewest(at offset: Int, header: RecordHeader) {
        let key = keyBytes(at: offset, header: header)
        let tag = KeyHash(key).tag
        var rival: (offset: Int, header: RecordHeader)?
        let index = scratch.table.find(tag: tag) { candidate in
            guard let other = RecordHeader.read(from: file, at: candidate, limit: ringEnd, seed: seed),
                  other.keyLength == key.count, keyBytes(at: candidate, header: other).sameBytes(as: key) else { return false }
            rival = (candidate, other)
            return true
        }
        let slot = HashTable.slot(tag: tag, offset: offset)
        if let index, let rival {
            if rival.header.sequence > header.sequence {
                RecordHeader.markDead(in: file, at: offset)
                return
            }
            RecordHeader.markDead(in: file, at: rival.offset)
            state.removeFromLiveCounts(rival.header)
            scratch.replace(at: index, with: slot)
        } else if scratch.insert(slot) {
            state.entryCount &+= 1
        } else {
            // More entries than the largest index holds: the surplus is dropped.
            RecordHeader.markDead(in: file, at: offset)
            return
        }
        state.addToLiveCounts(header)
    }

    private func keyBytes(at offset: Int, header: RecordHeader) -> UnsafeRawBufferPointer {
        file.bytes(at: offset + RecordHeader.size, count: header.keyLength)
    }

    /// Where the head was: after the newest record written at the head (`newest`), and after the
    /// records that follow it in ring order (padding aside, and round the ring's end once) with
    /// higher sequence numbers: written at the head after it and since written over in place
    /// (flagged). Past the head lie the records the tail passed before the head came round,
    /// which are older; in a full ring, the oldest of the span, which the walk passes only if
    /// they were written over since, and then as young as they are. After the scan, every byte of
    /// the ring is a kept record, an island or padding.
    private func headEnd() -> Int {
        var head = newest.end
        var position = newest.end
        var walked = 0
        while walked < ringEnd - ringStart {
            if position + RecordHeader.paddingSize > ringEnd {
                walked += ringEnd - position
                position = ringStart
                continue
            }
            let step: Int
            if let padding = RecordHeader.paddingLength(in: file, at: position, limit: ringEnd) {
                step = padding
            } else if let header = RecordHeader.read(from: file, at: position, limit: ringEnd, seed: seed),
                      header.sequence > newest.sequence, header.sequence < RecordHeader.recoverableSequenceLimit {
                step = header.totalSize
                head = position + step
            } else {
                break
            }
            position += step
            walked += step
        }
        return head
    }

    @inline(__always)
    private func checkInvariants() {
        #if DEBUG
        precondition(ringStart <= coveredUpTo && coveredUpTo <= position, "the walk lost its place")
        precondition(newest.sequence <= highestSequence || newest.sequence == 0, "the newest record is not the highest")
        precondition(newest.end >= ringStart && newest.end <= ringEnd, "the newest record is outside the ring")
        #endif
    }
}

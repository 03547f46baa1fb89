/// The ring: how space for records is found.
///
/// The data area `[ringStart, ringEnd)` is a circular log. New records go at the head; the tail
/// is the oldest record still in the log. `spanBytes` counts everything from the tail to the head
/// in ring order; the rest is the gap, free except for index segments parked in it. Space is made
/// at the head by reclaiming records at the tail (Eviction/TailReclaimer.swift): dead ones are
/// skipped, live ones are relocated to the head or evicted. While the file is below its capacity
/// it grows instead of wrapping.
///
/// Index segments are islands: neither head nor tail ever writes over or moves a live one.
extension CacheStore {
    /// What ends the free run in front of the head.
    enum Obstacle: Equatable {
        case tail
        case ringEnd
        case island(start: Int, end: Int)
    }

    private var activeIsland: (start: Int, end: Int)? { layout.activeIsland }
    private var drainingIsland: (start: Int, end: Int)? { layout.drainingIsland }

    /// Bytes of the ring (at full capacity) not taken by index segments.
    var usableRingBytes: Int { layout.usableRingBytes }

    /// Free bytes kept in front of the head while reclaiming (see `RingLayout`).
    var reclaimSlack: Int { layout.reclaimSlack }

    /// The largest record that can ever be placed (see `RingLayout`).
    var largestPlaceableRecord: Int { layout.largestPlaceableRecord }

    /// The end of the free run starting at the head, and what ends it. Records that a reader in
    /// some process is lending out (pinned) are obstacles like index segments.
    func freeRun(from head: Int) -> (limit: Int, obstacle: Obstacle) {
        var limit = ringEnd
        var obstacle = Obstacle.ringEnd
        if state.spanBytes > 0 && state.tail >= head {
            limit = state.tail
            obstacle = .tail
        }
        func consider(_ range: (start: Int, end: Int)?) {
            guard let range, range.start >= head, range.start < limit else { return }
            limit = range.start
            obstacle = .island(start: range.start, end: range.end)
        }
        consider(activeIsland)
        consider(drainingIsland)
        if !readers.isEmpty {
            for pinned in readers.pinnedRanges() { consider(pinned) }
        }
        return (limit, obstacle)
    }

    /// Free bytes between head and tail in ring order, not counting the index segments that
    /// sit in that stretch.
    var gapBytes: Int {
        let head = state.head, tail = state.tail
        let empty = state.spanBytes == 0
        func parked(_ island: (start: Int, end: Int)?) -> Int {
            guard let island else { return 0 }
            let inGap = empty || (tail > head ? island.start >= head && island.start < tail
                                              : island.start >= head || island.start < tail)
            return inGap ? island.end - island.start : 0
        }
        let parked = parked(activeIsland) + parked(drainingIsland)
        return (ringEnd - ringStart) - state.spanBytes - parked
    }

    /// The free bytes to keep in front of the head beyond a record of `size`. While the live
    /// data is below the compaction threshold nothing should be evicted: the fixed slack is then
    /// joined by up to twice the record's own size (at most a quarter of the ring), so that
    /// records about as large as the ones being written find a contiguous run to be relocated
    /// to when the tail reaches them (free bytes may be split by the ring's end); with the fixed
    /// slack alone, 1 MiB values in a cache a third full lost keys. The extra room is only asked
    /// for as far as reclaiming dead records can give it, with a margin: relocating a live
    /// record leaves the room in front of the head as it was, so asking for more than the ring
    /// holds beyond its live data could only be met by evicting. A fuller cache evicts what was
    /// not read anyway and keeps its room for values.
    private func slack(for size: Int) -> Int {
        let live = state.liveRecordBytes
        guard live <= compactionThreshold else { return reclaimSlack }
        let attainable = (usableRingBytes - live - size - reclaimSlack) / 2
        return reclaimSlack + max(0, min(2 * min(size, usableRingBytes / 8), attainable))
    }

    /// Makes `size` bytes at the head free, starting at a multiple of `alignment`, and returns
    /// that offset. The caller writes the record there and then calls `advanceHead(past:)`.
    ///
    /// Once the file is at its capacity, the tail is kept `slack(for: size)` bytes ahead of what
    /// the head needs, so that a record read since the tail last passed finds room to be relocated.
    func reserve(_ size: Int, alignment: Int = FileLayout.recordAlignment) throws(LarderError) -> Int {
        precondition(size > 0 && size % FileLayout.recordAlignment == 0)
        // Enough to relocate the live records met on the way while a quarter of the ring is
        // garbage, with room for runs of them; still bounded by the put's own size.
        var relocationBudget = max(8 * size, 64 << 10)
        // A bound on the work, so that a damaged ring can never make this spin.
        var steps = 0
        let stepLimit = 4 * (ringEnd - ringStart) / FileLayout.recordAlignment + 64
        while true {
            steps += 1
            if steps > stepLimit {
                throw LarderError(.corrupt, "the ring is inconsistent (no progress while making room)", path: path)
            }
            let head = state.head
            let start = FileLayout.alignUp(head, alignment)
            let (limit, obstacle) = freeRun(from: head)
            if start + size <= limit {
                if ringEnd < capacity || state.spanBytes == 0 || gapBytes >= size + slack(for: size) {
                    if start > head { pad(from: head, to: start) }
                    return start
                }
                try reclaimTailRecord(relocationBudget: &relocationBudget)
                continue
            }
            switch obstacle {
            case .tail:
                try reclaimTailRecord(relocationBudget: &relocationBudget)
            case .island(let islandStart, let islandEnd):
                jump(from: head, over: islandStart, to: islandEnd)
            case .ringEnd:
                if ringEnd < capacity {
                    try growFile(toFit: start + size)
                } else {
                    wrap(from: head)
                }
            }
        }
    }

    /// Moves the head, without reclaiming anything, to where at least `size` bytes are free in
    /// front of it: over index segments and around the ring's end. Returns false when the tail
    /// is in the way first.
    func makeRunAtHead(of size: Int) -> Bool {
        for _ in 0..<4 {
            let head = state.head
            let (limit, obstacle) = freeRun(from: head)
            if limit - head >= size { return true }
            switch obstacle {
            case .tail:
                return false
            case .island(let islandStart, let islandEnd):
                jump(from: head, over: islandStart, to: islandEnd)
            case .ringEnd:
                guard ringEnd == capacity else { return false }
                wrap(from: head)
            }
        }
        return false
    }

    private func jump(from head: Int, over islandStart: Int, to islandEnd: Int) {
        pad(from: head, to: islandStart)
        state.head = islandEnd
        state.spanBytes &+= islandEnd - islandStart
    }

    private func wrap(from head: Int) {
        pad(from: head, to: ringEnd)
        state.head = ringStart
    }

    /// Moves the head past a record of `size` bytes just written at it.
    func advanceHead(past size: Int) {
        state.head += size
        state.spanBytes &+= size
        pageWarmer?.headMoved(to: state.head)
    }

    /// Fills `[from, to)` at the head with a padding record and takes it into the span.
    private func pad(from start: Int, to end: Int) {
        guard end > start else { return }
        RecordHeader.writePadding(to: file, at: start, length: end - start)
        state.head = end
        state.spanBytes &+= end - start
    }

    /// Grows the file (in steps of up to half its size, at most 64 MiB) so that it reaches at
    /// least `needed`, never past the capacity.
    private func growFile(toFit needed: Int) throws(LarderError) {
        let step = max(min(ringEnd / 2, 64 << 20), 1 << 20)
        let target = min(capacity, FileLayout.alignUp(max(needed, ringEnd + step), pageSize))
        try file.grow(to: target)
        meta.fileSize = target
        // The put that grows the file writes at the head next: warming starts before it does.
        pageWarmer?.headMoved(to: state.head)
        // During recovery, before the index is placed, the meta page is not yet valid; recovery's
        // own final write records the size.
        if meta.activeIndex.exists { try writeMeta() }
    }
}

/// What the allocator needs to know of the meta page, worked out once per meta change rather than
/// on every write (`CacheStore.meta` recomputes it when it changes).
struct RingLayout {
    /// The live index segments (at most two) as `[start, end)` ranges.
    let activeIsland: (start: Int, end: Int)?
    let drainingIsland: (start: Int, end: Int)?
    /// The largest record that can ever be placed: the longest stretch of the ring, at full
    /// capacity, between index segments.
    let largestPlaceableRecord: Int
    /// Bytes of the ring (at full capacity) not taken by index segments.
    let usableRingBytes: Int
    /// Free bytes kept in front of the head while reclaiming, so that records read since the
    /// tail last passed can be relocated rather than evicted.
    let reclaimSlack: Int

    init(meta: Meta, ringStart: Int) {
        func island(_ location: IndexLocation) -> (start: Int, end: Int)? {
            guard location.exists else { return nil }
            return (location.offset, location.offset + IndexSegment.byteCount(slotCount: location.slotCount, pageSize: meta.pageSize))
        }
        let capacity = meta.capacity
        activeIsland = island(meta.activeIndex)
        drainingIsland = island(meta.drainingIndex)
        var first = activeIsland
        var second = drainingIsland
        if let a = first, let b = second, b.start < a.start { swap(&first, &second) }
        var longest = 0
        var position = ringStart
        var islandBytes = 0
        for range in [first, second] {
            guard let range else { continue }
            longest = max(longest, range.start - position)
            position = range.end
            islandBytes += range.end - range.start
        }
        largestPlaceableRecord = max(longest, capacity - position)
        usableRingBytes = capacity - ringStart - islandBytes
        reclaimSlack = min((capacity - ringStart) / 16, 256 << 10) & ~(FileLayout.recordAlignment - 1)
    }
}

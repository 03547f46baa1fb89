/// The ring: how space for records is found.
///
/// The data area `[ringStart, ringEnd)` is a circular log. New records go at the head; the tail
/// is the oldest record still in the log. `spanBytes` counts everything from the tail to the head
/// in ring order; the rest is the gap, free except for index segments parked in it. Space is made
/// at the head by reclaiming records at the tail (Eviction/TailReclaimer.swift): dead ones are
/// skipped, live ones are relocated to the head or evicted. While the file is below its capacity
/// nothing is evicted: it grows, unless so much of it is garbage that reclaiming ahead of need
/// has already freed the room behind the tail, and then the head wraps early and reuses it.
/// There, too, a large record may skip the head and take the room of a dead one inside the span
/// (DeadRoomReuse.swift).
///
/// Index segments are islands: neither head nor tail ever writes over or moves a live one.
///
/// `RingAllocator` owns the placement: the layout and ring bounds taken from the meta copy, the
/// dead rooms and the free run. The head, tail and span it moves live in the shared state. What
/// needs the index or the meta page (reclaiming at the tail, rebuilding, growing the file) the
/// store wires in (Engine/CacheStore+Placement.swift).
///
/// Invariants, checked in debug builds by `checkInvariants()`:
/// - `layout`, `ringEnd`, `capacity` and `seed` are derived from the meta copy the store has now
///   (`adopt`);
/// - `largestRecordPassedInPlace` is 0 or the size of a record, a multiple of 16 bytes.
///
/// Not copyable: every access borrows it where it lies, with no copy of its lists, and it
/// frees its scratch space when it goes. The methods a put calls are inlined: a call that is
/// not passes a copy of the whole value.
struct RingAllocator: ~Copyable {
    let file: MappedFile
    let state: SharedState
    let readers: ReaderTable
    let pageWarmer: PageWarmer?
    let ringStart: Int
    /// The end of the ring: the file's size in the meta copy.
    private(set) var ringEnd: Int
    private(set) var capacity: Int
    private(set) var seed: UInt32
    /// Index segments, slack and the largest placeable record, from the meta copy.
    private(set) var layout: RingLayout
    /// The rooms of large dead entries this process knows to be in the span (DeadRoomReuse.swift).
    var deadRooms = DeadRooms()
    /// The largest record the tail passed in place: the room kept in front of the head grows to
    /// take it next time (`slack(for:)`), so that it moves instead of being passed lap after lap.
    private(set) var largestRecordPassedInPlace = 0
    /// The slack's parts that change only with the fields above (`SlackTerms`).
    private var slackTerms: SlackTerms

    init(meta: Meta, ringStart: Int, file: MappedFile, state: SharedState, readers: ReaderTable,
         pageWarmer: PageWarmer?) {
        self.file = file
        self.state = state
        self.readers = readers
        self.pageWarmer = pageWarmer
        self.ringStart = ringStart
        ringEnd = meta.fileSize
        capacity = meta.capacity
        seed = meta.checksumSeed
        layout = RingLayout(meta: meta, ringStart: ringStart)
        slackTerms = SlackTerms(ringStart: ringStart, ringEnd: ringEnd, capacity: capacity, layout: layout,
                                largestRecordPassedInPlace: 0)
    }

    deinit {
        deadRooms.deallocateScratch()
    }

    /// Takes up a new meta copy: its index segments and file size.
    mutating func adopt(_ meta: Meta) {
        ringEnd = meta.fileSize
        capacity = meta.capacity
        seed = meta.checksumSeed
        layout = RingLayout(meta: meta, ringStart: ringStart)
        updateSlackTerms()
    }

    /// Notes a record of `size` bytes the tail passed in place.
    mutating func notePassedInPlace(size: Int) {
        largestRecordPassedInPlace = max(largestRecordPassedInPlace, size)
        updateSlackTerms()
    }

    /// Works the slack's parts out again after one of their inputs changed.
    private mutating func updateSlackTerms() {
        slackTerms = SlackTerms(ringStart: ringStart, ringEnd: ringEnd, capacity: capacity, layout: layout,
                                largestRecordPassedInPlace: largestRecordPassedInPlace)
        checkInvariants()
    }

    @inline(__always)
    func checkInvariants() {
        #if DEBUG
        precondition(largestRecordPassedInPlace >= 0 && largestRecordPassedInPlace % FileLayout.recordAlignment == 0,
                     "not the size of a record")
        precondition(layout.islandBytes >= 0 && layout.reclaimSlack >= 0, "a negative layout")
        precondition(slackTerms == SlackTerms(ringStart: ringStart, ringEnd: ringEnd, capacity: capacity, layout: layout,
                                              largestRecordPassedInPlace: largestRecordPassedInPlace),
                     "slack terms out of date")
        #endif
    }

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

    /// Live record bytes below which unread records are kept (relocated) rather than evicted.
    var compactionThreshold: Int { layout.compactionThreshold }

    /// Whether the file is below its capacity: it may still grow, and nothing is evicted.
    var isBelowCapacity: Bool {
        @inline(__always) get { ringEnd < capacity }
    }

    /// The end of the free run starting at the head, and what ends it. Records that a reader in
    /// some process is lending out (pinned) are obstacles like index segments.
    @inline(__always)
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
            for pinned in readers.pinnedRanges() where pinned.start >= head && pinned.start < limit
                && isRecord(pinned, endingBy: limit) {
                consider(pinned)
            }
        }
        return (limit, obstacle)
    }

    /// The usual placement of `size` bytes, without the general loop (`CacheStore.reserve`):
    /// the head aligned, `size` bytes free in front of it (up to the tail, the ring's end or an
    /// index segment), no range lent out, and nothing to reclaim first: below the capacity with
    /// the head ahead of the tail, no garbage to reclaim ahead; otherwise a gap that keeps the
    /// slack (unless the span is 0). Returns the head then, as that loop would; nil otherwise,
    /// and the loop decides. The usual case comes first and reads the fewest fields.
    /// Mutating only to take the allocator by address: the fields a case reads are loaded then,
    /// not the whole value first. It changes nothing.
    @inline(__always)
    mutating func headRoom(for size: Int, alignment: Int) -> Int? {
        let head = state.head, end = head &+ size
        guard head & (alignment &- 1) == 0 else { return nil }
        let tail = state.tail
        if tail < head && ringEnd < capacity {
            // Ahead of the tail below the capacity (a span of 0 here is damage: nil is safe).
            guard end <= ringEnd, !garbageOutweighsLiveData(span: state.spanBytes) else { return nil }
        } else {
            guard roomKeepsSlack(for: size, head: head, tail: tail) else { return nil }
        }
        guard !layout.islandStarts(from: head, before: end), readers.isEmpty else { return nil }
        return head
    }

    /// `headRoom` behind the tail or at the capacity: whether `size` bytes at the head end by
    /// the tail or the ring's end and, unless the span is 0, leave the gap its slack. Not
    /// inlined, so that `headRoom` stays small enough to be inlined where a put calls it.
    @inline(never)
    private mutating func roomKeepsSlack(for size: Int, head: Int, tail: Int) -> Bool {
        let span = state.spanBytes
        guard head &+ size <= (span > 0 && tail >= head ? tail : ringEnd) else { return false }
        return span == 0 || gap(gapBytes(head: head, tail: tail, span: span), keepsSlackFor: size)
    }

    /// Whether a reader's pin covers one record whole, within the free run that ends at
    /// `limit`: what a pin on a record the tail has passed covers. A reader pins the range the
    /// header it read names, before it checks that the record is still that one; a reader held
    /// up meanwhile may pin a range the ring has since filled otherwise, which could reach past
    /// the tail or into an index segment. Such a range is no obstacle (its reader's check fails,
    /// whatever is written there): the head must not jump to its end. Readers pin entries only:
    /// a pin over another kind of record (an index segment's header names a length no multiple
    /// of 16) is no obstacle either, so the head, jumping only to an entry's end, stays aligned.
    private func isRecord(_ pinned: (start: Int, end: Int), endingBy limit: Int) -> Bool {
        guard pinned.end <= limit,
              let header = RecordHeader.read(from: file, at: pinned.start, limit: limit, seed: seed),
              header.kind == .entry else { return false }
        return pinned.start &+ header.totalSize == pinned.end
    }

    /// Bytes of index segments parked in the gap (which the span does not count).
    private var parkedIslandBytes: Int {
        @inline(__always) get { parkedIslandBytes(head: state.head, tail: state.tail, span: state.spanBytes) }
    }

    /// `parkedIslandBytes` with head, tail and span read already.
    @inline(__always)
    private func parkedIslandBytes(head: Int, tail: Int, span: Int) -> Int {
        // In ring order the gap is [head, tail): an island starts in it when its start lies in
        // [head, tail) for a tail ahead of the head, and outside [tail, head) otherwise (all of
        // the ring, for a tail at the head). One unsigned comparison an island.
        let ahead = tail > head
        let lower = ahead ? head : tail
        let width = UInt(bitPattern: ahead ? tail &- head : head &- tail)
        func parked(_ start: Int, _ length: Int) -> Int {
            span == 0 || (UInt(bitPattern: start &- lower) < width) == ahead ? length : 0
        }
        return parked(layout.activeStart, layout.activeLength) &+ parked(layout.drainingStart, layout.drainingLength)
    }

    /// Free bytes between head and tail in ring order, not counting the index segments that
    /// sit in that stretch.
    var gapBytes: Int {
        @inline(__always) get { gapBytes(head: state.head, tail: state.tail, span: state.spanBytes) }
    }

    /// `gapBytes` with head, tail and span read already.
    @inline(__always)
    private func gapBytes(head: Int, tail: Int, span: Int) -> Int {
        (ringEnd &- ringStart) &- span &- parkedIslandBytes(head: head, tail: tail, span: span)
    }

    /// Bytes of the span that reclaiming would free: dead records and padding.
    private var garbageBytes: Int {
        @inline(__always) get {
            state.spanBytes - state.liveRecordBytes - (layout.islandBytes - parkedIslandBytes)
        }
    }

    /// Whether more of the span is garbage than live data, and at least the fixed slack. Asked
    /// before every put below the capacity: the islands in the span are only counted when the
    /// rest of the span would do.
    var garbageOutweighsLiveData: Bool {
        @inline(__always) get { garbageOutweighsLiveData(span: state.spanBytes) }
    }

    /// `garbageOutweighsLiveData` with the span's length read already. The islands in the span
    /// are counted only when all of them might not leave enough garbage.
    @inline(__always)
    func garbageOutweighsLiveData(span: Int) -> Bool {
        let live = state.liveRecordBytes
        let threshold = max(live, reclaimSlack)
        guard span &- live >= threshold else { return false }
        return span &- live &- layout.islandBytes >= threshold || garbageBytes >= threshold
    }

    /// Bytes of dead records the tail may pass one after another, each while
    /// `garbageOutweighsLiveData` still holds: 0 when it does not hold now. It holds exactly while
    /// the garbage is at least the threshold (the garbage never exceeds the span less the live
    /// data). Passing dead records takes their bytes off the garbage; the islands counted in it
    /// stay so while the tail passes no island's start and not the head.
    var deadBytesPassable: Int {
        @inline(__always) get {
            let passable = garbageBytes - max(state.liveRecordBytes, reclaimSlack) + 1
            assert((passable > 0) == garbageOutweighsLiveData, "the garbage measured twice")
            return max(0, passable)
        }
    }

    /// Whether the head has come round behind the tail: its free run then ends at the tail, and
    /// the file cannot grow until the tail has passed the ring's end.
    var headIsBehindTail: Bool {
        @inline(__always) get { state.spanBytes > 0 && state.tail >= state.head }
    }

    /// The free bytes to keep in front of the head beyond a record of `size`, in a ring of the
    /// file's present size.
    ///
    /// While the live data is below the compaction threshold (always, below the capacity),
    /// nothing should be evicted. The fixed slack is then joined by up to twice the record's own
    /// size, at most a quarter of the ring. Records about as large as the ones being written then
    /// find a contiguous run to be relocated to when the tail reaches them. The extra room is
    /// asked for only as far as reclaiming dead records can give it, with a margin: more could
    /// only be met by evicting. A fuller cache evicts what was not read and keeps its room for
    /// values.
    @inline(__always)
    func slack(for size: Int) -> Int {
        checkInvariants()
        return slackTerms.slack(for: size, live: state.liveRecordBytes)
    }

    /// Whether a gap of `gap` bytes keeps a record of `size` bytes and its slack: first against
    /// the most the slack can be (`SlackTerms.most(for:)`), which needs no live bytes, and
    /// usually is the slack below the compaction threshold.
    @inline(__always)
    func gap(_ gap: Int, keepsSlackFor size: Int) -> Bool {
        checkInvariants()
        return gap >= size &+ slackTerms.most(for: size) || gap >= size &+ slack(for: size)
    }

    /// Whether wrapping at the ring's end, rather than growing the file, would leave at least
    /// `size` bytes and the slack free: room that reclaiming ahead of need has freed.
    func roomBehindTail(for size: Int, from head: Int) -> Bool {
        gapBytes - (ringEnd - head) >= size + slack(for: size)
    }

    /// Brings the head up to the tail, padding the free bytes in between and stepping over the
    /// islands and pinned ranges there, so that the records from the tail on can be passed where
    /// they lie. Returns false when the head is not behind the tail.
    func moveHeadUpToTail() -> Bool {
        let tail = state.tail
        guard headIsBehindTail else { return false }
        // Each step passes an island or a pinned range, or reaches the tail.
        for _ in 0..<(3 + readers.slotCount) {
            let head = state.head
            if head == tail { return true }
            switch freeRun(from: head).obstacle {
            case .tail:
                pad(from: head, to: tail)
            case .island(let islandStart, let islandEnd):
                jump(from: head, over: islandStart, to: islandEnd)
            case .ringEnd:
                return false
            }
        }
        return state.head == tail
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

    func jump(from head: Int, over islandStart: Int, to islandEnd: Int) {
        pad(from: head, to: islandStart)
        state.head = islandEnd
        state.spanBytes &+= islandEnd - islandStart
    }

    func wrap(from head: Int) {
        pad(from: head, to: ringEnd)
        state.head = ringStart
        // An empty ring keeps its tail at the head (a head at the ring's end pads nothing).
        if state.spanBytes == 0 { state.tail = ringStart }
    }

    /// Moves the head past a record of `size` bytes just written at it.
    @inline(__always)
    func advanceHead(past size: Int) {
        state.head += size
        state.spanBytes &+= size
        pageWarmer?.headMoved(to: state.head)
    }

    /// Fills `[from, to)` at the head with a padding record and takes it into the span.
    @inline(__always)
    func pad(from start: Int, to end: Int) {
        guard end > start else { return }
        RecordHeader.writePadding(to: file, at: start, length: end - start)
        state.head = end
        state.spanBytes &+= end - start
    }

    /// The size to grow the file to (in steps of up to half its size, at most 64 MiB) so that it
    /// reaches at least `needed`, never past the capacity.
    func growthTarget(toFit needed: Int, pageSize: Int) -> Int {
        let step = max(min(ringEnd / 2, 64 << 20), 1 << 20)
        return min(capacity, FileLayout.alignUp(max(needed, ringEnd + step), pageSize))
    }
}

/// What the allocator needs to know of the meta page, worked out once per meta change rather than
/// on every write (`CacheStore.meta` recomputes it when it changes).
struct RingLayout {
    /// The live index segments (at most two) as `[start, end)` ranges.
    let activeIsland: (start: Int, end: Int)?
    let drainingIsland: (start: Int, end: Int)?
    /// The same as starts and lengths, `Int.max` and 0 for none: the tests of every placement,
    /// with no optional to unwrap.
    let activeStart, activeLength, drainingStart, drainingLength: Int
    /// The largest record that can ever be placed: the longest stretch of the ring, at full
    /// capacity, between index segments.
    let largestPlaceableRecord: Int
    /// Bytes of the ring (at full capacity) not taken by index segments.
    let usableRingBytes: Int
    /// Bytes of the live index segments.
    let islandBytes: Int
    /// Free bytes kept in front of the head while reclaiming, so that records read since the
    /// tail last passed can be relocated rather than evicted.
    let reclaimSlack: Int

    init(meta: Meta, ringStart: Int) {
        func island(_ location: IndexLocation) -> (start: Int, end: Int)? {
            guard location.exists else { return nil }
            let bytes = location.bytes(pageSize: meta.pageSize)
            return (bytes.lowerBound, bytes.upperBound)
        }
        let capacity = meta.capacity
        activeIsland = island(meta.activeIndex)
        drainingIsland = island(meta.drainingIndex)
        (activeStart, activeLength) = activeIsland.map { ($0.start, $0.end - $0.start) } ?? (.max, 0)
        (drainingStart, drainingLength) = drainingIsland.map { ($0.start, $0.end - $0.start) } ?? (.max, 0)
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
        self.islandBytes = islandBytes
        usableRingBytes = capacity - ringStart - islandBytes
        reclaimSlack = Self.fixedSlack(ringBytes: capacity - ringStart)
    }

    /// Live record bytes below which unread records are kept (relocated) rather than evicted.
    var compactionThreshold: Int { usableRingBytes / 4 * 3 }

    /// Whether an island starts in `[start, end)`, for `start` in the ring: one unsigned
    /// comparison an island (a start of `Int.max` is never in it).
    @inline(__always)
    func islandStarts(from start: Int, before end: Int) -> Bool {
        let length = UInt(bitPattern: end &- start)
        return UInt(bitPattern: activeStart &- start) < length || UInt(bitPattern: drainingStart &- start) < length
    }

    /// Whether `[start, end)` shares a byte with a live index segment: in a sound file no record
    /// does, but a damaged or hostile one may say otherwise.
    @inline(__always)
    func overlapsIsland(_ start: Int, _ end: Int) -> Bool {
        func overlaps(_ island: (start: Int, end: Int)?) -> Bool {
            guard let island else { return false }
            return island.start < end && start < island.end
        }
        return overlaps(activeIsland) || overlaps(drainingIsland)
    }

    /// The end of the stretch from `offset` up to `limit` that no live index segment shares a
    /// byte with: the start of the first one after `offset`, or `offset` itself when one holds it.
    @inline(__always)
    func islandFreeEnd(from offset: Int, limit: Int) -> Int {
        func end(_ island: (start: Int, end: Int)?, _ limit: Int) -> Int {
            guard let island, island.end > offset else { return limit }
            return min(limit, max(offset, island.start))
        }
        return end(drainingIsland, end(activeIsland, limit))
    }

    /// The fixed part of the free bytes kept in front of the head in a ring of `ringBytes`.
    static func fixedSlack(ringBytes: Int) -> Int {
        min(ringBytes / 16, 256 << 10) & ~(FileLayout.recordAlignment - 1)
    }
}

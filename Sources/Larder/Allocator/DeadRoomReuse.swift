/// Reusing the room of large dead entries in the span below the capacity (FORMAT.md 6.8), from
/// the free list (`FreeList`).
///
/// Only below the capacity: there nothing is evicted, so where a record lies does not decide how
/// long it stays. At the capacity the ring's order is the CLOCK order, and a new record placed
/// near the tail would be the next to go.
extension RingAllocator {
    /// Writer, on taking the writer lock: forgets the free list if another process has written
    /// since this one released the lock (its tail may have passed listed rooms, and its head padded
    /// over them, which leaves their headers in place but out of the ring's walk).
    @inline(__always)
    mutating func forgetDeadRoomIfOthersWrote() {
        guard !deadRooms.list.isEmpty, deadRooms.stateAtRelease != DeadRooms.WriterStateMark(state) else { return }
        deadRooms.list.removeAll()
    }

    /// Writer, on releasing the writer lock.
    @inline(__always)
    mutating func noteWriterStateAtRelease() {
        // With no rooms listed the mark does not matter: it is taken again before any is used.
        if !deadRooms.list.isEmpty { deadRooms.stateAtRelease = DeadRooms.WriterStateMark(state) }
    }

    /// The bytes a record of `size` takes at the head, its padding included. Below the capacity,
    /// records the free list takes are padded to a multiple of 1/64 of their power of two (at
    /// least 64 bytes: 256 for 16 KiB), so that the rooms of records a few bytes apart in size
    /// (keys and values of a few lengths) fit each other. At the capacity, where no room is
    /// taken, the padding would only hold fewer entries.
    @inline(__always)
    func footprint(ofRecord size: Int) -> Int {
        guard size >= FreeList.minimumRecordSize, ringEnd < capacity else { return size }
        let granularity = max(64, (1 << (Int.bitWidth - 1 - size.leadingZeroBitCount)) >> 6)
        let rounded = FileLayout.alignUp(size, granularity)
        return rounded <= largestPlaceableRecord ? rounded : size
    }

    /// Writer: lists the room of the entry at `offset`, marked dead while still in the span.
    /// Inlined as far as the size test, which is all that most writes of small values do.
    @inline(__always)
    mutating func rememberDeadRoom(at offset: Int, header: RecordHeader) {
        if header.totalSize >= FreeList.minimumRecordSize { listDeadRoom(at: offset, header: header) }
    }

    /// Listed by the record's own size: the padding after it, which the room includes, is looked
    /// at when the room is taken (reading it now would cost every removal a cache miss).
    private mutating func listDeadRoom(at offset: Int, header: RecordHeader) {
        guard ringEnd < capacity, let distance = distanceInSpan(of: offset, size: header.totalSize) else { return }
        deadRooms.list.add(offset: offset, size: header.totalSize, sequence: header.sequence, tailDistance: distance)
    }

    /// The room of the record of `recordSize` bytes at `offset`: the record and the padding that
    /// follows it (when no more than `largestPadding`), if all of it lies in the span; nil
    /// otherwise. A dead record's room takes padding up to an eighth of the record, as
    /// `footprint` and a record placed in a larger room leave.
    @inline(__always)
    func roomSize(at offset: Int, recordSize: Int, largestPadding: Int? = nil) -> Int? {
        guard let distance = distanceInSpan(of: offset, size: recordSize) else { return nil }
        if let padding = RecordHeader.paddingLength(in: file, at: offset + recordSize, limit: ringEnd),
           padding <= largestPadding ?? recordSize / 8, distance + recordSize + padding <= state.spanBytes {
            return recordSize + padding
        }
        return recordSize
    }

    /// Whether rooms are taken at all: below the capacity, unless a test turned it off.
    private var takesDeadRoom: Bool { ringEnd < capacity && deadRooms.isEnabled }

    /// With rooms listed, a large value to compress (`size` bytes: LZ4's bound) is compressed
    /// into memory before it is placed, so that it looks for a room of its compressed size, not
    /// of the bound. Returns what to store (the compressed bytes, or the value itself when
    /// compression saves nothing) and its flags; nil when the value is to be compressed straight
    /// into the ring as usual.
    mutating func compressedAhead(_ value: UnsafeRawBufferPointer, keyLength: Int, size: Int)
        -> (stored: UnsafeRawBufferPointer, flags: UInt8)? {
        guard size >= FreeList.minimumRecordSize, size <= DeadRooms.largestPrecompressed,
              !deadRooms.list.isEmpty, takesDeadRoom else { return nil }
        let scratch = deadRooms.compressionScratch(count: size - RecordHeader.size - keyLength)
        guard let compressed = LZ4Codec.compress(value, into: scratch) else { return (value, 0) }
        return (UnsafeRawBufferPointer(rebasing: scratch[..<compressed]), RecordHeader.compressedFlag)
    }

    /// Writer, placing a record of `size` bytes (LZ4's bound when compressing): a listed room of
    /// at least that size that is still a dead entry in the span, pinned by no reader, taken out
    /// of the list; nil when there is none (the record then goes at the head).
    @inline(__always)
    mutating func takeDeadRoom(for size: Int) -> (offset: Int, size: Int)? {
        size >= FreeList.minimumRecordSize ? takeListedRoom(for: size) : nil
    }

    private mutating func takeListedRoom(for size: Int) -> (offset: Int, size: Int)? {
        guard takesDeadRoom else {
            deadRooms.list.removeAll()
            return nil
        }
        // The list is taken out while it is searched: the search reads rooms through `self`.
        var list = FreeList()
        swap(&list, &deadRooms.list)
        defer { swap(&list, &deadRooms.list) }
        // Each try takes a room out of the list: a few, then the head.
        for _ in 0..<4 {
            guard let (room, roomSize) = list.take(atLeast: size, sizeOf: { deadEntrySize($0) }) else { return nil }
            if !isPinned(room.offset, roomSize) { return (room.offset, roomSize) }
        }
        return nil
    }

    /// The size of the listed room, if it is still what the list says: a dead entry with the
    /// sequence number listed, inside the span, clear of the index segments (checked although the
    /// list is kept exact: the file is shared, and may be hostile, its headers claiming any size).
    private func deadEntrySize(_ room: FreeList.Room) -> Int? {
        guard room.offset >= ringStart,
              let header = RecordHeader.read(from: file, at: room.offset, limit: ringEnd, seed: seed),
              header.kind == .entry, !header.isLive, header.sequence == room.sequence,
              let size = roomSize(at: room.offset, recordSize: header.totalSize),
              !layout.overlapsIsland(room.offset, room.offset + size) else { return nil }
        return size
    }

    /// Whether a reader of any process lends bytes of `[offset, offset + size)`. Checked after the
    /// record there was marked dead, as 7.7.5 asks: the free list only holds dead records.
    @inline(__always)
    func isPinned(_ offset: Int, _ size: Int) -> Bool {
        guard !readers.isEmpty else { return false }
        return readers.pinnedRanges().contains { $0.start < offset + size && $0.end > offset }
    }

    /// How far the tail has to go, in ring order, to reach `offset`, if `[offset, offset + size)`
    /// lies in the span; nil otherwise.
    @inline(__always)
    private func distanceInSpan(of offset: Int, size: Int) -> Int? {
        let tail = state.tail, span = state.spanBytes
        guard span > 0, tail >= ringStart, tail <= ringEnd else { return nil }
        let distance = offset >= tail ? offset - tail : (ringEnd - tail) + (offset - ringStart)
        return distance + size <= span ? distance : nil
    }

    /// Writer: the record of `size` bytes just written at the start of `room` (a dead record's,
    /// or the head's) is complete but for its header: the rest of the room becomes padding first,
    /// so that the ring walks from the record to what followed the room.
    @inline(__always)
    func padRest(of room: (offset: Int, size: Int), after size: Int) {
        if room.size > size {
            RecordHeader.writePadding(to: file, at: room.offset + size, length: room.size - size)
        }
    }
}

/// What a process knows of the room of dead entries, and what keeps that knowledge right.
struct DeadRooms {
    var list = FreeList()
    /// The shared state as this process left it when it last released the writer lock with rooms
    /// listed: another process that wrote since makes the list unreliable.
    var stateAtRelease: WriterStateMark?
    /// Whether large records take listed rooms. Off only in tests (`CacheStore.reusesDeadRoom`).
    var isEnabled = true
    /// Whether a record that fits the room of the entry it replaces is written there
    /// (`CacheStore.rewrite`). Off only in tests (`CacheStore.rewritesInPlace`).
    var rewritesInPlace = true
    /// Where a large value is compressed before it is placed (`CacheStore.put`), when a room of
    /// its compressed size may be listed; grown as needed, up to `largestPrecompressed` bytes.
    private var scratch = UnsafeMutableRawBufferPointer(start: nil, count: 0)

    /// Values whose LZ4 bound is larger than this are compressed straight into the ring, always,
    /// so that the scratch space stays small.
    static let largestPrecompressed = 1 << 20

    mutating func compressionScratch(count: Int) -> UnsafeMutableRawBufferPointer {
        if scratch.count < count {
            scratch.deallocate()
            scratch = .allocate(byteCount: count, alignment: 16)
        }
        return UnsafeMutableRawBufferPointer(rebasing: scratch[..<count])
    }

    /// What a write of another process would change: the head, the tail and the span (its ring
    /// moves), the next sequence number (every record it writes), the change counter (its meta
    /// writes: growth, clearing, index changes) and the count of recoveries.
    struct WriterStateMark: Equatable {
        let head: Int, tail: Int, span: Int
        let nextSequence: UInt64, changeCounter: UInt64, recoveries: UInt64

        init(_ state: SharedState) {
            head = state.head
            tail = state.tail
            span = state.spanBytes
            nextSequence = state.nextSequence
            changeCounter = state.changeCounter
            recoveries = state.counter(.recoveries)
        }
    }

    /// Frees the scratch space, when the store goes.
    func deallocateScratch() { scratch.deallocate() }
}

import CLarderSupport

/// The reader slots of the shared-state page: how a zero-copy read in any process keeps the
/// bytes it lends from being overwritten.
///
/// A reader claims a free slot (owner = its pid), writes the record's range into it, and only
/// then checks that the record is still live. A writer, before it writes into the gap, reads the
/// slots and steps over every pinned range as it steps over index segments. Both sides put a
/// sequentially consistent fence between their store and their load, so either the reader sees
/// the record already dead (and does not lend it) or the writer sees the pin.
/// A slot whose owner process no longer exists is freed by the next writer that meets it.
///
/// Like `SharedState`, it holds addresses in the mapping, valid while the store lives.
///
/// Invariant, checked in debug builds by `checkInvariants()`: the `slotCount` slots of
/// `SharedState.readerSlotSize` bytes fill the shared-state page from `Field.readerTable`, and
/// `count` is the pin-count word of that page.
struct ReaderTable {
    let slots: UnsafeMutableRawPointer
    let count: UnsafeMutableRawPointer
    let slotCount: Int
    /// The owner word of this process's pins: its process ID, taken when the store was opened (a
    /// value cached for the whole process would be the parent's in a child after fork).
    let processID: UInt64
    /// Written in the tag word of every pin this table makes, telling them from the pins of the
    /// process's other stores of the file: the address of this store's map, unique among the
    /// maps the process has while this store lives.
    let tag: UInt64

    init(state: SharedState, pageSize: Int, processID: UInt64, tag: UInt64) {
        slots = state.page + SharedState.Field.readerTable
        count = state.page + SharedState.Field.pinCount
        slotCount = (pageSize - SharedState.Field.readerTable) / SharedState.readerSlotSize
        self.processID = processID
        self.tag = tag
        checkInvariants(pageSize: pageSize, page: state.page)
    }

    private func checkInvariants(pageSize: Int, page: UnsafeMutableRawPointer) {
        #if DEBUG
        precondition(slotCount >= 1 && slots == page + SharedState.Field.readerTable
                     && SharedState.Field.readerTable + slotCount * SharedState.readerSlotSize <= pageSize,
                     "the reader slots do not fit the shared-state page")
        precondition(count == page + SharedState.Field.pinCount, "the pin count is not the page's")
        #endif
    }

    private func slot(_ index: Int) -> UnsafeMutableRawPointer { slots + index * SharedState.readerSlotSize }

    /// Pins `[start, end)`; nil when every slot is taken (the caller then copies instead).
    func pin(start: Int, end: Int) -> Int? {
        for index in 0..<slotCount {
            let at = slot(index)
            guard lrd_load_acquire_u64(at) == 0, lrd_cas_u64(at, 0, processID) != 0 else { continue }
            lrd_store_release_u64(at + 8, UInt64(start))
            lrd_store_release_u64(at + 16, UInt64(end))
            lrd_store_release_u64(at + 24, tag)
            _ = lrd_fetch_add_u64(count, 1)
            lrd_fence_seq_cst()
            return index
        }
        return nil
    }

    func unpin(_ index: Int) {
        let at = slot(index)
        lrd_store_release_u64(at + 8, 0)
        lrd_store_release_u64(at + 16, 0)
        _ = lrd_fetch_add_u64(count, UInt64.max)
        lrd_store_release_u64(at, 0)
    }

    /// Gives back a pin its store took before it was closed, if the slot still holds it: a
    /// writer that opened the file alone since has cleared the table (tag 0) and may have given
    /// the slot to another reader, of this process too (another tag). Left taken, the slot would
    /// stay so for as long as any process kept the file open.
    func unpinAfterClose(_ index: Int) {
        let at = slot(index)
        guard lrd_load_acquire_u64(at + 24) == tag, lrd_cas_u64(at, processID, 0) != 0 else { return }
        _ = lrd_fetch_add_u64(count, UInt64.max)
    }

    /// Whether a record may be lent out now, in any process: false when no pin is counted. A
    /// caller inside a lend of its own sees its own pin (taken before the lend began), so no
    /// fence is needed for that question, unlike `isEmpty`'s.
    var mayBeLending: Bool {
        lrd_load_acquire_u64(count) != 0
    }

    /// Whether any record is pinned now, in any process: the writer's fast path.
    var isEmpty: Bool {
        lrd_fence_seq_cst()
        return lrd_load_acquire_u64(count) == 0
    }

    /// Writer: the ranges pinned now, in any process. Frees the slots of processes that died.
    func pinnedRanges() -> [(start: Int, end: Int)] {
        guard !isEmpty else { return [] }
        var ranges: [(start: Int, end: Int)] = []
        // One process usually holds many slots: it is asked after once (a system call).
        var lastOwnerFoundAlive: UInt64 = processID
        for index in 0..<slotCount {
            let at = slot(index)
            let owner = lrd_load_acquire_u64(at)
            guard owner != 0 else { continue }
            if owner != lastOwnerFoundAlive {
                guard lrd_process_exists(Int64(truncatingIfNeeded: owner)) != 0 else {
                    // Its owner is gone; whoever frees the slot first gives the count back.
                    if lrd_cas_u64(at, owner, 0) != 0 { _ = lrd_fetch_add_u64(count, UInt64.max) }
                    continue
                }
                lastOwnerFoundAlive = owner
            }
            let start = Int(truncatingIfNeeded: lrd_load_acquire_u64(at + 8))
            let end = Int(truncatingIfNeeded: lrd_load_acquire_u64(at + 16))
            if end > start { ranges.append((start, end)) }
        }
        return ranges
    }

    /// Empties the table: only when no other process has the file open.
    func clear() {
        slots.initializeMemory(as: UInt8.self, repeating: 0, count: slotCount * SharedState.readerSlotSize)
        lrd_store_release_u64(count, 0)
    }
}

import CLarderSupport

/// A listing of a store's entries, taken in steps by ranges of key tags (`KeyHash.tag`), each
/// step under the in-process read lock, the caller's closure between steps with no lock held.
///
/// Why by tags and not by slots: a key's tag never changes, while its slot does. A removal shifts
/// other keys back a slot (`HashTable.removeShifting`), the index grows into a new table and
/// drains the old one, and another process may do all of that between two steps. A walk over slot
/// positions would miss keys shifted past it and would have to end when the tables change; a walk
/// over tags lists each key in the one step its tag falls in, whichever table holds it then. So
/// an entry that stays live from the listing's start to its end is listed exactly once, and no
/// key is listed twice (on an undamaged index); entries written or removed meanwhile may or may
/// not be.
///
/// Each step reads the slots of its tags while no writer of any process rearranges the index
/// (the index epoch is even and stays so), then checks every record they name as a point read
/// does (FORMAT.md 7.7.4): a record that changes meanwhile makes the step start over, with a
/// point read's patience.
struct EntryListing {
    /// How many home slots of the active table one step covers: few enough that a step rarely
    /// meets a writer, and the keys of one step are copied out of the map while it lasts.
    static let homeSlotsPerStep = 64

    /// The first tag the next step lists; `tagCount` once the listing is done.
    private(set) var nextTag = 0
    private static let tagCount = 1 << HashTable.tagBits

    /// The keys one step found, one after another, and where each starts with its value's length.
    private var keyBytes: [UInt8] = []
    private var entries: [(keyStart: Int, valueLength: Int)] = []
    /// The slots of one step's tags, reused from step to step.
    fileprivate var slots: [UInt64] = []

    var isFinished: Bool { nextTag >= EntryListing.tagCount }

    /// The tags of the next step, for an active table of `activeSlotCount` slots.
    fileprivate func nextTags(activeSlotCount: Int) -> Range<UInt32> {
        let width = max(1, EntryListing.tagCount / activeSlotCount) * EntryListing.homeSlotsPerStep
        return UInt32(nextTag)..<UInt32(min(EntryListing.tagCount, nextTag + width))
    }

    fileprivate mutating func startStep() {
        keyBytes.removeAll(keepingCapacity: true)
        entries.removeAll(keepingCapacity: true)
        slots.removeAll(keepingCapacity: true)
    }

    fileprivate mutating func finishStep(through tags: Range<UInt32>) {
        nextTag = Int(tags.upperBound)
    }

    fileprivate mutating func append(key: UnsafeRawBufferPointer, valueLength: Int) {
        entries.append((keyBytes.count, valueLength))
        keyBytes.append(contentsOf: key)
    }

    fileprivate mutating func removeLast() {
        keyBytes.removeSubrange(entries.removeLast().keyStart...)
    }

    /// The last key appended.
    fileprivate var lastKey: ArraySlice<UInt8> { keyBytes[(entries.last?.keyStart ?? keyBytes.count)...] }

    /// Calls `body` with the key and value length of each entry of the last step, until `body`
    /// returns false. Returns whether it went through all of them.
    func forEachListed(_ body: (_ key: UnsafeRawBufferPointer, _ valueLength: Int) -> Bool) -> Bool {
        keyBytes.withUnsafeBytes { all in
            for (index, entry) in entries.enumerated() {
                let end = index + 1 < entries.count ? entries[index + 1].keyStart : all.count
                if !body(UnsafeRawBufferPointer(rebasing: all[entry.keyStart..<end]), entry.valueLength) { return false }
            }
            return true
        }
    }
}

extension CacheStore {
    /// Reader, under the in-process read lock with a current view: takes the listing's next step,
    /// the live, unexpired entries whose tags are in the step's range.
    ///
    /// - Throws: `LarderError.staleView` when another process changed the meta page meanwhile
    ///   (the caller takes up the change and takes the same step again).
    func listNextEntries(_ listing: inout EntryListing) throws(LarderError) {
        try checkOpen()
        let view = currentView
        let tags = listing.nextTags(activeSlotCount: view.active.slotCount)
        let now = SystemCall.nowMilliseconds()
        var retry = Retry()
        attempt: while true {
            listing.startStep()
            let epoch = state.indexEpoch
            var abandoned = epoch & 1 != 0 && epoch == lrd_load_relaxed_u64(abandonedEpoch)
            if epoch & 1 != 0 && !abandoned {
                if retry.wait() { continue }
                // Its writer died in the middle: list what the index holds, as a point read
                // answers then, until a writer comes and ends the change.
                if state.indexEpoch == epoch { lrd_store_relaxed_u64(abandonedEpoch, epoch) }
                abandoned = true
            }
            // Whether no writer has changed the index since `epoch` was read.
            func indexStayedAsRead() -> Bool { state.indexEpoch == epoch && (epoch & 1 == 0 || abandoned) }
            view.active.collectSlots(withTagsIn: tags, into: &listing.slots)
            view.draining?.collectSlots(withTagsIn: tags, into: &listing.slots)
            if !indexStayedAsRead(), retry.wait() { continue }
            // The records lie anywhere in the file: their first lines start loading together.
            for slot in listing.slots where HashTable.offset(of: slot) < view.limit {
                lrd_prefetch(view.base + HashTable.offset(of: slot))
            }
            for slot in listing.slots {
                let offset = HashTable.offset(of: slot)
                guard let header = view.entryHeader(at: offset) else {
                    // Replaced or moved since the slots were read (the epoch has moved), or
                    // removed, or a damaged index: only the first is listed, from its new place.
                    if !indexStayedAsRead(), retry.wait() { continue attempt }
                    continue
                }
                if header.isExpired(now: now) { continue }
                listing.append(key: keyBytes(at: offset, header: header), valueLength: header.rawLength)
                let found = FoundEntry(offset: offset, header: header, inDraining: false, slotIndex: 0)
                guard isUnchanged(found, in: view) else {
                    listing.removeLast()
                    if !viewIsCurrent { throw LarderError.staleView }
                    if retry.wait() { continue attempt }
                    continue
                }
                // A slot whose record holds a key of another tag is damage: listing the key here
                // could list it twice.
                let matchesSlot = listing.lastKey.withUnsafeBytes { KeyHash($0).tag == HashTable.tag(of: slot) }
                if !matchesSlot { listing.removeLast() }
            }
            // The tables read were the view's only if no meta page was written since: one that
            // no longer names a table lets its space be reused.
            guard viewIsCurrent else { throw LarderError.staleView }
            listing.finishStep(through: tags)
            return
        }
    }
}

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
/// key is listed twice; entries written or removed meanwhile may or may not be.
///
/// Each step reads the slots of its tags while no writer of any process rearranges the index
/// (the index epoch is even and stays so), then checks every record they name as a point read
/// does (FORMAT.md 7.7.4). A record that changed meanwhile makes the step start over; the waits
/// between attempts, with a point read's patience, happen outside the lock.
struct EntryListing {
    /// How many home slots of the active table one step covers: few enough that a step rarely
    /// meets a writer, and the keys of one step are copied out of the map while it lasts.
    static let homeSlotsPerStep = 64

    /// The first tag the next step lists; `tagCount` once the listing is done.
    private(set) var nextTag = 0
    fileprivate static let tagCount = 1 << HashTable.tagBits

    /// The keys one step found, one after another, and where each starts with its value's length.
    private var keyBytes: [UInt8] = []
    private var entries: [(keyStart: Int, valueLength: Int)] = []
    /// The slots of one step's tags, and every slot value the step read from each table, reused
    /// from step to step.
    fileprivate var slots: [UInt64] = []
    fileprivate var readFromActive: [UInt64] = []
    fileprivate var readFromDraining: [UInt64] = []
    /// The waits of the step being taken; the store notes in it the odd epochs it meets.
    var retry = CacheStore.Retry()

    var isFinished: Bool { nextTag >= EntryListing.tagCount }

    /// The tags of the next step, for an active table of `activeSlotCount` slots.
    fileprivate func nextTags(activeSlotCount: Int) -> Range<UInt32> {
        let width = max(1, EntryListing.tagCount / activeSlotCount) * EntryListing.homeSlotsPerStep
        return UInt32(nextTag)..<UInt32(min(EntryListing.tagCount, nextTag + width))
    }

    /// Waits, with no lock held, before the step is attempted again; false once the step's
    /// patience has run out.
    mutating func backOff() -> Bool { retry.wait() }

    fileprivate mutating func startAttempt() {
        keyBytes.removeAll(keepingCapacity: true)
        entries.removeAll(keepingCapacity: true)
        slots.removeAll(keepingCapacity: true)
    }

    fileprivate mutating func finishStep(through tags: Range<UInt32>) {
        nextTag = Int(tags.upperBound)
        retry = CacheStore.Retry()
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

    /// Reader, under the in-process read lock with a current view: one attempt at the next step,
    /// the live, unexpired entries whose tags are in the step's range. Returns false when a
    /// writer of another process was in the way: the caller backs off (`backOff()`, with no lock
    /// held) and calls again.
    ///
    /// - Parameters:
    ///   - view: the store's view now (`CacheStore.currentView`), whose tables are read.
    ///   - abandoned: whether the writer of the odd `epoch` died in its change.
    ///   - stepHook: called between the reading of the slots and the checking of their records.
    /// - Throws: `LarderError.staleView` when another process changed the meta page meanwhile
    ///   (the caller takes up the change and calls again).
    mutating func takeNextStep(through view: ReadView, file: MappedFile, state: SharedState, epoch: UInt64,
                               abandoned: Bool, maximumAge: UInt64,
                               stepHook: (([UInt64]) -> Void)?) throws(LarderError) -> Bool {
        var tags = nextTags(activeSlotCount: view.active.slotCount)
        let now = SystemCall.nowMilliseconds()
        startAttempt()
        // Whether no writer has changed the index or written a record over since `epoch` was read.
        func indexStayedAsRead() -> Bool { state.indexEpoch == epoch && (epoch & 1 == 0 || abandoned) }
        func collectSlots(withTagsIn tags: Range<UInt32>) -> Bool {
            slots.removeAll(keepingCapacity: true)
            readFromActive.removeAll(keepingCapacity: true)
            readFromDraining.removeAll(keepingCapacity: true)
            let active = view.active.collectSlots(withTagsIn: tags, into: &slots, reading: &readFromActive)
            let draining = view.draining?.collectSlots(withTagsIn: tags, into: &slots, reading: &readFromDraining) ?? true
            return active && draining
        }
        if !collectSlots(withTagsIn: tags) {
            // A table with no empty slot at all (damage), whose every scan reads all of it: one
            // step takes the rest of the tags, so that the listing stays linear in its size.
            tags = tags.lowerBound..<UInt32(EntryListing.tagCount)
            _ = collectSlots(withTagsIn: tags)
        }
        // The slots read are all the step's entries if no writer changed the index meanwhile, or
        // else if every slot read still holds what it held: writers that only write records over
        // in place (each in a bracket of the epoch) move no slot, and neither does one that
        // paused or died in the middle of a change (where each key is in a slot throughout).
        guard indexStayedAsRead()
                || (view.active.stillHolds(readFromActive, from: tags)
                    && view.draining?.stillHolds(readFromDraining, from: tags) != false)
        else { return false }
        stepHook?(slots)
        // Each slot once (a damaged index, or one a writer died rearranging, may hold one twice),
        // and the records in file order.
        slots.sort { (HashTable.offset(of: $0), $0) < (HashTable.offset(of: $1), $1) }
        var previous: UInt64?
        // The records lie anywhere in the file: their first lines start loading together.
        for slot in slots where HashTable.offset(of: slot) < view.limit {
            lrd_prefetch(view.base + HashTable.offset(of: slot))
        }
        for slot in slots {
            defer { previous = slot }
            if slot == previous { continue }
            let offset = HashTable.offset(of: slot)
            // A record that is not the slot's entry: removed, or damage, while the epoch stays as
            // it was; otherwise the entry may have been replaced or relocated and its place
            // reused since the slots were read, and its new slot is not among them.
            guard let header = view.entryHeader(at: offset) else {
                if indexStayedAsRead() { continue }
                return false
            }
            append(key: file.bytes(at: offset + RecordHeader.size, count: header.keyLength), valueLength: header.rawLength)
            // The re-check looks at the offset and header only.
            guard view.isUnchanged(at: offset, sequence: header.sequence, state: state) else {
                removeLast()
                if state.changeCounter != view.changeCounter { throw LarderError.staleView }
                return false
            }
            let isTheSlotsEntry = lastKey.withUnsafeBytes { KeyHash($0).tag == HashTable.tag(of: slot) }
            if !isTheSlotsEntry {
                removeLast()
                if indexStayedAsRead() { continue }
                return false
            }
            if header.isExpired(now: now, maximumAge: maximumAge) { removeLast() }
        }
        // The tables read were the view's only if no meta page was written since: one that no
        // longer names a table lets its space be reused.
        guard state.changeCounter == view.changeCounter else { throw LarderError.staleView }
        finishStep(through: tags)
        return true
    }

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

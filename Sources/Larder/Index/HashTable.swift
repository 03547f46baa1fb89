import CLarderSupport

/// An open-addressing hash table of 8-byte slots with linear probing: a view over memory owned
/// elsewhere (an index segment in the map, or a scratch buffer during recovery).
///
/// A slot is `tag << 36 | offset / 16`: the key's 28-bit tag (see `KeyHash`) and the file offset
/// of its record in 16-byte units. 0 is an empty slot, 1 a tombstone (used only in a table being
/// drained); neither can be a real record, which never lies in the header pages.
///
/// Invariant: the memory holds `slotCount` slots, `slotCount` is a power of two in
/// `minimumSlotCount...maximumSlotCount`; every index is masked before use, so no slot value,
/// however damaged, can lead outside the table.
struct HashTable {
    static let minimumSlotCount = 512
    static let maximumSlotCount = 1 << 28
    static let tagBits = 28
    static let empty: UInt64 = 0
    static let tombstone: UInt64 = 1

    let slots: UnsafeMutablePointer<UInt64>
    let slotCount: Int
    /// How far a tag shifts right to give its home: its top log2(slotCount) bits are the home.
    let homeShift: UInt32
    /// No overflow check: `slotCount` is at least `minimumSlotCount`.
    var mask: Int { slotCount &- 1 }

    init(slots: UnsafeMutablePointer<UInt64>, slotCount: Int) {
        precondition(slotCount >= HashTable.minimumSlotCount && slotCount <= HashTable.maximumSlotCount
                     && slotCount & (slotCount - 1) == 0)
        self.init(checkedSlots: slots, slotCount: slotCount)
    }

    /// A table whose slot count was checked by `init(slots:slotCount:)` before: the one a
    /// reader takes from a published view (which every read does) need not check it again.
    init(checkedSlots slots: UnsafeMutablePointer<UInt64>, slotCount: Int) {
        self.slots = slots
        self.slotCount = slotCount
        // At most 28 and at least 0 for a checked count: no conversion check needed.
        self.homeShift = UInt32(truncatingIfNeeded: HashTable.tagBits &- slotCount.trailingZeroBitCount)
    }

    /// The number of keys a table of `slotCount` slots may hold before it must grow: three
    /// quarters of them, in integers (checked on every write). A shift, as counts are positive.
    @inline(__always)
    static func loadLimit(slotCount: Int) -> Int { slotCount &- slotCount &>> 2 }

    var loadLimit: Int { HashTable.loadLimit(slotCount: slotCount) }

    @inline(__always)
    static func slot(tag: UInt32, offset: Int) -> UInt64 {
        UInt64(tag) << 36 | UInt64(offset >> 4)
    }

    @inline(__always)
    static func offset(of slot: UInt64) -> Int { Int(truncatingIfNeeded: slot & 0xF_FFFF_FFFF) << 4 }

    @inline(__always)
    static func tag(of slot: UInt64) -> UInt32 { UInt32(truncatingIfNeeded: slot >> 36) }

    @inline(__always)
    static func isEntry(_ slot: UInt64) -> Bool { slot > tombstone }

    @inline(__always)
    func home(ofTag tag: UInt32) -> Int { Int(tag &>> homeShift) }

    /// Starts loading the slot where `tag`'s probe sequence begins (a hint; reads nothing).
    @inline(__always)
    func prefetchHome(ofTag tag: UInt32) {
        lrd_prefetch(slots + home(ofTag: tag))
    }

    @inline(__always)
    subscript(index: Int) -> UInt64 {
        get { lrd_load_acquire_u64(slots + (index & mask)) }
        nonmutating set { lrd_store_release_u64(slots + (index & mask), newValue) }
    }

    /// The first slot along `tag`'s probe sequence whose record `matches`, or nil at the first
    /// empty slot. Looks at each slot at most once.
    @inline(__always)
    func find(tag: UInt32, where matches: (_ offset: Int) -> Bool) -> Int? {
        // Each slot once, from the home on: no range and iterator, and one compare a slot for
        // the end. Indices are masked here, so slots are reached directly.
        let mask = slotCount &- 1
        var index = home(ofTag: tag)
        let end = index &+ slotCount
        while index != end {
            let slot = lrd_load_acquire_u64(slots + (index & mask))
            if slot == HashTable.empty { return nil }
            // The tag first: most slots passed have another, and only then can it be a tombstone.
            if HashTable.tag(of: slot) == tag, HashTable.isEntry(slot), matches(HashTable.offset(of: slot)) {
                return index & mask
            }
            index &+= 1
        }
        return nil
    }

    /// Where `tag`'s probe sequence first meets an empty slot or a slot of the tag: its index and
    /// value (`empty` for an empty slot), or nil when it meets neither (a damaged table). A
    /// writer's lookup: the empty slot it may end at is where an insert of the tag would go.
    @inline(__always)
    func firstSlot(ofTag tag: UInt32) -> (index: Int, slot: UInt64)? {
        let mask = slotCount &- 1
        var index = home(ofTag: tag)
        let end = index &+ slotCount
        while index != end {
            let slot = lrd_load_acquire_u64(slots + (index & mask))
            if slot == HashTable.empty || (HashTable.tag(of: slot) == tag && HashTable.isEntry(slot)) {
                return (index & mask, slot)
            }
            index &+= 1
        }
        return nil
    }

    /// The slot holding exactly `slot` (a record's own tag and offset), if any.
    @inline(__always)
    func find(exactly slot: UInt64) -> Int? {
        var index = home(ofTag: HashTable.tag(of: slot))
        for _ in 0..<slotCount {
            let current = self[index]
            if current == HashTable.empty { return nil }
            if current == slot { return index & mask }
            index &+= 1
        }
        return nil
    }

    /// Appends to `found` every entry slot whose tag is in `tags`. Linear probing keeps an entry
    /// between its home and the first empty slot after it, so the slots from the first tag's home
    /// to the first empty slot past the last tag's home hold all of them. Looks at each slot at
    /// most once.
    ///
    /// - Parameter read: gets every slot value read, in order, for `stillHolds`.
    /// - Returns: false when it read every slot without finding that empty slot (a table with
    ///   none is damaged: writers keep a quarter of the slots empty).
    func collectSlots(withTagsIn tags: Range<UInt32>, into found: inout [UInt64], reading read: inout [UInt64]) -> Bool {
        guard !tags.isEmpty else { return true }
        let lastHome = home(ofTag: tags.upperBound - 1)
        var index = home(ofTag: tags.lowerBound)
        for _ in 0..<slotCount {
            let slot = self[index]
            read.append(slot)
            if slot == HashTable.empty {
                if index > lastHome { return true }
            } else if HashTable.isEntry(slot), tags.contains(HashTable.tag(of: slot)) {
                found.append(slot)
            }
            index &+= 1
        }
        return false
    }

    /// Whether the slots from the home of the first of `tags` still hold `read`, one after
    /// another, as `collectSlots` read them. If so, the entries it found were all there were:
    /// a key that moved past its reading would have changed a slot it had read (writers move an
    /// entry only back towards its home, or into the active table, which is read first, and
    /// never put a slot value back where it was).
    func stillHolds(_ read: [UInt64], from tags: Range<UInt32>) -> Bool {
        var index = home(ofTag: tags.lowerBound)
        for value in read {
            if self[index] != value { return false }
            index &+= 1
        }
        return true
    }

    /// Puts `slot` in the first empty slot of its probe sequence, and returns that slot's index.
    /// Callers keep the load under `loadLimit`, so nil (no empty slot) means a damaged table: a
    /// hostile file's slots that the entry count does not account for.
    func insert(_ slot: UInt64) -> Int? {
        var index = home(ofTag: HashTable.tag(of: slot))
        // A counted loop rather than a range: no range checks and iterator on the write path.
        var remaining = slotCount
        while remaining > 0 {
            if self[index] == HashTable.empty {
                self[index] = slot
                return index & mask
            }
            index &+= 1
            remaining &-= 1
        }
        return nil
    }

    /// Empties slot `index` and shifts later members of its cluster back, so that lookups never
    /// need tombstones in the active table. Inline, a delete's one index change: the call cost
    /// more than the usual loop. Indices are masked here once, so slots are reached directly.
    @inline(__always)
    func removeShifting(at index: Int) {
        let mask = slotCount &- 1
        var hole = index & mask
        var probe = hole
        var remaining = slotCount
        while remaining > 0 {
            remaining &-= 1
            probe = (probe &+ 1) & mask
            let slot = lrd_load_acquire_u64(slots + probe)
            if slot == HashTable.empty { break }
            let home = home(ofTag: HashTable.tag(of: slot))
            // The entry at `probe` may move to `hole` only if its home is not in (hole, probe].
            let stays = hole <= probe ? (home > hole && home <= probe) : (home > hole || home <= probe)
            if stays { continue }
            lrd_store_release_u64(slots + hole, slot)
            hole = probe
        }
        lrd_store_release_u64(slots + hole, HashTable.empty)
    }

    /// Leaves a tombstone in slot `index`: for a table being drained, whose probe sequences must
    /// stay intact while entries leave it.
    func removeLeavingTombstone(at index: Int) {
        self[index] = HashTable.tombstone
    }

    func clear() {
        slots.initialize(repeating: HashTable.empty, count: slotCount)
    }
}

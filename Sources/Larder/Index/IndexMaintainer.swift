/// The writer's side of the index: the tables this process has, the migration from the draining
/// table into the active one, and the index epoch around every move of a slot.
///
/// Growth is incremental: when the active table reaches its `loadLimit`, a table twice its size
/// is allocated in the ring and becomes active; the old one is drained into it a few slots per
/// write (`migrationStep` slots). Lookups consult both tables, the one the migration cursor says
/// holds the key first. No write ever pauses for work proportional to the number of entries.
/// Placing the new segment needs the ring and the meta page: `CacheStore.ensureIndexRoom` does
/// that (Engine/CacheStore+Index.swift) and hands the tables over through `attach`.
///
/// The migration cursor and the index epoch are the file's, in `SharedState`. The store holds
/// this value in a `StateCell`: its methods never call back into the store, so nothing else
/// touches the cell while one of them runs.
///
/// Invariants:
/// - the tables keep `CacheIndex`'s invariants (checked in debug builds by `checkInvariants()`);
/// - `generation` moves whenever the tables are replaced, so that the store publishes them;
/// - while `isRebuilding`, a change of slots takes no bracket of its own: the rebuild's holds it;
/// - while `vacancy` names a slot and the index epoch is still `vacancyEpoch`, that slot of the
///   active table is empty and the first empty one of its tag's probe sequence: a removal or a
///   migration step moves the epoch (its bracket), a replacement of the tables forgets it, and a
///   repointed slot stays occupied. Only a put's lookup notes it, under the writer lock.
struct IndexMaintainer {
    /// Slots moved per write. While two tables exist every miss probes both, so the migration
    /// should end soon after the growth: 128 slots end it within about 1% of the writes the new
    /// table takes before it grows again. A step costs a few thousand instructions.
    static let migrationStep = 128

    /// The tables as this process has them. Replaced whole, never changed in place.
    private(set) var tables = CacheIndex()
    /// Moves whenever `tables` is replaced.
    private(set) var generation: UInt64 = 0
    /// Set while a rebuild runs. Its index changes then stay inside its own bracket of the epoch.
    private(set) var isRebuilding = false
    /// Where the last put's lookup met an empty slot of the active table (`tag << 32 | index`),
    /// for that put's insert, or `noVacancy`. Good while the index epoch is `vacancyEpoch`.
    private(set) var vacancy = IndexMaintainer.noVacancy
    private(set) var vacancyEpoch: UInt64 = 0
    /// No vacancy noted: its high half is no tag (tags have 28 bits).
    static let noVacancy = UInt64.max
    /// The file's shared state: the migration cursor and the index epoch.
    let state: SharedState

    init(state: SharedState) {
        self.state = state
    }

    /// Frees the placeholder table's slots, when the store goes.
    func deallocate() { tables.deallocate() }

    var active: HashTable {
        @inline(__always) get { tables.active }
    }

    var draining: HashTable? {
        @inline(__always) get { tables.draining }
    }

    // MARK: - The tables

    /// Takes the tables `meta` names, after checking their segment headers.
    mutating func attach(in file: MappedFile, meta: Meta) throws(LarderError) {
        let attached = try tables.attached(in: file, meta: meta)
        replaceTables(with: attached)
    }

    /// Makes `table` the only one: a recovery's scratch table while the ring makes room, then the
    /// segment it fills.
    mutating func replace(with table: HashTable) {
        replaceTables(with: tables.replaced(with: table))
    }

    /// Leaves only the placeholder table, until the next rebuild.
    mutating func detach() {
        replaceTables(with: tables.detached())
    }

    private mutating func replaceTables(with new: CacheIndex) {
        tables = new
        vacancy = IndexMaintainer.noVacancy
        generation &+= 1
        checkInvariants()
    }

    /// Empties the index: drops the draining table and clears the active one, in a bracket.
    mutating func removeAll() {
        replaceTables(with: tables.withoutDraining())
        state.migrationCursor = 0
        beginChange()
        tables.active.clear()
        endChange()
    }

    // MARK: - The epoch

    /// Brackets a rearrangement of index slots with the index epoch (FORMAT.md 7.7.3), so that
    /// readers of other processes that miss meanwhile look again.
    @inline(__always)
    func beginChange() {
        if !isRebuilding { state.beginIndexChange() }
    }

    @inline(__always)
    func endChange() {
        if !isRebuilding { state.endIndexChange() }
    }

    /// Notes that a rebuild runs. It brackets the whole of its work with the epoch itself: the
    /// relocations and removals it makes while placing the new index must not end its bracket
    /// early. False when a rebuild runs already.
    mutating func beginRebuild() -> Bool {
        guard !isRebuilding else { return false }
        isRebuilding = true
        return true
    }

    mutating func endRebuild() {
        isRebuilding = false
    }

    // MARK: - Lookups, repointing, removal

    /// Writer: the live entry for `key` through `view` (see `ReadView.lookup`). `valueFollows`
    /// for a put, which may write its value over the entry found: the entry's lines start loading
    /// as soon as its first word shows it is the key's.
    @inline(__always)
    func lookup(_ key: UnsafeRawBufferPointer, hash: KeyHash, in view: ReadView, valueFollows: Bool = false) -> FoundEntry? {
        view.lookup(key, hash: hash, migrationCursor: state.migrationCursor, valueFollows: valueFollows)
    }

    /// Points the slot holding exactly `old` at `new` (same tag, new place).
    func repoint(from old: UInt64, to new: UInt64) {
        tables.repoint(from: old, to: new)
    }

    /// Removes the slot holding exactly `slot`. Returns whether there was one.
    func remove(exactly slot: UInt64) -> Bool {
        guard let place = tables.find(exactly: slot) else { return false }
        removeSlot(at: place.index, inDraining: place.inDraining)
        return true
    }

    /// Empties slot `index` of the active table (shifting its cluster back) or of the draining one
    /// (a tombstone).
    @inline(__always)
    func removeSlot(at index: Int, inDraining: Bool) {
        if inDraining {
            tables.draining!.removeLeavingTombstone(at: index)
        } else {
            // Shifting moves other keys back a slot: readers that miss meanwhile look again.
            beginChange()
            tables.active.removeShifting(at: index)
            endChange()
        }
    }

    // MARK: - Insertion

    /// Notes where a put's lookup of a key with `tag` met an empty slot of the active table, `index`
    /// (found with no draining table), for the insert of that put (`insert`).
    @inline(__always)
    mutating func noteVacancy(at index: Int, tag: UInt32) {
        vacancy = UInt64(tag) << 32 | UInt64(UInt32(truncatingIfNeeded: index))
        vacancyEpoch = state.indexEpoch
    }

    /// Forgets the vacancy noted: a put's lookup that met no empty slot of the key's tag.
    @inline(__always)
    mutating func forgetVacancy() {
        vacancy = IndexMaintainer.noVacancy
    }

    /// Puts `slot` in the first empty slot of its probe sequence in the active table, and returns
    /// that slot's index; nil means a damaged table (`HashTable.insert`). The vacancy noted for
    /// the slot's tag is that slot while the epoch has not moved since: no probe then.
    @inline(__always)
    mutating func insert(_ slot: UInt64) -> Int? {
        let noted = vacancy
        vacancy = IndexMaintainer.noVacancy
        let index = Int(truncatingIfNeeded: noted & 0xFFFF_FFFF)
        if noted >> 32 == UInt64(HashTable.tag(of: slot)), vacancyEpoch == state.indexEpoch,
           tables.active[index] == HashTable.empty {
            tables.active[index] = slot
            return index
        }
        return tables.active.insert(slot)
    }

    // MARK: - Migration and growth

    /// How a migration step ended.
    enum MigrationStep {
        /// Slots were moved, or there was nothing to move; the draining table stays.
        case moved
        /// The draining table is empty and no longer part of the index. Its segment is retired
        /// once the meta page no longer names it.
        case finished
        /// The active table had no empty slot for a moved one: a damaged index, which recovery
        /// makes anew from the records.
        case damaged
    }

    /// Moves the next `slots` slots of the draining table into the active one.
    mutating func migrate(slots: Int) -> MigrationStep {
        guard let old = tables.draining else { return .moved }
        // A local copy: the slot stores below could alias `tables` for all the compiler knows,
        // which reloaded the table's fields for every slot moved.
        let active = tables.active
        var cursor = state.migrationCursor
        let end = min(old.slotCount, cursor + slots)
        // The epoch brackets the moves; a step that finds nothing to move changes no slot.
        var moving = false
        while cursor < end {
            let slot = old[cursor]
            if HashTable.isEntry(slot) {
                if !moving {
                    beginChange()
                    moving = true
                }
                guard active.insert(slot) != nil else {
                    // The active table is full of slots the count does not know (a hostile file).
                    endChange()
                    return .damaged
                }
                old.removeLeavingTombstone(at: cursor)
            }
            cursor += 1
        }
        if moving { endChange() }
        state.migrationCursor = cursor
        guard cursor == old.slotCount else { return .moved }
        replaceTables(with: tables.withoutDraining())
        state.migrationCursor = 0
        return .finished
    }

    /// Starts draining the active table into a new, larger one: the cursor goes back to the
    /// draining table's first slot. The caller then names both in the meta page and `attach`es.
    func startMigration() {
        state.migrationCursor = 0
    }

    /// The slot count and bytes of the segment the index grows into next, or nil when it may not
    /// grow: past `HashTable.maximumSlotCount`, or past a third of the ring's `ringBytes`.
    func nextSegment(pageSize: Int, ringBytes: Int) -> (slotCount: Int, bytes: Int)? {
        let slotCount = tables.active.slotCount * 2
        let bytes = IndexSegment.byteCount(slotCount: slotCount, pageSize: pageSize)
        guard slotCount <= HashTable.maximumSlotCount, bytes <= ringBytes / 3 else { return nil }
        return (slotCount, bytes)
    }

    @inline(__always)
    func checkInvariants() {
        #if DEBUG
        tables.checkInvariants()
        #endif
    }
}

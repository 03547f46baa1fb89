/// The index tables of a store as this process has them: the active table, and while the index
/// grows, the table being drained into it (`IndexMaintainer` moves the slots).
///
/// Invariants, checked in debug builds by `checkInvariants()`:
/// - there is always an active table: a segment's, the scratch table of a recovery, or the
///   placeholder (a table that lives as long as the store) while there is no other (`detached()`);
/// - while the placeholder is active there is no draining table, and the placeholder is never
///   the draining table.
///
/// A hostile meta page may name one segment as both tables: that is the file's to be wrong
/// about (recovery drops such a draining index), not an invariant of this type.
///
/// Its changes return a new value, which `IndexMaintainer` assigns whole: a view taken before a
/// change keeps the tables it was taken with.
///
/// The tables are views of segments in the map (`IndexSegment.table`), valid while the store's
/// `MappedFile` lives. The migration cursor and the index epoch are the file's, in `SharedState`.
struct CacheIndex {
    private(set) var active: HashTable
    private(set) var draining: HashTable?
    /// The slots of the placeholder table, allocated by `init` and freed by `deallocate()`.
    private let placeholder: UnsafeMutablePointer<UInt64>

    /// An index of the placeholder table only, until `attached` finds the real ones.
    init() {
        placeholder = .allocate(capacity: HashTable.minimumSlotCount)
        placeholder.initialize(repeating: HashTable.empty, count: HashTable.minimumSlotCount)
        active = HashTable(slots: placeholder, slotCount: HashTable.minimumSlotCount)
        draining = nil
    }

    /// Frees the placeholder's slots, when the store goes.
    func deallocate() { placeholder.deallocate() }

    /// The index of the tables `meta` names, after checking their segment headers.
    func attached(in file: MappedFile, meta: Meta) throws(LarderError) -> CacheIndex {
        guard let table = IndexSegment.table(in: file, at: meta.activeIndex, pageSize: meta.pageSize, seed: meta.checksumSeed) else {
            throw LarderError(.corrupt, "the index segment at offset \(meta.activeIndex.offset) is damaged", path: file.path)
        }
        var old: HashTable?
        if meta.drainingIndex.exists {
            guard let drained = IndexSegment.table(in: file, at: meta.drainingIndex, pageSize: meta.pageSize,
                                                   seed: meta.checksumSeed) else {
                throw LarderError(.corrupt, "the index segment at offset \(meta.drainingIndex.offset) is damaged", path: file.path)
            }
            old = drained
        }
        var index = self
        index.active = table
        index.draining = old
        index.checkInvariants()
        return index
    }

    /// The index of the placeholder table alone.
    func detached() -> CacheIndex {
        replaced(with: HashTable(slots: placeholder, slotCount: HashTable.minimumSlotCount))
    }

    /// The index once the migration has ended: the draining table is no longer part of it.
    func withoutDraining() -> CacheIndex {
        var index = self
        index.draining = nil
        return index
    }

    /// The index of `table` alone: a recovery's scratch table while the ring makes room, then the
    /// segment it fills.
    func replaced(with table: HashTable) -> CacheIndex {
        var index = self
        index.draining = nil
        index.active = table
        index.checkInvariants()
        return index
    }

    /// Points the slot holding exactly `old` at `new` (same tag, new place).
    func repoint(from old: UInt64, to new: UInt64) {
        if let index = active.find(exactly: old) {
            active[index] = new
        } else if let table = draining, let index = table.find(exactly: old) {
            table[index] = new
        }
    }

    /// The place of the slot holding exactly `slot`: in which table, at which index.
    func find(exactly slot: UInt64) -> (index: Int, inDraining: Bool)? {
        if let index = active.find(exactly: slot) { return (index, false) }
        if let table = draining, let index = table.find(exactly: slot) { return (index, true) }
        return nil
    }

    @inline(__always)
    func checkInvariants() {
        #if DEBUG
        if let draining {
            precondition(active.slots != placeholder, "a draining table beside the placeholder")
            precondition(draining.slots != placeholder, "the placeholder is draining")
        }
        #endif
    }
}

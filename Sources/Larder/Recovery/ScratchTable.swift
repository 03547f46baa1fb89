/// A hash table in process memory that grows by doubling: where recovery collects the entries it
/// finds before the index segment that will hold them exists.
final class ScratchTable {
    private(set) var table: HashTable
    private var memory: UnsafeMutablePointer<UInt64>
    private(set) var count = 0

    init() {
        memory = .allocate(capacity: HashTable.minimumSlotCount)
        memory.initialize(repeating: HashTable.empty, count: HashTable.minimumSlotCount)
        table = HashTable(slots: memory, slotCount: HashTable.minimumSlotCount)
    }

    deinit {
        memory.deallocate()
    }

    /// Adds a slot, doubling first when the table would pass its load limit. Returns false when
    /// the table may grow no more and is at its limit (as many entries as the largest index holds).
    func insert(_ slot: UInt64) -> Bool {
        if count + 1 > table.loadLimit {
            guard table.slotCount < HashTable.maximumSlotCount else { return false }
            let bigger = UnsafeMutablePointer<UInt64>.allocate(capacity: table.slotCount * 2)
            bigger.initialize(repeating: HashTable.empty, count: table.slotCount * 2)
            let grown = HashTable(slots: bigger, slotCount: table.slotCount * 2)
            // Half full at most: every slot finds room.
            forEachSlot { _ = grown.insert($0) }
            memory.deallocate()
            memory = bigger
            table = grown
        }
        // Under the load limit: there is an empty slot.
        _ = table.insert(slot)
        count += 1
        return true
    }

    func replace(at index: Int, with slot: UInt64) {
        table[index] = slot
    }

    func forEachSlot(_ body: (UInt64) -> Void) {
        for index in 0..<table.slotCount {
            let slot = table[index]
            if HashTable.isEntry(slot) { body(slot) }
        }
    }
}

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

    /// Adds a slot, doubling first when the table would pass its load limit.
    func insert(_ slot: UInt64) {
        if count + 1 > table.loadLimit && table.slotCount < HashTable.maximumSlotCount {
            let bigger = UnsafeMutablePointer<UInt64>.allocate(capacity: table.slotCount * 2)
            bigger.initialize(repeating: HashTable.empty, count: table.slotCount * 2)
            let grown = HashTable(slots: bigger, slotCount: table.slotCount * 2)
            forEachSlot { grown.insert($0) }
            memory.deallocate()
            memory = bigger
            table = grown
        }
        table.insert(slot)
        count += 1
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

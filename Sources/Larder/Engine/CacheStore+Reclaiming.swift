/// Reclaiming at the tail, wired to the index: making room in the standing count limit.
extension CacheStore {
    /// Writer: evicts at the tail until a new entry keeps the file within its count limit
    /// (Eviction/CountLimit.swift).
    @inline(never)
    func makeRoomInCountLimit(forPlacing size: Int) throws(LarderError) {
        var budget = ReclaimBudget(forPlacing: size)
        budget.relocatesUnread = false
        // Every step passes a record or relocates one within the budget; a damaged ring is
        // rebuilt on the way (`reclaimTailRecord`). Bounded as a placement is (FORMAT.md 6.4).
        var steps = 4 * (ringEnd - ringStart) / FileLayout.recordAlignment + 64
        while limits.value.isAtCountLimit(entryCount: state.entryCount) && state.spanBytes > 0 {
            try reclaimTailRecord(budget: &budget, unrelocated: .evict)
            steps -= 1
            if steps == 0 { throw LarderError(.corrupt, "the ring holds more entries than it can walk", path: path) }
        }
    }
}

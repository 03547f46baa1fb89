/// The standing count limit (FORMAT.md 6.10): a file whose meta page names one never holds more
/// entries, whichever process writes. A put that adds a key to a file at its limit first takes
/// entries from the tail, as the byte capacity does: dead and expired ones are passed or dropped,
/// one read since the tail last passed is relocated within the put's budget (CLOCK's second
/// chance), and the first other live entry is evicted.
/// The standing limits of a meta copy (FORMAT.md 2.1), as writers read them on every write.
struct FileLimits {
    /// The most entries; 0 for none.
    let countLimit: UInt64
    /// Milliseconds; 0 for none.
    let maximumAge: UInt64

    init(_ meta: Meta) {
        countLimit = meta.countLimit
        maximumAge = meta.maximumAge
    }
}

extension CacheStore {
    /// Writer: whether a put that adds a key must first make room in the count limit. One
    /// compare: with no limit (0) the bound wraps to the largest count.
    @inline(__always)
    var isAtCountLimit: Bool {
        UInt64(truncatingIfNeeded: state.entryCount) > limits.value.countLimit &- 1
    }

    /// Writer: evicts at the tail until a new entry keeps the file within its count limit.
    @inline(never)
    func makeRoomInCountLimit(forPlacing size: Int) throws(LarderError) {
        var budget = ReclaimBudget(forPlacing: size)
        budget.relocatesUnread = false
        // Every step passes a record or relocates one within the budget; a damaged ring is
        // rebuilt on the way (`reclaimTailRecord`). Bounded as a placement is (FORMAT.md 6.4).
        var steps = 4 * (ringEnd - ringStart) / FileLayout.recordAlignment + 64
        while isAtCountLimit && state.spanBytes > 0 {
            try reclaimTailRecord(budget: &budget, unrelocated: .evict)
            steps -= 1
            if steps == 0 { throw LarderError(.corrupt, "the ring holds more entries than it can walk", path: path) }
        }
    }

    /// Writer, or a sole writer opening the file: evicts, in the order of `trim(toCount:)`, until
    /// the entries fit a count limit lowered below them.
    func trimToCountLimit() {
        let limit = limits.value.countLimit
        guard limit != 0, UInt64(truncatingIfNeeded: state.entryCount) > limit else { return }
        _ = evict { UInt64(truncatingIfNeeded: state.entryCount) <= limit }
    }
}

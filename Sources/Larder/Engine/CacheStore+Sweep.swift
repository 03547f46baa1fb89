/// The sweep: removing expired and over-age entries through the index, a bounded number of slots
/// per hold of the writer lock, so that writers of every process wait at most one step for it.
extension CacheStore {
    /// The most index slots one step looks at (a removal that shifts a slot back counts the slot
    /// again): a step takes some 25 µs, under 0.1 ms at the 99th percentile (`larder-bench
    /// sweep-step`, 2 cores under load).
    static let sweepStepSlots = 512

    /// What one step of a sweep did.
    struct SweepStep {
        /// Where the next step starts; nil when this one finished the pass.
        var next: Int?
        var examined = 0
        var removed = 0
    }

    /// Writer: looks at up to `slots` index slots from `cursor` (the active table's, then the
    /// draining table's while the index grows) and removes every expired entry they name. A
    /// cursor past the tables (they changed since the last step) ends the pass.
    func sweepStep(from cursor: Int, slots: Int = CacheStore.sweepStepSlots) -> SweepStep {
        var step = SweepStep()
        var position = cursor
        let now = SystemCall.nowMilliseconds()
        let activeCount = active.slotCount
        let total = activeCount + (draining?.slotCount ?? 0)
        while step.examined < slots && position < total {
            step.examined += 1
            let inDraining = position >= activeCount
            let index = inDraining ? position - activeCount : position
            let slot = inDraining ? draining![index] : active[index]
            guard HashTable.isEntry(slot), let header = entryHeader(at: HashTable.offset(of: slot)),
                  header.isExpired(now: now, maximumAge: maximumAge),
                  SlidingExpiry.claimExpired(in: file, at: HashTable.offset(of: slot), header: header, maximumAge: maximumAge) else {
                position += 1
                continue
            }
            let offset = HashTable.offset(of: slot)
            removeEntry(FoundEntry(offset: offset, header: header, inDraining: inDraining, slotIndex: index), counter: .expirations)
            allocator.value.rememberDeadRoom(at: offset, header: header)
            step.removed += 1
            // Removing from the active table shifts the slots after it back: this one again.
            if inDraining { position += 1 }
        }
        step.next = position < total ? position : nil
        return step
    }
}

/// Maintenance: changes to many entries at once (removing the expired, the old, those under a
/// prefix; trimming to a size). Each is a writer: it runs under the exclusive in-process lock and
/// the writer lock of every process (`withWriterLock`), so nothing moves while it looks.
///
/// Each walks the index once, chooses, then removes what it chose: work proportional to the
/// number of entries, which is why none of this runs on the write path. Removed records are
/// marked dead in place; their space is reused when the tail comes around to them, as after
/// `remove(key:)`.
extension CacheStore {
    /// Writer: calls `body` with the offset and header of every entry the index names (both
    /// tables while the index grows), expired ones included.
    func forEachIndexedEntry(_ body: (_ offset: Int, _ header: RecordHeader) -> Void) {
        for table in [active] + (draining.map { [$0] } ?? []) {
            for index in 0..<table.slotCount {
                let slot = table[index]
                guard HashTable.isEntry(slot) else { continue }
                let offset = HashTable.offset(of: slot)
                if let header = entryHeader(at: offset) { body(offset, header) }
            }
        }
    }

    /// Writer: removes every entry for which `isChosen(key, header)` holds, counting each under
    /// `counter` (or as an expiration when its time was up anyway).
    ///
    /// - Returns: how many of the entries removed had not expired, and how many had.
    func removeEntries(counting counter: SharedState.Counter,
                       where isChosen: (_ key: UnsafeRawBufferPointer, _ header: RecordHeader) -> Bool)
        -> (live: Int, expired: Int) {
        // Chosen first, removed afterwards: removing shifts slots the walk has yet to visit.
        var chosen: [Int] = []
        forEachIndexedEntry { offset, header in
            if isChosen(keyBytes(at: offset, header: header), header) { chosen.append(offset) }
        }
        let now = SystemCall.nowMilliseconds()
        var removed = (live: 0, expired: 0)
        for offset in chosen {
            guard let header = entryHeader(at: offset) else { continue }
            let expired = header.isExpired(now: now, maximumAge: maximumAge)
            // Removing the expired: a sliding entry a read pushed back since it was chosen stays.
            if counter == .expirations && !(expired && SlidingExpiry.claimExpired(in: file, at: offset, header: header, maximumAge: maximumAge)) { continue }
            removeEntry(at: offset, header: header, counter: expired ? .expirations : counter)
            allocator.value.rememberDeadRoom(at: offset, header: header)
            if expired { removed.expired += 1 } else { removed.live += 1 }
        }
        return removed
    }

    /// Writer: evicts entries until `isSatisfied()` holds, in the order the ring's CLOCK would:
    /// expired ones first, then those not read since they were written (or since the tail last
    /// passed them), oldest first, then those read, oldest first. Without relocating anything,
    /// so the order holds wherever the head and tail stand.
    ///
    /// - Returns: how many unexpired entries were evicted.
    func evict(until isSatisfied: () -> Bool) -> Int {
        guard !isSatisfied() else { return 0 }
        let now = SystemCall.nowMilliseconds()
        // Rank 0: expired; 1: not read; 2: read. Within a rank, the sequence number says the age.
        var candidates: [(rank: UInt8, sequence: UInt64, offset: Int)] = []
        // The count comes from the file: a damaged one may claim more entries than slots.
        candidates.reserveCapacity(max(0, min(state.entryCount, active.slotCount + (draining?.slotCount ?? 0))))
        forEachIndexedEntry { offset, header in
            let rank: UInt8 = header.isExpired(now: now, maximumAge: maximumAge) ? 0 : RecordHeader.wasVisited(in: file, at: offset) ? 2 : 1
            candidates.append((rank, header.sequence, offset))
        }
        candidates.sort { ($0.rank, $0.sequence) < ($1.rank, $1.sequence) }
        var evicted = 0
        for candidate in candidates {
            if isSatisfied() { break }
            guard let header = entryHeader(at: candidate.offset) else { continue }
            removeEntry(at: candidate.offset, header: header, counter: candidate.rank == 0 ? .expirations : .evictions)
            allocator.value.rememberDeadRoom(at: candidate.offset, header: header)
            if candidate.rank != 0 { evicted += 1 }
        }
        return evicted
    }

    /// Writer, or a sole writer opening the file: evicts, in the order of `trim(toCount:)`, until
    /// the entries fit a count limit lowered below them (Eviction/CountLimit.swift).
    func trimToCountLimit() {
        let limits = limits.value
        guard limits.exceedsCountLimit(entryCount: state.entryCount) else { return }
        _ = evict { !limits.exceedsCountLimit(entryCount: state.entryCount) }
    }
}

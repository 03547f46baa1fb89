import Foundation

/// Limits by age, count and bytes, applied when you ask.
///
/// The cache always keeps within its capacity by itself, evicting the least recently used entries
/// as new ones come in; these calls apply tighter limits of your own. Each looks at every entry
/// once, under the exclusive lock, so it takes time proportional to the number of entries: call
/// it now and then (at launch, after a batch of downloads), not on every write, or call its
/// `async` overload. The file keeps its size; the room freed is reused by later writes.
extension Cache {
    /// Removes every expired entry now, rather than when the ring comes around to it.
    ///
    /// After this, an offline-first ``load(_:forKey:expiry:policy:coder:using:)`` has no stale
    /// copies left to fall back on.
    ///
    /// - Returns: How many expired entries were removed.
    ///
    /// The corresponding C function is `larder_remove_expired`.
    @discardableResult
    public func removeExpired() throws(LarderError) -> Int {
        let now = SystemCall.nowMilliseconds()
        return try write { (store) throws(LarderError) in
            store.removeEntries(counting: .expirations) { _, header in header.isExpired(now: now, maximumAge: store.maximumAge) }.expired
        }
    }

    /// Removes every entry stored more than `age` seconds ago, whatever its expiry: a limit by
    /// age.
    ///
    /// An entry's age counts from when its value was last set; reading it does not make it
    /// younger.
    ///
    /// - Returns: How many unexpired entries were removed.
    /// - Throws: `.invalidArgument` for a negative or NaN age.
    ///
    /// The corresponding C function is `larder_remove_older`.
    @discardableResult
    public func removeOlder(than age: TimeInterval) throws(LarderError) -> Int {
        guard age >= 0 else {
            throw LarderError(.invalidArgument, "the age must be zero or more seconds, not \(age)", path: path)
        }
        // Ages past 2^63 ms (some 292 million years) are all older than any entry.
        return try removeOlder(thanMilliseconds: UInt64(min((age * 1000).rounded(.down), 0x1p63)))
    }

    /// ``removeOlder(than:)`` for an age in whole milliseconds, as the C API's ages are: no
    /// conversion through seconds to round.
    @discardableResult
    package func removeOlder(thanMilliseconds age: UInt64) throws(LarderError) -> Int {
        let now = SystemCall.nowMilliseconds()
        let cutoff = now - min(now, age)
        return try write { (store) throws(LarderError) in
            store.removeEntries(counting: .removals) { _, header in header.storedAt < cutoff }.live
        }
    }

    /// Evicts entries, least recently used first, until the values left add up to at most
    /// `bytes` (``totalBytes``, as callers see them): a limit by bytes, tighter than the
    /// capacity.
    ///
    /// The order is the one the cache's own eviction follows: expired entries first, then
    /// entries not read since they were stored, oldest first, then the ones read, oldest first.
    ///
    /// - Returns: How many unexpired entries were evicted.
    /// - Throws: `.invalidArgument` for a negative `bytes`.
    ///
    /// The corresponding C function is `larder_trim_bytes`.
    @discardableResult
    public func trim(toBytes bytes: Int) throws(LarderError) -> Int {
        guard bytes >= 0 else { throw LarderError(.invalidArgument, "cannot trim to \(bytes) bytes", path: path) }
        return try write { (store) throws(LarderError) in
            store.evict { store.state.liveRawBytes <= bytes }
        }
    }

    /// Evicts entries, least recently used first, until at most `count` are left: a limit by
    /// count.
    ///
    /// The order is that of ``trim(toBytes:)-4hcpt``.
    ///
    /// - Returns: How many unexpired entries were evicted.
    /// - Throws: `.invalidArgument` for a negative `count`.
    ///
    /// The corresponding C function is `larder_trim_count`.
    @discardableResult
    public func trim(toCount count: Int) throws(LarderError) -> Int {
        guard count >= 0 else { throw LarderError(.invalidArgument, "cannot trim to \(count) entries", path: path) }
        return try write { (store) throws(LarderError) in
            store.evict { store.state.entryCount <= count }
        }
    }
}

extension Cache {
    /// The most index slots one step of the sweep looks at.
    @_spi(Inspection) public static let sweepStepSlots = CacheStore.sweepStepSlots

    /// One step of the automatic sweep from `cursor`, as a write: the next cursor, or nil when
    /// the pass is over or the cache cannot be written (closed, say). Public for the benchmark.
    @_spi(Inspection) public func sweepStep(from cursor: Int) -> Int? {
        try? write { (store) throws(LarderError) in store.sweepStep(from: cursor) }.next
    }
}

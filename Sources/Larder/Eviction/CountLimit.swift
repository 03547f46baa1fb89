/// The standing count limit (FORMAT.md 6.10): a file whose meta page names one never holds more
/// entries, whichever process writes. A put that adds a key to a file at its limit first takes
/// entries from the tail, as the byte capacity does: dead and expired ones are passed or dropped,
/// one read since the tail last passed is relocated within the put's budget (CLOCK's second
/// chance), and the first other live entry is evicted (`CacheStore.makeRoomInCountLimit`).
///
/// `FileLimits` holds the standing limits of a meta copy (FORMAT.md 2.1), as writers read them
/// on every write. Invariant: they are the meta copy's the store has now (kept in step by
/// `CacheStore.meta`).
struct FileLimits {
    /// The most entries; 0 for none.
    let countLimit: UInt64
    /// Milliseconds; 0 for none.
    let maximumAge: UInt64

    init(_ meta: Meta) {
        countLimit = meta.countLimit
        maximumAge = meta.maximumAge
    }

    /// Whether a put that adds a key to `entryCount` entries must first make room. One compare:
    /// with no limit (0) the bound wraps to the largest count.
    @inline(__always)
    func isAtCountLimit(entryCount: Int) -> Bool {
        UInt64(truncatingIfNeeded: entryCount) > countLimit &- 1
    }

    /// Whether `entryCount` entries are more than a count limit allows (one lowered below them).
    func exceedsCountLimit(entryCount: Int) -> Bool {
        countLimit != 0 && UInt64(truncatingIfNeeded: entryCount) > countLimit
    }
}

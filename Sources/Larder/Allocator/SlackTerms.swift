/// The parts of the slack (FORMAT.md 6.4) that change only with the file's size, its capacity,
/// its islands or the largest record passed in place. `RingAllocator` works them out again when
/// one of those changes, so that a placement adds only the record's size and the live bytes.
///
/// Invariant: made from the allocator's present fields (checked in debug builds).
struct SlackTerms: Equatable {
    /// The fixed slack of the ring at its present size.
    let fixed: Int
    /// Live record bytes above which the slack is the fixed one: the compaction threshold at
    /// the capacity, `Int.max` below it.
    let fixedAbove: Int
    /// `U_F / 8` and `min(R, U_F / 4)`, with `U_F` the ring's present bytes less the islands:
    /// a record that had to be passed in place for want of room (`R`) asks for room next time.
    let eighth: Int
    let passedRoom: Int
    /// `U_F` less the fixed slack: what reclaiming dead records frees at most, before the live
    /// bytes and the record are taken off.
    let attainableBase: Int

    init(ringStart: Int, ringEnd: Int, capacity: Int, layout: RingLayout, largestRecordPassedInPlace: Int) {
        fixed = RingLayout.fixedSlack(ringBytes: ringEnd - ringStart)
        fixedAbove = ringEnd < capacity ? .max : layout.compactionThreshold
        // The islands always lie within the file.
        let usable = layout.usableRingBytes - (capacity - ringEnd)
        eighth = usable / 8
        passedRoom = min(largestRecordPassedInPlace, usable / 4)
        attainableBase = usable - fixed
    }

    /// `RingAllocator.slack(for:)` with `live` record bytes live. Sizes within the ring do not
    /// overflow: the arithmetic wraps, unchecked.
    @inline(__always)
    func slack(for size: Int, live: Int) -> Int {
        guard live <= fixedAbove else { return fixed }
        let attainable = (attainableBase &- live &- size) / 2
        let extra = max(2 &* min(size, eighth), passedRoom)
        return fixed &+ max(0, min(extra, attainable))
    }

    /// The most the slack can be for a record of `size` bytes, whatever the live bytes: the
    /// fixed slack, and twice the record's size or the room of the largest record passed in
    /// place. (`min(size, eighth) <= size`, and the fixed slack alone is less.)
    @inline(__always)
    func most(for size: Int) -> Int {
        fixed &+ max(2 &* size, passedRoom)
    }
}

import CLarderSupport

/// The `ReadView` of a store as its last in-process writer left it, for readers of the same
/// process to take without a lock: a sequence lock over a few words of process memory.
///
/// In-process readers then read the way readers of other processes always have: from a view that
/// may be out of date, checked at the end against the file's change counter. Writers, holding the
/// exclusive in-process lock, publish a new view when the meta copy, the index tables or the file
/// size they see have changed; a reader that finds the counter moved past its view waits for the
/// writer by taking that lock for the refresh.
///
/// Invariant: the words are written only under the exclusive in-process lock; the sequence is odd
/// while they are being written. Every word is accessed atomically, so no read is a data race.
final class PublishedView: @unchecked Sendable {
    private enum Word {
        static let sequence = 0, limit = 1, firstValidSequence = 2, activeSlots = 3, activeCount = 4
        static let drainingSlots = 5, drainingCount = 6, changeCounter = 7, maximumAge = 8
        static let count = 9
    }

    private let words: UnsafeMutablePointer<UInt64>
    /// The parts of every view that never change.
    private let base: UnsafeMutableRawPointer
    private let ringStart: Int
    private let seed: UInt32

    init(base: UnsafeMutableRawPointer, ringStart: Int, seed: UInt32) {
        self.base = base
        self.ringStart = ringStart
        self.seed = seed
        words = .allocate(capacity: Word.count)
        words.initialize(repeating: 0, count: Word.count)
    }

    deinit {
        words.deallocate()
    }

    /// Writer, under the exclusive in-process lock: makes `view` the one readers take.
    func publish(_ view: ReadView) {
        precondition(view.base == base && view.ringStart == ringStart && view.seed == seed)
        let sequence = lrd_load_relaxed_u64(words + Word.sequence)
        lrd_store_relaxed_u64(words + Word.sequence, sequence &+ 1)
        lrd_fence_release()
        set(Word.limit, UInt64(view.limit))
        set(Word.firstValidSequence, view.firstValidSequence)
        set(Word.activeSlots, UInt64(UInt(bitPattern: view.active.slots)))
        set(Word.activeCount, UInt64(view.active.slotCount))
        set(Word.drainingSlots, UInt64(UInt(bitPattern: view.draining?.slots)))
        set(Word.drainingCount, UInt64(view.draining?.slotCount ?? 0))
        set(Word.changeCounter, view.changeCounter)
        set(Word.maximumAge, view.maximumAge)
        lrd_store_release_u64(words + Word.sequence, sequence &+ 2)
    }

    /// Reader: the view last published, whole (never half of one and half of the next).
    @inline(__always)
    func load() -> ReadView {
        while true {
            let sequence = lrd_load_acquire_u64(words + Word.sequence)
            let limit = get(Word.limit), firstValid = get(Word.firstValidSequence)
            let activeSlots = get(Word.activeSlots), activeCount = get(Word.activeCount)
            let drainingSlots = get(Word.drainingSlots), drainingCount = get(Word.drainingCount)
            let changeCounter = get(Word.changeCounter), maximumAge = get(Word.maximumAge)
            lrd_fence_acquire()
            guard sequence & 1 == 0, lrd_load_relaxed_u64(words + Word.sequence) == sequence,
                  let active = UnsafeMutablePointer<UInt64>(bitPattern: UInt(activeSlots)) else {
                lrd_spin_pause()
                continue
            }
            // The words hold what `publish` stored from a view's own Ints: converted back unchecked.
            return ReadView(
                base: base, limit: Int(truncatingIfNeeded: limit), ringStart: ringStart, seed: seed,
                firstValidSequence: firstValid,
                active: HashTable(checkedSlots: active, slotCount: Int(truncatingIfNeeded: activeCount)),
                draining: UnsafeMutablePointer<UInt64>(bitPattern: UInt(drainingSlots))
                    .map { HashTable(checkedSlots: $0, slotCount: Int(truncatingIfNeeded: drainingCount)) },
                changeCounter: changeCounter, maximumAge: maximumAge)
        }
    }

    @inline(__always)
    private func get(_ word: Int) -> UInt64 { lrd_load_relaxed_u64(words + word) }

    private func set(_ word: Int, _ value: UInt64) { lrd_store_relaxed_u64(words + word, value) }
}

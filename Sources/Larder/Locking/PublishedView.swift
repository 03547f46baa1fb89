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
/// The words sit at the start of an `lrd_read_view`, with what the usual read checks and counts
/// besides, so that `lrd_view_get` answers it in one C call, through `readView`.
///
/// Invariant: the words are written only under the exclusive in-process lock; the sequence is odd
/// while they are being written. Every word is accessed atomically, so no read is a data race.
/// The `lrd_read_view` is allocated and initialized for this object's life; its other fields,
/// set in `init`, point into the store's mapping and `LocalWords`, which outlive it.
final class PublishedView: @unchecked Sendable {
    private enum Word {
        static let sequence = 0, limit = 1, firstValidSequence = 2, activeSlots = 3, activeCount = 4
        static let drainingSlots = 5, drainingCount = 6, changeCounter = 7, maximumAge = 8
        static let count = 9
    }

    private let reader: UnsafeMutablePointer<lrd_read_view>
    /// The first field of `reader`, its nine words.
    private let words: UnsafeMutablePointer<UInt64>
    /// The parts of every view that never change.
    private let base: UnsafeMutableRawPointer
    private let ringStart: Int
    private let seed: UInt32

    /// - Parameters:
    ///   - changeCounter, indexEpoch: the shared state's words in the mapping.
    ///   - hits, misses: this process's counters (`LocalWords`).
    ///   - readOnly: the mapping cannot take the access bit.
    init(base: UnsafeMutableRawPointer, ringStart: Int, seed: UInt32, changeCounter: UnsafeRawPointer,
         indexEpoch: UnsafeRawPointer, hits: UnsafeMutablePointer<UInt64>, misses: UnsafeMutablePointer<UInt64>,
         readOnly: Bool) {
        self.base = base
        self.ringStart = ringStart
        self.seed = seed
        reader = .allocate(capacity: 1)
        reader.initialize(to: lrd_read_view(
            words: (0, 0, 0, 0, 0, 0, 0, 0, 0), base: UnsafePointer(base.assumingMemoryBound(to: UInt8.self)),
            ring_start: UInt64(ringStart), change_counter: changeCounter.assumingMemoryBound(to: UInt64.self),
            index_epoch: indexEpoch.assumingMemoryBound(to: UInt64.self), hits: hits, misses: misses,
            seed: seed, read_only: readOnly ? 1 : 0))
        // `words` is a homogeneous tuple of UInt64 at offset 0: its elements are UInt64s in order.
        words = UnsafeMutableRawPointer(reader).assumingMemoryBound(to: UInt64.self)
    }

    deinit {
        reader.deinitialize(count: 1)
        reader.deallocate()
    }

    /// What `lrd_view_get` reads through: valid for this object's life.
    var readView: UnsafePointer<lrd_read_view> { UnsafePointer(reader) }

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

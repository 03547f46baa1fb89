import CLarderSupport

/// The words of process memory that the threads of one store share without a lock: counters
/// its readers add to, and flags any of its threads may set.
///
/// They sit in one allocation, not in stored properties of `CacheStore`. The C atomics need a
/// fixed address. A class's stored `var` would also cost an exclusivity check at run time on each
/// access, and the read path touches these on every get.
///
/// Invariant: the allocation holds `Word.allCases.count` words, initialized to zero at first,
/// for as long as this value lives; every access after `init` is atomic.
struct LocalWords: ~Copyable {
    enum Word: Int, CaseIterable {
        /// Hits and misses of this process not yet added to the file's counters.
        case hits, misses
        /// An odd index epoch this process's readers waited out their patience on (0: none).
        /// Its writer died mid-change; reads do not wait on it again.
        case abandonedEpoch
        /// Set when `close()` begins: a reader still lending a value must not give its pin back.
        case closing
        /// Set once a child forked after the open has given up its copy of the descriptor.
        case descriptorReleased
    }

    private let base: UnsafeMutablePointer<UInt64>

    init() {
        base = .allocate(capacity: Word.allCases.count)
        base.initialize(repeating: 0, count: Word.allCases.count)
    }

    deinit {
        base.deallocate()
    }

    /// The address of `word`, for the C atomics.
    @inline(__always)
    func pointer(_ word: Word) -> UnsafeMutablePointer<UInt64> { base + word.rawValue }

    @inline(__always)
    func load(_ word: Word) -> UInt64 { lrd_load_relaxed_u64(pointer(word)) }

    @inline(__always)
    func increment(_ word: Word) { lrd_fetch_add_u64(pointer(word), 1) }

    /// Sets `word` to zero and returns what it held.
    func take(_ word: Word) -> UInt64 { lrd_exchange_u64(pointer(word), 0) }
}

import CLarderSupport

/// The change ring (FORMAT.md 3.3): the last 128 changes to the file, by key hash, for watchers
/// of every process.
///
/// Invariants:
/// - The pointers lie in the mapping of the `MappedFile` the ring was made from, and are used
///   only while it is alive (the `CacheStore` owns both; a watch keeps its cache).
/// - Only the writer holding the writer lock appends. While no watcher is counted it only moves
///   the change number on; otherwise it stores the slot's word, then its stamp (the number after
///   the change), both release, then the number, and wakes waiters.
/// - A reader trusts nothing it reads: a slot counts only when its stamp is that of the change
///   read, its kind is valid, and the change number, read again after the slot, shows that no
///   later lap wrote over it. Anything else is a lost stretch, which the watcher makes good by
///   looking at the cache itself.
/// - A read-only handle never stores here (its mapping is read-only): it neither appends nor
///   counts itself among the watchers.
struct ChangeRing {
    /// Slots in the ring: a power of two, the same for every page size.
    static let slotCount = 128
    /// Bytes of a slot: the change's word, then its stamp.
    static let slotSize = 16
    /// Where the slots start in meta page 1 (FORMAT.md 3.3).
    static let slotsPageOffset = 2048
    /// Shared-state offsets of the change number and the watcher count (FORMAT.md 3.1).
    static let numberField = 288, watcherCountField = 296

    /// What a change did. Its raw value is the slot's low 3 bits; 0 and 7 are never written.
    enum Kind: UInt64 {
        case stored = 1, removed, evicted, expired
        /// Every entry went (a clear); the slot's hash bits are 0.
        case cleared
        /// The file was rebuilt (recovery): any entry may have changed; hash bits 0.
        case rebuilt
    }

    /// The shared-state page: the change number and the watcher count are at fixed offsets in
    /// it, so that an append loads one pointer for both.
    private let state: UnsafeMutableRawPointer
    private let slots: UnsafeMutableRawPointer
    /// The change number's word: the number of the next change. Its low 32 bits are the word
    /// watchers wait on.
    private var number: UnsafeMutableRawPointer { state + ChangeRing.numberField }
    private var watchers: UnsafeMutableRawPointer { state + ChangeRing.watcherCountField }

    init(file: MappedFile, pageSize: Int) {
        state = file.sharedPage(at: FileLayout.statePage * pageSize, length: pageSize)
        slots = file.sharedPage(at: pageSize + ChangeRing.slotsPageOffset, length: ChangeRing.slotCount * ChangeRing.slotSize)
    }

    /// The slot of change `number`.
    private func slot(of number: UInt64) -> UnsafeMutableRawPointer {
        slots + Int(truncatingIfNeeded: number & UInt64(ChangeRing.slotCount - 1)) &* ChangeRing.slotSize
    }

    // MARK: - Writer

    /// Records a change of the key whose `KeyHash` is `hash`. Writer lock held.
    @inline(__always)
    func record(hash: UInt64, kind: Kind) {
        if isWatched { append(hash: hash, kind: kind) } else { skip() }
    }

    /// Whether a watcher is counted, so that a change must fill its slot (`append`); otherwise
    /// the writer only moves the number on (`skip`). Writer lock held.
    ///
    /// A watcher counted in just after this read finds the change lost (its slot keeps an older
    /// stamp) and is not woken for it: its first wait is short (`ChangeWatch.firstWaitMilliseconds`).
    @inline(__always)
    var isWatched: Bool { lrd_load_seq_cst_u64(watchers) != 0 }

    /// A change with no watcher counted: the number moves on, its slot is left as it is.
    @inline(__always)
    func skip() {
        lrd_store_release_u64(number, lrd_load_relaxed_u64(number) &+ 1)
    }

    /// A change while a watcher is counted: the slot, then the number, then the wake.
    @inline(never)
    func append(hash: UInt64, kind: Kind) {
        let next = lrd_load_relaxed_u64(number)
        let slot = slot(of: next)
        lrd_store_release_u64(slot, hash & ~7 | kind.rawValue)
        lrd_store_release_u64(slot + 8, next &+ 1)
        lrd_store_seq_cst_u64(number, next &+ 1)
        wakeWatchers()
    }

    /// Wakes every watcher of every process; also how a watch that stops ends its own wait.
    @inline(never)
    func wakeWatchers() { lrd_wake_word(number) }

    /// Forgets watchers that died without leaving: only a sole writer, when no other read-write
    /// handle (hence no counted watcher) has the file open.
    func forgetWatchers() { lrd_store_seq_cst_u64(watchers, 0) }

    // MARK: - Watchers

    /// The number the next change will take: where a watcher starting now begins.
    var nextNumber: UInt64 { lrd_load_acquire_u64(number) }

    /// One change read from the ring: the key hash's top 61 bits (low 3 bits zero) and the kind.
    struct Change: Equatable {
        let hashBits: UInt64
        let kind: Kind

        /// Whether it is a change of the key whose `KeyHash` is `hash`.
        func isOfKey(hashed hash: UInt64) -> Bool { hashBits == hash & ~7 }
    }

    /// What reading from a cursor found.
    enum Reading {
        /// The changes since the cursor, oldest first, and the cursor after them.
        case changes([Change], next: UInt64)
        /// The changes since the cursor are no longer all in the ring (more than it holds, a
        /// slot not written for its change, or a change number that went back): the caller
        /// looks at the cache itself and goes on from `next`.
        case lost(next: UInt64)
    }

    /// The changes numbered from `cursor` up to the present.
    func changes(since cursor: UInt64) -> Reading {
        let end = nextNumber
        let count = end &- cursor
        if count == 0 { return .changes([], next: end) }
        guard count < UInt64(ChangeRing.slotCount) else { return .lost(next: end) }
        var found: [Change] = []
        found.reserveCapacity(Int(count))
        var index = cursor
        while index != end {
            // The stamp first: the word stored before it is that change's, or a later lap's.
            let slot = slot(of: index)
            let stamp = lrd_load_acquire_u64(slot + 8)
            let word = lrd_load_acquire_u64(slot)
            guard stamp == index &+ 1, let kind = Kind(rawValue: word & 7) else { return .lost(next: end) }
            found.append(Change(hashBits: word & ~7, kind: kind))
            index &+= 1
        }
        // A writer of a later lap writes a slot only once the number has reached the slot's
        // change plus the ring's size, and the slot loads were acquires: a number still below
        // that means every word read was its own change's.
        let after = nextNumber
        guard after &- cursor < UInt64(ChangeRing.slotCount) else { return .lost(next: after) }
        return .changes(found, next: end)
    }

    /// Counts a watcher of a read-write handle in: writers fill slots and wake watchers only
    /// while there is one.
    func addWatcher() {
        _ = lrd_fetch_add_u64(watchers, 1)
        lrd_fence_seq_cst()
    }

    /// Watchers of read-write handles now counted, in all processes (a dead one's stays counted).
    var watcherCount: UInt64 { lrd_load_acquire_u64(watchers) }

    /// Counts a watcher out; never below zero (a sole writer may have reset the count).
    func removeWatcher() {
        while true {
            let count = lrd_load_relaxed_u64(watchers)
            if count == 0 || lrd_cas_u64(watchers, count, count - 1) != 0 { return }
        }
    }

    /// Sleeps until the change number moves past `cursor`, a writer wakes watchers, or
    /// `milliseconds` pass. Returns at once when the number is not `cursor` already.
    func wait(whileAt cursor: UInt64, milliseconds: UInt32) {
        guard nextNumber == cursor else { return }
        _ = lrd_wait_word(number, UInt32(truncatingIfNeeded: cursor), milliseconds)
    }
}

import CLarderSupport
import Foundation

/// Who is reading each shard of a memory tier, and the shards' hits: one word per shard in each
/// of a few slots, each slot on cache lines of its own. A thread uses the slot its number picks.
///
/// A hit takes no lock. It adds 1 to its slot's word for the shard, reads the shard if no writer
/// holds readers off (`ShardLock.isExcludingReaders`), then takes the 1 back and counts the hit in
/// the same add. Threads of different slots write no line in common. A writer sets the shard's
/// flag, then waits until every slot's word for the shard counts no reader (`waitForReaders`).
///
/// Invariant: `words` holds `slotCount` slots of `lineBytes`, allocated here and freed in
/// `deinit`. A word is (hits << 16) | readers inside: the low 16 bits count the threads of its
/// slot reading its shard now (far fewer than 65,536), the high 48 the shard's hits through the
/// slot, wrapping.
final class MemoryReaders: @unchecked Sendable {
    /// Two cache lines: what a core's adjacent-line prefetcher fetches together.
    static let lineBytes = 128
    /// The most shards a slot has a word for.
    static let maximumShards = lineBytes / 8
    private static let readerBits: UInt64 = 16
    private static let reader: UInt64 = 1
    private static let hit: UInt64 = 1 << readerBits

    private let words: UnsafeMutableRawPointer
    private let slotCount: Int

    /// Slots for `shards` shards (at most `maximumShards`): twice as many as processors, a power
    /// of two from 4 to 64, so that threads seldom share one.
    init(shards: Int) {
        precondition(shards <= MemoryReaders.maximumShards)
        var count = 4
        while count < 64 && count < 2 * ProcessInfo.processInfo.activeProcessorCount { count *= 2 }
        slotCount = count
        let bytes = count * MemoryReaders.lineBytes
        words = UnsafeMutableRawPointer.allocate(byteCount: bytes, alignment: MemoryReaders.lineBytes)
        words.initializeMemory(as: UInt8.self, repeating: 0, count: bytes)
    }

    deinit {
        words.deallocate()
    }

    /// This thread's word for shard `shard`.
    @inline(__always)
    func word(forShard shard: Int) -> UnsafeMutableRawPointer {
        let slot = Int(truncatingIfNeeded: lrd_thread_number()) & (slotCount - 1)
        return words + slot * MemoryReaders.lineBytes + shard * 8
    }

    /// Counts this thread in as a reader of the word's shard. Ordered before the load of the
    /// shard's flag that follows (a writer sets the flag, then reads the words).
    @inline(__always)
    func enter(_ word: UnsafeMutableRawPointer) {
        lrd_fetch_add_seq_cst_u64(word, MemoryReaders.reader)
    }

    /// Counts this thread out, with a hit if `hit`. What it read comes before (release).
    /// `MemoryLease` adds the same after a hit, inlined in the caller's module.
    @inline(__always)
    func leave(_ word: UnsafeMutableRawPointer, hit: Bool) {
        lrd_fetch_add_release_u64(word, (hit ? MemoryReaders.hit : 0) &- MemoryReaders.reader)
    }

    /// Takes back a hit counted through `word` (a reader that is no longer inside).
    func retractHit(_ word: UnsafeMutableRawPointer) {
        lrd_fetch_add_u64(word, 0 &- MemoryReaders.hit)
    }

    /// Returns once no thread reads shard `shard`. The caller has set the shard's flag, so that
    /// readers that come later wait (sequentially consistent, like `enter`).
    func waitForReaders(ofShard shard: Int) {
        for slot in 0..<slotCount {
            let word = words + slot * MemoryReaders.lineBytes + shard * 8
            var spins = 0
            while lrd_load_seq_cst_u64(word) & (MemoryReaders.hit - 1) != 0 {
                spins += 1
                if spins < 64 { lrd_spin_pause() } else { sched_yield() }
            }
        }
    }

    /// The hits counted in every slot, wrapping at 2^48.
    var hits: UInt64 {
        var sum: UInt64 = 0
        for slot in 0..<slotCount {
            for shard in 0..<MemoryReaders.maximumShards {
                sum &+= lrd_load_relaxed_u64(words + slot * MemoryReaders.lineBytes + shard * 8) >> MemoryReaders.readerBits
            }
        }
        return sum & (UInt64.max >> MemoryReaders.readerBits)
    }
}

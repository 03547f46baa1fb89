import CLarderSupport
#if canImport(Darwin)
import Darwin
import os
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The lock of one shard of a memory tier, its writers' flag, and the shard's miss counter.
///
/// Writers (inserts, removals, evictions, checks noted) take the lock, then hold readers off
/// with the flag (`excludingReaders`). A hit takes no lock: it reads the shard while the flag is
/// clear (`MemoryReaders`), and writes nothing here. Taking the lock is one compare-and-swap and
/// releasing it one store; a waiter spins a little, then yields its processor to a holder that
/// may have been preempted. On Apple platforms it is an `os_unfair_lock`, which lends a waiter's
/// priority to the holder.
///
/// Invariant: the lock word, the flag and the counter live at a fixed address, allocated here and
/// freed in `deinit`, on cache lines of their own (`ShardLock.lineBytes`), so that the flag's line
/// is written only by the shard's writers and by misses. The flag is set only under the lock.
final class ShardLock: @unchecked Sendable {
    /// Two cache lines: what a core's adjacent-line prefetcher fetches together.
    static let lineBytes = 128

    /// The lock word, then the flag and the miss counter.
    private let words: UnsafeMutableRawPointer
    private static let flagOffset = 8, missesOffset = 16

    init() {
        words = UnsafeMutableRawPointer.allocate(byteCount: ShardLock.lineBytes, alignment: ShardLock.lineBytes)
        words.initializeMemory(as: UInt8.self, repeating: 0, count: ShardLock.lineBytes)
        #if canImport(Darwin)
        words.bindMemory(to: os_unfair_lock.self, capacity: 1).initialize(to: os_unfair_lock())
        #endif
    }

    deinit {
        words.deallocate()
    }

    @inline(__always)
    func withLock<R>(_ body: () throws -> R) rethrows -> R {
        lock()
        defer { unlock() }
        return try body()
    }

    #if canImport(Darwin)
    @inline(__always)
    private func lock() { os_unfair_lock_lock(words.assumingMemoryBound(to: os_unfair_lock.self)) }

    @inline(__always)
    private func unlock() { os_unfair_lock_unlock(words.assumingMemoryBound(to: os_unfair_lock.self)) }
    #else
    @inline(__always)
    private func lock() {
        if lrd_cas_u64(words, 0, 1) == 0 { lockAfterWaiting() }
    }

    @inline(never)
    private func lockAfterWaiting() {
        var spins = 0
        while lrd_load_relaxed_u64(words) != 0 || lrd_cas_u64(words, 0, 1) == 0 {
            spins += 1
            if spins < 64 { lrd_spin_pause() } else { sched_yield() }
        }
    }

    @inline(__always)
    private func unlock() { lrd_store_release_u64(words, 0) }
    #endif

    /// Under the lock: runs `body` while no reader reads the shard. It sets the flag, so that
    /// readers wait, and waits for those inside (`readers`, the shard's index `shard`).
    @inline(__always)
    func excludingReaders<R>(_ readers: MemoryReaders, shard: Int, _ body: () throws -> R) rethrows -> R {
        lrd_store_seq_cst_u64(words + ShardLock.flagOffset, 1)
        readers.waitForReaders(ofShard: shard)
        defer { lrd_store_release_u64(words + ShardLock.flagOffset, 0) }
        return try body()
    }

    /// Whether a writer holds readers off (ordered after a reader's `MemoryReaders.enter`).
    @inline(__always)
    var isExcludingReaders: Bool { lrd_load_seq_cst_u64(words + ShardLock.flagOffset) != 0 }

    /// Returns once no writer holds readers off (a reader that found the flag set, and left).
    @inline(never)
    func waitWhileExcludingReaders() {
        var spins = 0
        while lrd_load_acquire_u64(words + ShardLock.flagOffset) != 0 {
            spins += 1
            if spins < 64 { lrd_spin_pause() } else { sched_yield() }
        }
    }

    /// Anywhere: counts a miss.
    func countMiss() { lrd_fetch_add_u64(words + ShardLock.missesOffset, 1) }

    var misses: UInt64 { lrd_load_relaxed_u64(words + ShardLock.missesOffset) }
}

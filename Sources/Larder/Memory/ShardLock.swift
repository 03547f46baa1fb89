import CLarderSupport
#if canImport(Darwin)
import Darwin
import os
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The lock of one shard of a memory tier, and the shard's hit and miss counters.
///
/// A hit holds the lock for a probe of a few slots. Taking it is one compare-and-swap and
/// releasing it one store (a pthread mutex took two locked instructions and some 80 instructions
/// in all); a waiter spins a little, then yields its processor to a holder that may have been
/// preempted. On Apple platforms it is an `os_unfair_lock`, which lends a waiter's priority to
/// the holder.
///
/// Invariant: the lock word and the counters live at a fixed address, allocated here and freed in
/// `deinit`, on cache lines of their own (`ShardLock.lineBytes`), so that threads taking the locks
/// of different shards share none, and a hit counted under the lock writes no other line. The hit
/// counter is written only under the lock (a plain load and store); the miss counter by atomic
/// adds.
final class ShardLock: @unchecked Sendable {
    /// Two cache lines: what a core's adjacent-line prefetcher fetches together.
    static let lineBytes = 128

    /// The lock word, then the hit and miss counters.
    private let words: UnsafeMutableRawPointer
    private static let hitsOffset = 8, missesOffset = 16

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

    /// Under the lock: counts a hit, or (`by: -1`) takes one back.
    @inline(__always)
    func countHit(by count: Int = 1) {
        let hits = words + ShardLock.hitsOffset
        lrd_store_relaxed_u64(hits, lrd_load_relaxed_u64(hits) &+ UInt64(bitPattern: Int64(count)))
    }

    /// Anywhere: counts a miss.
    func countMiss() { lrd_fetch_add_u64(words + ShardLock.missesOffset, 1) }

    var hits: UInt64 { lrd_load_relaxed_u64(words + ShardLock.hitsOffset) }
    var misses: UInt64 { lrd_load_relaxed_u64(words + ShardLock.missesOffset) }
}

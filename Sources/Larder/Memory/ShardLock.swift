#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The mutex of one shard of a memory tier.
///
/// Invariant: the mutex lives at a fixed address, allocated here and freed in `deinit`, as
/// pthread requires (a Swift stored property may move). It has its cache lines to itself
/// (`ShardLock.lineBytes`), so that threads taking the locks of different shards share none.
final class ShardLock: @unchecked Sendable {
    /// Two cache lines: what a core's adjacent-line prefetcher fetches together.
    static let lineBytes = 128

    private let mutex: UnsafeMutablePointer<pthread_mutex_t>

    init() {
        precondition(MemoryLayout<pthread_mutex_t>.size <= ShardLock.lineBytes)
        mutex = UnsafeMutableRawPointer.allocate(byteCount: ShardLock.lineBytes, alignment: ShardLock.lineBytes)
            .bindMemory(to: pthread_mutex_t.self, capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        pthread_mutex_init(mutex, nil)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        UnsafeMutableRawPointer(mutex).deallocate()
    }

    @inline(__always)
    func withLock<R>(_ body: () throws -> R) rethrows -> R {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body()
    }
}

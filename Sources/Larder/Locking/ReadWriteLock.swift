import CLarderSupport

/// A process-local reader-writer lock: many readers or one writer among the threads sharing a
/// `Cache`. Its critical sections are short (one lookup and copy, one put), so waiters spin and
/// yield instead of parking in the kernel, which with a writer thread beside reader threads
/// would cost a context switch per operation (see `lrd_rwlock_read_lock`).
///
/// In a child process forked while another thread of the parent held it, the lock is cleared
/// when the child first finds it taken (`lrd_rwlock_read_lock`): a `Cache` the parent opened then
/// refuses the child's call under it, rather than the child waiting for a thread it does not have.
final class ReadWriteLock: @unchecked Sendable {
    /// The lock's state, then the count of forks it was made or last cleared at.
    private let word: UnsafeMutablePointer<UInt64>

    init() {
        word = .allocate(capacity: 2)
        word.initialize(to: 0)
        (word + 1).initialize(to: lrd_watch_forks())
    }

    deinit {
        word.deallocate()
    }

    @inline(__always)
    func withReadLock<R, E: Error>(_ body: () throws(E) -> R) throws(E) -> R {
        lrd_rwlock_read_lock(word)
        defer { lrd_rwlock_read_unlock(word) }
        return try body()
    }

    @inline(__always)
    func withWriteLock<R, E: Error>(_ body: () throws(E) -> R) throws(E) -> R {
        lockExclusive()
        defer { unlockExclusive() }
        return try body()
    }

    /// The write lock without a closure, for the write path; pair with `unlockExclusive()`.
    @inline(__always)
    func lockExclusive() { lrd_rwlock_write_lock(word) }

    @inline(__always)
    func unlockExclusive() { lrd_rwlock_write_unlock(word) }
}

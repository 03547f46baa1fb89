#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Remembers, per thread, which cache's memory the thread is borrowing in `withValue`.
///
/// A write from inside `forEachEntry`'s closure would wait for the read lock the same thread
/// holds: a deadlock. With this marker such a write fails with an error instead. `withValue`
/// (which takes no lock) keeps the same documented rule: a caller may not change the cache while
/// it borrows bytes of it.
enum BorrowMarker {
    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        let rc = pthread_key_create(&key, nil)
        precondition(rc == 0, "pthread_key_create failed: \(rc)")
        return key
    }()

    static func current() -> UnsafeMutableRawPointer? {
        pthread_getspecific(key)
    }

    /// Runs `body` with `owner` marked as borrowed by this thread, restoring the previous mark.
    static func borrowing<R, E: Error>(_ owner: AnyObject, _ body: () throws(E) -> R) throws(E) -> R {
        let previous = pthread_getspecific(key)
        pthread_setspecific(key, Unmanaged.passUnretained(owner).toOpaque())
        defer { pthread_setspecific(key, previous) }
        return try body()
    }

    static func isBorrowed(_ owner: AnyObject) -> Bool {
        current() == Unmanaged.passUnretained(owner).toOpaque()
    }
}

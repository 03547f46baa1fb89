import CLarderSupport

/// Remembers, per thread, which cache's memory the thread is borrowing in `withValue`.
///
/// A write from inside `forEachEntry`'s closure would wait for the read lock the same thread
/// holds: a deadlock. With this marker such a write fails with an error instead. `withValue`
/// (which takes no lock) keeps the same documented rule: a caller may not change the cache while
/// it borrows bytes of it. The mark is a word of thread-local storage (CLarderSupport), since
/// it is looked at on every write and set twice on every `withValue`.
enum BorrowMarker {
    /// Runs `body` with `owner` marked as borrowed by this thread, restoring the previous mark.
    @inline(__always)
    static func borrowing<R, E: Error>(_ owner: AnyObject, _ body: () throws(E) -> R) throws(E) -> R {
        let previous = lrd_borrowed()
        lrd_set_borrowed(Unmanaged.passUnretained(owner).toOpaque())
        defer { lrd_set_borrowed(previous) }
        return try body()
    }

    @inline(__always)
    static func isBorrowed(_ owner: AnyObject) -> Bool {
        lrd_borrowed() == Unmanaged.passUnretained(owner).toOpaque()
    }
}

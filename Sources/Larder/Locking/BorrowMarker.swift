import CLarderSupport

/// Remembers, per thread, what the thread is borrowing: a `Cache` inside its `withValue`, or the
/// store of a file inside `forEachEntry`, which holds the in-process read lock that every `Cache`
/// on that file shares.
///
/// A write (or a sync, or a close) from inside `forEachEntry`'s closure would wait for the read
/// lock the same thread holds: a deadlock. With this marker it fails with an error instead.
/// `withValue` (which takes no lock) keeps the documented rule that a caller may not change the
/// cache while it borrows bytes of it. Borrows nest: the thread's borrows are a list through its
/// own stack frames, whose head is a word of thread-local storage (CLarderSupport), since it is
/// looked at on every write and set twice on every `withValue`.
enum BorrowMarker {
    /// One borrow: its owner, and the borrow it is nested in.
    private struct Borrow {
        let owner: UnsafeMutableRawPointer
        let outer: UnsafeMutableRawPointer?
    }

    /// What a borrow is marked with: the owner's address. A closure that captures it instead of
    /// the owner captures no reference, which a read would retain and release on every call.
    static func mark(of owner: AnyObject) -> UnsafeMutableRawPointer {
        Unmanaged.passUnretained(owner).toOpaque()
    }

    /// Runs `body` with `owner` marked as borrowed by this thread, then restores the marks before.
    @inline(__always)
    static func borrowing<R, E: Error>(_ owner: AnyObject, _ body: () throws(E) -> R) throws(E) -> R {
        try borrowing(mark: mark(of: owner), body)
    }

    /// `borrowing` for an owner given by its `mark(of:)`.
    @inline(__always)
    static func borrowing<R, E: Error>(mark owner: UnsafeMutableRawPointer, _ body: () throws(E) -> R) throws(E) -> R {
        var borrow = Borrow(owner: owner, outer: lrd_borrowed())
        return try withUnsafeMutablePointer(to: &borrow) { (head) throws(E) -> R in
            lrd_set_borrowed(head)
            defer { lrd_set_borrowed(head.pointee.outer) }
            return try body()
        }
    }

    /// Whether this thread is inside a borrow of `owner` (or of `other`), at any depth.
    @inline(__always)
    static func isBorrowed(_ owner: AnyObject, or other: AnyObject? = nil) -> Bool {
        var next = lrd_borrowed()
        guard next != nil else { return false }
        let wanted = mark(of: owner)
        let alsoWanted = other.map(mark(of:))
        while let current = next {
            let borrow = current.assumingMemoryBound(to: Borrow.self).pointee
            if borrow.owner == wanted || borrow.owner == alsoWanted { return true }
            next = borrow.outer
        }
        return false
    }
}

import CLarderSupport

/// Remembers, per thread, what the thread is borrowing: a `Cache` inside its `withValue`, which
/// lends bytes of the file, or a `Cache` inside its `forEachEntry`, which is walking the index.
///
/// `withValue` takes no lock, but keeps the documented rule that a caller may not change the
/// cache through the handle while it borrows bytes of it (a write could be asked to overwrite
/// them). A listing holds no lock while its closure runs, so the closure may write; only closing
/// the handle it walks is refused (the C ABI would free the handle under the walk). Borrows nest:
/// the thread's borrows are a list through its own stack frames, whose head is a word of
/// thread-local storage (CLarderSupport), since it is looked at on every write and set twice on
/// every `withValue`.
enum BorrowMarker {
    /// One borrow: its owner, and the borrow it is nested in.
    private struct Borrow {
        let owner: UnsafeMutableRawPointer
        let outer: UnsafeMutableRawPointer?
    }

    /// What a borrow is for.
    enum Purpose: Int {
        /// Bytes of the owner's file are lent to the thread.
        case lending = 0
        /// The thread is listing the owner's entries.
        case listing = 1
    }

    /// What a borrow is marked with: the owner's address, whose lowest bit (always clear in an
    /// object's address) tells the purpose. A closure that captures it instead of the owner
    /// captures no reference, which a read would retain and release on every call.
    static func mark(of owner: AnyObject, for purpose: Purpose = .lending) -> UnsafeMutableRawPointer {
        Unmanaged.passUnretained(owner).toOpaque() + purpose.rawValue
    }

    /// Runs `body` with `owner` marked as borrowed by this thread, then restores the marks before.
    @inline(__always)
    static func borrowing<R, E: Error>(mark owner: UnsafeMutableRawPointer, _ body: () throws(E) -> R) throws(E) -> R {
        var borrow = Borrow(owner: owner, outer: lrd_borrowed())
        return try withUnsafeMutablePointer(to: &borrow) { (head) throws(E) -> R in
            lrd_set_borrowed(head)
            defer { lrd_set_borrowed(head.pointee.outer) }
            return try body()
        }
    }

    /// Whether this thread is inside a borrow marked `mark`, at any depth.
    @inline(__always)
    static func isBorrowed(_ mark: UnsafeMutableRawPointer) -> Bool {
        var next = lrd_borrowed()
        while let current = next {
            let borrow = current.assumingMemoryBound(to: Borrow.self).pointee
            if borrow.owner == mark { return true }
            next = borrow.outer
        }
        return false
    }
}

import CLarderSupport

/// A memory hit's object, for one copy of its value: borrowed while this thread still counts as
/// a reader of the object's shard, or owned.
///
/// A borrowed object is kept alive by its shard: no writer can drop it while this thread is
/// counted in (`MemoryReaders`), so the hit touches no reference count of the object.
///
/// Invariant: `value(as:)` is called exactly once. With `readerWord`, the object is unretained
/// and this thread is counted in through that word until then; without, the lease holds a +1 on
/// the object, which `value(as:)` gives back. Nothing between the hit and `value(as:)` takes a
/// lock or waits for another thread.
@usableFromInline
struct MemoryLease {
    @usableFromInline let object: Unmanaged<MemoryObject>
    @usableFromInline let readerWord: UnsafeMutableRawPointer?

    /// The object `object`, borrowed through `readerWord`.
    init(borrowing object: Unmanaged<MemoryObject>, readerWord: UnsafeMutableRawPointer) {
        (self.object, self.readerWord) = (object, readerWord)
    }

    /// The object `object`, retained once for the lease.
    init(owning object: Unmanaged<MemoryObject>) {
        (self.object, readerWord) = (object, nil)
    }

    /// The value, if it is a `Value`; then ends the lease (counting the thread out of the shard, a
    /// hit counted, or releasing the object).
    @inlinable @inline(__always)
    func value<Value>(as type: Value.Type) -> Value? {
        let value = object._withUnsafeGuaranteedRef { $0.value(as: type) }
        if let readerWord {
            // `MemoryReaders.leave(_:hit: true)`: a hit (1 << 16) in, the reader (1) out.
            lrd_fetch_add_release_u64(readerWord, 0xFFFF)
        } else {
            object.release()
        }
        return value
    }
}

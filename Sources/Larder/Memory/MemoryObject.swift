import CLarderSupport

/// One object of the memory tier: a value, in memory of its own, and its type.
///
/// A read checks `type` and then reads the value in place, with no dynamic cast and no
/// existential box (a hit is a copy of the value, as a `Dictionary` read is).
///
/// Invariant: `storage` holds one initialized value of the type `type` names, from `init` to
/// `deinit`, and is never written in between (so it may be read from any thread).
@usableFromInline
final class MemoryObject: @unchecked Sendable {
    @usableFromInline let storage: UnsafeMutableRawPointer
    @usableFromInline let type: ObjectIdentifier
    private let destroy: (UnsafeMutableRawPointer) -> Void
    private let byteCount: Int

    init<Value>(_ value: Value) {
        byteCount = max(MemoryLayout<Value>.size, 1)
        storage = .allocate(byteCount: byteCount, alignment: MemoryLayout<Value>.alignment)
        storage.initializeMemory(as: Value.self, to: value)
        type = ObjectIdentifier(Value.self)
        destroy = { $0.assumingMemoryBound(to: Value.self).deinitialize(count: 1) }
    }

    deinit {
        destroy(storage)
        storage.deallocate()
    }

    /// Starts loading the value's first two cache lines (a hint; reads nothing).
    @inline(__always)
    func prefetch() {
        lrd_prefetch(storage)
        if byteCount > 64 { lrd_prefetch(storage + 64) }
    }

    /// The value, if it is a `Value`.
    @inlinable
    func value<Value>(as _: Value.Type) -> Value? {
        type == ObjectIdentifier(Value.self) ? storage.assumingMemoryBound(to: Value.self).pointee : nil
    }
}

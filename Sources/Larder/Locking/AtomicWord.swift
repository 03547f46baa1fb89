import CLarderSupport

/// One 64-bit word of process memory that threads share without a lock, at a fixed address (the
/// C primitives that work on it need one; a Swift stored property has none).
@usableFromInline
final class AtomicWord: @unchecked Sendable {
    @usableFromInline let pointer: UnsafeMutablePointer<UInt64>

    init() {
        pointer = .allocate(capacity: 1)
        pointer.initialize(to: 0)
    }

    deinit {
        pointer.deallocate()
    }

    @inlinable @inline(__always)
    func load() -> UInt64 { lrd_load_acquire_u64(pointer) }

    func store(_ value: UInt64) { lrd_store_release_u64(pointer, value) }
}

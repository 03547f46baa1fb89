import CLarderSupport

/// One object of the memory tier: a value, inside the object's own allocation, and its type.
///
/// A read checks `type` and then reads the value in place, with no dynamic cast and no
/// existential box (a hit is a copy of the value, as a `Dictionary` read is). The value sits in
/// the object's tail, so keeping it takes one allocation and a read follows no second pointer.
///
/// Invariant: the tail holds one initialized value of the type `type` names, at the first
/// address aligned for it, from `make` to `deinit`, and is never written in between (so it may be
/// read from any thread).
@usableFromInline
final class MemoryObject: ManagedBuffer<MemoryObject.Header, UInt8> {
    @usableFromInline
    struct Header {
        @usableFromInline let type: ObjectIdentifier
        /// Destroys the value (it knows the value's type and alignment).
        let destroyer: any MemoryValueDestroyer.Type
        let byteCount: Int
    }

    /// An object holding `value`.
    static func make<Value>(_ value: Value) -> MemoryObject {
        let size = max(MemoryLayout<Value>.size, 1)
        let header = Header(type: ObjectIdentifier(Value.self), destroyer: DestroyerOf<Value>.self, byteCount: size)
        let object = unsafeDowncast(create(minimumCapacity: size + MemoryLayout<Value>.alignment - 1) { _ in header },
                                    to: MemoryObject.self)
        object.withUnsafeMutablePointerToElements { MemoryObject.address(of: Value.self, in: $0).initialize(to: value) }
        return object
    }

    deinit {
        withUnsafeMutablePointers { header, elements in header.pointee.destroyer.destroy(in: elements) }
    }

    /// Where a `Value` sits in the tail that starts at `elements`.
    @inlinable @inline(__always)
    static func address<Value>(of _: Value.Type, in elements: UnsafeMutablePointer<UInt8>) -> UnsafeMutablePointer<Value> {
        let mask = UInt(MemoryLayout<Value>.alignment - 1)
        let address = (UInt(bitPattern: elements) + mask) & ~mask
        return UnsafeMutablePointer(bitPattern: address).unsafelyUnwrapped
    }

    /// Starts loading the value's first two cache lines (a hint; reads nothing).
    @inline(__always)
    func prefetch() {
        let (start, byteCount) = withUnsafeMutablePointers { ($1, $0.pointee.byteCount) }
        lrd_prefetch(start)
        if Int(bitPattern: start) & 63 + byteCount > 64 { lrd_prefetch(start + 64) }
    }

    /// The value, if it is a `Value`.
    @inlinable
    func value<Value>(as _: Value.Type) -> Value? {
        withUnsafeMutablePointers { header, elements in
            header.pointee.type == ObjectIdentifier(Value.self)
                ? MemoryObject.address(of: Value.self, in: elements).pointee : nil
        }
    }
}

/// Destroys a value of the memory tier, knowing its type.
protocol MemoryValueDestroyer {
    static func destroy(in elements: UnsafeMutablePointer<UInt8>)
}

private enum DestroyerOf<Value>: MemoryValueDestroyer {
    static func destroy(in elements: UnsafeMutablePointer<UInt8>) {
        _ = MemoryObject.address(of: Value.self, in: elements).deinitialize(count: 1)
    }
}

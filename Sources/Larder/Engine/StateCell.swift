/// A value of process memory that a store's writer reads and changes on every write, held at a
/// fixed address outside the store object.
///
/// A stored `var` of a class is checked for exclusive access at run time on each access (some 80
/// instructions, a tenth of a small put). Through a cell held in a `let` it is not: the store's
/// locks give the exclusion instead, and the value changes only under the exclusive in-process
/// lock.
///
/// Invariant: the allocation holds one initialized value for as long as the cell lives.
struct StateCell<Value: ~Copyable>: ~Copyable {
    private let pointer: UnsafeMutablePointer<Value>

    init(_ value: consuming Value) {
        pointer = .allocate(capacity: 1)
        pointer.initialize(to: value)
    }

    deinit {
        pointer.deinitialize(count: 1)
        pointer.deallocate()
    }

    var value: Value {
        @inline(__always) unsafeAddress { UnsafePointer(pointer) }
        @inline(__always) nonmutating unsafeMutableAddress { pointer }
    }
}

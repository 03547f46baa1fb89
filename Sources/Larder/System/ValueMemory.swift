#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Memory for a copy of a value, whose length the file decides: up to 4 GiB, and a damaged file
/// can claim any length its checks allow. Swift's allocation stops the program when the system
/// has no memory to give; these buffers come from `malloc`, so that a read that cannot get its
/// memory fails with `.noMemory`, as a C program's would.
///
/// A buffer from `allocate` is given back with `release`, never `deallocate()`; its address is
/// aligned for any value (`malloc`'s alignment: 16 bytes on 64-bit platforms).
enum ValueMemory {
    /// At least `count` bytes (at least one), or nil when the system has none to give.
    static func allocate(_ count: Int) -> UnsafeMutableRawBufferPointer? {
        let length = max(count, 1)
        guard let memory = malloc(length) else { return nil }
        return UnsafeMutableRawBufferPointer(start: memory, count: length)
    }

    static func release(_ buffer: UnsafeMutableRawBufferPointer) {
        free(buffer.baseAddress)
    }

    /// `allocate`, throwing `.noMemory` for the file at `path` when there is none.
    static func allocate(_ count: Int, forValueIn path: String) throws(LarderError) -> UnsafeMutableRawBufferPointer {
        guard let buffer = allocate(count) else { throw exhausted(count, path: path) }
        return buffer
    }

    static func exhausted(_ count: Int, path: String) -> LarderError {
        LarderError(.noMemory, "no memory for a copy of a \(count)-byte value", path: path)
    }
}

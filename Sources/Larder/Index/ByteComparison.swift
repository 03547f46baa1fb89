#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

extension UnsafeRawBufferPointer {
    /// Whether both buffers hold the same bytes. Keys are compared on every lookup, and most are
    /// short: from 8 to 32 bytes they are compared as overlapping words, inline (no call, and
    /// about ten instructions); other lengths go to `memcmp`.
    @inline(__always)
    func sameBytes(as other: UnsafeRawBufferPointer) -> Bool {
        guard count == other.count else { return false }
        guard count > 0 else { return true }
        let a = baseAddress!, b = other.baseAddress!
        func word(_ pointer: UnsafeRawPointer, _ at: Int) -> UInt64 {
            pointer.loadUnaligned(fromByteOffset: at, as: UInt64.self)
        }
        switch count {
        case 8...16:
            let last = count &- 8
            return (word(a, 0) ^ word(b, 0)) | (word(a, last) ^ word(b, last)) == 0
        case 17...32:
            let last = count &- 16
            return (word(a, 0) ^ word(b, 0)) | (word(a, 8) ^ word(b, 8))
                | (word(a, last) ^ word(b, last)) | (word(a, last &+ 8) ^ word(b, last &+ 8)) == 0
        default:
            return memcmp(a, b, count) == 0
        }
    }
}

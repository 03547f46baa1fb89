import CLarderSupport

/// The 64-bit hash of a key (XXH64, seed 0) and the 28-bit tag the index keeps of it.
///
/// The tag is the hash's top 28 bits. A table of 2^b slots takes a key's home slot from the tag's
/// top b bits, so the home of any slot can be recomputed from the slot alone: deletion can
/// shift entries back and the index can double without reading a single key.
struct KeyHash {
    let value: UInt64

    init(_ key: UnsafeRawBufferPointer) {
        value = lrd_xxh64(key.baseAddress, key.count, 0)
    }

    var tag: UInt32 { UInt32(truncatingIfNeeded: value >> 36) }
}

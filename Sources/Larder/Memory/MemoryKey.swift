import Foundation

/// A key of the memory tier: its bytes, and their hash, computed once per call (the same XXH64
/// the file's index uses, so that the check against the file does not hash the key again).
struct MemoryKey: Hashable, @unchecked Sendable {
    let bytes: Data
    let hash: UInt64

    /// No key (that of a free node).
    static let none = MemoryKey(bytes: Data(), hash: 0)

    private init(bytes: Data, hash: UInt64) {
        self.bytes = bytes
        self.hash = hash
    }

    init(_ key: UnsafeRawBufferPointer) {
        bytes = Data(key)
        hash = KeyHash(key).value
    }

    init(_ key: some CacheKey) {
        self = key.withCacheKeyBytes { MemoryKey($0) }
    }

    static func == (lhs: MemoryKey, rhs: MemoryKey) -> Bool {
        lhs.hash == rhs.hash && lhs.bytes == rhs.bytes
    }

    func hash(into hasher: inout Hasher) {
        hasher.combine(hash)
    }
}

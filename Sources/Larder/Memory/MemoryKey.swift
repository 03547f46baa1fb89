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
        self.init(key, hash: KeyHash(key).value)
    }

    /// The key `key`, whose XXH64 the caller has computed.
    init(_ key: UnsafeRawBufferPointer, hash: UInt64) {
        bytes = Data(key)
        self.hash = hash
    }

    /// Whether the key's bytes are `other`.
    @inline(__always)
    func matches(_ other: UnsafeRawBufferPointer) -> Bool {
        bytes.count == other.count && bytes.withUnsafeBytes { own in
            other.isEmpty || memcmp(own.baseAddress!, other.baseAddress!, other.count) == 0
        }
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

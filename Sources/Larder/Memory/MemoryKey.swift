import Foundation

/// A key of the memory tier: its bytes, and their hash, computed once per call (the same XXH64
/// the file's index uses, so that the check against the file does not hash the key again).
///
/// A key of at most 16 bytes (most keys) is held in two words inside the node, so that a lookup
/// compares it without following a pointer. A longer one is held in an array.
///
/// Invariant: `head` holds the first `min(count, 16)` bytes, zero after them; `tail` is empty
/// when `count <= 16`, and holds all `count` bytes otherwise.
struct MemoryKey: Hashable, @unchecked Sendable {
    let hash: UInt64
    private let head: (UInt64, UInt64)
    private let tail: [UInt8]
    /// 32 bits, and last, so that a node's next fields fill the rest of the word.
    private let length: UInt32
    var count: Int { Int(length) }

    /// No key (that of a free node).
    static let none = MemoryKey(UnsafeRawBufferPointer(start: nil, count: 0), hash: 0)

    private static let headBytes = 16

    init(_ key: UnsafeRawBufferPointer) {
        self.init(key, hash: KeyHash(key).value)
    }

    /// The key `key`, whose XXH64 the caller has computed.
    init(_ key: UnsafeRawBufferPointer, hash: UInt64) {
        self.hash = hash
        length = UInt32(clamping: key.count)
        var head: (UInt64, UInt64) = (0, 0)
        withUnsafeMutableBytes(of: &head) { head in
            if !key.isEmpty { head.copyMemory(from: UnsafeRawBufferPointer(rebasing: key.prefix(MemoryKey.headBytes))) }
        }
        self.head = head
        tail = key.count > MemoryKey.headBytes ? [UInt8](key) : []
    }

    init(_ key: some CacheKey) {
        self = key.withCacheKeyBytes { MemoryKey($0) }
    }

    /// Calls `body` with the key's bytes.
    func withBytes<R>(_ body: (UnsafeRawBufferPointer) -> R) -> R {
        if count > MemoryKey.headBytes { return tail.withUnsafeBytes(body) }
        var head = head
        return withUnsafeBytes(of: &head) { body(UnsafeRawBufferPointer(rebasing: $0.prefix(count))) }
    }

    /// The key's bytes, as `Data` (allocates).
    var bytes: Data { withBytes { Data($0) } }

    /// Whether the key's bytes are `other`.
    @inline(__always)
    func matches(_ other: UnsafeRawBufferPointer) -> Bool {
        guard count == other.count else { return false }
        if count > MemoryKey.headBytes {
            return tail.withUnsafeBytes { memcmp($0.baseAddress!, other.baseAddress!, count) == 0 }
        }
        if count >= 8 {
            // Two loads, overlapping when the key is shorter than 16 bytes.
            var head = head
            let last = withUnsafeBytes(of: &head) { $0.loadUnaligned(fromByteOffset: count - 8, as: UInt64.self) }
            return head.0 == other.loadUnaligned(as: UInt64.self)
                && last == other.loadUnaligned(fromByteOffset: count - 8, as: UInt64.self)
        }
        var word: UInt64 = 0
        withUnsafeMutableBytes(of: &word) { $0.copyMemory(from: other) }
        return word == head.0
    }

    static func == (lhs: MemoryKey, rhs: MemoryKey) -> Bool {
        lhs.hash == rhs.hash && lhs.length == rhs.length && lhs.head == rhs.head && lhs.tail == rhs.tail
    }

    func hash(into hasher: inout Hasher) {
        hasher.combine(hash)
    }
}

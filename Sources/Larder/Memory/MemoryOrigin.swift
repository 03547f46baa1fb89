/// Where an object of the memory tier came from, which decides how a read checks it: a record of
/// the file (returned only while the key's current entry is still that record), or memory only
/// (never written to the file: returned until it is replaced, removed, trimmed or evicted).
///
/// Two words and no tag, so that a node stays small: memory only is an offset no record has.
struct MemoryOrigin: Hashable, Sendable {
    private let offset: Int
    private let sequence: UInt64

    /// Decoded from, or encoded into, this record of the file.
    static func record(_ identity: RecordIdentity) -> MemoryOrigin {
        MemoryOrigin(offset: identity.offset, sequence: identity.sequence)
    }

    /// Stored in memory only.
    static let memoryOnly = MemoryOrigin(offset: -1, sequence: 0)

    /// The record it came from; nil for memory only.
    var record: RecordIdentity? {
        offset >= 0 ? RecordIdentity(offset: offset, sequence: sequence) : nil
    }
}

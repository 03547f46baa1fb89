/// Where an object of the memory tier came from, which decides how a read checks it.
enum MemoryOrigin: Hashable, Sendable {
    /// Decoded from, or encoded into, this record of the file: returned only while the key's
    /// current entry is still that record.
    case record(RecordIdentity)
    /// Stored in memory only (never written to the file): returned until it is replaced,
    /// removed, trimmed or evicted.
    case memoryOnly
}

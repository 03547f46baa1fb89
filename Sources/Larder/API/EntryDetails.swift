import Foundation

/// What the cache holds for one key, read from its record's header: lengths, compression, times
/// and whether it was read. ``Cache/entryDetails(forKey:)`` returns it.
///
/// The names follow the members of `larder dump --json` (docs/CLI.md): `size`, `stored_size`,
/// `record_size`, `compressed`, `stored_at`, `expires_at`, `sliding`, `read`.
///
/// The corresponding C type is `larder_entry_info`.
public struct EntryDetails: Sendable, Hashable {
    /// The value's length as callers see it (after decompression).
    public let size: Int
    /// The value's length as stored in the file (smaller when compressed).
    public let storedSize: Int
    /// The bytes the entry's record takes in the file: header, key, stored value, alignment.
    public let recordSize: Int
    /// Whether the value is stored LZ4-compressed.
    public let compressed: Bool
    /// When the value was stored, to the millisecond.
    public let storedAt: Date
    /// When the value stops being returned, to the millisecond; nil for never. Reads push it
    /// back for a sliding expiry.
    public let expiresAt: Date?
    /// Whether the expiry slides: reads push it back (``Expiry/sliding(_:)``).
    public let sliding: Bool
    /// Whether the value was read since it was stored, or since eviction last passed it and gave
    /// it a second chance (the record's access bit, FORMAT.md 4.3).
    public let read: Bool

    init(header: RecordHeader, wasRead: Bool) {
        size = header.rawLength
        storedSize = header.storedLength
        recordSize = header.totalSize
        compressed = header.isCompressed
        storedAt = Date(millisecondsSince1970: header.storedAt)
        expiresAt = header.expiresAt == 0 ? nil : Date(millisecondsSince1970: header.effectiveExpiry)
        sliding = header.isSliding
        read = wasRead
    }
}

extension Date {
    /// The time `milliseconds` after the Unix epoch, as the file stores times.
    init(millisecondsSince1970 milliseconds: UInt64) {
        self.init(timeIntervalSince1970: Double(milliseconds) / 1000)
    }
}

import CLarderABI
import Foundation
import Larder

// larder_entry_info: what the cache holds for one key.

@c(larder_entry_info)
public func larderEntryInfo(_ db: UnsafeMutablePointer<larder>?, _ key: UnsafeRawPointer?, _ keyLength: size_t,
                            _ info: UnsafeMutablePointer<larder_entry_info>?) -> Int32 {
    withCache(db) { cache in
        guard let info else { throw StatusError.invalid("info is NULL") }
        let size = try Arguments.structSize(of: info, "larder_entry_info").get()
        guard let details = try cache.entryDetails(forKey: try Arguments.key(key, keyLength).get()) else {
            return Status.notFound
        }
        let filled = larder_entry_info(
            struct_size: UInt32(min(size, MemoryLayout<larder_entry_info>.size)),
            compressed: details.compressed ? 1 : 0, read: details.read ? 1 : 0, sliding: details.sliding ? 1 : 0, reserved: 0,
            size: UInt64(details.size), stored_size: UInt64(details.storedSize), record_size: UInt64(details.recordSize),
            stored_at: milliseconds(details.storedAt), expires_at: details.expiresAt.map(milliseconds) ?? 0)
        Arguments.fill(info, size, with: filled)
        return Status.ok
    }
}

/// A time of the file, which counts whole milliseconds since the Unix epoch, as it was stored.
private func milliseconds(_ date: Date) -> UInt64 {
    UInt64((date.timeIntervalSince1970 * 1000).rounded())
}

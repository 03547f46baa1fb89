/// What a lookup through the inspection view found for a key.
@_spi(Inspection) public enum LookupResult: Sendable {
    /// The current value, checked and decompressed.
    case found(EntryRecord, [UInt8])
    /// No current entry for the key.
    case missing
    /// The entry's time is up.
    case expired(EntryRecord)
    /// The entry is there but its value does not check out.
    case damaged(EntryRecord)
}

extension FileInspector {
    /// Looks `key` up the way a read-only `Cache` does (active table, then the draining one;
    /// docs/FORMAT.md 5.3), checking the data checksum before handing out the value, but without
    /// taking the cache's locks: it works while another process has the file open.
    public func lookup(key: [UInt8]) -> LookupResult {
        let tag = key.withUnsafeBytes { KeyHash($0).tag }
        for (_, _, table) in namedTables() {
            guard let table else { continue }
            var found: (Int, RecordHeader)?
            _ = table.find(tag: tag) { offset in
                guard offset >= ringStart, offset < ringEnd,
                      let header = RecordHeader.read(from: file, at: offset, limit: ringEnd, seed: seed),
                      header.kind == .entry, header.isLive, header.sequence >= meta.firstValidSequence,
                      header.keyLength == key.count,
                      file.bytes(at: offset + RecordHeader.size, count: header.keyLength).elementsEqual(key) else { return false }
                found = (offset, header)
                return true
            }
            guard let (offset, header) = found else { continue }
            let intact = header.dataIsIntact(in: file, at: offset, seed: seed)
            let value = intact ? decodedValue(at: offset, header: header) : nil
            var entry = entryRecord(header, at: offset, damage: !intact ? "data checksum mismatch"
                                    : value == nil ? "compressed value does not decode" : nil)
            entry.isIndexed = true
            if header.isExpired(now: SystemCall.nowMilliseconds()) { return .expired(entry) }
            guard let value else { return .damaged(entry) }
            return .found(entry, value)
        }
        return .missing
    }
}

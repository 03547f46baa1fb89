import CLarderSupport

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
    /// taking the cache's locks: it works while another process has the file open. Like any
    /// reader (7.7.4) it copies the value once, then re-checks that the record is still the one
    /// whose header it read, and looks again when a writer replaced it meanwhile.
    public func lookup(key: [UInt8]) -> LookupResult {
        let tag = key.withUnsafeBytes { KeyHash($0).tag }
        for _ in 0..<1_000 {
            guard let outcome = lookupOnce(key: key, tag: tag) else { continue }
            return outcome
        }
        return .missing
    }

    /// One attempt; nil when the record found changed while it was read.
    private func lookupOnce(key: [UInt8], tag: UInt32) -> LookupResult? {
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
            let stored: [UInt8]?
            switch copyStored(at: offset, header: header, key: key) {
            case .changed: return nil
            case .damaged: stored = nil
            case .intact(let bytes): stored = bytes
            }
            let intact = stored != nil
            let value = stored.flatMap { bytes in bytes.withUnsafeBytes { decodedValue(header: header, stored: $0) } }
            var entry = entryRecord(header, at: offset, damage: !intact ? "data checksum mismatch"
                                    : value == nil ? "compressed value does not decode" : nil)
            entry.isIndexed = true
            if header.isExpired(now: SystemCall.nowMilliseconds(), maximumAge: meta.maximumAge) { return .expired(entry) }
            guard let value else { return .damaged(entry) }
            return .found(entry, value)
        }
        return .missing
    }
}

extension FileInspector {
    /// The stored bytes of the entry `header` describes at `offset`, copied out of the mapping
    /// once and checked as any reader checks them (docs/FORMAT.md 7.7.4).
    enum StoredCopy {
        case intact([UInt8])
        /// The copy does not match the data checksum of `key` and the header.
        case damaged
        /// The record died, or a writer put another one there, while the bytes were copied
        /// (a dead record's room is the only one a writer reuses): look again.
        case changed
    }

    func copyStored(at offset: Int, header: RecordHeader, key: [UInt8]) -> StoredCopy {
        let stored = Array(file.bytes(at: offset + RecordHeader.size + header.keyLength, count: header.storedLength))
        lrd_fence_acquire()
        guard UInt64(littleEndian: file.loadAcquire64(at: offset)) & RecordHeader.Word0.liveBit != 0,
              file.load(UInt64.self, at: offset + RecordHeader.Field.sequence) == header.sequence else { return .changed }
        let checksum = stored.withUnsafeBytes { lrd_crc32c(lrd_crc32c(seed, key, key.count), $0.baseAddress, $0.count) }
        return checksum == header.dataChecksum ? .intact(stored) : .damaged
    }
}

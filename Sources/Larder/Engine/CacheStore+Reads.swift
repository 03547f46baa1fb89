import CLarderSupport

/// Reads. Every method here is a reader: safe under the shared lock, concurrently with other
/// readers. Nothing is written but access bits and this process's hit and miss counters.
extension CacheStore {
    /// Where a value lies in the map, checked: key found, not expired, checksum correct.
    struct ValueLocation {
        let recordOffset: Int
        let header: RecordHeader
        var valueOffset: Int { recordOffset + RecordHeader.size + header.keyLength }
    }

    func validateKey(_ key: UnsafeRawBufferPointer) throws(LarderError) {
        guard key.count > 0 else { throw LarderError(.invalidArgument, "the key is empty", path: path) }
        guard key.count <= CacheStore.maximumKeyLength else {
            throw LarderError(.tooLarge, "the key is \(key.count) bytes; the limit is \(CacheStore.maximumKeyLength)", path: path)
        }
    }

    /// Reader: finds the value for `key`, verifying its checksum, and marks it as read.
    /// Returns nil for a missing or expired key; throws `.corrupt` for a damaged record.
    func locateValue(forKey key: UnsafeRawBufferPointer) throws(LarderError) -> ValueLocation? {
        try checkOpen()
        try validateKey(key)
        guard let found = lookup(key, hash: KeyHash(key)),
              !found.header.isExpiredNow else {
            lrd_fetch_add_u64(localCounters + 1, 1)
            return nil
        }
        guard found.header.dataIsIntact(in: file, at: found.offset, seed: seed) else {
            throw LarderError(.corrupt, "the stored value for this key is damaged (checksum mismatch at offset \(found.offset))", path: path)
        }
        // A read-only mapping cannot take the access bit: such readers do not count as recency.
        if !isReadOnly { RecordHeader.markVisited(in: file, at: found.offset) }
        lrd_fetch_add_u64(localCounters, 1)
        return ValueLocation(recordOffset: found.offset, header: found.header)
    }

    /// Reader: the stored bytes of a located value, valid while the shared lock is held.
    func storedBytes(of location: ValueLocation) -> UnsafeRawBufferPointer {
        file.bytes(at: location.valueOffset, count: location.header.storedLength)
    }

    /// Reader: writes the value as callers see it (decompressed) into `destination`, which holds
    /// exactly `header.rawLength` bytes. Returns false when a compressed value does not decode.
    func decodeValue(_ location: ValueLocation, into destination: UnsafeMutableRawBufferPointer) -> Bool {
        guard destination.count == location.header.rawLength else { return false }
        let stored = storedBytes(of: location)
        guard location.header.isCompressed else {
            destination.copyMemory(from: stored)
            return true
        }
        return LZ4Codec.decompress(stored, into: destination)
    }

    /// Reader: whether a live, unexpired entry exists for `key` (no checksum, no statistics).
    func contains(key: UnsafeRawBufferPointer) throws(LarderError) -> Bool {
        try checkOpen()
        try validateKey(key)
        guard let found = lookup(key, hash: KeyHash(key)) else { return false }
        return !found.header.isExpiredNow
    }

    /// Reader: calls `body` with the key and header of every live, unexpired entry, in index
    /// order, until it returns false.
    func forEachEntry(_ body: (UnsafeRawBufferPointer, RecordHeader) throws -> Bool) throws(LarderError) -> Result<Void, any Error> {
        try checkOpen()
        let now = SystemCall.nowMilliseconds()
        for table in [active] + (draining.map { [$0] } ?? []) {
            for index in 0..<table.slotCount {
                let slot = table[index]
                guard HashTable.isEntry(slot), let header = entryHeader(at: HashTable.offset(of: slot)),
                      !header.isExpired(now: now) else { continue }
                do {
                    if try !body(keyBytes(at: HashTable.offset(of: slot), header: header), header) { return .success(()) }
                } catch {
                    return .failure(error)
                }
            }
        }
        return .success(())
    }

    /// Reader: the persistent counters plus this process's unfolded hits and misses.
    func counter(_ counter: SharedState.Counter) -> UInt64 {
        let base = isClosed ? 0 : state.counter(counter)
        switch counter {
        case .hits: return base &+ lrd_load_relaxed_u64(localCounters)
        case .misses: return base &+ lrd_load_relaxed_u64(localCounters + 1)
        default: return base
        }
    }
}

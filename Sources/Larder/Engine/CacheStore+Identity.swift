/// Record identities: which record of the file a value was read from, and whether a key's
/// current entry is still that record. The memory tier checks each object it returns this way
/// (FORMAT.md 7.7.8): one lookup, no value bytes read, no value checksum.

/// The identity of one entry record of one open file: its offset and its sequence number.
///
/// Two reads that find the same identity for a key found the same record, so the same value:
/// writers never reuse a sequence number in a file (FORMAT.md 4.1), nor change a live record's
/// bytes (7.7.6). The offset is not needed for that, and is compared as a second guard. An
/// identity means nothing for another file, such as one a compaction renamed over the path:
/// each is kept beside the store it was read from.
struct RecordIdentity: Hashable, Sendable {
    let offset: Int
    let sequence: UInt64
}

extension CacheStore {
    /// What one look at a key's current entry found.
    enum IdentityLookup: Equatable {
        /// A live, unexpired entry: this record.
        case entry(RecordIdentity)
        /// No live entry, or an expired one, in a settled index of a current view.
        case absent
        /// A writer was changing the index or the record meanwhile: ask the careful read.
        case unsettled
    }

    /// Reader: the identity of `key`'s live, unexpired entry, in one attempt without retries.
    ///
    /// It takes no lock, reads the header (checked as every lookup checks it) and the key, and
    /// neither the value nor its checksum. An answer other than `.unsettled` was true at one
    /// moment during the call. A read-write handle marks the entry visited, as a read of its value
    /// would (the object read from memory is the entry's use); no statistics are counted.
    ///
    /// - Throws: `.staleView` when the file's change counter moved past `view`
    ///   (`Cache.read` refreshes the view and calls again); a key's length error.
    ///
    /// - Parameter hash: `key`'s XXH64 (`KeyHash(key).value`), which the caller has at hand.
    func liveIdentity(forKey key: UnsafeRawBufferPointer, hash: UInt64, in view: ReadView) throws(LarderError) -> IdentityLookup {
        try validateKey(key)
        let epoch = state.indexEpoch
        guard let found = view.lookup(key, hash: KeyHash(precomputed: hash), migrationCursor: state.migrationCursor) else {
            if state.changeCounter != view.changeCounter { throw LarderError.staleView }
            return epoch & 1 == 0 && state.indexEpoch == epoch ? .absent : .unsettled
        }
        let expired = found.header.isExpiredNow(maximumAge: view.maximumAge)
        // An object read from memory is a read of its entry: a sliding expiry moves (FORMAT.md 4.8).
        if !expired { pushExpiry(found, in: view) }
        guard isUnchanged(found, in: view) else {
            if state.changeCounter != view.changeCounter { throw LarderError.staleView }
            return .unsettled
        }
        if expired { return .absent }
        if !isReadOnly { RecordHeader.markVisited(view.base + found.offset, header: found.header) }
        return .entry(RecordIdentity(offset: found.offset, sequence: found.header.sequence))
    }

    /// Writer, under the writer lock: the identity of `key`'s live entry, as the write just made
    /// it (nil when it holds none).
    func identityOfEntry(forKey key: UnsafeRawBufferPointer) -> RecordIdentity? {
        lookup(key, hash: KeyHash(key)).map { RecordIdentity(offset: $0.offset, sequence: $0.header.sequence) }
    }
}

extension KeyHash {
    /// The hash whose value, `KeyHash(key).value`, the caller kept.
    init(precomputed value: UInt64) {
        self.value = value
    }
}

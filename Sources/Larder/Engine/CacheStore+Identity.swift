import CLarderSupport

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

    /// Reader: whether `identity` is still the live, unexpired entry of the key whose hash is
    /// `hash`, by the shortcut of FORMAT.md 7.7.8: the slot that names it, then its record's
    /// first word and sequence number. No key compare and no header checksum: the record that
    /// had this identity when it was remembered held the key, and its bytes stay while it lives.
    ///
    /// Returns the first millisecond at which the entry is expired (`.max` for never) only if it
    /// was the key's entry at one moment during the call. Nil when the shortcut cannot tell (a
    /// sliding entry, a slot not found, a record changed, a stale view): the caller asks
    /// `liveIdentity`. A read-write handle marks the entry visited, as `liveIdentity` does.
    @inline(__always)
    func stillEntryDeadline(_ identity: RecordIdentity, hash: KeyHash, in view: ReadView) -> UInt64? {
        let offset = identity.offset
        guard offset >= view.ringStart, offset <= view.limit &- RecordHeader.size,
              identity.sequence >= view.firstValidSequence else { return nil }
        // At the moment the slot is read, it is the key's entry if the record is still live then.
        let slot = HashTable.slot(tag: hash.tag, offset: offset)
        guard view.active.find(exactly: slot) != nil || view.draining?.find(exactly: slot) != nil else { return nil }
        let record = view.base + offset
        // Read before the re-check, which vouches for them: the record was this one all along.
        let expiresAt = UInt64(littleEndian: lrd_load_relaxed_u64(record + RecordHeader.Field.expiresAt))
        let storedAt = UInt64(littleEndian: lrd_load_relaxed_u64(record + RecordHeader.Field.storedAt))
        lrd_fence_acquire()
        let word = UInt64(littleEndian: lrd_load_acquire_u64(record))
        guard word & RecordHeader.Word0.liveBit != 0,
              word & RecordHeader.Word0.slidingBit == 0,
              UInt64(littleEndian: lrd_load_relaxed_u64(record + RecordHeader.Field.sequence)) == identity.sequence,
              state.changeCounter == view.changeCounter,
              !RecordHeader.isExpiredNow(expiresAt: expiresAt, storedAt: storedAt, maximumAge: view.maximumAge)
        else { return nil }
        if !isReadOnly && word & RecordHeader.Word0.visitedBit == 0 {
            _ = lrd_cas_u64(record, word.littleEndian, (word | RecordHeader.Word0.visitedBit).littleEndian)
        }
        return RecordHeader.deadline(expiresAt: expiresAt, storedAt: storedAt, maximumAge: view.maximumAge)
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

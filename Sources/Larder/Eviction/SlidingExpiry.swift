/// Sliding expiry on the writer's side (FORMAT.md 4.8): readers push a sliding entry's expiry
/// back without a lock, so a writer that found one expired drops it only with a compare-and-swap
/// against the slide count it found it expired by.
///
/// No state of its own: the slide count and the deadline live in the record header.
enum SlidingExpiry {
    /// Writer: whether the entry at `offset` in `file`, which `header` says is expired, may be
    /// dropped as such. A sliding one is marked dead here, unless a reader's push has landed
    /// meanwhile (FORMAT.md 4.8); the caller then takes it out of the index, or keeps it.
    static func claimExpired(in file: MappedFile, at offset: Int, header: RecordHeader, maximumAge: UInt64) -> Bool {
        guard header.isSliding else { return true }
        return RecordHeader.markDeadIfStillExpired(file.mutableBytes(at: offset, count: RecordHeader.size).baseAddress!,
                                                   header: header, now: SystemCall.nowMilliseconds(), maximumAge: maximumAge)
    }
}

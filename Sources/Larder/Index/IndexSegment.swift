/// An index segment: a hash table stored in the ring as a record of kind `.indexSegment`.
///
/// It starts on a page boundary with a normal 48-byte record header (key length 0; stored length
/// = segment bytes - 48; raw length = slot count), then 16 reserved bytes, then the slots from
/// byte 64, and runs to the end of its last page. The ring's head and tail step over a live
/// segment; a dead one is ordinary free space.
enum IndexSegment {
    static let slotsOffset = 64

    static func byteCount(slotCount: Int, pageSize: Int) -> Int {
        FileLayout.alignUp(slotsOffset + slotCount * 8, pageSize)
    }

    /// Writes the header of a segment of `byteCount` bytes holding `slotCount` empty slots.
    static func format(in file: MappedFile, at offset: Int, slotCount: Int, byteCount: Int, sequence: UInt64, now: UInt64, seed: UInt32) {
        file.zero(offset + RecordHeader.size, byteCount - RecordHeader.size)
        RecordHeader(kind: .indexSegment, flags: 0, isLive: true, keyLength: 0,
                     storedLength: byteCount - RecordHeader.size, rawLength: slotCount,
                     sequence: sequence, expiresAt: 0, storedAt: now, dataChecksum: 0)
            .write(to: file, at: offset, seed: seed)
    }

    /// Whether `header`, read at `offset`, has the place and size a segment must have (FORMAT.md
    /// 4.7): a header of kind 3 anywhere else, or of another length, is no segment, and stepping
    /// over it would lose the record boundaries of the ring behind it.
    static func isWellFormed(_ header: RecordHeader, at offset: Int, pageSize: Int) -> Bool {
        header.kind == .indexSegment && offset % pageSize == 0 && header.keyLength == 0
            && header.rawLength >= HashTable.minimumSlotCount && header.rawLength <= HashTable.maximumSlotCount
            && header.totalSize == byteCount(slotCount: header.rawLength, pageSize: pageSize)
    }

    /// The table of the segment described by `location`, after checking that a live segment
    /// header of the right size is really there.
    static func table(in file: MappedFile, at location: IndexLocation, pageSize: Int, seed: UInt32) -> HashTable? {
        guard location.exists,
              let header = RecordHeader.read(from: file, at: location.offset, limit: file.size, seed: seed),
              isWellFormed(header, at: location.offset, pageSize: pageSize), header.isLive,
              header.rawLength == location.slotCount
        else { return nil }
        return HashTable(slots: file.slots(at: location.offset + slotsOffset, count: location.slotCount),
                         slotCount: location.slotCount)
    }
}

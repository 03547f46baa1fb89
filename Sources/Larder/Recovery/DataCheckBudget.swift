/// How many bytes a scan of the ring may spend on data checksums that fail.
///
/// A scan that cannot trust padding (recovery, the inspector outside the span) checks every
/// header it meets, 16 bytes apart, and the data of every entry whose header holds; an entry whose
/// data fail is stepped into, not over. A hostile file can put a valid header every 48 bytes, each
/// claiming data to the ring's end and failing its checksum: each check then reads the rest of the
/// ring, and the scan is quadratic (minutes for 64 MiB, days for a gigabyte), where a damaged
/// file has a few torn records. So the bytes of data checks that fail are bounded by the ring's
/// size: past that, an entry whose data would take more than is left is taken as damaged without
/// reading it. Checks that hold cost at most the ring once (the scan steps over what they cover),
/// so a whole scan reads at most three times the ring (FORMAT.md 7.4, step 3).
struct DataCheckBudget {
    private var remaining: Int

    init(ringBytes: Int) {
        remaining = ringBytes
    }

    /// Whether the data of the entry at `offset` hold, within the budget; false, unread, when a
    /// failure could overspend it.
    mutating func dataIsIntact(_ header: RecordHeader, in file: MappedFile, at offset: Int, seed: UInt32) -> Bool {
        let cost = header.keyLength + header.storedLength
        guard cost <= remaining else { return false }
        if header.dataIsIntact(in: file, at: offset, seed: seed) { return true }
        remaining -= cost
        return false
    }
}

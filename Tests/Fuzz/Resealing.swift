import CLarderSupport

/// Makes the checksums of a mutated cache file right again: the meta copies', and every record
/// header's and entry's that the file's seed covers (FORMAT.md 2.2, 4.4). A mutation of a field
/// then reaches the checks of its value (lengths, offsets, counts) instead of stopping at a
/// checksum, as a hostile file, whose author can compute checksums, would.
enum Resealing {
    /// The file with its checksums made right, or nil when that changes nothing.
    static func resealed(_ file: [UInt8]) -> [UInt8]? {
        var bytes = file
        let pageSize = metaPageSize(bytes) ?? 4096
        for copy in 0..<2 { resealMeta(&bytes, at: copy * pageSize) }
        if let seed = checksumSeed(bytes, pageSize: pageSize) {
            var offset = 3 * pageSize
            while offset + headerSize <= bytes.count {
                if isRecordHeader(bytes, at: offset) { resealRecord(&bytes, at: offset, seed: seed) }
                offset += 16
            }
        }
        return bytes == file ? nil : bytes
    }

    private static let metaMagic: [UInt8] = [0x89, 0x4C, 0x41, 0x52, 0x44, 0x45, 0x52, 0x1A]
    private static let metaChecksumOffset = 124, metaPageSizeOffset = 24, metaSeedOffset = 96
    private static let headerSize = 48
    private static let keyLengthOffset = 6, storedLengthOffset = 8
    private static let dataChecksumOffset = 40, headerChecksumOffset = 44

    private static func hasMetaMagic(_ bytes: [UInt8], at offset: Int) -> Bool {
        offset + 128 <= bytes.count && bytes[offset..<(offset + 8)].elementsEqual(metaMagic)
    }

    /// The page size copy 0 names, if it is one a file may have.
    private static func metaPageSize(_ bytes: [UInt8]) -> Int? {
        guard hasMetaMagic(bytes, at: 0) else { return nil }
        let size = Int(load32(bytes, at: metaPageSizeOffset))
        return (4096...65536).contains(size) && size & (size - 1) == 0 ? size : nil
    }

    private static func checksumSeed(_ bytes: [UInt8], pageSize: Int) -> UInt32? {
        [0, pageSize].first { hasMetaMagic(bytes, at: $0) }.map { load32(bytes, at: $0 + metaSeedOffset) }
    }

    private static func resealMeta(_ bytes: inout [UInt8], at offset: Int) {
        guard hasMetaMagic(bytes, at: offset) else { return }
        let checksum = bytes.withUnsafeBytes { lrd_crc32c(0, $0.baseAddress! + offset, metaChecksumOffset) }
        store32(checksum, in: &bytes, at: offset + metaChecksumOffset)
    }

    /// The magic "LR" and an entry's or an index segment's kind.
    private static func isRecordHeader(_ bytes: [UInt8], at offset: Int) -> Bool {
        bytes[offset] == 0x4C && bytes[offset + 1] == 0x52 && (bytes[offset + 2] == 1 || bytes[offset + 2] == 3)
    }

    private static func resealRecord(_ bytes: inout [UInt8], at offset: Int, seed: UInt32) {
        if bytes[offset + 2] == 1 {
            let keyLength = Int(bytes[offset + keyLengthOffset]) | (Int(bytes[offset + keyLengthOffset + 1]) << 8)
            let dataLength = keyLength + Int(load32(bytes, at: offset + storedLengthOffset))
            if offset + headerSize + dataLength <= bytes.count {
                let checksum = bytes.withUnsafeBytes { lrd_crc32c(seed, $0.baseAddress! + offset + headerSize, dataLength) }
                store32(checksum, in: &bytes, at: offset + dataChecksumOffset)
            }
        }
        let checksum = bytes.withUnsafeBytes { lrd_crc32c_record_header(seed, $0.baseAddress! + offset) }
        store32(checksum, in: &bytes, at: offset + headerChecksumOffset)
    }

    private static func load32(_ bytes: [UInt8], at offset: Int) -> UInt32 {
        (0..<4).reduce(0) { $0 | UInt32(bytes[offset + $1]) << (8 * $1) }
    }

    private static func store32(_ value: UInt32, in bytes: inout [UInt8], at offset: Int) {
        for index in 0..<4 { bytes[offset + index] = UInt8(truncatingIfNeeded: value >> (8 * index)) }
    }
}

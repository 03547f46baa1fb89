// File offsets and sizes, up to `maximumFileSize` (1 TiB), are `Int`s throughout: a 32-bit
// `Int` (Apple Watch hardware's arm64_32) would silently refuse every capacity.
#if _pointerBitWidth(_32)
#error("Larder needs a 64-bit platform: Apple Watch devices (arm64_32) are not supported")
#endif
// The file is little-endian (FORMAT.md 1); the code reads and writes it in the machine's order
// in places (index slots, shared counters, checksums over words), which are the same only here.
#if _endian(big)
#error("Larder needs a little-endian platform")
#endif

/// Fixed numbers of the file format. docs/FORMAT.md is the normative description; every value
/// here appears there with the same name.
enum FileLayout {
    /// Bytes 0-7 of both meta pages: `89 4C 41 52 44 45 52 1A` ("\x89LARDER\x1A"). The high first
    /// byte and the trailing SUB catch text-mode transfers, as PNG's signature does.
    static let metaMagic: UInt64 = 0x1A52_4544_5241_4C89
    /// Bytes 0-7 of a file being created, until its meta pages are written ("\x89LRDNEW\x1A").
    /// Durable before the file grows: only an empty file or one starting with these bytes is ever
    /// formatted (FORMAT.md 2.3), never a file of zeros that happens to be at the path.
    static let creationMagic: UInt64 = 0x1A57_454E_4452_4C89
    /// Bytes 0-7 of the shared-state page: "LRDSTATE".
    static let stateMagic: UInt64 = 0x4554_4154_5344_524C

    /// The format this code writes. A file whose read version is newer is refused; a file whose
    /// write version is newer (but read version is not) is opened read-only.
    static let formatVersion: UInt32 = 2
    /// The read version of a file with no maximum age: version-1 readers read it correctly.
    static let readVersion: UInt32 = 1
    /// The read version of a file with a maximum age, which readers must apply (FORMAT.md 2.5).
    static let maximumAgeReadVersion: UInt32 = 2

    static let minimumPageSize = 4096
    static let maximumPageSize = 65536
    static let defaultPageSize = 4096

    /// Page 0 and page 1 hold the two meta copies; page 2 the shared state.
    static let metaPageCount = 2
    static let statePage = 2
    static let headerPageCount = 3

    /// Records start at multiples of this, and their sizes are multiples of it.
    static let recordAlignment = 16

    /// Largest file a slot can address: slots keep offsets in 16-byte units in 36 bits.
    static let maximumFileSize = 1 << 40

    /// The smallest capacity: header pages plus room for an index and some records.
    static func minimumCapacity(pageSize: Int) -> Int { max(64 * 1024, pageSize * 16) }

    /// Offset of the data area (the ring) for a page size.
    static func dataStart(pageSize: Int) -> Int { headerPageCount * pageSize }

    @inline(__always)
    static func alignUp(_ value: Int, _ alignment: Int) -> Int {
        (value + alignment - 1) & ~(alignment - 1)
    }

    /// The first bytes of a file being created (`creationMagic`, then zeros to a meta copy's size).
    static var creationMarker: [UInt8] {
        withUnsafeBytes(of: creationMagic.littleEndian) { Array($0) } + [UInt8](repeating: 0, count: Meta.encodedSize - 8)
    }

    /// Whether `bytes`, read at offset 0, start with `creationMagic`.
    static func isCreationMarker(_ bytes: [UInt8]) -> Bool {
        bytes.starts(with: creationMarker.prefix(8))
    }

    /// Whether a file of `fileSize` bytes that starts with `firstBytes` (up to a meta copy's
    /// size, read at offset 0) is a creation cut short (FORMAT.md 2.3): it has the marker, or
    /// it is no longer than the marker and all zero (the marker's write lost to a power cut on a
    /// file system that kept the new size, not the bytes; such a file holds nothing to lose).
    static func isUnfinishedCreation(firstBytes: [UInt8], fileSize: Int) -> Bool {
        isCreationMarker(firstBytes) || (fileSize <= Meta.encodedSize && firstBytes.allSatisfy { $0 == 0 })
    }

    static func isValidPageSize(_ size: Int) -> Bool {
        size >= minimumPageSize && size <= maximumPageSize && size & (size - 1) == 0
    }
}

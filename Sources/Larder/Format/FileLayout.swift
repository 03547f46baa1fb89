// File offsets and sizes, up to `maximumFileSize` (1 TiB), are `Int`s throughout: a 32-bit
// `Int` (Apple Watch hardware's arm64_32) would silently refuse every capacity.
#if _pointerBitWidth(_32)
#error("Larder needs a 64-bit platform: Apple Watch devices (arm64_32) are not supported")
#endif

/// Fixed numbers of the file format. docs/FORMAT.md is the normative description; every value
/// here appears there with the same name.
enum FileLayout {
    /// Bytes 0-7 of both meta pages: `89 4C 41 52 44 45 52 1A` ("\x89LARDER\x1A"). The high first
    /// byte and the trailing SUB catch text-mode transfers, as PNG's signature does.
    static let metaMagic: UInt64 = 0x1A52_4544_5241_4C89
    /// Bytes 0-7 of the shared-state page: "LRDSTATE".
    static let stateMagic: UInt64 = 0x4554_4154_5344_524C

    /// The format this code writes. A file whose read version is newer is refused; a file whose
    /// write version is newer (but read version is not) is opened read-only.
    static let formatVersion: UInt32 = 1
    static let readVersion: UInt32 = 1

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

    static func isValidPageSize(_ size: Int) -> Bool {
        size >= minimumPageSize && size <= maximumPageSize && size & (size - 1) == 0
    }
}

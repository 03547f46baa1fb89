import CLarderSupport

/// Where one hash table lives: an index segment inside the ring.
struct IndexLocation: Equatable {
    /// File offset of the segment's record header (page aligned); 0 when there is none.
    var offset: Int
    /// Number of 8-byte slots, a power of two.
    var slotCount: Int

    static let none = IndexLocation(offset: 0, slotCount: 0)
    var exists: Bool { offset != 0 }

    /// The bytes the segment takes in the file.
    func bytes(pageSize: Int) -> Range<Int> {
        offset..<(offset + IndexSegment.byteCount(slotCount: slotCount, pageSize: pageSize))
    }
}

/// The rarely changing description of a file, kept twice (pages 0 and 1).
///
/// Writers alternate between the two copies and bump `sequence`; a reader takes the valid copy
/// (magic and CRC32C both right) with the higher sequence. A write torn by a crash therefore
/// never loses the file: the other copy is intact and describes the state before.
struct Meta: Equatable {
    var sequence: UInt64
    var writeVersion: UInt32
    var readVersion: UInt32
    var pageSize: Int
    var capacity: Int
    /// Bytes of the file in use; the ring ends here. A multiple of the page size.
    var fileSize: Int
    var createdAt: UInt64
    /// Records whose sequence number is lower belong to a cleared cache and are void.
    var firstValidSequence: UInt64
    /// The table lookups and inserts use.
    var activeIndex: IndexLocation
    /// The table being drained into the active one while the index grows.
    var drainingIndex: IndexLocation
    /// Random at creation; seeds every record checksum of this file.
    var checksumSeed: UInt32
    /// The most entries the file holds; 0 for no limit (FORMAT.md 2.1, version 2).
    var countLimit: UInt64 = 0
    /// Milliseconds after its time stored that an entry counts as expired; 0 for no limit.
    var maximumAge: UInt64 = 0

    /// Encoded size; the CRC covers the bytes before it.
    static let encodedSize = 128
    static let checksumOffset = 124

    enum Field {
        static let magic = 0, writeVersion = 8, readVersion = 12, sequence = 16, pageSize = 24
        static let capacity = 32, fileSize = 40, createdAt = 48, firstValidSequence = 56
        static let activeOffset = 64, activeSlots = 72, drainingOffset = 80, drainingSlots = 88
        static let checksumSeed = 96, countLimit = 100, maximumAge = 108
    }

    /// The read version a file with these limits needs: a reader of version 1 would return
    /// entries past the maximum age (FORMAT.md 2.5).
    var neededReadVersion: UInt32 {
        maximumAge == 0 ? FileLayout.readVersion : FileLayout.maximumAgeReadVersion
    }

    func encode(into buffer: UnsafeMutableRawBufferPointer) {
        precondition(buffer.count >= Meta.encodedSize)
        buffer.baseAddress!.initializeMemory(as: UInt8.self, repeating: 0, count: Meta.encodedSize)
        func put<T: FixedWidthInteger>(_ value: T, _ at: Int) {
            buffer.storeBytes(of: value.littleEndian, toByteOffset: at, as: T.self)
        }
        put(FileLayout.metaMagic, Field.magic)
        put(writeVersion, Field.writeVersion)
        put(readVersion, Field.readVersion)
        put(sequence, Field.sequence)
        put(UInt32(pageSize), Field.pageSize)
        put(UInt64(capacity), Field.capacity)
        put(UInt64(fileSize), Field.fileSize)
        put(createdAt, Field.createdAt)
        put(firstValidSequence, Field.firstValidSequence)
        put(UInt64(activeIndex.offset), Field.activeOffset)
        put(UInt64(activeIndex.slotCount), Field.activeSlots)
        put(UInt64(drainingIndex.offset), Field.drainingOffset)
        put(UInt64(drainingIndex.slotCount), Field.drainingSlots)
        put(checksumSeed, Field.checksumSeed)
        put(countLimit, Field.countLimit)
        put(maximumAge, Field.maximumAge)
        let crc = lrd_crc32c(0, buffer.baseAddress!, Meta.checksumOffset)
        put(crc, Meta.checksumOffset)
    }

    /// Why a meta copy was rejected, for error messages.
    enum Rejection: Error {
        case notLarder
        case damaged
    }

    /// Decodes one copy. Checks the magic and the checksum only; `validate` checks the values.
    static func decode(_ buffer: UnsafeRawBufferPointer) -> Result<Meta, Rejection> {
        guard buffer.count >= encodedSize else { return .failure(.notLarder) }
        func get<T: FixedWidthInteger>(_: T.Type, _ at: Int) -> T {
            T(littleEndian: buffer.loadUnaligned(fromByteOffset: at, as: T.self))
        }
        guard get(UInt64.self, Field.magic) == FileLayout.metaMagic else { return .failure(.notLarder) }
        guard get(UInt32.self, checksumOffset) == lrd_crc32c(0, buffer.baseAddress!, checksumOffset) else {
            return .failure(.damaged)
        }
        func int(_ at: Int) -> Int { Int(truncatingIfNeeded: min(get(UInt64.self, at), UInt64(Int.max))) }
        return .success(Meta(
            sequence: get(UInt64.self, Field.sequence),
            writeVersion: get(UInt32.self, Field.writeVersion),
            readVersion: get(UInt32.self, Field.readVersion),
            pageSize: Int(get(UInt32.self, Field.pageSize)),
            capacity: int(Field.capacity),
            fileSize: int(Field.fileSize),
            createdAt: get(UInt64.self, Field.createdAt),
            firstValidSequence: get(UInt64.self, Field.firstValidSequence),
            activeIndex: IndexLocation(offset: int(Field.activeOffset), slotCount: int(Field.activeSlots)),
            drainingIndex: IndexLocation(offset: int(Field.drainingOffset), slotCount: int(Field.drainingSlots)),
            checksumSeed: get(UInt32.self, Field.checksumSeed),
            countLimit: get(UInt64.self, Field.countLimit),
            maximumAge: get(UInt64.self, Field.maximumAge)
        ))
    }

    /// Whether this code can read the file the copy describes: one whose format is no newer
    /// than its own for readers (FORMAT.md 2.5).
    var isReadable: Bool { readVersion <= FileLayout.formatVersion }

    /// Checks that every number is one this code can trust: a hostile meta page with a correct
    /// checksum must still not lead to an out-of-bounds access.
    func validationFailure() -> String? {
        guard FileLayout.isValidPageSize(pageSize) else { return "page size \(pageSize) is not a power of two in 4096...65536" }
        let dataStart = FileLayout.dataStart(pageSize: pageSize)
        guard capacity >= FileLayout.minimumCapacity(pageSize: pageSize),
              capacity <= FileLayout.maximumFileSize, capacity % pageSize == 0 else {
            return "capacity \(capacity) is out of range"
        }
        guard fileSize > dataStart, fileSize <= capacity, fileSize % pageSize == 0 else {
            return "file size \(fileSize) is out of range"
        }
        guard sequence < RecordHeader.sequenceLimit, firstValidSequence <= RecordHeader.sequenceLimit else {
            return "sequence \(sequence) or first valid sequence \(firstValidSequence) is out of range"
        }
        for (name, index) in [("active", activeIndex), ("draining", drainingIndex)] {
            if name == "active" && !index.exists { return "no active index" }
            guard index.exists else { continue }
            guard index.offset >= dataStart, index.offset % pageSize == 0,
                  index.slotCount >= HashTable.minimumSlotCount, index.slotCount <= HashTable.maximumSlotCount,
                  index.slotCount & (index.slotCount - 1) == 0,
                  index.offset <= fileSize - IndexSegment.byteCount(slotCount: index.slotCount, pageSize: pageSize) else {
                return "\(name) index (offset \(index.offset), \(index.slotCount) slots) is out of range"
            }
        }
        return nil
    }

    /// This copy with the standing limits `configuration` asks for (nil keeps a limit as it is).
    func withLimits(of configuration: CacheStore.Configuration) -> Meta {
        var meta = self
        meta.countLimit = configuration.countLimit ?? countLimit
        meta.maximumAge = configuration.maximumAge ?? maximumAge
        return meta
    }

    /// Whether the draining index shares bytes with the active one: writers never place them so
    /// (a hostile file), and a sole writer rebuilds such a file rather than use it (FORMAT.md 7.3).
    var indexSegmentsOverlap: Bool {
        drainingIndex.exists && activeIndex.bytes(pageSize: pageSize).overlaps(drainingIndex.bytes(pageSize: pageSize))
    }
}

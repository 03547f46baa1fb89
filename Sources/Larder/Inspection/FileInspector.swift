/// A read-only view of a cache file for tools (`larder info`, `dump`, `verify`, ...): the meta
/// copies, the shared state, the ring's records and the index, taken apart as they are on disk.
///
/// It is not a `Cache`: it takes no lock, changes no byte and never recovers anything, so it can
/// look at a file that another process has open, at a file that was not closed cleanly, and at a
/// damaged or hostile one. Every offset and length read from the file is checked before use
/// (through `Meta.validationFailure`, `RecordHeader.read` and `MappedFile`'s bounds), so nothing
/// in the file can make it read outside its own mapping. What another process writes while it
/// looks may appear half-done; checksums tell such records apart as they do after a crash.
///
/// The file is mapped read-only for the length it has when opened, and the ring taken to end
/// within the mapping. The engine shortens a file only when a sole writer recovers it and finds
/// bytes past the ring's end (FORMAT.md 7.4, step 0): an inspection running at that moment may
/// fault there (SIGBUS), as any reader of a file another program truncates.
@_spi(Inspection) public final class FileInspector {
    /// The file inspected.
    public let path: String
    /// Bytes of the file on disk when it was opened.
    public let diskSize: Int
    /// Both meta copies, as found.
    public let metaCopies: [MetaCopy]
    /// The meta copy in use (the newest that validates), as the engine would choose it.
    public let summary: FileSummary
    /// Page 2, or nil when the file is too short to hold it.
    public let state: StateSnapshot?

    let file: MappedFile
    let meta: Meta
    /// Where the ring ends for this inspection: the meta page's file size, or less when the file
    /// on disk is shorter (truncated).
    let ringEnd: Int
    var ringStart: Int { FileLayout.dataStart(pageSize: meta.pageSize) }
    var seed: UInt32 { meta.checksumSeed }

    /// Opens `path` read-only.
    ///
    /// - Throws: `.invalidArgument` for a missing, empty or non-regular file; `.incompatible` for
    ///   a file that is not a Larder cache or needs a newer reader; `.corrupt` when no meta copy
    ///   can be used (then nothing else in the file can be trusted or even located).
    public init(path: String) throws(LarderError) {
        self.path = path
        let descriptor = try FileDescriptor.open(path, create: false, readOnly: true, permissions: 0)
        var owned = false
        defer { if !owned { descriptor.close() } }
        diskSize = try descriptor.size()
        guard diskSize > 0 else { throw LarderError(.invalidArgument, "the file is empty, not a cache", path: path) }
        let (copies, inUse) = try FileInspector.readMetaCopies(descriptor, diskSize: diskSize)
        metaCopies = copies
        meta = try FileInspector.chooseMeta(copies, inUse: inUse, path: path)
        let mapped = try MappedFile(descriptor, readOnly: true, mappedLength: diskSize)
        owned = true
        file = mapped
        // A file cut short before its data area has an empty ring, not a reversed one.
        // The mapped size, not the size read before: the file may have been shortened between.
        ringEnd = max(FileLayout.dataStart(pageSize: meta.pageSize),
                      min(meta.fileSize, mapped.size & ~(FileLayout.recordAlignment - 1)))
        summary = FileSummary(meta, sequenceInUse: meta.sequence, diskSize: diskSize)
        let statePage = FileLayout.statePage * meta.pageSize
        state = mapped.contains(statePage, meta.pageSize)
            ? StateSnapshot(SharedState(file: mapped, pageSize: meta.pageSize), meta: meta, ringEnd: ringEnd)
            : nil
    }

    // MARK: - Meta copies

    /// One of the two meta copies (pages 0 and 1) and what became of it.
    public struct MetaCopy: Sendable {
        public enum Status: Sendable, Equatable {
            /// Magic and checksum hold; the values may still fail validation (`problem`).
            case valid(sequence: UInt64)
            /// The magic is there but the checksum does not hold.
            case damaged
            /// All 128 bytes are zero.
            case blank
            /// Copy 0 of a creation cut short (FORMAT.md 2.3): the creation marker, or a file no
            /// longer than a copy and all zero.
            case unfinishedCreation
            /// No magic (or the file ends before the copy).
            case missing
        }
        /// 0 or 1.
        public let copy: Int
        /// File offset of the copy.
        public let offset: Int
        public let status: Status
        /// Why a copy with a correct checksum cannot be used, when it cannot.
        public let problem: String?
        /// Whether this is the copy in use.
        public let inUse: Bool
    }

    private struct DecodedCopy {
        let offset: Int
        let result: Result<Meta, Meta.Rejection>
        let blank: Bool
        let unfinishedCreation: Bool
    }

    /// Reads copy 0, then copy 1 one page in (every possible page size when copy 0 does not say
    /// which), as docs/FORMAT.md section 2.3 prescribes.
    private static func readMetaCopies(_ descriptor: FileDescriptor, diskSize: Int) throws(LarderError) -> (copies: [MetaCopy], inUse: Meta?) {
        func decode(at offset: Int) throws(LarderError) -> DecodedCopy {
            let bytes = try descriptor.read(count: Meta.encodedSize, at: offset)
            return DecodedCopy(offset: offset, result: bytes.withUnsafeBytes { Meta.decode($0) },
                               blank: bytes.count == Meta.encodedSize && bytes.allSatisfy { $0 == 0 },
                               unfinishedCreation: offset == 0 && FileLayout.isUnfinishedCreation(firstBytes: bytes, fileSize: diskSize))
        }
        let first = try decode(at: 0)
        var second: DecodedCopy?
        if case .success(let meta) = first.result, FileLayout.isValidPageSize(meta.pageSize) {
            second = try decode(at: meta.pageSize)
        } else {
            var size = FileLayout.minimumPageSize
            while size <= FileLayout.maximumPageSize {
                let candidate = try decode(at: size)
                if case .success(let meta) = candidate.result, meta.pageSize == size {
                    second = candidate
                    break
                }
                if second == nil && !candidate.blank, case .failure(.damaged) = candidate.result { second = candidate }
                size *= 2
            }
            if second == nil { second = try decode(at: FileLayout.minimumPageSize) }
        }
        let decoded = [first, second!]
        // Candidates as the engine takes them: a copy read one page in that records another
        // page size is not one (FORMAT.md 2.3).
        func candidate(_ copy: DecodedCopy) -> Meta? {
            guard case .success(let meta) = copy.result, copy.offset == 0 || meta.pageSize == copy.offset else { return nil }
            return meta
        }
        // A newest copy of a newer format is not passed over for an older one (FORMAT.md 2.5).
        let newestWritten = decoded.compactMap(candidate).max { $0.sequence < $1.sequence }
        let chosen = newestWritten?.isReadable == false ? nil : decoded.enumerated().compactMap { index, copy -> (Int, Meta)? in
            guard let meta = candidate(copy), meta.isReadable,
                  meta.validationFailure() == nil else { return nil }
            return (index, meta)
        }.max { $0.1.sequence < $1.1.sequence }
        let copies = decoded.enumerated().map { index, copy in
            let status: MetaCopy.Status
            var problem: String?
            switch copy.result {
            case .success(let meta):
                status = .valid(sequence: meta.sequence)
                if meta.readVersion > FileLayout.formatVersion {
                    problem = "needs format \(meta.readVersion)"
                } else {
                    problem = meta.validationFailure()
                }
            case .failure(.damaged):
                status = .damaged
            case .failure(.notLarder):
                status = copy.unfinishedCreation ? .unfinishedCreation : copy.blank ? .blank : .missing
            }
            return MetaCopy(copy: index, offset: copy.offset, status: status, problem: problem, inUse: index == chosen?.0)
        }
        return (copies, chosen?.1)
    }

    /// The copy the engine would use (see `CacheStore.chooseMeta`), or the reason there is none.
    private static func chooseMeta(_ copies: [MetaCopy], inUse: Meta?, path: String) throws(LarderError) -> Meta {
        if let inUse { return inUse }
        func sequence(_ copy: MetaCopy) -> UInt64? {
            if case .valid(let sequence) = copy.status { sequence } else { nil }
        }
        guard let newest = copies.filter({ sequence($0) != nil }).max(by: { sequence($0)! < sequence($1)! }) else {
            // In the engine's order (FORMAT.md 2.3): an unfinished creation before damage.
            if copies[0].status == .unfinishedCreation {
                throw LarderError(.incompatible, "not a cache file yet: its creation did not finish (a read-write open creates it anew)",
                                  path: path)
            }
            if copies.contains(where: { $0.status == .damaged }) {
                throw LarderError(.corrupt, "both meta pages are damaged", path: path)
            }
            throw LarderError(.incompatible, "not a Larder cache file", path: path)
        }
        if let problem = newest.problem, problem.hasPrefix("needs format") {
            throw LarderError(.incompatible, "the file \(problem) or newer; this build reads format \(FileLayout.formatVersion)", path: path)
        }
        throw LarderError(.corrupt, "meta page: \(newest.problem ?? "invalid")", path: path)
    }
}

/// What the meta page in use says about a file.
@_spi(Inspection) public struct FileSummary: Sendable {
    public let writeVersion: UInt32
    public let readVersion: UInt32
    /// Meta sequence of the copy in use.
    public let metaSequence: UInt64
    public let pageSize: Int
    public let capacity: Int
    /// The meta page's file size: where the ring ends.
    public let fileSize: Int
    /// Bytes on disk; less than `fileSize` when the file was truncated.
    public let diskSize: Int
    /// Milliseconds since the Unix epoch.
    public let createdAt: UInt64
    public let firstValidSequence: UInt64
    public let checksumSeed: UInt32
    public let activeIndexOffset: Int
    public let activeIndexSlots: Int
    /// 0 when no index migration is in progress.
    public let drainingIndexOffset: Int
    public let drainingIndexSlots: Int
    /// The standing count limit; 0 for none.
    public let countLimit: UInt64
    /// The standing maximum age in milliseconds; 0 for none.
    public let maximumAge: UInt64

    init(_ meta: Meta, sequenceInUse: UInt64, diskSize: Int) {
        writeVersion = meta.writeVersion
        readVersion = meta.readVersion
        metaSequence = sequenceInUse
        pageSize = meta.pageSize
        capacity = meta.capacity
        fileSize = meta.fileSize
        self.diskSize = diskSize
        createdAt = meta.createdAt
        firstValidSequence = meta.firstValidSequence
        checksumSeed = meta.checksumSeed
        activeIndexOffset = meta.activeIndex.offset
        activeIndexSlots = meta.activeIndex.slotCount
        drainingIndexOffset = meta.drainingIndex.offset
        drainingIndexSlots = meta.drainingIndex.slotCount
        countLimit = meta.countLimit
        maximumAge = meta.maximumAge
    }

    /// Offset of the data area (the ring).
    public var ringStart: Int { FileLayout.dataStart(pageSize: pageSize) }
    public var isTruncated: Bool { diskSize < fileSize }
}

/// The shared-state page (page 2) as it was when read.
@_spi(Inspection) public struct StateSnapshot: Sendable {
    /// Magic and layout version are right.
    public let isFormatted: Bool
    /// The last process to close the file closed it cleanly, and nothing changed it since.
    public let isClean: Bool
    /// Head, tail, span and migration cursor describe a possible ring (docs/FORMAT.md 3.2).
    public let isPlausible: Bool
    public let head: Int
    public let tail: Int
    public let spanBytes: Int
    public let nextSequence: UInt64
    public let entryCount: Int
    public let liveRawBytes: Int
    public let liveStoredBytes: Int
    public let liveRecordBytes: Int
    public let migrationCursor: Int
    /// The persistent statistics counters, in file order, with their names.
    public let counters: [(name: String, value: UInt64)]

    init(_ state: SharedState, meta: Meta, ringEnd: Int) {
        isFormatted = state.isFormatted
        isClean = state.isFormatted && state.isClean
        // Loaded once: the values checked are the values kept, whatever a process writes into
        // the page meanwhile.
        let figures = state.figures
        head = figures.head
        tail = figures.tail
        spanBytes = figures.spanBytes
        nextSequence = figures.nextSequence
        entryCount = figures.entryCount
        liveRawBytes = figures.liveRawBytes
        liveStoredBytes = figures.liveStoredBytes
        liveRecordBytes = figures.liveRecordBytes
        migrationCursor = figures.migrationCursor
        let formatted = state.isFormatted
        counters = SharedState.Counter.allCases.map { ("\($0)", formatted ? state.counter($0) : 0) }
        isPlausible = formatted && figures.isPlausible(
            ringStart: FileLayout.dataStart(pageSize: meta.pageSize), ringEnd: ringEnd,
            drainingSlotCount: meta.drainingIndex.exists ? meta.drainingIndex.slotCount : 0,
            firstValidSequence: meta.firstValidSequence)
    }

    /// Whether the ring between tail and head can be walked record by record: the file was closed
    /// cleanly and its state is plausible. Otherwise (a crash, or a process has it open) only
    /// checksums say what is what, as in recovery.
    public var isTrustworthy: Bool { isClean && isPlausible }
}

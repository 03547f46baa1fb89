#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import CLarderSupport

/// The storage engine behind `Cache`: one mapped cache file, its ring of records, its index.
///
/// Not thread-safe by itself: `Cache` calls the reading methods (marked "reader") under a shared
/// lock and everything else under an exclusive one. Readers change nothing but access bits and
/// process-local counters, both atomically.
///
/// The store composes the parts that own their state: the mapped file (`MappedFile`), the
/// shared-state page (`SharedState`), the reader slots (`ReaderTable`), the index
/// (`IndexMaintainer`), the allocator's knowledge (`RingAllocator`) and the process-local words
/// (`LocalWords`). It keeps the locking and the open and close life cycle (here). The work on
/// them is split by concern: the ring allocator (Allocator/), eviction (Eviction/), index
/// maintenance (Index/), recovery (Recovery/), reads and writes (Engine/).
final class CacheStore {
    struct Configuration {
        /// Bytes; nil keeps the file's capacity (or uses the default when creating).
        var capacity: Int?
        var pageSize: Int
        var readOnly: Bool
        var permissions: UInt16
        /// The standing limits to set (FORMAT.md 2.1): nil keeps the file's, 0 removes it.
        /// Taken by a sole writer's open; others keep the file's.
        var countLimit: UInt64?
        /// Milliseconds; as `countLimit`.
        var maximumAge: UInt64?
        /// False while this process has the file open in the other mode: then no open may
        /// rename a smaller copy over it. This says so before any lock is taken.
        var mayReplaceFile = true
        /// False: an open that would wait for another process's open, close, repair or compaction
        /// throws `LarderError.otherProcessInTransition` instead, holding nothing. Its caller
        /// then waits without its own locks (`waitForOtherProcesses`).
        var waitsForOtherProcesses = true
    }

    static let defaultCapacity = 64 << 20
    static let maximumKeyLength = 4096

    /// Bytes of the file's lock space (advisory locks; they never touch data).
    enum LockByte {
        /// Held while a process opens or closes the file (exclusively by writers).
        static let transition: UInt64 = 0
        /// Held shared by every read-write handle for as long as it is open. Whoever can take it
        /// exclusively is the only writer: it may recover the file, and on close mark it clean.
        static let writers: UInt64 = 1
        /// Held shared by every handle, read-only ones included. Only a writer that can take it
        /// exclusively, alone with the file, may change the capacity (every process maps the
        /// capacity it found).
        static let users: UInt64 = 3
    }

    let file: MappedFile
    let pageSize: Int
    let ringStart: Int
    let isReadOnly: Bool
    var meta: Meta {
        didSet {
            allocator.value.adopt(meta)
            limits.value = FileLimits(meta)
            viewGeneration &+= 1
        }
    }
    /// What the ring allocator knows beyond the shared state (Allocator/RingAllocator.swift).
    let allocator: StateCell<RingAllocator>
    /// The standing limits of `meta`, kept up to date with it: read on every write without the
    /// run-time exclusivity check of `meta` (Eviction/CountLimit.swift).
    let limits: StateCell<FileLimits>
    /// What the ring allocator derives from `meta`, kept up to date with it.
    var layout: RingLayout { allocator.value.layout }
    let state: SharedState
    /// The change ring, for watchers of every process (FORMAT.md 3.3).
    let changes: ChangeRing
    /// The index tables, their migration and the epoch around their changes
    /// (Index/IndexMaintainer.swift).
    let index: StateCell<IndexMaintainer>
    /// The write count this store left at its last release of the writer lock after a hold that
    /// checked the shared state; odd (never left at a release) until then and after a failed hold.
    let writeCountAtRelease = StateCell<UInt64>(1)
    var active: HashTable { index.value.active }
    var draining: HashTable? { index.value.draining }
    /// Moves whenever something `currentView` reads changes (the meta copy, whose file size every
    /// growth updates, the change counter; the tables have `IndexMaintainer.generation`), so that
    /// publishing can skip unchanged views.
    private var viewGeneration: UInt64 = 0
    private var publishedGeneration: UInt64 = .max
    private(set) var isClosed = false
    /// Counters and flags this store's threads share without a lock.
    let localWords = LocalWords()
    /// Whether the last open found the file unclean and rebuilt it.
    private(set) var recoveredOnOpen = false
    /// What tests watch and steer (CacheStore+Testing.swift).
    let testHooks = EngineTestHooks()
    /// The shared-state change counter this process's view (meta copy, tables, file size) was
    /// taken at; another process that writes the meta page bumps the counter.
    private(set) var viewChangeCounter: UInt64 = 0 { didSet { viewGeneration &+= 1 } }
    /// Zero-copy reads in progress, in every process.
    let readers: ReaderTable
    /// The view this process's readers take without a lock (see `publishView()`).
    let publishedView: PublishedView
    /// Maps fresh pages ahead of the head in the background (nil for read-only handles and where
    /// the system cannot).
    let pageWarmer: PageWarmer?
    /// The count of forks (`lrd_fork_generation`) when the store was opened. A child forked
    /// later inherits the store but not its locks, which stay the parent's: it may not use it
    /// (`isInheritedAcrossFork`).
    let forkGeneration: UInt64
    /// This store's number among the stores this process opened (from 1): what a memory tier
    /// checked against one store is not taken for checked against the next.
    let serial: UInt64

    private static let openedStores = AtomicWord()

    var path: String { file.path }
    var capacity: Int { meta.capacity }
    var ringEnd: Int { meta.fileSize }
    var seed: UInt32 { meta.checksumSeed }
    /// The file's standing maximum age in milliseconds (0: none). Writers only: readers take it
    /// from their view.
    var maximumAge: UInt64 { limits.value.maximumAge }

    private init(file: MappedFile, meta: Meta, readOnly: Bool) {
        self.file = file
        self.meta = meta
        self.pageSize = meta.pageSize
        self.ringStart = FileLayout.dataStart(pageSize: meta.pageSize)
        self.limits = StateCell(FileLimits(meta))
        self.isReadOnly = readOnly
        self.pageWarmer = PageWarmer.warming(file)
        self.state = SharedState(file: file, pageSize: meta.pageSize)
        self.index = StateCell(IndexMaintainer(state: state))
        self.changes = ChangeRing(file: file, pageSize: meta.pageSize)
        self.forkGeneration = lrd_watch_forks()
        self.serial = lrd_fetch_add_u64(CacheStore.openedStores.pointer, 1) &+ 1
        self.readers = ReaderTable(state: state, pageSize: meta.pageSize, processID: UInt64(SystemCall.processID()),
                                   tag: file.mappingTag)
        self.allocator = StateCell(RingAllocator(meta: meta, ringStart: ringStart, file: file, state: state,
                                                 readers: readers, pageWarmer: pageWarmer))
        self.publishedView = PublishedView(
            base: file.viewBase, ringStart: ringStart, seed: meta.checksumSeed,
            changeCounter: state.page + SharedState.Field.changeCounter, indexEpoch: state.page + SharedState.Field.indexEpoch,
            hits: localWords.pointer(.hits), misses: localWords.pointer(.misses), readOnly: readOnly)
    }

    deinit {
        index.value.deallocate()
    }

    // MARK: - Opening

    /// Refuses options no open may use, whether the file exists or not, and whether or not the
    /// process has it open already: a page size outside 4096...65536, a capacity below the least
    /// that page size allows or above 1 TiB.
    static func validate(_ configuration: Configuration, path: String) throws(LarderError) {
        guard FileLayout.isValidPageSize(configuration.pageSize) else {
            throw LarderError(.invalidArgument, "page size must be a power of two from 4096 to 65536, not \(configuration.pageSize)", path: path)
        }
        if let capacity = configuration.capacity {
            let minimum = FileLayout.minimumCapacity(pageSize: configuration.pageSize)
            guard capacity >= minimum, capacity <= FileLayout.maximumFileSize else {
                throw LarderError(.invalidArgument, "capacity must be from \(minimum) bytes to 1 TiB, not \(capacity)", path: path)
            }
        }
    }

    /// Opens the cache at `path`, creating it when it does not exist (unless read-only), and
    /// repairs it when the last process to use it did not close it cleanly.
    ///
    /// An attempt that could not replace the file with a smaller one leaves
    /// `configuration.mayReplaceFile` false, for the caller's next attempt too.
    /// The configuration has passed `validate` (the registry checks it before every open).
    static func open(path: String, configuration: inout Configuration) throws(LarderError) -> CacheStore {
        // A compaction or a shrink renames a new file over `path` while it holds the old file's
        // locks; an open that waited for them then starts again on the new file.
        for _ in 0..<maximumOpenAttempts {
            switch try openOnce(path: path, configuration: configuration) {
            case .opened(let store):
                return store
            case .again:
                continue
            case .againKeepingCapacity:
                configuration.mayReplaceFile = false
            }
        }
        throw LarderError(.busy, "the file was replaced \(maximumOpenAttempts) times while this process opened it", path: path)
    }

    private static let maximumOpenAttempts = 100

    /// Waits until no other process is opening, closing, repairing or compacting the file at
    /// `path` (a recovery or a compaction can take seconds), on a descriptor of its own that it
    /// then closes: an open that threw `LarderError.otherProcessInTransition` calls this before
    /// it tries again. (Where locks belong to the process, `ProcessLockTable` keeps this
    /// descriptor's close from dropping the locks of the process's other stores of the file.)
    ///
    /// - Returns: false when it could not open the file to wait (gone or replaced meanwhile, which
    ///   the next attempt finds out; or refused for a reason that may last, which the caller
    ///   should not retry at once).
    static func waitForOtherProcesses(path: String, readOnly: Bool) throws(LarderError) -> Bool {
        guard let descriptor = try? FileDescriptor.open(path, create: false, readOnly: readOnly, permissions: 0) else {
            return false
        }
        defer { descriptor.close() }
        if try descriptor.lock(byte: LockByte.transition, readOnly ? .shared : .exclusive, wait: true) {
            try descriptor.lock(byte: LockByte.transition, .unlock, wait: false)
        }
        return true
    }

    /// How one attempt at `open` ended.
    private enum OpenAttempt {
        case opened(CacheStore)
        /// The path named another file by the time this attempt had the file's locks, or this
        /// attempt replaced the file with a smaller one.
        case again
        /// This attempt could not replace the file with a smaller one. It has given its
        /// descriptor and locks up; the next attempt starts over from the path and keeps the
        /// file's capacity.
        case againKeepingCapacity
    }

    private static func openOnce(path: String, configuration: Configuration) throws(LarderError) -> OpenAttempt {
        let descriptor = try FileDescriptor.open(path, create: !configuration.readOnly, readOnly: configuration.readOnly,
                                                 permissions: configuration.permissions)
        var owner: MappedFile?
        do throws(LarderError) {
            // Opening and closing are serialized between processes. A dead process's locks are
            // released by the kernel, so this never waits on the dead. A read-only descriptor
            // cannot hold a write lock; read-only opens change nothing and share the byte.
            let readOnly = configuration.readOnly
            let waits = configuration.waitsForOtherProcesses
            guard try descriptor.lock(byte: LockByte.transition, readOnly ? .shared : .exclusive, wait: waits) else {
                // The catch below closes the descriptor (once: its number may be another's next).
                throw LarderError.otherProcessInTransition
            }
            guard try descriptor.isStillLinked(at: path) else {
                descriptor.close()
                return .again
            }
            var soleWriter = false
            if !readOnly { soleWriter = try descriptor.lock(byte: LockByte.writers, .exclusive, wait: false) }
            if !readOnly && !soleWriter {
                try descriptor.lock(byte: LockByte.writers, .shared, wait: true)
            }
            var alone = false
            if soleWriter { alone = try descriptor.lock(byte: LockByte.users, .exclusive, wait: false) }
            let store: CacheStore
            let fileSize = try descriptor.size()
            let copies: MetaCopies = fileSize == 0 ? .unformatted : try readMetaCopies(descriptor, fileSize: fileSize)
            switch copies {
            case .unformatted:
                guard soleWriter else {
                    throw LarderError(readOnly ? .incompatible : .corrupt,
                                      "not a cache file yet (it is empty, or its creation did not finish)")
                }
                store = try create(descriptor, configuration: configuration, owner: &owner)
            case .valid(let metas):
                let meta = try chooseMeta(metas)
                if alone, !readOnly, configuration.mayReplaceFile, let smaller = smallerCapacity(meta, configuration) {
                    let replaced = rewrite(path, descriptor, capacity: smaller)
                    descriptor.close()
                    return replaced ? .again : .againKeepingCapacity
                }
                store = try openExisting(descriptor, meta: meta, configuration: configuration,
                                         soleWriter: soleWriter, alone: alone, owner: &owner)
            }
            if soleWriter && !store.isReadOnly { store.finishSoleOpen() }
            if soleWriter {
                // From now on other writers may join.
                try descriptor.lock(byte: LockByte.writers, .shared, wait: true)
            }
            try descriptor.lock(byte: LockByte.users, .shared, wait: true)
            try descriptor.lock(byte: LockByte.transition, .unlock, wait: false)
            store.publishView()
            return .opened(store)
        } catch {
            if owner == nil { descriptor.close() }
            throw error.at(path)
        }
    }

    private static func create(_ descriptor: FileDescriptor, configuration: Configuration,
                               owner: inout MappedFile?) throws(LarderError) -> CacheStore {
        let pageSize = configuration.pageSize
        let capacity = FileLayout.alignUp(configuration.capacity ?? defaultCapacity, pageSize)
        let dataStart = FileLayout.dataStart(pageSize: pageSize)
        let segmentBytes = IndexSegment.byteCount(slotCount: HashTable.minimumSlotCount, pageSize: pageSize)
        let initialSize = min(capacity, FileLayout.alignUp(dataStart + segmentBytes + (1 << 20), pageSize))
        let now = SystemCall.nowMilliseconds()
        var meta = Meta(sequence: 1, writeVersion: FileLayout.formatVersion, readVersion: FileLayout.readVersion,
                        pageSize: pageSize, capacity: capacity, fileSize: initialSize, createdAt: now,
                        firstValidSequence: 1,
                        activeIndex: IndexLocation(offset: dataStart, slotCount: HashTable.minimumSlotCount),
                        drainingIndex: .none, checksumSeed: UInt32.random(in: 1...UInt32.max),
                        countLimit: configuration.countLimit ?? 0, maximumAge: configuration.maximumAge ?? 0)
        meta.readVersion = meta.neededReadVersion
        // Marked first, and durably: from here on a creation cut short is known for one.
        try descriptor.write(FileLayout.creationMarker, at: 0)
        try descriptor.synchronize()
        let file = try MappedFile(descriptor, readOnly: false, mappedLength: capacity)
        owner = file
        try file.grow(to: initialSize)
        // A leftover of an earlier, unfinished creation may be longer, and sparse; the ring ends
        // here.
        file.adoptSize(initialSize)
        try file.reserveHoles()
        let store = CacheStore(file: file, meta: meta, readOnly: false)
        try store.formatSharedPage()
        IndexSegment.format(in: file, at: dataStart, slotCount: HashTable.minimumSlotCount, byteCount: segmentBytes,
                            sequence: 1, now: now, seed: meta.checksumSeed)
        store.state.head = dataStart + segmentBytes
        store.state.tail = dataStart + segmentBytes
        store.state.spanBytes = 0
        store.state.nextSequence = 2
        // On the disk before a meta copy names them (FORMAT.md 2.7): a power cut then leaves the
        // marker or a whole file, never meta copies over pages not yet written.
        try file.flush()
        // Both copies start identical; from now on writes alternate between them.
        for page in 0..<FileLayout.metaPageCount {
            meta.encode(into: file.mutableBytes(at: page * pageSize, count: Meta.encodedSize))
        }
        try store.attachTables()
        try file.flush()
        try store.markInUse()
        return store
    }

    private static func openExisting(_ descriptor: FileDescriptor, meta: Meta, configuration: Configuration,
                                     soleWriter: Bool, alone: Bool, owner: inout MappedFile?) throws(LarderError) -> CacheStore {
        var meta = meta
        // A newer writer may have added things this code would not maintain: look, don't touch.
        let readOnly = configuration.readOnly || meta.writeVersion > FileLayout.formatVersion
        var metaChanged = false
        if alone, !readOnly, let requested = requestedCapacity(meta, configuration),
           requested != meta.capacity, requested >= meta.fileSize {
            // Growing is free; shrinking is possible while the file has not grown past the new
            // size. Only a sole writer may: every process maps the capacity it found.
            meta.capacity = requested
            metaChanged = true
        }
        // The standing limits need no new mapping: any sole writer may set them, beside read-only
        // handles, which take them up with the next view (FORMAT.md 2.6).
        if soleWriter, !readOnly, meta.withLimits(of: configuration) != meta {
            meta = meta.withLimits(of: configuration)
            metaChanged = true
        }
        let diskSize = try descriptor.size()
        let file = try MappedFile(descriptor, readOnly: readOnly, mappedLength: meta.capacity)
        owner = file
        let store = CacheStore(file: file, meta: meta, readOnly: readOnly)
        let truncated = diskSize < meta.fileSize
        let mayRepair = soleWriter && !readOnly
        if truncated {
            guard mayRepair else {
                throw LarderError(.corrupt, readOnly ? "the file is truncated; open it read-write once to recover it"
                                                     : "the file in use by other processes is truncated")
            }
            // The ring ends at the real end of the file, rounded up to a page: the records
            // wholly before the cut are kept, and the file is never shortened under a tool
            // inspecting it meanwhile. The header pages must exist before anything reads them.
            store.meta.fileSize = max(store.ringStart + meta.pageSize, FileLayout.alignUp(diskSize, meta.pageSize))
            file.adoptSize(min(diskSize, store.meta.fileSize))
            try file.grow(to: store.meta.fileSize)
            metaChanged = true
        } else {
            file.adoptSize(meta.fileSize)
        }
        store.viewChangeCounter = store.state.isFormatted ? store.state.changeCounter : 0
        guard mayRepair else {
            // Other writers are running this file, or this handle may not write: take the file
            // as it is. Readers check everything.
            guard store.state.isFormatted else {
                throw LarderError(.corrupt, readOnly ? "the file needs recovery; open it read-write once"
                                                     : "the file in use by other processes is damaged")
            }
            // With no read-write handle on the file anywhere, nothing changes until a writer
            // opens it (and ends any change it finds, 7.2): what the file says now stands.
            let othersWrite = try descriptor.isLockedByOthers(byte: LockByte.writers)
            if !othersWrite && store.state.indexEpoch & 1 != 0 {
                lrd_store_relaxed_u64(store.localWords.pointer(.abandonedEpoch), store.state.indexEpoch)
            }
            if (try? store.attachTables()) == nil {
                guard othersWrite else {
                    throw LarderError(.corrupt, "the file's index is damaged; open it read-write once to recover it")
                }
                // The meta copy read at open may have named a segment another writer has since
                // retired: take the view as it stands now, looking again while it is in flux.
                store.viewChangeCounter = store.state.changeCounter &- 1
            }
            try store.refreshView()
            return store
        }
        // Before anything is written through the map: a file copied sparse has holes that growth
        // never reserved.
        try file.reserveHoles()
        // A first valid sequence past the trusted limit would be counted on from (FORMAT.md 4.1):
        // recovery lowers it.
        let usable = !truncated && store.state.isFormatted && store.state.isClean && !meta.indexSegmentsOverlap
            && (try? store.attachTables()) != nil && store.sharedStateIsPlausible(lastSequence: RecordHeader.trustedSequenceLimit)
            && store.meta.firstValidSequence <= RecordHeader.trustedSequenceLimit
        let renumber = store.meta.sequence >= RecordHeader.trustedSequenceLimit
        // No other process has the file open for writing: the lock and the reader table start
        // afresh (a crashed process may have left either taken).
        try store.formatSharedPage()
        // Durably unclean before the first change: a crash from here on, even inside recovery,
        // is noticed by the next open. An open that changes nothing leaves that to the first
        // write (`acquireWriterLock`): opening a clean file then waits for no disk.
        if !usable || metaChanged || renumber { try store.markInUse() }
        if !usable {
            EngineTestHooks.recoveryAtOpen?(store.path)
            try store.rebuild()
            store.recoveredOnOpen = true
        } else {
            // A clean file's index is whole, whatever its epoch says: an odd one (a hostile file)
            // would make every miss wait out the readers' patience. The epoch moves on, never back.
            if store.state.indexEpoch & 1 != 0 { store.state.endIndexChange() }
            if metaChanged && !renumber { try store.writeMeta() }
        }
        if renumber { try store.renumberMetaCopies() }
        // A count limit lowered below the entries the file holds.
        store.trimToCountLimit()
        return store
    }

    /// Whether head, tail, span and the totals in the shared state could be right for this view
    /// (FORMAT.md 3.2), with a next sequence of at most `lastSequence`: a sole writer's open trusts
    /// a clean file only then (the trusted limit), and a writer that has taken the writer lock
    /// rebuilds the file unless so (`RecordHeader.heldSequenceLimit`, FORMAT.md 7.3).
    @inline(__always)
    func sharedStateIsPlausible(lastSequence: UInt64) -> Bool {
        state.figures.isPlausible(ringStart: ringStart, ringEnd: ringEnd, drainingSlotCount: draining?.slotCount ?? 0,
                                  firstValidSequence: meta.firstValidSequence, lastSequence: lastSequence)
    }

    /// Makes the shared-state page usable by this and later processes: formats it if it is not,
    /// and resets the writer lock and the reader slots. Only a sole writer may call this.
    private func formatSharedPage() throws(LarderError) {
        if !state.isFormatted { state.format() }
        // Readers of other processes may be reading: this open's changes count as a write, until
        // `finishSoleOpen()`.
        state.beginWrites()
        let rc = lrd_writer_lock_init(state.writerLockArea)
        if rc != 0 { throw SystemCall.error("initialize the writer lock", errno: rc).at(path) }
        readers.clear()
        changes.forgetWatchers()
    }

    /// Ends the write this open began (`formatSharedPage`). No writer of version 1 can be writing
    /// the file from here on if the meta page says version 2 or later: one opens such a file
    /// read-only (FORMAT.md 2.5). Then every writer moves the write count.
    private func finishSoleOpen() {
        state.countsWrites = meta.writeVersion >= 2
        state.endWrites()
    }

    /// What the two meta copies of a file say.
    private enum MetaCopies {
        /// An empty file, or a creation that never finished (the file starts with the creation
        /// marker: its meta pages were never written).
        case unformatted
        /// The copies whose magic and checksum hold, newest first.
        case valid([Meta])
    }

    /// Reads both meta copies.
    private static func readMetaCopies(_ descriptor: FileDescriptor, fileSize: Int) throws(LarderError) -> MetaCopies {
        let first = try descriptor.read(count: Meta.encodedSize, at: 0)
        var candidates: [Result<Meta, Meta.Rejection>] = [first.withUnsafeBytes { Meta.decode($0) }]
        // The second copy sits one page in; without a valid first copy, try every page size.
        let pageSizes: [Int]
        if case .success(let meta) = candidates[0], FileLayout.isValidPageSize(meta.pageSize) {
            pageSizes = [meta.pageSize]
        } else {
            pageSizes = Array(sequence(first: FileLayout.minimumPageSize) { $0 < FileLayout.maximumPageSize ? $0 * 2 : nil })
        }
        for size in pageSizes {
            let bytes = try descriptor.read(count: Meta.encodedSize, at: size)
            let decoded = bytes.withUnsafeBytes { Meta.decode($0) }
            if case .success(let meta) = decoded, meta.pageSize != size { continue }
            candidates.append(decoded)
        }
        let valid = candidates.compactMap { try? $0.get() }.sorted { $0.sequence > $1.sequence }
        if !valid.isEmpty { return .valid(valid) }
        if FileLayout.isUnfinishedCreation(firstBytes: first, fileSize: fileSize) { return .unformatted }
        let damaged = candidates.contains { if case .failure(.damaged) = $0 { return true } else { return false } }
        if damaged {
            throw LarderError(.corrupt, "both meta pages are damaged")
        }
        throw LarderError(.incompatible, "not a Larder cache file")
    }

    /// The newest meta copy this code can use. An older copy stands in when the newest one's
    /// values fail validation (a write that went wrong can leave that), never when the newest
    /// needs a newer reader: the file holds what that writer wrote since, which this code would
    /// misread, and as a sole writer recover or rewrite (FORMAT.md 2.5).
    private static func chooseMeta(_ copies: [Meta]) throws(LarderError) -> Meta {
        let newest = copies[0]
        guard newest.isReadable else { throw needsNewerReader(newest) }
        if let usable = copies.first(where: { $0.isReadable && $0.validationFailure() == nil }) { return usable }
        throw LarderError(.corrupt, "meta page: \(newest.validationFailure() ?? "invalid")")
    }

    private static func needsNewerReader(_ meta: Meta) -> LarderError {
        LarderError(.incompatible, "the file needs Larder format \(meta.readVersion) or newer; this build reads format \(FileLayout.formatVersion)")
    }

    /// Finds the index tables the meta page names, checking their segment headers.
    func attachTables() throws(LarderError) {
        try index.value.attach(in: file, meta: meta)
    }

    /// Clears the clean flag durably before any change, so that a crash from here on is noticed.
    /// Once per file: later writers of any process find the flag clear.
    private func markInUse() throws(LarderError) {
        state.isClean = false
        do throws(LarderError) {
            try file.flush(state.base, pageSize)
        } catch {
            // Not durably unclean: the next writer must try again rather than find the flag clear.
            state.isClean = true
            throw error
        }
    }

    /// Writes `meta` to both copies with meta sequences 1 and 2: a sole writer that found a meta
    /// sequence of 2^61 or more (a hostile file), so that its count never nears the limit
    /// (FORMAT.md 7.3). A crash in between leaves a copy with the old number, and the next sole
    /// writer renumbers again.
    func renumberMetaCopies() throws(LarderError) {
        meta.sequence = 0
        for _ in 0..<FileLayout.metaPageCount { try writeMeta() }
    }

    /// Writes `meta` to the copy not written last, with the next sequence number, and tells
    /// other processes (change counter).
    ///
    /// - Parameter durable: wait until the copy is on disk. Only a clear needs that (it must
    ///   never be undone); after growth or an index change, a copy lost to a power cut leaves
    ///   the older copy, which recovery copes with (a smaller ring, an index it re-creates).
    func writeMeta(durable: Bool = false) throws(LarderError) {
        meta.sequence += 1
        // This writer keeps the change ring and the standing limits: writers of version 1 may only
        // read from now on.
        meta.writeVersion = max(meta.writeVersion, FileLayout.formatVersion)
        meta.readVersion = meta.neededReadVersion
        let page = Int(meta.sequence % UInt64(FileLayout.metaPageCount))
        meta.encode(into: file.mutableBytes(at: page * pageSize, count: Meta.encodedSize))
        if durable { try file.flush(page * pageSize, pageSize) }
        state.changeCounter &+= 1
        // Before any later store: readers of other processes that see bytes written after this
        // point must also see the counter move (they check it after copying).
        lrd_fence_seq_cst()
        viewChangeCounter = state.changeCounter
    }

    /// The view of the file readers look through, as this process has it now. Inline: a
    /// writer's lookup reads a few of its fields, and loads only those.
    var currentView: ReadView {
        @inline(__always) get {
            let index = index.value.tables
            return ReadView(base: file.viewBase, limit: min(ringEnd, file.size), ringStart: ringStart, seed: seed,
                            firstValidSequence: meta.firstValidSequence, active: index.active, draining: index.draining,
                            changeCounter: viewChangeCounter)
        }
    }

    /// Lets this process's readers see the file as this writer left it. Under the exclusive
    /// in-process lock, at the end of every write and refresh.
    @inline(__always)
    func publishView() {
        let generation = viewGeneration &+ index.value.generation
        guard generation != publishedGeneration else { return }
        publishView(generation: generation)
    }

    @inline(never)
    private func publishView(generation: UInt64) {
        var view = currentView
        view.maximumAge = maximumAge
        publishedView.publish(view)
        publishedGeneration = generation
    }

    // MARK: - Other processes

    /// Whether another process changed the meta page since this view was taken.
    var viewIsCurrent: Bool { state.changeCounter == viewChangeCounter }

    /// Takes the meta page, tables and file size another process left. Under the exclusive
    /// in-process lock.
    func refreshView() throws(LarderError) {
        let counter = state.changeCounter
        guard counter != viewChangeCounter else { return }
        // A writer of another process may be writing the newest meta copy right now: a torn copy
        // fails its checksum, and the older copy may name an index segment already retired. Such
        // a view is transient; look again until it holds (or patience runs out).
        var retry = Retry()
        while true {
            if let failure = takeView(counter: counter) {
                if failure.code != .incompatible && retry.wait() { continue }
                throw failure
            }
            return
        }
    }

    /// One attempt at taking the view the meta page describes now; the error when it is not whole.
    ///
    /// Only a copy this handle could have opened with is taken: of a format it reads, with the
    /// capacity it mapped (only a process alone with the file changes it), and naming no bytes
    /// past the end of the file, which a writer extends before it names them. A hostile copy
    /// would otherwise point the view at pages past the file's end, whose access is `SIGBUS`.
    private func takeView(counter: UInt64) -> LarderError? {
        var newest: Meta?
        var newestWritten: Meta?
        for page in 0..<FileLayout.metaPageCount {
            guard case .success(let copy) = Meta.decode(file.bytes(at: page * pageSize, count: Meta.encodedSize)) else { continue }
            if copy.sequence > (newestWritten?.sequence ?? 0) { newestWritten = copy }
            if copy.isReadable, copy.validationFailure() == nil,
               copy.pageSize == pageSize, copy.capacity == meta.capacity, copy.checksumSeed == meta.checksumSeed,
               copy.sequence > (newest?.sequence ?? 0) {
                newest = copy
            }
        }
        if let newestWritten, !newestWritten.isReadable { return CacheStore.needsNewerReader(newestWritten).at(path) }
        guard let newest else {
            return LarderError(.corrupt, "both meta pages are unreadable", path: path)
        }
        if newest.fileSize > file.size {
            let diskSize = (try? file.descriptor.size()) ?? 0
            if diskSize < newest.fileSize {
                return LarderError(.corrupt, "the meta page names \(newest.fileSize) bytes; the file has \(diskSize)", path: path)
            }
        }
        let previous = (meta, file.size)
        meta = newest
        file.adoptSize(min(meta.fileSize, file.mappedLength))
        do {
            try attachTables()
        } catch {
            meta = previous.0
            file.adoptSize(previous.1)
            return error
        }
        viewChangeCounter = counter
        return nil
    }

    /// Runs `body` holding the writer lock that excludes the writers of every process. The lock
    /// of a writer that died holding it is taken over, and the file it may have left half-changed
    /// is rebuilt first.
    func withWriterLock<R>(_ body: () throws(LarderError) -> R) throws(LarderError) -> R {
        try acquireWriterLock()
        do throws(LarderError) {
            let outcome = try body()
            releaseWriterLock()
            return outcome
        } catch {
            releaseWriterLockAfterFailure()
            throw error
        }
    }

    /// `withWriterLock` in two halves, for the write path: takes the writer lock, repairs what a
    /// dead holder left, and takes up other processes' changes. On success the caller must call
    /// `releaseWriterLock()`; on failure the lock is not held.
    func acquireWriterLock() throws(LarderError) {
        try checkOpen()
        try acquireWriterLockWhileOpen()
    }

    /// `acquireWriterLock` for a caller that has checked that the store is open and was opened
    /// in this process (a `Cache` whose handle is open): `Cache`'s writes, which would otherwise
    /// check it twice. Inline there: its usual path makes no call.
    @inline(__always)
    func acquireWriterLockWhileOpen() throws(LarderError) {
        // The caller's check: a closed or inherited store would take a lock it may not hold.
        assert(!isClosed && !isInheritedAcrossFork)
        if isReadOnly { throw readOnlyError() }
        // The usual hold without a call, so that this function keeps no register across one.
        guard lrd_writer_lock_fast(state.writerLockArea) != 0 else { return try acquireWriterLockSlowly() }
        try holdWriterLock(rc: Int32(LRD_LOCK_ACQUIRED))
    }

    /// `acquireWriterLockWhileOpen` when the lock is held or waited for, its holder died, or
    /// glibc's own steps are needed: through `lrd_writer_lock`.
    @inline(never)
    private func acquireWriterLockSlowly() throws(LarderError) {
        let rc = lrd_writer_lock(state.writerLockArea, file.descriptor.rawValue)
        guard rc >= 0 else { return try writerLockFailed(rc) }
        try holdWriterLock(rc: rc)
    }

    /// The rest of taking the writer lock, `rc` the way it was taken.
    @inline(__always)
    private func holdWriterLock(rc: Int32) throws(LarderError) {
        // Odd until the release: readers' remembered checks (FORMAT.md 7.7.8) stop holding.
        let countAtLock = state.beginWrites()
        // Unmoved since this store's own release: no writer of any process has changed the
        // shared state since it was last checked (FORMAT.md 3.4, 7.7.1).
        let unchangedSinceRelease = countAtLock == writeCountAtRelease.value && state.countsWrites
        // Before anything here can fail: giving the lock back records the state as this process
        // leaves it, other processes' changes included.
        allocator.value.forgetDeadRoomIfOthersWrote()
        // The usual hold has nothing more to do; the rest is out of line, so that this function
        // keeps a small frame.
        if rc == LRD_LOCK_ACQUIRED && unchangedSinceRelease && !state.isClean && !state.needsRepair && viewIsCurrent {
            return
        }
        try settleWriterLock(rc: rc, unchangedSinceRelease: unchangedSinceRelease)
    }

    /// What taking the writer lock does beyond the usual hold: a dead holder's repair, the first
    /// change since a clean close, other processes' changes, the check of the shared state. On
    /// failure the lock is given back.
    @inline(never)
    private func settleWriterLock(rc: Int32, unchangedSinceRelease: Bool) throws(LarderError) {
        let area = state.writerLockArea
        do throws(LarderError) {
            if rc == LRD_LOCK_OWNER_DIED {
                // Remember the repair in the file until it is done, whatever happens to this process,
                // and make the lock usable again before anything here can fail.
                state.needsRepair = true
                lrd_writer_lock_consistent(area)
                // It may have died between writing a meta copy and moving the change counter
                // (writeMeta): take the newest copy whatever the counter says, before recovery
                // cuts the file back to the end of the ring it names. A copy that cannot be taken
                // leaves the view as it was, which recovery rebuilds from.
                _ = takeView(counter: viewChangeCounter)
            }
            // The first change since the file was last closed clean, by any process.
            if state.isClean { try markInUse() }
            if !viewIsCurrent { try refreshView() }
            // What a process that broke the format left in the shared state is not counted with.
            if state.needsRepair
                || !unchangedSinceRelease && !sharedStateIsPlausible(lastSequence: RecordHeader.heldSequenceLimit) { try rebuild() }
        } catch {
            releaseWriterLockAfterFailure()
            throw error
        }
    }

    /// The writer lock could not be taken (`rc`, a negative errno): not held.
    @inline(never)
    private func writerLockFailed(_ rc: Int32) throws(LarderError) {
        throw SystemCall.error("take the writer lock", errno: -rc).at(path)
    }

    /// Gives the writer lock back. Inline: its usual path makes no call.
    @inline(__always)
    func releaseWriterLock() {
        releaseWriterLock(afterFailure: false)
    }

    /// Releases the writer lock after a hold that failed: the next hold checks the shared state
    /// again, whatever the write count says.
    @inline(never)
    func releaseWriterLockAfterFailure() {
        releaseWriterLock(afterFailure: true)
    }

    /// The release itself. The count the next hold compares with is kept before the unlock, so
    /// that no other holder can come between them.
    @inline(__always)
    private func releaseWriterLock(afterFailure failed: Bool) {
        allocator.value.noteWriterStateAtRelease()
        let count = state.endWrites()
        writeCountAtRelease.value = failed ? 1 : count
        if lrd_writer_unlock_fast(state.writerLockArea) == 0 { releaseWriterLockSlowly() }
    }

    /// The unlock when the fast path does not apply, through glibc: out of line.
    @inline(never)
    private func releaseWriterLockSlowly() {
        lrd_writer_unlock(state.writerLockArea, file.descriptor.rawValue)
    }

    /// Rebuilds the ring and the index from the records (Recovery/Rebuilder.swift). Under the
    /// writer lock.
    func rebuild() throws(LarderError) {
        try Rebuilder.rebuild(self)
    }

    // MARK: - Closing

    /// Folds this process's counters into the file's. Under the writer lock.
    func foldCounters() {
        let hits = localWords.take(.hits)
        let misses = localWords.take(.misses)
        state.add(hits, to: .hits)
        state.add(misses, to: .misses)
    }

    /// Makes everything written so far durable (msync + fsync).
    func sync() throws(LarderError) {
        try checkOpen()
        guard !isReadOnly else { return }
        try withWriterLock { () throws(LarderError) in foldCounters() }
        try file.flush()
    }

    /// Whether this process is a child forked after the store was opened: then it leaves the
    /// store's file and locks to the parent (reads, writes and closes through it are refused
    /// by `Cache`, and `close()` releases nothing), and opens the file anew to use it.
    var isInheritedAcrossFork: Bool { lrd_fork_generation() != forkGeneration }

    /// In a child forked after the open: gives up the child's copy of the file's descriptor,
    /// once, unlocking nothing (the locks are the parent's). On Linux the locks belong to the
    /// open file description, which lives while any descriptor of it is open: a child holding
    /// its copy would keep the parent's locks after the parent is gone, and no writer would be
    /// alone with the file again (to mark it clean, compact or shrink it) until the child ended.
    /// The mapping stays, for whatever still holds the store.
    func releaseInheritedDescriptor() {
        guard isInheritedAcrossFork, lrd_cas_u64(localWords.pointer(.descriptorReleased), 0, 1) != 0 else { return }
        file.descriptor.retire()
    }

    /// Flushes and releases the file; the last writer to close it marks it clean. Idempotent.
    /// In a child forked after the open, does nothing: the file's locks are the parent's.
    func close() throws(LarderError) {
        guard !isClosed else { return }
        defer { isClosed = true }
        guard !isInheritedAcrossFork else { return }
        lrd_store_seq_cst_u64(localWords.pointer(.closing), 1)
        let descriptor = file.descriptor
        _ = try? descriptor.lock(byte: LockByte.transition, isReadOnly ? .shared : .exclusive, wait: true)
        defer {
            _ = try? descriptor.lock(byte: LockByte.users, .unlock, wait: false)
            _ = try? descriptor.lock(byte: LockByte.writers, .unlock, wait: false)
            _ = try? descriptor.lock(byte: LockByte.transition, .unlock, wait: false)
            descriptor.retire()
        }
        guard !isReadOnly else { return }
        try withWriterLock { () throws(LarderError) in foldCounters() }
        try file.flush()
        // The clean flag is the last writer's to set: with the transition lock held, nobody can
        // join meanwhile.
        if try descriptor.lock(byte: LockByte.writers, .exclusive, wait: false) {
            state.isClean = true
            try file.flush(state.base, pageSize)
        }
    }

    func checkOpen() throws(LarderError) {
        if isClosed || isInheritedAcrossFork { throw closedError() }
    }

    /// Why a handle cannot be used: closed, or opened by the parent of this forked process.
    @inline(never)
    func closedError() -> LarderError {
        guard isInheritedAcrossFork else { return LarderError(.closed, "the cache is closed", path: path) }
        return LarderError(.closed, "the cache was opened before this process was forked: a child process opens the file again to use it", path: path)
    }

    func checkWritable() throws(LarderError) {
        try checkOpen()
        if isReadOnly { throw readOnlyError() }
    }

    @inline(never)
    private func readOnlyError() -> LarderError {
        if meta.writeVersion > FileLayout.formatVersion {
            return LarderError(.readOnly, "a newer Larder wrote this file (format version \(meta.writeVersion)): this one may read it, not change it", path: path)
        }
        return LarderError(.readOnly, "the cache was opened read-only", path: path)
    }
}

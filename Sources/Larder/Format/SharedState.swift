/// The shared-state page (page 2): what changes on every write, updated in place.
///
/// None of it is needed to find data after a crash: an unclean open rebuilds the ring position,
/// the counts and the index from the self-describing records. That is why these fields carry no
/// checksum and are not double-buffered like the meta page.
struct SharedState {
    let file: MappedFile
    /// File offset of the page.
    let base: Int

    enum Field {
        static let magic = 0, layoutVersion = 8, flags = 12
        /// 128 bytes for a process-shared writer lock (robust mutex where the platform has one).
        static let writerLock = 64, writerLockSize = 128
        static let head = 192, tail = 200, spanBytes = 208, nextSequence = 216
        static let entryCount = 224, liveRawBytes = 232, liveStoredBytes = 240, liveRecordBytes = 248
        static let migrationCursor = 256, changeCounter = 264
        /// Odd while the writer rearranges index slots (a key may be briefly invisible); readers
        /// that miss retry when it moved.
        static let indexEpoch = 272
        /// Number of occupied reader slots (zero-copy reads in progress), all processes.
        static let pinCount = 280
        /// Persistent statistics, 8 bytes each from here, in `Counter` order.
        static let counters = 320
        /// Reader slots, 32 bytes each to the end of the page: owner pid, pinned [start, end).
        static let readerTable = 512
    }

    static let readerSlotSize = 32

    static let layoutVersion: UInt32 = 1

    /// Bit 0 of `flags`: the last process to close the file closed it cleanly.
    static let cleanFlag: UInt32 = 1
    /// Bit 1 of `flags`: a writer died holding the writer lock; the next writer rebuilds.
    static let repairFlag: UInt32 = 2

    enum Counter: Int, CaseIterable {
        case hits, misses, inserts, updates, removals, evictions, expirations, relocations, recoveries
        var offset: Int { Field.counters + rawValue * 8 }
    }

    init(file: MappedFile, pageSize: Int) {
        self.file = file
        self.base = FileLayout.statePage * pageSize
    }

    private func get(_ field: Int) -> UInt64 { file.load(UInt64.self, at: base + field) }
    private func set(_ field: Int, _ value: UInt64) { file.store(value, at: base + field) }

    var isFormatted: Bool {
        file.load(UInt64.self, at: base + Field.magic) == FileLayout.stateMagic
            && file.load(UInt32.self, at: base + Field.layoutVersion) == SharedState.layoutVersion
    }

    /// Writes a fresh page: magic, version, flags, zeroed ring fields and counters. The writer
    /// lock, the reader slots and the change counter are left alone: on a page another process
    /// is using, they are live.
    func format() {
        file.zero(base, Field.writerLock)
        file.zero(base + Field.head, Field.changeCounter - Field.head)
        file.zero(base + Field.counters, Field.readerTable - Field.counters)
        set(Field.magic, FileLayout.stateMagic)
        file.store(SharedState.layoutVersion, at: base + Field.layoutVersion)
    }

    var isClean: Bool {
        get { file.load(UInt32.self, at: base + Field.flags) & SharedState.cleanFlag != 0 }
        nonmutating set {
            let flags = file.load(UInt32.self, at: base + Field.flags)
            file.store(newValue ? flags | SharedState.cleanFlag : flags & ~SharedState.cleanFlag, at: base + Field.flags)
        }
    }

    var needsRepair: Bool {
        get { file.load(UInt32.self, at: base + Field.flags) & SharedState.repairFlag != 0 }
        nonmutating set {
            let flags = file.load(UInt32.self, at: base + Field.flags)
            file.store(newValue ? flags | SharedState.repairFlag : flags & ~SharedState.repairFlag, at: base + Field.flags)
        }
    }

    var head: Int { get { Int(truncatingIfNeeded: get(Field.head)) } nonmutating set { set(Field.head, UInt64(newValue)) } }
    var tail: Int { get { Int(truncatingIfNeeded: get(Field.tail)) } nonmutating set { set(Field.tail, UInt64(newValue)) } }
    /// Bytes from the tail to the head in ring order, everything included.
    var spanBytes: Int { get { Int(truncatingIfNeeded: get(Field.spanBytes)) } nonmutating set { set(Field.spanBytes, UInt64(newValue)) } }
    var nextSequence: UInt64 { get { get(Field.nextSequence) } nonmutating set { set(Field.nextSequence, newValue) } }
    var entryCount: Int { get { Int(truncatingIfNeeded: get(Field.entryCount)) } nonmutating set { set(Field.entryCount, UInt64(newValue)) } }
    var liveRawBytes: Int { get { Int(truncatingIfNeeded: get(Field.liveRawBytes)) } nonmutating set { set(Field.liveRawBytes, UInt64(newValue)) } }
    var liveStoredBytes: Int { get { Int(truncatingIfNeeded: get(Field.liveStoredBytes)) } nonmutating set { set(Field.liveStoredBytes, UInt64(newValue)) } }
    var liveRecordBytes: Int { get { Int(truncatingIfNeeded: get(Field.liveRecordBytes)) } nonmutating set { set(Field.liveRecordBytes, UInt64(newValue)) } }
    var migrationCursor: Int { get { Int(truncatingIfNeeded: get(Field.migrationCursor)) } nonmutating set { set(Field.migrationCursor, UInt64(newValue)) } }
    var changeCounter: UInt64 {
        get { file.loadAcquire64(at: base + Field.changeCounter) }
        nonmutating set { file.storeRelease64(newValue, at: base + Field.changeCounter) }
    }

    var indexEpoch: UInt64 { file.loadAcquire64(at: base + Field.indexEpoch) }

    /// Brackets a rearrangement of index slots (see `Field.indexEpoch`).
    func beginIndexChange() { file.storeSequentiallyConsistent64(indexEpoch | 1, at: base + Field.indexEpoch) }
    func endIndexChange() { file.storeRelease64((indexEpoch | 1) &+ 1, at: base + Field.indexEpoch) }

    func counter(_ counter: Counter) -> UInt64 { get(counter.offset) }
    func add(_ amount: UInt64, to counter: Counter) { set(counter.offset, get(counter.offset) &+ amount) }
}

import CLarderSupport

/// The shared-state page (page 2): what changes on every write, updated in place.
///
/// None of it is needed to find data after a crash: an unclean open rebuilds the ring position,
/// the counts and the index from the self-describing records. That is why these fields carry no
/// checksum and are not double-buffered like the meta page.
///
/// Holds the page's address rather than the file object, so that the hot paths copy a plain
/// pointer and no reference count. Invariant: used only while the `MappedFile` it was made from
/// is alive (the `CacheStore` owns both).
struct SharedState {
    /// File offset of the page.
    let base: Int
    /// The page in the mapping.
    let page: UnsafeMutableRawPointer

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
        /// Odd while a writer holds the writer lock; moves on by two with every hold (FORMAT.md 3.1).
        static let writeCount = 304
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
    /// Bit 2 of `flags`: every writer of the file moves `Field.writeCount` (none of version 1
    /// can be writing it). Set or cleared by a sole writer's open.
    static let countedWritesFlag: UInt32 = 4

    enum Counter: Int, CaseIterable {
        case hits, misses, inserts, updates, removals, evictions, expirations, relocations, recoveries
        var offset: Int { Field.counters + rawValue * 8 }
    }

    /// The page lies inside the mapping (which covers at least the capacity); callers read or
    /// write it only once the file holds it.
    init(file: MappedFile, pageSize: Int) {
        base = FileLayout.statePage * pageSize
        page = file.sharedPage(at: base, length: pageSize)
    }

    @inline(__always)
    private func word(_ field: Int) -> UInt64 { UInt64(littleEndian: lrd_load_relaxed_u64(page + field)) }
    @inline(__always)
    private func setWord(_ field: Int, _ value: UInt64) { lrd_store_relaxed_u64(page + field, value.littleEndian) }
    private var flags: UInt32 {
        get { UInt32(littleEndian: page.load(fromByteOffset: Field.flags, as: UInt32.self)) }
        nonmutating set { page.storeBytes(of: newValue.littleEndian, toByteOffset: Field.flags, as: UInt32.self) }
    }

    var isFormatted: Bool {
        word(Field.magic) == FileLayout.stateMagic
            && UInt32(littleEndian: page.load(fromByteOffset: Field.layoutVersion, as: UInt32.self)) == SharedState.layoutVersion
    }

    /// The writer lock's bytes (`Field.writerLockSize` of them).
    var writerLockArea: UnsafeMutableRawPointer { page + Field.writerLock }

    /// Writes a fresh page: magic, version, flags, zeroed ring fields and counters. The writer
    /// lock, the reader slots and the change counter are left alone: on a page another process
    /// is using, they are live.
    func format() {
        page.initializeMemory(as: UInt8.self, repeating: 0, count: Field.writerLock)
        (page + Field.head).initializeMemory(as: UInt8.self, repeating: 0, count: Field.changeCounter - Field.head)
        (page + Field.counters).initializeMemory(as: UInt8.self, repeating: 0, count: Field.readerTable - Field.counters)
        setWord(Field.magic, FileLayout.stateMagic)
        page.storeBytes(of: SharedState.layoutVersion.littleEndian, toByteOffset: Field.layoutVersion, as: UInt32.self)
    }

    var isClean: Bool {
        get { flags & SharedState.cleanFlag != 0 }
        nonmutating set { flags = newValue ? flags | SharedState.cleanFlag : flags & ~SharedState.cleanFlag }
    }

    var needsRepair: Bool {
        get { flags & SharedState.repairFlag != 0 }
        nonmutating set { flags = newValue ? flags | SharedState.repairFlag : flags & ~SharedState.repairFlag }
    }

    // The words below come from the file: a damaged or hostile one may hold any value in them.
    // They are stored truncating and updated with wrapping arithmetic (`&+=`); a writer checks
    // them (`Figures.isPlausible`) each time it takes the writer lock, before it counts with
    // them, and an open before it trusts a clean file.
    var head: Int { get { Int(truncatingIfNeeded: word(Field.head)) } nonmutating set { setWord(Field.head, UInt64(truncatingIfNeeded: newValue)) } }
    var tail: Int { get { Int(truncatingIfNeeded: word(Field.tail)) } nonmutating set { setWord(Field.tail, UInt64(truncatingIfNeeded: newValue)) } }
    /// Bytes from the tail to the head in ring order, everything included.
    var spanBytes: Int { get { Int(truncatingIfNeeded: word(Field.spanBytes)) } nonmutating set { setWord(Field.spanBytes, UInt64(truncatingIfNeeded: newValue)) } }
    var nextSequence: UInt64 { get { word(Field.nextSequence) } nonmutating set { setWord(Field.nextSequence, newValue) } }
    var entryCount: Int { get { Int(truncatingIfNeeded: word(Field.entryCount)) } nonmutating set { setWord(Field.entryCount, UInt64(truncatingIfNeeded: newValue)) } }
    var liveRawBytes: Int { get { Int(truncatingIfNeeded: word(Field.liveRawBytes)) } nonmutating set { setWord(Field.liveRawBytes, UInt64(truncatingIfNeeded: newValue)) } }
    var liveStoredBytes: Int { get { Int(truncatingIfNeeded: word(Field.liveStoredBytes)) } nonmutating set { setWord(Field.liveStoredBytes, UInt64(truncatingIfNeeded: newValue)) } }
    var liveRecordBytes: Int { get { Int(truncatingIfNeeded: word(Field.liveRecordBytes)) } nonmutating set { setWord(Field.liveRecordBytes, UInt64(truncatingIfNeeded: newValue)) } }
    var migrationCursor: Int { get { Int(truncatingIfNeeded: word(Field.migrationCursor)) } nonmutating set { setWord(Field.migrationCursor, UInt64(truncatingIfNeeded: newValue)) } }
    var changeCounter: UInt64 {
        get { lrd_load_acquire_u64(page + Field.changeCounter) }
        nonmutating set { lrd_store_release_u64(page + Field.changeCounter, newValue) }
    }

    var indexEpoch: UInt64 { lrd_load_acquire_u64(page + Field.indexEpoch) }

    /// Whether `writeCount` counts every writer's changes (`countedWritesFlag`).
    var countsWrites: Bool {
        get { flags & SharedState.countedWritesFlag != 0 }
        nonmutating set { flags = newValue ? flags | SharedState.countedWritesFlag : flags & ~SharedState.countedWritesFlag }
    }

    /// The write count (acquire): odd while a writer may be changing the file.
    @inline(__always)
    var writeCount: UInt64 { lrd_load_acquire_u64(page + Field.writeCount) }

    /// Opens a hold of the writer lock: the count turns odd before the first change is stored.
    /// One left odd by a writer that died takes the next odd value, as the index epoch does.
    /// Returns the count it found.
    @inline(__always) @discardableResult
    func beginWrites() -> UInt64 {
        let count = lrd_load_relaxed_u64(page + Field.writeCount)
        lrd_store_relaxed_u64(page + Field.writeCount, count & 1 == 0 ? count &+ 1 : count &+ 2)
        // The odd value before any change, as a sequence lock's writer orders it.
        lrd_fence_release()
        return count
    }

    /// Ends a hold: the next even value, after every change (release). Returns it.
    @inline(__always) @discardableResult
    func endWrites() -> UInt64 {
        let count = (lrd_load_relaxed_u64(page + Field.writeCount) | 1) &+ 1
        lrd_store_release_u64(page + Field.writeCount, count)
        return count
    }

    /// The words FORMAT.md 3.2 checks, each loaded once: a check of these values holds for them
    /// whatever another process writes into the page meanwhile.
    struct Figures {
        var head, tail, spanBytes, entryCount, liveRawBytes, liveStoredBytes, liveRecordBytes, migrationCursor: Int
        var nextSequence: UInt64

        /// Whether head, tail, span, migration cursor, next sequence and live totals could be
        /// right for a ring `[ringStart, ringEnd)` whose draining index has `drainingSlotCount`
        /// slots (0 for none): FORMAT.md 3.2. `firstValidSequence` is the meta page's: below it,
        /// every record written would be void, stored and never found. The next sequence may be at
        /// most `lastSequence`: the trusted limit for an open, which counts on from it; the limit
        /// for a writer holding the lock (`RecordHeader.heldSequenceLimit`), which counts on from
        /// what an open trusted, past the trusted limit if need be. A writer checks this each
        /// time it takes the writer lock, so that what a process that broke the format left in
        /// the page is never counted with (it could overflow, or send a loop on for ever).
        @inline(__always)
        func isPlausible(ringStart: Int, ringEnd: Int, drainingSlotCount: Int, firstValidSequence: UInt64,
                         lastSequence: UInt64 = RecordHeader.trustedSequenceLimit) -> Bool {
            let ring = ringEnd &- ringStart
            // The live totals: what the span holds, entries of at least a header each.
            return within(head, from: ringStart, width: ring) && within(tail, from: ringStart, width: ring)
                && (head | tail) & (FileLayout.recordAlignment - 1) == 0 && within(spanBytes, from: 0, width: ring)
                && within(migrationCursor, from: 0, width: drainingSlotCount)
                && nextSequence <= lastSequence && nextSequence >= firstValidSequence
                && within(liveRecordBytes, from: 0, width: spanBytes)
                && within(entryCount, from: 0, width: liveRecordBytes / RecordHeader.size)
                && liveRawBytes >= 0 && within(liveStoredBytes, from: 0, width: liveRecordBytes)
        }

        /// As unsigned differences, one comparison checks both ends of a range.
        @inline(__always)
        private func within(_ value: Int, from low: Int, width: Int) -> Bool {
            UInt(bitPattern: value &- low) <= UInt(bitPattern: width)
        }
    }

    @inline(__always)
    var figures: Figures {
        Figures(head: head, tail: tail, spanBytes: spanBytes, entryCount: entryCount, liveRawBytes: liveRawBytes,
                liveStoredBytes: liveStoredBytes, liveRecordBytes: liveRecordBytes, migrationCursor: migrationCursor,
                nextSequence: nextSequence)
    }

    /// Brackets a rearrangement of index slots (see `Field.indexEpoch`). An epoch that is odd
    /// already was left so by a writer that died in its bracket, and readers may have stopped
    /// waiting for that value: the bracket takes the next odd one, which they wait for again.
    func beginIndexChange() {
        let epoch = indexEpoch
        lrd_store_seq_cst_u64(page + Field.indexEpoch, epoch & 1 == 0 ? epoch &+ 1 : epoch &+ 2)
    }
    func endIndexChange() { lrd_store_release_u64(page + Field.indexEpoch, (indexEpoch | 1) &+ 1) }

    /// Adds a new live record to the counts.
    @inline(__always)
    func addToLiveCounts(_ header: RecordHeader) {
        liveRawBytes &+= header.rawLength
        liveStoredBytes &+= header.storedLength
        liveRecordBytes &+= header.totalSize
    }

    /// Takes a record that is no longer live out of the counts.
    @inline(__always)
    func removeFromLiveCounts(_ header: RecordHeader) {
        liveRawBytes &-= header.rawLength
        liveStoredBytes &-= header.storedLength
        liveRecordBytes &-= header.totalSize
    }

    /// Puts the record `new` in the counts in place of `old`: one change of each count.
    @inline(__always)
    func replaceInLiveCounts(_ old: RecordHeader, with new: RecordHeader) {
        liveRawBytes &+= new.rawLength &- old.rawLength
        liveStoredBytes &+= new.storedLength &- old.storedLength
        liveRecordBytes &+= new.totalSize &- old.totalSize
    }

    func counter(_ counter: Counter) -> UInt64 { word(counter.offset) }
    func add(_ amount: UInt64, to counter: Counter) { setWord(counter.offset, word(counter.offset) &+ amount) }
}

import CLarderSupport
#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Reads. Every method here is a reader: it runs concurrently with other readers and with the
/// writers of every process. Point reads take no lock at all and work through a `ReadView`
/// (listings, which take each step under the shared in-process lock, are in `EntryListing`).
/// Nothing is written but access bits, pins and this process's hit and miss counters.
extension CacheStore {
    @inline(__always)
    func validateKey(_ key: UnsafeRawBufferPointer) throws(LarderError) {
        if key.count <= 0 || key.count > CacheStore.maximumKeyLength { throw invalidKey(key) }
    }

    @inline(never)
    private func invalidKey(_ key: UnsafeRawBufferPointer) -> LarderError {
        key.count <= 0 ? LarderError(.invalidArgument, "the key is empty", path: path)
            : LarderError(.tooLarge, "the key is \(key.count) bytes; the limit is \(CacheStore.maximumKeyLength)", path: path)
    }

    /// How long a read keeps starting over while writers of other processes change what it
    /// looks at (a recovery after a dead writer takes a while), in milliseconds.
    static let readPatience: UInt64 = 5_000

    /// A read's retries: a few spins, then yielding, then short sleeps, within `readPatience`.
    struct Retry {
        var attempts = 0
        var started: UInt64 = 0
        /// The odd index epoch seen last, and since when (monotonic milliseconds): a writer that
        /// stays in one bracket for a whole patience has died in it. Another odd value is another
        /// bracket (a repair's, say), which has to be waited out on its own.
        private var oddEpoch: UInt64 = 0
        private var oddSince: UInt64 = 0

        /// Notes the index epoch an attempt read.
        mutating func note(epoch: UInt64) {
            guard epoch & 1 != 0, epoch != oddEpoch else { return }
            oddEpoch = epoch
            oddSince = SystemCall.monotonicMilliseconds()
        }

        /// Whether `epoch` is odd and has been the epoch for a whole patience, as far as the
        /// attempts noted saw: its writer died in its bracket.
        func hasWaitedOut(_ epoch: UInt64) -> Bool {
            epoch & 1 != 0 && epoch == oddEpoch
                && SystemCall.monotonicMilliseconds() - oddSince >= CacheStore.readPatience
        }

        /// Waits a little before the next attempt; false once patience has run out.
        mutating func wait() -> Bool {
            attempts += 1
            if attempts <= 16 { return true }
            if attempts == 17 { started = SystemCall.monotonicMilliseconds() }
            if attempts < 200 {
                sched_yield()
            } else {
                usleep(100)
            }
            return SystemCall.monotonicMilliseconds() - started < CacheStore.readPatience
        }
    }

    /// Reader: whether the record `found` through `view` still is what it was
    /// (`ReadView.isUnchanged`).
    @inline(__always)
    func isUnchanged(_ found: FoundEntry, in view: ReadView) -> Bool {
        isUnchanged(at: found.offset, sequence: found.header.sequence, in: view)
    }

    /// `isUnchanged` for the record at `offset`, numbered `sequence` when it was checked.
    @inline(__always)
    func isUnchanged(at offset: Int, sequence: UInt64, in view: ReadView) -> Bool {
        view.isUnchanged(at: offset, sequence: sequence, state: state)
    }

    /// Reader: the view this process published last, or nil when the file's change counter has
    /// moved past it (another process changed the meta page, which the view must take up first).
    @inline(__always)
    func publishedViewIfCurrent() -> ReadView? {
        let view = publishedView.load()
        return state.changeCounter == view.changeCounter ? view : nil
    }

    /// Reader: one consistent look at `key`'s entry. Retries while a writer in another process
    /// rearranges the index; nil when the key is absent. A rearrangement that never ends (its
    /// writer died in the middle and no writer came after) is waited for only so long: the
    /// answer is then a miss, which a cache may always give, never a wrong value.
    @inline(__always)
    private func find(_ key: UnsafeRawBufferPointer, in view: ReadView, valueFollows: Bool,
                      retry: inout Retry) throws(LarderError) -> FoundEntry? {
        let hash = KeyHash(key)
        while true {
            let epoch = state.indexEpoch
            if let found = view.lookup(key, hash: hash, migrationCursor: state.migrationCursor, valueFollows: valueFollows) {
                return found
            }
            if indexStayedSettled(since: epoch) {
                // Another process may have moved the index elsewhere since this view was taken.
                if state.changeCounter != view.changeCounter { throw LarderError.staleView }
                return nil
            }
            if writerDied(in: epoch, noting: &retry) && state.indexEpoch == epoch { return nil }
            guard retry.wait() else {
                // A miss; and if the change stood all along (which the wait may have just made
                // true), it is recorded as a dead writer's.
                _ = writerDied(in: epoch, noting: &retry)
                return nil
            }
        }
    }

    /// Reader: whether `epoch`, read from the file, is the odd epoch of a writer that died in its
    /// bracket: one a read of this process already found so, or one that `retry`'s attempts have
    /// now seen stand for a whole patience. The second kind is recorded, so that until a writer
    /// comes and ends the change (under another epoch, waited for anew), later reads do not wait
    /// on it again. Point reads then answer a miss, listings leave out what it left half written.
    func writerDied(in epoch: UInt64, noting retry: inout Retry) -> Bool {
        guard epoch & 1 != 0 else { return false }
        if epoch == localWords.load(.abandonedEpoch) { return true }
        retry.note(epoch: epoch)
        guard retry.hasWaitedOut(epoch) else { return false }
        if state.indexEpoch == epoch { lrd_store_relaxed_u64(localWords.pointer(.abandonedEpoch), epoch) }
        return true
    }

    /// Reader, under the in-process read lock with a current view: one attempt at the listing's
    /// next step (`EntryListing.takeNextStep`). Returns false when a writer of another process
    /// was in the way: the caller backs off (`backOff()`, with no lock held) and calls again.
    ///
    /// - Throws: `LarderError.staleView` when another process changed the meta page meanwhile
    ///   (the caller takes up the change and calls again).
    func listNextEntries(_ listing: inout EntryListing) throws(LarderError) -> Bool {
        try checkOpen()
        let view = currentView
        let epoch = state.indexEpoch
        // A dead writer's file holds still: records it left half written are taken for removed.
        let abandoned = writerDied(in: epoch, noting: &listing.retry)
        return try listing.takeNextStep(through: view, file: file, state: state, epoch: epoch, abandoned: abandoned,
                                        maximumAge: maximumAge, stepHook: testHooks.listingStep)
    }

    /// Reader: whether no writer of any process was rearranging the index when `epoch` was read,
    /// nor has begun to since: a lookup that found nothing in between is a true miss.
    @inline(__always)
    private func indexStayedSettled(since epoch: UInt64) -> Bool {
        epoch & 1 == 0 && state.indexEpoch == epoch
    }

    /// Reader: `find` for a read of the value, counting a miss when the key is absent.
    @inline(__always)
    private func findCountingMiss(_ key: UnsafeRawBufferPointer, in view: ReadView, retry: inout Retry) throws(LarderError) -> FoundEntry? {
        let found = try find(key, in: view, valueFollows: true, retry: &retry)
        if found == nil { countMiss() }
        return found
    }

    /// Waits before a read starts over because its record changed while it was read; when the
    /// change was another process's meta write, the caller takes up the new view first.
    private func backOff(_ retry: inout Retry, in view: ReadView) throws(LarderError) {
        if state.changeCounter != view.changeCounter { throw LarderError.staleView }
        if !retry.wait() {
            throw LarderError(.busy, "the entry kept changing under concurrent writers", path: path)
        }
    }

    private func damaged(_ found: FoundEntry) -> LarderError {
        LarderError(.corrupt, "the stored value for this key is damaged (checksum mismatch at offset \(found.offset))", path: path)
    }

    @inline(__always)
    private func countHit(_ found: FoundEntry, in view: ReadView) {
        countHit(at: found.offset, flags: found.header.flags, keyLength: found.header.keyLength, in: view)
    }

    /// `countHit` for the live entry at `offset`, with the flags and key length it was checked with.
    @inline(__always)
    private func countHit(at offset: Int, flags: UInt8, keyLength: Int, in view: ReadView) {
        // A read-only mapping cannot take the access bit: such readers do not count as recency.
        if !isReadOnly { RecordHeader.markVisited(view.base + offset, flags: flags, keyLength: keyLength) }
        localWords.increment(.hits)
    }

    /// Reader: pushes back the expiry of a sliding entry it is about to return, before its final
    /// re-check (FORMAT.md 4.8): if a writer marks the entry dead first, the re-check fails and
    /// nothing is returned; if the push lands first, no writer reclaims the entry as expired.
    /// Read-only mappings cannot push.
    @inline(__always)
    func pushExpiry(_ found: FoundEntry, in view: ReadView) {
        guard found.header.isSliding, !isReadOnly else { return }
        RecordHeader.pushExpiry(view.base + found.offset, header: found.header, now: SystemCall.nowMilliseconds())
    }

    @inline(__always)
    private func countMiss() {
        localWords.increment(.misses)
    }

    /// Reader: copies the value of `key`, as callers see it (decompressed), into the buffer that
    /// `destination` returns for its length, and checks it: the record did not change while it
    /// was copied (writers of other processes do not wait for readers), and the checksum holds
    /// over the bytes copied. `destination` may return nil to skip the copy (a buffer too small);
    /// it may be called again when a read starts over.
    ///
    /// The usual read (a value stored as it is, a buffer large enough, nothing changing meanwhile)
    /// and the usual miss are answered inline by one attempt; everything else, and anything that
    /// goes wrong, is left to `copyValueCarefully`, which starts over from the view this process
    /// published last (so `view` must be one `Cache.read` took, and the read may end in
    /// `.staleView` for `Cache.read` to refresh and repeat). The split is for speed:
    /// the instructions a read runs after its record arrives from memory decide whether the
    /// processor reaches the next read's first load while it waits (Benchmarks/ANALYSIS.md).
    ///
    /// - Parameter includingExpired: Return an expired entry too, while it is still in the file
    ///   (the stale copy an offline-first read falls back on).
    /// - Returns: the value's length, or nil for a missing or expired key.
    /// - Throws: `.corrupt` for a damaged record.
    @inline(__always)
    func copyValue(forKey key: UnsafeRawBufferPointer, in view: ReadView, includingExpired: Bool = false,
                   into destination: (Int) -> UnsafeMutableRawBufferPointer?) throws(LarderError) -> Int? {
        try validateKey(key)
        switch attemptCopy(forKey: key, in: view, includingExpired: includingExpired, into: destination) {
        case .answered(let length): return length
        case .absent: return nil
        case .unsettled: return try copyValueCarefully(forKey: key, includingExpired: includingExpired, into: destination)
        }
    }

    /// Reader: the usual read into a buffer of the caller's, probed in Swift through the view
    /// last published, for what `lrd_view_get` (`Cache.copyValue(forKeyBytes:into:)`) did not
    /// settle: while the index migrates (two tables), past a slot of the key's tag that was not
    /// its entry, or an entry it did not copy. Counts the hit or the miss it answers; anything
    /// else is `.unsettled`, for the careful read.
    @inline(never)
    func attemptCopyProbingOn(forKey key: UnsafeRawBufferPointer,
                              toBuffer buffer: UnsafeMutableRawBufferPointer) -> Attempt<Int> {
        guard let view = publishedViewIfCurrent() else { return .unsettled }
        return attemptCopy(forKey: key, in: view, toBuffer: buffer)
    }

    /// `attemptCopyProbingOn(forKey:toBuffer:)` through `view`.
    @inline(__always)
    func attemptCopy(forKey key: UnsafeRawBufferPointer, in view: ReadView,
                     toBuffer buffer: UnsafeMutableRawBufferPointer) -> Attempt<Int> {
        guard key.count > 0, key.count <= CacheStore.maximumKeyLength else { return .unsettled }
        let epoch = state.indexEpoch
        guard let copy = view.copyEntry(key, hash: KeyHash(key), migrationCursor: state.migrationCursor, into: buffer) else {
            guard indexStayedSettled(since: epoch), state.changeCounter == view.changeCounter else { return .unsettled }
            countMiss()
            return .absent
        }
        guard copy.isCopied, isUnchanged(at: copy.offset, sequence: copy.sequence, in: view) else { return .unsettled }
        countHit(at: copy.offset, flags: copy.flags, keyLength: key.count, in: view)
        return .answered(copy.length)
    }

    /// What one inlined attempt at a read came to: its answer (the entry found, the value's
    /// length copied), or one of the two ways it can end without one.
    enum Attempt<Answer> {
        case answered(Answer)
        /// No entry, in a settled index of the view's meta copy (counted as a miss).
        case absent
        /// Anything else (the index or the meta page changed meanwhile, a value stored
        /// compressed, ...): the careful read decides.
        case unsettled
    }

    /// Reader: the first lookup of a read of the value, answering the usual miss inline (the
    /// loop with retries in `find` costs a miss more than the miss itself).
    @inline(__always)
    private func firstLookup(_ key: UnsafeRawBufferPointer, in view: ReadView) -> Attempt<FoundEntry> {
        let epoch = state.indexEpoch
        guard let found = view.lookup(key, hash: KeyHash(key), migrationCursor: state.migrationCursor, valueFollows: true) else {
            guard indexStayedSettled(since: epoch), state.changeCounter == view.changeCounter else { return .unsettled }
            countMiss()
            return .absent
        }
        return .answered(found)
    }

    /// Reader: one attempt at the usual read. Counts the hit or the miss it answers.
    @inline(__always)
    private func attemptCopy(forKey key: UnsafeRawBufferPointer, in view: ReadView, includingExpired: Bool,
                             into destination: (Int) -> UnsafeMutableRawBufferPointer?) -> Attempt<Int> {
        let found: FoundEntry
        switch firstLookup(key, in: view) {
        case .answered(let entry): found = entry
        case .absent: return .absent
        case .unsettled: return .unsettled
        }
        let header = found.header
        // A value stored compressed, or one whose expiry slides, is the careful read's.
        guard header.flags & (RecordHeader.compressedFlag | RecordHeader.slidingFlag) == 0,
              includingExpired ? view.maximumAge == 0 : !header.isExpiredNow(maximumAge: view.maximumAge), let target = destination(header.rawLength),
              target.count >= header.storedLength else { return .unsettled }
        let checksum = view.copyStoredValue(of: found, key: key, to: target.baseAddress)
        guard isUnchanged(found, in: view), checksum == header.dataChecksum else { return .unsettled }
        countHit(found, in: view)
        return .answered(header.rawLength)
    }

    /// Reader: `copyValue` for every case: expiry, compression, a buffer too small, writers
    /// changing the record or the index meanwhile, a damaged record. It starts over from the
    /// view this process published last, not the attempt's: passing the attempt's view would
    /// have every read build it in memory for this call, which few reads make.
    @inline(never)
    private func copyValueCarefully(forKey key: UnsafeRawBufferPointer, includingExpired: Bool,
                                    into destination: (Int) -> UnsafeMutableRawBufferPointer?) throws(LarderError) -> Int? {
        guard let view = publishedViewIfCurrent() else { throw LarderError.staleView }
        var retry = Retry()
        while true {
            guard let found = try findCountingMiss(key, in: view, retry: &retry) else { return nil }
            let header = found.header
            // An entry past the file's maximum age is not returned even as a stale copy.
            if header.isExpiredNow(maximumAge: view.maximumAge)
                && (!includingExpired || header.isOverAge(now: SystemCall.nowMilliseconds(), maximumAge: view.maximumAge)) {
                guard isUnchanged(found, in: view) else { try backOff(&retry, in: view); continue }
                countMiss()
                return nil
            }
            guard let target = destination(header.rawLength) else {
                guard isUnchanged(found, in: view) else { try backOff(&retry, in: view); continue }
                return header.rawLength
            }
            if !includingExpired || !header.isExpiredNow(maximumAge: view.maximumAge) { pushExpiry(found, in: view) }
            precondition(target.count >= header.rawLength)
            let copy = header.isCompressed
                ? try ValueMemory.allocate(header.storedLength, forValueIn: path)
                : UnsafeMutableRawBufferPointer(rebasing: target[0..<header.storedLength])
            defer { if header.isCompressed { ValueMemory.release(copy) } }
            let checksum = view.copyStoredValue(of: found, key: key, to: copy.baseAddress)
            guard isUnchanged(found, in: view) else { try backOff(&retry, in: view); continue }
            guard checksum == header.dataChecksum else { throw damaged(found) }
            if header.isCompressed {
                guard LZ4Codec.decompress(UnsafeRawBufferPointer(rebasing: copy[0..<header.storedLength]),
                                          into: UnsafeMutableRawBufferPointer(rebasing: target[0..<header.rawLength])) else {
                    throw LarderError(.corrupt, "the compressed value for this key does not decode", path: path)
                }
            }
            countHit(found, in: view)
            return header.rawLength
        }
    }

    /// Reader: lends the value of `key` to `body` straight from the map (decompressed into a
    /// temporary buffer when compressed). The record is pinned in the reader table meanwhile, so
    /// no writer of any process overwrites it. Falls back to a copy when every slot is taken.
    ///
    /// - Returns: whether there was a value (false for a missing or expired key).
    func withValue(forKey key: UnsafeRawBufferPointer, in view: ReadView,
                   _ body: (UnsafeRawBufferPointer) -> Void) throws(LarderError) -> Bool {
        try validateKey(key)
        var retry = Retry()
        var firstFound: FoundEntry?
        switch firstLookup(key, in: view) {
        case .answered(let entry): firstFound = entry
        case .absent: return false
        case .unsettled: break
        }
        while true {
            let next: FoundEntry?
            if let entry = firstFound.take() { next = entry } else { next = try findCountingMiss(key, in: view, retry: &retry) }
            guard let found = next else { return false }
            let header = found.header
            // A read-only mapping cannot pin (the table is in the file); it lends a checked copy.
            guard !isReadOnly, let slot = readers.pin(start: found.offset, end: found.offset + header.totalSize) else {
                return try lendCopy(forKey: key, in: view, body)
            }
            defer { unpin(slot) }
            let expired = header.isExpiredNow(maximumAge: view.maximumAge)
            if !expired { pushExpiry(found, in: view) }
            guard isUnchanged(found, in: view) else { try backOff(&retry, in: view); continue }
            if expired {
                countMiss()
                return false
            }
            guard view.dataIsIntact(found, key: key) else { throw damaged(found) }
            let stored = view.storedValue(of: found)
            countHit(found, in: view)
            guard header.isCompressed else {
                body(stored)
                return true
            }
            let buffer = try ValueMemory.allocate(header.rawLength, forValueIn: path)
            defer { ValueMemory.release(buffer) }
            let value = UnsafeMutableRawBufferPointer(rebasing: buffer[0..<header.rawLength])
            guard LZ4Codec.decompress(stored, into: value) else {
                throw LarderError(.corrupt, "the compressed value for this key does not decode", path: path)
            }
            body(UnsafeRawBufferPointer(value))
            return true
        }
    }

    /// Gives a pin back; if the store was closed meanwhile (another thread closed the cache while
    /// this one was lending), only if the slot still holds it: the file's locks are gone then,
    /// and a writer that opened the file alone since may have cleared the table and given the
    /// slot to another reader.
    private func unpin(_ slot: Int) {
        // A child forked inside the parent's withValue: the pin is the parent's, still lending.
        guard !isInheritedAcrossFork else { return }
        if lrd_load_seq_cst_u64(localWords.pointer(.closing)) == 0 {
            readers.unpin(slot)
        } else {
            readers.unpinAfterClose(slot)
        }
    }

    /// Reader: `withValue` through a private copy, for when no reader slot is free.
    private func lendCopy(forKey key: UnsafeRawBufferPointer, in view: ReadView,
                          _ body: (UnsafeRawBufferPointer) -> Void) throws(LarderError) -> Bool {
        guard let copy = try copyValueToNewMemory(forKey: key, in: view) else { return false }
        defer { ValueMemory.release(copy) }
        body(UnsafeRawBufferPointer(copy))
        return true
    }

    /// Reader: `copyValue` into memory of its own (`ValueMemory`), exactly the value's length,
    /// which the caller owns and releases; nil for a missing or expired key. Throws `.noMemory`
    /// when the memory cannot be had, having released whatever it took.
    func copyValueToNewMemory(forKey key: UnsafeRawBufferPointer, in view: ReadView,
                              includingExpired: Bool = false) throws(LarderError) -> UnsafeMutableRawBufferPointer? {
        var buffer: UnsafeMutableRawBufferPointer?
        let length: Int?
        do {
            length = try copyValue(forKey: key, in: view, includingExpired: includingExpired) { count in
                if let buffer, buffer.count >= count { return buffer }
                buffer.map(ValueMemory.release)
                buffer = ValueMemory.allocate(count)
                return buffer
            }
        } catch {
            buffer.map(ValueMemory.release)
            throw error
        }
        guard let length else {
            buffer.map(ValueMemory.release)
            return nil
        }
        // No buffer: the last one asked for could not be had, and the value was not copied.
        guard let buffer else { throw ValueMemory.exhausted(length, path: path) }
        return UnsafeMutableRawBufferPointer(start: buffer.baseAddress, count: length)
    }

    /// Reader: whether a live, unexpired entry exists for `key` (no checksum, no statistics).
    func contains(key: UnsafeRawBufferPointer, in view: ReadView) throws(LarderError) -> Bool {
        try liveHeader(forKey: key, in: view) != nil
    }

    /// Reader: the header of `key`'s live, unexpired entry and its access bit, as they were at
    /// one moment during the call; nil when there is none. Reads no value byte, counts nothing
    /// and sets no access bit.
    func liveHeader(forKey key: UnsafeRawBufferPointer, in view: ReadView) throws(LarderError) -> (header: RecordHeader, wasRead: Bool)? {
        try validateKey(key)
        var retry = Retry()
        while true {
            guard let found = try find(key, in: view, valueFollows: false, retry: &retry) else { return nil }
            let expired = found.header.isExpiredNow(maximumAge: view.maximumAge)
            // Before the re-check, which then vouches for it as for the header.
            let wasRead = UInt64(littleEndian: lrd_load_acquire_u64(view.base + found.offset)) & RecordHeader.Word0.visitedBit != 0
            if isUnchanged(found, in: view) { return expired ? nil : (found.header, wasRead) }
            try backOff(&retry, in: view)
        }
    }

    /// Reader: the persistent counters plus this process's unfolded hits and misses.
    func counter(_ counter: SharedState.Counter) -> UInt64 {
        let base = isClosed ? 0 : state.counter(counter)
        switch counter {
        case .hits: return base &+ localWords.load(.hits)
        case .misses: return base &+ localWords.load(.misses)
        default: return base
        }
    }
}

import CLarderSupport
import Foundation

/// A persistent, memory-mapped cache in a single file, with a hard byte capacity, approximately
/// least-recently-used eviction and per-entry expiry.
///
/// ```swift
/// let cache = try Cache(path: "app.larder", options: .init(capacity: .megabytes(64)))
/// try cache.set(Data("hello".utf8), forKey: "greeting", expiry: .seconds(3600))
/// let value = try cache.data(forKey: "greeting")
/// ```
///
/// One `Cache` may be shared by any number of threads. Reads run concurrently with each other;
/// writes take turns. Values are read straight out of the mapping: `withValue(forKey:_:)` lends
/// them without a copy.
///
/// The corresponding C type is `larder`, opened with `larder_open`.
public final class Cache: @unchecked Sendable {
    /// How a cache is created or opened.
    ///
    /// The corresponding C type is `larder_options`.
    public struct Options: Sendable {
        /// The most bytes the file may ever take, from 64 KiB to 1 TiB (else `.invalidArgument`).
        /// `nil` keeps an existing file's capacity and creates new files with 64 MiB. Another value
        /// changes an existing file's only when no other handle has it open (docs/GUIDE.md).
        public var capacity: ByteCount?
        /// Page size of a new file: a power of two from 4096 to 65536. An existing file keeps its
        /// own, but a value outside that range is refused on every open.
        public var pageSize: Int
        /// Expiry for writes that do not name one; one that is not a number (NaN) is refused
        /// (`.invalidArgument`) when the cache opens.
        public var defaultExpiry: Expiry
        /// Open without the right to change anything; fails when the file does not exist. A file
        /// written by a newer Larder that this one can read but not maintain opens read-only
        /// whatever this says: its writes throw `.readOnly`.
        public var readOnly: Bool
        /// How writes that do not say otherwise store values.
        public var compression: Compression
        /// Values shorter than this many bytes are stored raw even when compressing: LZ4 cannot
        /// shrink very short values, and the work would be wasted.
        public var compressionThreshold: Int
        /// Permission bits for a new file (default `0o600`: owner only).
        public var permissions: UInt16
        /// How `Codable` values are turned into bytes when a call does not name a coder: JSON
        /// unless you say otherwise (see ``CacheCoder``).
        public var coder: any CacheCoder
        /// How many decoded objects typed reads and writes keep in memory in front of the file
        /// (default ``MemoryLimits/default``: 64 MiB, 10,000 objects); `nil` keeps none. Limits
        /// of 0 or less are refused (`.invalidArgument`) when the cache opens.
        public var memory: MemoryLimits?
        /// The most entries the file holds, kept by every process on every write. `nil` keeps the
        /// file's (none for a new file), `Int.max` removes it; it is changed as the maximum age is.
        /// 0 or less is refused (`.invalidArgument`).
        public var countLimit: Int?
        /// Seconds after it is stored that an entry counts as expired, in every process. `nil` keeps
        /// the file's, `.infinity` removes it; another value changes it when no other read-write
        /// handle has the file open (docs/GUIDE.md). 0 or less, or NaN, is refused.
        public var maximumAge: TimeInterval?
        /// Seconds between sweeps that remove expired and over-age entries in the background, a
        /// few at a time, while the cache is open. `nil` runs none; 0 or less, NaN or infinity is
        /// refused.
        public var sweepInterval: TimeInterval?
        /// The data protection class of a file this open creates, on Apple platforms (see
        /// ``FileProtection``: background reads need ``FileProtection/completeUntilFirstUserAuthentication``
        /// or ``FileProtection/none``). Ignored elsewhere.
        public var fileProtection: FileProtection
        /// Keep the file out of device backups (`URLResourceValues.isExcludedFromBackup`), set at
        /// every read-write open and resume, on Apple platforms. Ignored elsewhere.
        public var excludedFromBackup: Bool

        /// Options for opening a cache; every one has a default.
        ///
        /// The corresponding C call is `larder_options_init` (a macro over
        /// `larder_options_init_sized`), which fills a `larder_options` with the same defaults.
        public init(capacity: ByteCount? = nil, pageSize: Int = 4096, defaultExpiry: Expiry = .never,
                    readOnly: Bool = false, permissions: UInt16 = 0o600,
                    compression: Compression = .none, compressionThreshold: Int = 128,
                    coder: any CacheCoder = JSONCacheCoder(), memory: MemoryLimits? = .default,
                    fileProtection: FileProtection = .systemDefault, excludedFromBackup: Bool = false,
                    countLimit: Int? = nil, maximumAge: TimeInterval? = nil, sweepInterval: TimeInterval? = nil) {
            self.capacity = capacity
            self.pageSize = pageSize
            self.defaultExpiry = defaultExpiry
            self.readOnly = readOnly
            self.permissions = permissions
            self.compression = compression
            self.compressionThreshold = compressionThreshold
            self.coder = coder
            self.memory = memory
            self.countLimit = countLimit
            self.maximumAge = maximumAge
            self.sweepInterval = sweepInterval
            self.fileProtection = fileProtection
            self.excludedFromBackup = excludedFromBackup
        }
    }

    /// This library's version.
    ///
    /// The corresponding C function is `larder_version`.
    public static let versionString: StaticString = "0.1.0"

    /// The longest key, in bytes.
    public static let maximumKeyLength = CacheStore.maximumKeyLength

    /// The capacities a cache may have: from 64 KiB (16 pages for pages larger than 4 KiB) to
    /// 1 TiB.
    public static let capacities = FileLayout.minimumCapacity(pageSize: FileLayout.minimumPageSize)...FileLayout.maximumFileSize

    /// The file this cache lives in.
    public let path: String
    /// The options it was opened with.
    public let options: Options

    /// The open file, shared with every other `Cache` of this process on the same path.
    /// `resume()` replaces it, with `lock` and `store`, while no call may reach them (see
    /// `openGeneration`); so no access to the three is checked for exclusivity.
    @exclusivity(unchecked) var entry: OpenFileRegistry.Entry
    /// The entry's lock and engine, unretained: `entry` (or `previousEntry`, after a resume)
    /// holds them. The hot paths borrow them (`lend`, `read`, `write`), as a class `var` would
    /// cost a retain and a release around every opaque call.
    @exclusivity(unchecked) var lockReference: Unmanaged<ReadWriteLock>
    @exclusivity(unchecked) var storeReference: Unmanaged<CacheStore>
    /// The store's `PublishedView.readView`, set with `storeReference`: `larder_get` loads it
    /// with no load of the store between.
    @exclusivity(unchecked) @usableFromInline var readViewReference: UnsafePointer<lrd_read_view>
    /// The entry's lock and engine, for the calls off the hot paths.
    var lock: ReadWriteLock { lockReference.takeUnretainedValue() }
    var store: CacheStore { storeReference.takeUnretainedValue() }
    /// Decoded objects of typed reads and writes (nil when `options.memory` is).
    let memory: MemoryTier?
    /// `memory` again, unretained, so that a hit in memory retains no tier (`memory` keeps it).
    let unretainedMemory: Unmanaged<MemoryTier>?
    /// The type of `options.coder`, so that a typed read names its coder without copying it
    /// (a copy retains the coder's objects, which every thread shares).
    @usableFromInline let defaultCoderType: ObjectIdentifier
    /// The fork count (`lrd_fork_generation`) at open; `.max` once closed, `suspendedGeneration`
    /// while suspended. A forked child sees another count, so the handle is closed there too.
    /// Set under the exclusive lock, read without it: one compare a call.
    @usableFromInline let openGeneration = AtomicWord()
    static let suspendedGeneration = UInt64.max - 1
    /// Whether the handle may not reach its store: closed, suspended, or in a child after fork.
    @inlinable var isClosed: Bool { openGeneration.load() != lrd_fork_generation() }
    /// Serializes `suspend()`, `resume()` and `close()` with each other.
    let lifeCycle = NSLock()
    /// The entry a `resume()` replaced, kept until the next one: a read that began before
    /// `suspend()` may still be looking through its mapping.
    var previousEntry: OpenFileRegistry.Entry?
    /// The automatic sweep's thread (`options.sweepInterval`); nil for none.
    private(set) var sweeper: Sweeper?
    /// This handle's watches, counted in its file while it has it open. Under `lifeCycle`.
    let watchTally = WatcherTally()

    /// Opens the cache file at `path`, creating it if needed. A file that was not closed cleanly
    /// (its process crashed) is checked and repaired first.
    ///
    /// The corresponding C function is `larder_open`.
    public init(path: String, options: Options = Options()) throws(LarderError) {
        self.path = path
        self.options = options
        // Checked once here, so that a write checks only the expiry it is given.
        guard options.defaultExpiry.isNumber else {
            throw LarderError(.invalidArgument, "the default expiry is not a number (NaN)", path: path)
        }
        if let limits = options.memory, limits.cost.bytes <= 0 || limits.count <= 0 {
            throw LarderError(.invalidArgument, "memory limits must be positive (cost \(limits.cost.bytes) bytes, count \(limits.count))", path: path)
        }
        let limits = try StandingLimits(options, path: path)
        memory = options.memory.map(MemoryTier.init(limits:))
        unretainedMemory = memory.map(Unmanaged.passUnretained)
        defaultCoderType = ObjectIdentifier(type(of: options.coder))
        let existed = FileIdentity(path: path) != nil
        entry = try OpenFileRegistry.shared.open(path: path, configuration: Cache.configuration(options, limits: limits))
        lockReference = .passUnretained(entry.lock)
        storeReference = .passUnretained(entry.store)
        readViewReference = entry.store.publishedView.readView
        openGeneration.store(entry.store.forkGeneration)
        do {
            try FileAttributes.apply(options, to: path, created: !existed)
        } catch {
            openGeneration.store(.max)
            try? OpenFileRegistry.shared.release(entry)
            throw error
        }
        if let interval = limits.sweepInterval, !entry.store.isReadOnly {
            sweeper = Sweeper(intervalMilliseconds: interval) { [weak self] cursor in self?.sweepStep(from: cursor) }
        }
    }

    /// What the engine opens the file with.
    static func configuration(_ options: Options, limits: StandingLimits) -> CacheStore.Configuration {
        .init(capacity: options.capacity?.bytes, pageSize: options.pageSize,
              readOnly: options.readOnly, permissions: options.permissions,
              countLimit: limits.count, maximumAge: limits.maximumAge)
    }

    deinit {
        if store.isInheritedAcrossFork {
            store.releaseInheritedDescriptor()
            return
        }
        sweeper?.stop()
        if !isClosed {
            watchTally.countOut()
            try? OpenFileRegistry.shared.release(entry)
        }
    }

    // MARK: - Writing

    /// Stores `value` for `key`, replacing any earlier value. When the cache is full, the least
    /// recently used entries are evicted to make room.
    ///
    /// - Parameters:
    ///   - value: The bytes to store: `Data`, `[UInt8]`, an `UnsafeRawBufferPointer`, ...
    ///   - key: 1 to 4096 bytes.
    ///   - expiry: When the entry stops being returned; `nil` uses `options.defaultExpiry`.
    ///   - compression: How to store this value; `nil` uses `options.compression`.
    /// - Throws: `.tooLarge` for a key over 4096 bytes or a value the cache can never hold,
    ///   `.invalidArgument` for an empty key, an expiry that is not a number, or a call from
    ///   inside `withValue` on this thread, `.full` when the disk refuses more space, `.busy`
    ///   while `withValue` calls lend out records all round the cache, `.readOnly`, `.closed`.
    ///
    /// The corresponding C function is `larder_put`.
    @inlinable
    public func set(_ value: some ContiguousBytes, forKey key: some CacheKey, expiry: Expiry? = nil,
                    compression: Compression? = nil) throws(LarderError) {
        // Inlined into the caller, where the key and value types are concrete: the engine below
        // is not generic, and the closures return nothing that needs generic metadata.
        try key.withCacheKeyBytes { keyBytes in
            value.withUnsafeBytes { valueBytes in
                Result { () throws(LarderError) in
                    try setValue(valueBytes, forKey: keyBytes, expiry: expiry, compression: compression)
                }
            }
        }.get()
    }

    /// `set` without the generic key and value.
    @usableFromInline
    func setValue(_ value: UnsafeRawBufferPointer, forKey key: UnsafeRawBufferPointer, expiry: Expiry?,
                  compression: Compression?) throws(LarderError) {
        if let expiry, !expiry.isNumber { throw notANumber() }
        let (expiry, compress) = settings(expiry: expiry, compression: compression, valueLength: value.count)
        try write { (store) throws(LarderError) in
            try store.put(key: key, value: value, compress: compress, expiry: expiry)
        }
    }

    /// The expiry and compression a put of `valueLength` bytes takes, given what it asked for.
    @inline(__always)
    func settings(expiry: Expiry?, compression: Compression?, valueLength: Int) -> (Expiry, compress: Bool) {
        (expiry ?? options.defaultExpiry,
         (compression ?? options.compression) == .lz4 && valueLength >= options.compressionThreshold)
    }

    /// Why `set` refuses an expiry that is not a number, off the path of the writes that pass.
    /// (Not described further: a `Date` of NaN seconds cannot be printed.)
    @inline(never)
    func notANumber() -> LarderError {
        LarderError(.invalidArgument, "the expiry is not a number (NaN)", path: path)
    }

    /// Removes the value for `key`.
    ///
    /// - Returns: Whether there was a live value to remove.
    ///
    /// The corresponding C function is `larder_delete`.
    @inlinable @discardableResult
    public func removeValue(forKey key: some CacheKey) throws(LarderError) -> Bool {
        try key.withCacheKeyBytes { keyBytes in
            Result { () throws(LarderError) in try removeValue(forKeyBytes: keyBytes) }
        }.get()
    }

    /// `removeValue` without the generic key.
    @usableFromInline
    func removeValue(forKeyBytes key: UnsafeRawBufferPointer) throws(LarderError) -> Bool {
        defer { forgetInMemory(key) }
        return try write { (store) throws(LarderError) in try store.remove(key: key) }
    }

    /// Removes every entry, in time independent of how many there are.
    ///
    /// - Returns: How many entries there were (expired ones not yet reclaimed included), counted
    ///   in the same turn as the removal: no other process's write comes between.
    ///
    /// The corresponding C function is `larder_clear`.
    @discardableResult
    public func removeAll() throws(LarderError) -> Int {
        defer { memory?.removeAll() }
        return try write { (store) throws(LarderError) in try store.removeAll() }
    }

    // MARK: - Reading

    /// Lends the value for `key` to `body` without copying it, straight from the mapped file.
    ///
    /// The buffer is valid only during `body`; do not let it escape. Writing to this cache from
    /// inside `body` throws `.invalidArgument` (a write could be asked to overwrite the bytes
    /// lent); reads are fine.
    ///
    /// - Returns: What `body` returns, or `nil` when the key is missing or expired.
    /// - Throws: `.corrupt` when the stored value fails its checksum; `.noMemory` when a value
    ///   stored compressed (or lent as a copy, when every reader slot is taken) needs more memory
    ///   than the process can get; whatever `body` throws.
    ///
    /// The corresponding C function is `larder_with_value`.
    @inlinable
    public func withValue<R>(forKey key: some CacheKey, _ body: (UnsafeRawBufferPointer) throws -> R) throws -> R? {
        // Inlined into the caller, so that R is a concrete type there: the engine below is not
        // generic, and no generic metadata is looked up on the read path.
        var result: R?
        let found = key.withCacheKeyBytes { keyBytes in
            Result { try lendValue(forKey: keyBytes) { bytes in result = try body(bytes) } }
        }
        return try found.get() ? result : nil
    }

    /// `withValue` without the generic result: lends the value of `key` to `body`.
    ///
    /// - Returns: whether there was a value.
    @usableFromInline
    func lendValue(forKey key: UnsafeRawBufferPointer, _ body: (UnsafeRawBufferPointer) throws -> Void) throws -> Bool {
        var failure: (any Error)?
        let borrower = BorrowMarker.mark(of: self)
        let found = try read(key) { (loan, view) throws(LarderError) in
            try loan.lend { (store) throws(LarderError) in
                try store.withValue(forKey: key, in: view) { bytes in
                    BorrowMarker.borrowing(mark: borrower) {
                        do { try body(bytes) } catch { failure = error }
                    }
                }
            }
        }
        if let failure { throw failure }
        return found
    }

    /// The value for `key` as `Data`, or `nil` when it is missing or expired.
    ///
    /// - Throws: `.noMemory` when the process cannot get the memory for the copy (the value and
    ///   the cache are as they were); `.corrupt` when the stored value fails its checksum.
    ///
    /// The corresponding C function is `larder_get_alloc`.
    public func data(forKey key: some CacheKey) throws(LarderError) -> Data? {
        try key.withCacheKeyBytes { keyBytes in
            Result { () throws(LarderError) in try copyData(forKey: keyBytes, includingExpired: false) }
        }.get()
    }

    /// The value of `key` as `Data`; with `includingExpired`, also an expired one still in the file.
    func copyData(forKey keyBytes: UnsafeRawBufferPointer, includingExpired: Bool) throws(LarderError) -> Data? {
        let copy = try read(keyBytes) { (loan, view) throws(LarderError) in
            try loan.lend { (store) throws(LarderError) in
                try store.copyValueToNewMemory(forKey: keyBytes, in: view, includingExpired: includingExpired)
            }
        }
        // ValueMemory's buffers are malloc's, which Data's `.free` gives back.
        return copy.map { Data(bytesNoCopy: $0.baseAddress!, count: $0.count, deallocator: .free) }
    }

    /// The value for `key` as bytes, or `nil` when it is missing or expired.
    ///
    /// An array the process cannot get the memory for stops the program, as every `Array` does;
    /// ``data(forKey:)-(CacheKey)`` throws `.noMemory` instead, for values that may be that large.
    ///
    /// The corresponding C function is `larder_get_alloc`.
    public func bytes(forKey key: some CacheKey) throws(LarderError) -> [UInt8]? {
        do {
            return try withValue(forKey: key) { Array($0) }
        } catch let error as LarderError {
            throw error
        } catch {
            preconditionFailure("Array's initializer does not throw")
        }
    }

    /// Copies the value for `key` into `buffer` when it fits there.
    ///
    /// - Returns: the value's length (also when it did not fit: nothing is copied then), or nil
    ///   when the key is missing or expired.
    ///
    /// The corresponding C function is `larder_get`.
    @inlinable
    public func copyValue(forKey key: some CacheKey, into buffer: UnsafeMutableRawBufferPointer) throws(LarderError) -> Int? {
        // Inlined into the caller, like `withValue`: the key's type is concrete there, and the
        // call below is the whole cost.
        try key.withCacheKeyBytes { keyBytes in
            Result { () throws(LarderError) in try copyValue(forKeyBytes: keyBytes, into: buffer) }
        }.get()
    }

    /// `copyValue(forKey:into:)` for a key already in bytes. The usual hit and miss are answered
    /// by one C call, `lrd_view_get`, as `larder_get` answers them; it passes everything else,
    /// as its last step, to `copyValueUnsettled`, so that nothing of the call is kept here
    /// across it (its registers and stack slots every read would otherwise pay for).
    @usableFromInline
    func copyValue(forKeyBytes key: UnsafeRawBufferPointer, into buffer: UnsafeMutableRawBufferPointer) throws(LarderError) -> Int? {
        // See `read`: the caller's key starts loading now.
        if let start = key.baseAddress { lrd_prefetch(start) }
        guard let view = readView(forKeyLength: key.count) else { return try copyValueCarefully(forKeyBytes: key, into: buffer) }
        var length = 0
        // The length is lent without a stack guard: five instructions on every read.
        let status = _withUnprotectedUnsafeMutablePointer(to: &length) { length in
            lrd_view_get(view, key.baseAddress, key.count, buffer.baseAddress, buffer.count, length,
                         Unmanaged.passUnretained(self).toOpaque()) {
                handle, key, keyLength, buffer, bufferLength, valueLength in
                Cache.copyValueUnsettled(handle, key, keyLength, buffer, bufferLength, valueLength)
            }
        }
        if status == Int32(LRD_VIEW_GET_FOUND) { return length }
        if status == Int32(LRD_VIEW_GET_ABSENT) { return nil }
        // The careful read threw: read again here, where its error can be thrown.
        return try copyValueCarefully(forKeyBytes: key, into: buffer)
    }

    /// `lrd_view_get`'s fallback for `copyValue(forKeyBytes:into:)`, whose cache `handle` is: the
    /// probe in Swift, then the careful read. A value's length (also one that did not fit) is
    /// found, no value absent; a read that throws is answered with a status of neither kind.
    private static func copyValueUnsettled(_ handle: UnsafeMutableRawPointer?, _ key: UnsafeRawPointer?, _ keyLength: Int,
                                           _ buffer: UnsafeMutableRawPointer?, _ bufferLength: Int,
                                           _ valueLength: UnsafeMutablePointer<Int>?) -> Int32 {
        // Retained on this path only: the usual read holds the cache it was called on.
        let cache = Unmanaged<Cache>.fromOpaque(handle!).takeUnretainedValue()
        let keyBytes = UnsafeRawBufferPointer(start: key, count: keyLength)
        let destination = UnsafeMutableRawBufferPointer(start: buffer, count: bufferLength)
        switch cache.storeReference._withUnsafeGuaranteedRef({ $0.attemptCopyProbingOn(forKey: keyBytes, toBuffer: destination) }) {
        case .answered(let length):
            valueLength!.pointee = length
            return Int32(LRD_VIEW_GET_FOUND)
        case .absent:
            return Int32(LRD_VIEW_GET_ABSENT)
        case .unsettled:
            break
        }
        do throws(LarderError) {
            guard let length = try cache.copyValueCarefully(forKeyBytes: keyBytes, into: destination) else {
                return Int32(LRD_VIEW_GET_ABSENT)
            }
            valueLength!.pointee = length
            return Int32(LRD_VIEW_GET_FOUND)
        } catch {
            return -1
        }
    }

    /// The read view the C ABI's `larder_get` reads through in one C call (`lrd_view_get`), or
    /// nil for a closed handle or a key of other than 1 to `Cache.maximumKeyLength` bytes.
    /// Valid while the handle is open (its store outlives it).
    /// Inlinable, so that `larder_get` makes no call before `lrd_view_get`.
    @inlinable @inline(__always) package func readView(forKeyLength keyLength: Int) -> UnsafePointer<lrd_read_view>? {
        guard !isClosed, keyLength > 0, keyLength <= Cache.maximumKeyLength else { return nil }
        return readViewReference
    }

    /// `copyValue(forKeyBytes:into:)` for every case: a closed handle, an invalid key, a view to
    /// refresh, and what the store's careful read handles.
    @inline(never)
    private func copyValueCarefully(forKeyBytes key: UnsafeRawBufferPointer,
                                    into buffer: UnsafeMutableRawBufferPointer) throws(LarderError) -> Int? {
        try read(key) { (loan, view) throws(LarderError) in
            try loan.lend { (store) throws(LarderError) in
                try store.copyValue(forKey: key, in: view) { count in count <= buffer.count ? buffer : nil }
            }
        }
    }

    /// Whether a live, unexpired value exists for `key`. A closed cache or an invalid key answers
    /// `false`.
    ///
    /// The corresponding C function is `larder_contains`.
    public func contains(_ key: some CacheKey) -> Bool {
        (try? containsValue(forKey: key)) ?? false
    }

    /// Calls `body` with the key and the value's length (as callers see it) of every live entry,
    /// in no particular order, until `body` returns false. The key bytes are valid only during
    /// the call.
    ///
    /// The listing takes a few entries at a time and holds no lock while `body` runs, so `body`
    /// may read, write, remove and sync (removing the entries it is given is the usual reason to
    /// list them), and writers of this and other processes go on meanwhile. An entry that stays
    /// in the cache from the listing's start to its end is listed exactly once, whatever is
    /// written, removed or moved meanwhile; one written or removed meanwhile may or may not be.
    /// Closing this cache from inside `body` throws `.invalidArgument`. Writers of other
    /// processes that keep the index changing for longer than a read's patience (5 s) make the
    /// listing throw `.busy`; a record left half written by a writer that died is waited for
    /// once, for that patience, and then left out, as a read of it misses (FORMAT.md 7.7.4).
    ///
    /// The corresponding C function is `larder_foreach`.
    public func forEachEntry(_ body: (_ key: UnsafeRawBufferPointer, _ valueLength: Int) throws -> Bool) throws {
        var failure: (any Error)?
        try listEntries { key, valueLength in
            do { return try body(key, valueLength) } catch { failure = error }
            return false
        }
        if let failure { throw failure }
    }

    /// `forEachEntry` for a `body` that cannot throw.
    func listEntries(_ body: (_ key: UnsafeRawBufferPointer, _ valueLength: Int) -> Bool) throws(LarderError) {
        try BorrowMarker.borrowing(mark: BorrowMarker.mark(of: self, for: .listing)) { () throws(LarderError) in
            var listing = EntryListing()
            while !listing.isFinished {
                var patience = true
                while try !readUnderLock({ () throws(LarderError) in try store.listNextEntries(&listing) }) {
                    // A writer of another process was in the way: wait for it without the lock,
                    // and try once more when patience has run out (a writer that died in its
                    // change is then known for one).
                    guard patience else {
                        throw LarderError(.busy, "writers of other processes kept changing the index; list again", path: path)
                    }
                    patience = listing.backOff()
                }
                if !listing.forEachListed(body) { return }
            }
        }
    }

    /// Whether a live, unexpired value exists for `key`; unlike `contains(_:)`, a closed cache or
    /// an invalid key is an error.
    ///
    /// The corresponding C function is `larder_contains`.
    public func containsValue(forKey key: some CacheKey) throws(LarderError) -> Bool {
        try key.withCacheKeyBytes { keyBytes in
            Result { () throws(LarderError) in
                try read(keyBytes) { (loan, view) throws(LarderError) in
                    try loan.lend { (store) throws(LarderError) in try store.contains(key: keyBytes, in: view) }
                }
            }
        }.get()
    }

    // MARK: - Size and statistics

    // The sizes below read the file's shared counters from an up-to-date view; a closed cache,
    // or one whose view cannot be taken up (another process damaged the file), answers 0.

    /// Number of live entries (expired ones count until they are reclaimed).
    public var count: Int { inspect(orElse: 0) { $0.state.entryCount } }

    /// Bytes of live values as callers see them.
    public var totalBytes: Int { inspect(orElse: 0) { $0.state.liveRawBytes } }

    /// Size of the cache file in bytes; never more than `capacity`.
    public var fileBytes: Int { inspect(orElse: 0) { $0.ringEnd } }

    /// The most bytes the file may take.
    public var capacity: Int { lock.withReadLock { store.capacity } }

    /// The file's standing count limit, or nil for none, as the last open that set it left it.
    public var countLimit: Int? { inspect(orElse: nil) { $0.meta.countLimit == 0 ? nil : Int(clamping: $0.meta.countLimit) } }

    /// The file's standing maximum age in seconds, or nil for none.
    public var maximumAge: TimeInterval? { inspect(orElse: nil) { $0.maximumAge == 0 ? nil : Double($0.maximumAge) / 1000 } }

    /// Counters and sizes, read together: no write of this process comes between them (another
    /// process's may). The sizes are 0 for a closed cache.
    /// The corresponding C function is `larder_stats`.
    public var stats: CacheStatistics {
        func snapshot() -> CacheStatistics {
            var statistics = CacheStatistics(
                entryCount: store.state.entryCount, liveBytes: store.state.liveRawBytes,
                storedBytes: store.state.liveStoredBytes, recordBytes: store.state.liveRecordBytes,
                fileBytes: store.ringEnd, capacity: store.capacity,
                hits: store.counter(.hits), misses: store.counter(.misses), inserts: store.counter(.inserts),
                updates: store.counter(.updates), removals: store.counter(.removals),
                evictions: store.counter(.evictions), expirations: store.counter(.expirations),
                relocations: store.counter(.relocations), recoveries: store.counter(.recoveries))
            if let memory {
                (statistics.memoryHits, statistics.memoryMisses) = (memory.hits, memory.misses)
                (statistics.memoryCount, statistics.memoryCost) = (memory.count, memory.currentCost)
            }
            return statistics
        }
        if let current = try? readUnderLock({ () throws(LarderError) in snapshot() }) { return current }
        // Closed (or no view to be had): the counters as they stand, no sizes.
        var counters = lock.withReadLock { snapshot() }
        (counters.entryCount, counters.liveBytes, counters.storedBytes, counters.recordBytes, counters.fileBytes) = (0, 0, 0, 0, 0)
        return counters
    }

    /// Reads sizes from an up-to-date view, or answers `fallback` for a closed cache.
    private func inspect<T>(orElse fallback: T, _ body: (CacheStore) -> T) -> T {
        (try? readUnderLock { () throws(LarderError) in body(store) }) ?? fallback
    }

    /// Whether opening this cache found it not closed cleanly and rebuilt it.
    public var wasRecovered: Bool { store.recoveredOnOpen }

    // MARK: - Durability and lifetime

    /// Makes every write so far durable: after `sync()` returns, a power loss loses none of it.
    ///
    /// The corresponding C function is `larder_sync`.
    public func sync() throws(LarderError) {
        try lock.withWriteLock { () throws(LarderError) in
            try checkOpen()
            try store.sync()
        }
    }

    /// Flushes the cache, marks the file cleanly closed and releases it. Later reads and writes
    /// on this cache throw `.closed`; the properties that cannot throw answer as for an empty
    /// cache (``count``, ``totalBytes`` and ``fileBytes`` 0, ``contains(_:)`` false, and the
    /// sizes in ``stats`` 0). Calling `close()` again does nothing. Close a cache only when no
    /// other thread is inside `withValue(forKey:_:)` on it: reads take no lock, so closing does not
    /// wait for them, and bytes lent when the file is let go are no longer protected from writers
    /// of other processes. Closing from inside such a closure, or from inside this cache's
    /// `forEachEntry`, on its own thread throws `.invalidArgument`.
    ///
    /// An open cache holds a record lock on its file; on iOS, tvOS and watchOS, suspend
    /// (``suspend()``) or close a cache whose file is in an app group container before the app is
    /// suspended, or the system terminates the app
    /// (<doc:GettingStarted#Share-a-cache-with-an-app-extension>).
    ///
    /// In a child process forked after the cache was opened, the cache is closed already (its
    /// calls throw `.closed`), and `close()` releases nothing: the file and its locks stay the
    /// parent's. Open the file again in the child.
    ///
    /// The corresponding C function is `larder_close`.
    public func close() throws(LarderError) {
        // No lock of the parent's (this one's copy may have been held by another of its threads).
        if store.isInheritedAcrossFork {
            openGeneration.store(.max)
            store.releaseInheritedDescriptor()
            return
        }
        try refuseInsideBorrow("close")
        lifeCycle.lock()
        defer { lifeCycle.unlock() }
        // Outside the lock, which each step takes: the step under way ends first.
        sweeper?.stop()
        let wasOpen = lock.withWriteLock {
            defer { openGeneration.store(.max) }
            return !isClosed
        }
        memory?.removeAll()
        guard wasOpen else { return }
        watchTally.countOut()
        try OpenFileRegistry.shared.release(entry)
    }

    // MARK: - Locking

    /// Throws `.invalidArgument` on a thread inside this cache's `withValue` or `forEachEntry`:
    /// letting the file go (`verb`: close, suspend) would take the protection of the bytes lent.
    func refuseInsideBorrow(_ verb: String) throws(LarderError) {
        if isBorrowedByThisThread || BorrowMarker.isBorrowed(BorrowMarker.mark(of: self, for: .listing)) {
            throw LarderError(.invalidArgument, "cannot \(verb) the cache from inside its withValue(forKey:_:) or forEachEntry on the same thread", path: path)
        }
    }

    /// Whether this thread is inside this cache's `withValue`, which takes no lock but lends bytes
    /// a write through this handle could be asked to overwrite.
    private var isBorrowedByThisThread: Bool {
        BorrowMarker.isBorrowed(BorrowMarker.mark(of: self))
    }

    /// Throws `.closed` for a closed cache, `.suspended` for a suspended one.
    func checkOpen() throws(LarderError) {
        if isClosed { throw unusableError() }
    }

    /// Why a call cannot reach the store: suspended, closed, or opened before this process forked.
    @inline(never)
    func unusableError() -> LarderError {
        guard openGeneration.load() == Cache.suspendedGeneration, !store.isInheritedAcrossFork else { return store.closedError() }
        return LarderError(.suspended, "the cache is suspended: call resume() first", path: path)
    }

    /// Runs a write: the in-process exclusive lock, then the writer lock shared with every
    /// process (which also brings this process's view of the file up to date). `body` gets the
    /// store borrowed (`lend`).
    @inline(__always)
    func write<R>(_ body: (CacheStore) throws(LarderError) -> R) throws(LarderError) -> R {
        try beginWrite()
        do throws(LarderError) {
            let outcome = try storeReference.lend(body)
            endWrite()
            return outcome
        } catch {
            endFailedWrite()
            throw error
        }
    }

    /// `write` in two halves, without closures on the hot path: the in-process exclusive lock,
    /// then the writer lock. On failure neither is held.
    @inline(__always)
    private func beginWrite() throws(LarderError) {
        if isBorrowedByThisThread {
            throw LarderError(.invalidArgument, "cannot change the cache from inside its withValue(forKey:_:) on the same thread", path: path)
        }
        lockReference._withUnsafeGuaranteedRef { $0.lockExclusive() }
        do throws(LarderError) {
            try checkOpen()
            // An open handle's store is open, and was opened in this process.
            try storeReference.lend { (store) throws(LarderError) in try store.acquireWriterLockWhileOpen() }
        } catch {
            lockReference._withUnsafeGuaranteedRef { $0.unlockExclusive() }
            throw error
        }
    }

    @inline(__always)
    private func endWrite() {
        // Readers of this process take the file as the write left it.
        storeReference._withUnsafeGuaranteedRef { store in
            store.publishView()
            store.releaseWriterLock()
        }
        lockReference._withUnsafeGuaranteedRef { $0.unlockExclusive() }
    }

    /// `endWrite` after a write that threw: the next write checks the shared state again.
    @inline(never)
    private func endFailedWrite() {
        storeReference._withUnsafeGuaranteedRef { store in
            store.publishView()
            store.releaseWriterLockAfterFailure()
        }
        lockReference._withUnsafeGuaranteedRef { $0.unlockExclusive() }
    }

    /// Runs a point read of `key` without a lock, the way readers of other processes read:
    /// through the view the last writer of this process published, which the read checks at its
    /// end against the file's change counter. When the counter has moved past the view (a write
    /// of this or another process changed the meta page), the view is refreshed first. `body`
    /// gets the store to borrow (`lend`): a closure that would borrow it around `body` keeps the
    /// compiler from inlining `body`.
    @inline(__always)
    func read<R>(_ key: UnsafeRawBufferPointer, _ body: (Unmanaged<CacheStore>, ReadView) throws(LarderError) -> R) throws(LarderError) -> R {
        // The caller's key is often not in the cache (a read of a random key's bytes costs a
        // trip to memory): its load starts now, while the view is taken, and, when the calls
        // come one after another, while the previous read still waits for its record.
        if let start = key.baseAddress { lrd_prefetch(start) }
        while true {
            try checkOpen()
            if let view = storeReference._withUnsafeGuaranteedRef({ $0.publishedViewIfCurrent() }) {
                do {
                    return try body(storeReference, view)
                } catch where error == LarderError.staleView {
                    // Fall through to the refresh.
                }
            }
            try refreshView()
        }
    }

    /// Runs a read that looks at the store itself (its tables, its counters) under the shared
    /// in-process lock, which keeps writers of this process out, after taking up what other
    /// processes changed.
    func readUnderLock<R>(_ body: () throws(LarderError) -> R) throws(LarderError) -> R {
        while true {
            do {
                let outcome = try lock.withReadLock { () throws(LarderError) -> R? in
                    try checkOpen()
                    return store.viewIsCurrent ? try body() : nil
                }
                if let outcome { return outcome }
            } catch where error == LarderError.staleView {
                // Fall through to the refresh.
            }
            try refreshView()
        }
    }

    /// Takes up what other processes changed; out of line, as it is rare.
    @inline(never)
    private func refreshView() throws(LarderError) {
        try lock.withWriteLock { () throws(LarderError) in
            try checkOpen()
            try store.refreshView()
            store.publishView()
        }
    }
}

extension Unmanaged where Instance == CacheStore {
    /// Lends the store to `body` borrowed: no retain, no release (`Cache.storeReference`).
    @inline(__always)
    func lend<R>(_ body: (CacheStore) throws(LarderError) -> R) throws(LarderError) -> R {
        // `body` itself, not a closure around it: the compiler then inlines it.
        do {
            return try _withUnsafeGuaranteedRef(body)
        } catch {
            // What `body` threw: a `LarderError`.
            throw error as! LarderError
        }
    }
}

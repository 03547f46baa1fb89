import CLarderSupport
import Foundation

/// Reading many keys at once.
///
/// One read waits for memory twice in a row (the key's index slot, then its record), and a read
/// that takes several hundred instructions keeps the processor from reaching the next read's loads
/// while it waits. A batch first starts loading every key's index slot, then
/// every record those slots name, and only then reads the keys one by one as usual: the waits of
/// the whole batch overlap. The loads are hints, so the reads are exactly the single reads, with
/// their checks and their guarantees, only faster on a cache larger than the processor's caches.
extension Cache {
    /// How many keys start loading together: enough to keep the memory system busy, few enough
    /// that the first key's lines are still in the processor's cache when its turn comes.
    @usableFromInline static let batchWidth = 16

    /// Calls `body` with the value of each of `keys`, in order: its position in `keys`, and its
    /// bytes, or nil when it is missing or expired. The bytes are a copy, valid only during the
    /// call. Each read counts as a hit or a miss, and a hit as a use, as a single read does. A key
    /// that cannot be read (empty, too long; a damaged record) throws when its turn comes, after
    /// `body` has had the values before it.
    ///
    /// On a cache larger than the processor's caches this reads up to about twice as many small
    /// values per second as one call per key (BENCHMARKS.md, batched reads): the reads of a batch
    /// wait for memory together instead of in turn. Large values gain nothing (their copy is the
    /// read), and a copy of them made in `body` is a second one: read those with
    /// ``copyValue(forKey:into:)`` or ``withValue(forKey:_:)``.
    ///
    /// ```swift
    /// try cache.withValues(forKeys: thumbnailURLs) { index, bytes in
    ///     if let bytes { thumbnails[index] = Image(bytes) }
    /// }
    /// ```
    ///
    /// The corresponding C function is `larder_get_many`.
    @inlinable
    public func withValues<Keys: Collection>(forKeys keys: Keys,
                                             _ body: (_ index: Int, _ value: UnsafeRawBufferPointer?) throws -> Void) throws
    where Keys.Element: CacheKey {
        // Memory for values over 4 KiB, kept from batch to batch.
        var large: UnsafeMutableRawBufferPointer?
        defer { large?.deallocate() }
        try forEachBatch(of: keys) { batch, firstIndex in try readBatch(batch, firstIndex: firstIndex, large: &large, body) }
    }

    /// The values of `keys`, in order: nil where a key is missing or expired. Read as
    /// ``withValues(forKeys:_:)`` reads them, each copied once, into its `Data`.
    ///
    /// The corresponding C function is `larder_get_many`.
    @inlinable
    public func data<Keys: Collection>(forKeys keys: Keys) throws(LarderError) -> [Data?] where Keys.Element: CacheKey {
        var values: [Data?] = []
        values.reserveCapacity(keys.count)
        try forEachBatch(of: keys) { (batch, _) throws(LarderError) in try appendData(of: batch, to: &values) }
        return values
    }

    /// Calls `body` with the bytes of `keys` a batch at a time, and the position of each batch's
    /// first key in `keys`. Inlined into the caller, where the key type is concrete: only
    /// gathering the keys' bytes is generic.
    @inlinable
    func forEachBatch<Keys: Collection, E: Error>(of keys: Keys, _ body: (KeyBatch, Int) throws(E) -> Void) throws(E)
    where Keys.Element: CacheKey {
        var batch = KeyBatch()
        var position = 0
        var start = keys.startIndex
        while start != keys.endIndex {
            let end = keys.index(start, offsetBy: Cache.batchWidth, limitedBy: keys.endIndex) ?? keys.endIndex
            batch.removeAll()
            for key in keys[start..<end] { key.withCacheKeyBytes { batch.append($0) } }
            try body(batch, position)
            position += batch.count
            start = end
        }
    }

    /// `withValues` for one batch of keys, the first of which is at `firstIndex` in the caller's.
    /// Values up to 4 KiB are copied to the stack, larger ones to `large` (grown as needed).
    @usableFromInline
    func readBatch(_ batch: KeyBatch, firstIndex: Int, large: inout UnsafeMutableRawBufferPointer?,
                   _ body: (_ index: Int, _ value: UnsafeRawBufferPointer?) throws -> Void) throws {
        try withUnsafeTemporaryAllocation(byteCount: 4096, alignment: 16) { onStack in
            try batch.withKeys { keyAt in
                try readEach(count: batch.count, key: keyAt) { index in
                    let key = keyAt(index)
                    var buffer = large.map { $0.count > onStack.count ? $0 : onStack } ?? onStack
                    var length = try copyValue(forKeyBytes: key, into: buffer)
                    while let needed = length, needed > buffer.count {
                        large?.deallocate()
                        large = .allocate(byteCount: needed, alignment: 16)
                        buffer = large!
                        length = try copyValue(forKeyBytes: key, into: buffer)
                    }
                    try body(firstIndex + index, length.map { UnsafeRawBufferPointer(rebasing: buffer[..<$0]) })
                }
            }
        }
    }

    /// `data(forKeys:)` for one batch of keys: appends their values to `values`.
    @usableFromInline
    func appendData(of batch: KeyBatch, to values: inout [Data?]) throws(LarderError) {
        do {
            try batch.withKeys { keyAt in
                try readEach(count: batch.count, key: keyAt) { (index) throws(LarderError) in
                    values.append(try copyData(forKey: keyAt(index), includingExpired: false))
                }
            }
        } catch let error as LarderError {
            throw error
        } catch {
            preconditionFailure("only reads throw here")
        }
    }

    /// Runs `readOne` for the keys `key(0)`, ..., `key(count - 1)`, in order, a batch at a time,
    /// each batch after starting to load the index slots and then the records its reads will look
    /// at first. `key(i)` must stay the same bytes throughout; a key that is empty or too long is
    /// not looked at here (its read reports it).
    package func readEach<E: Error>(count: Int, key: (Int) -> UnsafeRawBufferPointer,
                                    _ readOne: (Int) throws(E) -> Void) throws(E) {
        var start = 0
        while start < count {
            let end = min(count, start + Cache.batchWidth)
            if let view = store.publishedViewIfCurrent() {
                withUnsafeTemporaryAllocation(of: KeyHash?.self, capacity: end - start) { hashes in
                    for index in start..<end {
                        let bytes = key(index)
                        let hash = (1...CacheStore.maximumKeyLength).contains(bytes.count) ? KeyHash(bytes) : nil
                        hashes.initializeElement(at: index - start, to: hash)
                        if let hash { view.prefetchHomes(of: hash) }
                    }
                    for case let hash? in hashes { view.prefetchRecord(of: hash) }
                }
            }
            for index in start..<end { try readOne(index) }
            start = end
        }
    }
}

/// The bytes of a batch of keys of any `CacheKey` type, one after another, so that they stay put
/// while the batch is read.
@usableFromInline
struct KeyBatch {
    @usableFromInline var bytes: [UInt8] = []
    @usableFromInline var starts: [Int] = []

    @inlinable init() {}

    @usableFromInline var count: Int { starts.count }

    @inlinable mutating func removeAll() {
        bytes.removeAll(keepingCapacity: true)
        starts.removeAll(keepingCapacity: true)
    }

    @inlinable mutating func append(_ key: UnsafeRawBufferPointer) {
        starts.append(bytes.count)
        bytes.append(contentsOf: key)
    }

    /// Calls `body` with a function from a key's position in the batch to its bytes.
    func withKeys<R>(_ body: ((Int) -> UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try bytes.withUnsafeBytes { all in
            try body { index in
                let end = index + 1 < starts.count ? starts[index + 1] : all.count
                return UnsafeRawBufferPointer(rebasing: all[starts[index]..<end])
            }
        }
    }
}

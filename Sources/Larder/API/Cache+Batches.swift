import CLarderSupport
import Foundation

/// Reading, writing and removing many keys at once.
///
/// One read waits for memory twice in a row (the key's index slot, then its record), and a read
/// that takes several hundred instructions keeps the processor from reaching the next read's loads
/// while it waits. A write over a stored key, and a removal, wait the same way, for the slot and
/// the record they change. A batch first starts loading every key's index slot, then every record
/// those slots name, and only then reads, writes or removes the keys one by one as usual: the
/// waits of the whole batch overlap. The loads are hints, so each call is exactly the single one,
/// with its checks and its guarantees, only faster on a cache larger than the processor's caches.
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
    /// On a cache larger than the processor's caches this reads two to two and a half times as
    /// many small values per second as one call per key (BENCHMARKS.md, batched reads and writes):
    /// the reads of a batch wait for memory together instead of in turn. Large values gain
    /// nothing (their copy is the read), and a copy of them made in `body` is a second one: read
    /// those with ``copyValue(forKey:into:)`` or ``withValue(forKey:_:)``.
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
        try withCopyBuffer { buffer in
            try forEachBatch(of: keys, key: { $0 }) { batch, firstIndex, _ in
                try readBatch(batch, firstIndex: firstIndex, buffer: &buffer, body)
            }
        }
    }

    /// Runs `body` with a buffer for the values' copies, one at a time: `readBatch` grows it for a
    /// longer one, and it is kept from batch to batch.
    @usableFromInline
    func withCopyBuffer(_ body: (inout UnsafeMutableRawBufferPointer) throws -> Void) throws {
        var buffer = try ValueMemory.allocate(4096, forValueIn: path)
        defer { ValueMemory.release(buffer) }
        try body(&buffer)
    }

    /// The values of `keys`, in order: nil where a key is missing or expired. Read as
    /// ``withValues(forKeys:_:)`` reads them, each copied once, into its `Data`.
    ///
    /// The corresponding C function is `larder_get_many`.
    @inlinable
    public func data<Keys: Collection>(forKeys keys: Keys) throws(LarderError) -> [Data?] where Keys.Element: CacheKey {
        var values: [Data?] = []
        values.reserveCapacity(keys.count)
        try forEachBatch(of: keys, key: { $0 }) { (batch, _, _) throws(LarderError) in try appendData(of: batch, to: &values) }
        return values
    }

    /// Stores the value of each of `entries` for its key, in the collection's order, as
    /// ``set(_:forKey:expiry:compression:)-(_,CacheKey,_,_)`` stores one: each write on its own,
    /// counted, evicting and replacing as a single one does, and visible to readers of every
    /// process as soon as it is made. When one cannot be stored (an empty or too long key, a value
    /// larger than the cache), it throws when its turn comes: the entries before it are stored,
    /// those after it are not. (A dictionary's order is its own, so which of its entries were
    /// stored then is not known in advance: check the keys first when that matters.)
    ///
    /// On a cache larger than the processor's caches this writes up to about twice as many small
    /// values a second as one call per key, when most of the keys are stored already
    /// (BENCHMARKS.md, batched reads and writes): a write of a stored key waits for its index slot
    /// and for the record it writes over, and the waits of a batch overlap.
    ///
    /// ```swift
    /// try cache.set(["/users/1": user1JSON, "/users/2": user2JSON], expiry: .seconds(300))
    /// // Pairs without labels: name them.
    /// try cache.set(zip(urls, images).map { (key: $0, value: $1) })
    /// ```
    ///
    /// Each entry is accessed twice, once for its key and once for its value: a lazy collection
    /// computes it twice.
    ///
    /// The corresponding C function is `larder_put_many`.
    @inlinable
    public func set<Key: CacheKey, Value: ContiguousBytes>(_ entries: some Collection<(key: Key, value: Value)>,
                                                          expiry: Expiry? = nil, compression: Compression? = nil) throws(LarderError) {
        try forEachBatch(of: entries, key: \.key) { (batch, _, batchEntries) throws(LarderError) in
            var position = batchEntries.startIndex
            try forEachInBatches(count: batch.count, key: batch.key(at:)) { (index) throws(LarderError) in
                let value = batchEntries[position].value
                batchEntries.formIndex(after: &position)
                try value.withUnsafeBytes { valueBytes in
                    Result { () throws(LarderError) in
                        try setValue(valueBytes, forKey: batch.key(at: index), expiry: expiry, compression: compression)
                    }
                }.get()
            }
        }
    }

    /// Removes the value of each of `keys`, in order, as ``removeValue(forKey:)`` removes one:
    /// each removal on its own, and visible to readers of every process as soon as it is made.
    /// A key that cannot be removed (empty, too long) throws when its turn comes: the keys before
    /// it are removed, those after it are not.
    ///
    /// A removal looks the key up as a read does, so a batch overlaps the waits for memory of its
    /// lookups, as ``withValues(forKeys:_:)`` does (BENCHMARKS.md, batched reads and writes).
    ///
    /// - Returns: How many live values were removed. An expired entry is removed too, but not
    ///   counted, as ``removeValue(forKey:)`` returns false for it; a key listed twice counts once.
    ///
    /// The corresponding C function is `larder_delete_many`.
    @inlinable @discardableResult
    public func removeValues<Keys: Collection>(forKeys keys: Keys) throws(LarderError) -> Int where Keys.Element: CacheKey {
        var removed = 0
        try forEachBatch(of: keys, key: { $0 }) { (batch, _, _) throws(LarderError) in
            try forEachInBatches(count: batch.count, key: batch.key(at:)) { (index) throws(LarderError) in
                if try removeValue(forKeyBytes: batch.key(at: index)) { removed += 1 }
            }
        }
        return removed
    }

    /// Calls `body` with the bytes of the keys of `elements` a batch at a time, the position of
    /// each batch's first element in `elements`, and the batch's elements. Inlined into the
    /// caller, where the types are concrete: only gathering the keys' bytes is generic.
    @inlinable
    func forEachBatch<Elements: Collection, Key: CacheKey, E: Error>(
        of elements: Elements, key: (Elements.Element) -> Key,
        _ body: (KeyBatch, Int, Elements.SubSequence) throws(E) -> Void
    ) throws(E) {
        var batch = KeyBatch()
        defer { batch.deallocate() }
        var position = 0
        var start = elements.startIndex
        while start != elements.endIndex {
            let end = elements.index(start, offsetBy: Cache.batchWidth, limitedBy: elements.endIndex) ?? elements.endIndex
            batch.removeAll()
            for element in elements[start..<end] { key(element).withCacheKeyBytes { batch.append($0) } }
            try body(batch, position, elements[start..<end])
            position += batch.count
            start = end
        }
    }

    /// `withValues` for one batch of keys, the first of which is at `firstIndex` in the caller's:
    /// each value copied into `buffer` (a `ValueMemory` buffer), which grows for a value longer
    /// than it.
    @usableFromInline
    func readBatch(_ batch: KeyBatch, firstIndex: Int, buffer: inout UnsafeMutableRawBufferPointer,
                   _ body: (_ index: Int, _ value: UnsafeRawBufferPointer?) throws -> Void) throws {
        try forEachInBatches(count: batch.count, key: batch.key(at:)) { index in
            let key = batch.key(at: index)
            var length = try copyValue(forKeyBytes: key, into: buffer)
            while let needed = length, needed > buffer.count {
                let larger = try ValueMemory.allocate(needed, forValueIn: path)
                ValueMemory.release(buffer)
                buffer = larger
                length = try copyValue(forKeyBytes: key, into: buffer)
            }
            try body(firstIndex + index, length.map { UnsafeRawBufferPointer(rebasing: buffer[..<$0]) })
        }
    }

    /// `data(forKeys:)` for one batch of keys: appends their values to `values`.
    @usableFromInline
    func appendData(of batch: KeyBatch, to values: inout [Data?]) throws(LarderError) {
        try forEachInBatches(count: batch.count, key: batch.key(at:)) { (index) throws(LarderError) in
            values.append(try copyData(forKey: batch.key(at: index), includingExpired: false))
        }
    }

    /// Runs `operation` for the keys `key(0)`, ..., `key(count - 1)`, in order, a batch at a
    /// time, each batch after starting to load the index slots and then the records that its reads
    /// or writes will look at first. `key(i)` must stay the same bytes throughout; a key that is
    /// empty or too long is not looked at here (its operation reports it).
    @usableFromInline
    package func forEachInBatches<E: Error>(count: Int, key: (Int) -> UnsafeRawBufferPointer,
                                            _ operation: (Int) throws(E) -> Void) throws(E) {
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
            for index in start..<end { try operation(index) }
            start = end
        }
    }
}

/// The bytes of a batch of keys of any `CacheKey` type, one after another in memory of its own,
/// so that they stay put while the batch is read or written. One serves a whole call on many
/// keys, batch after batch; its owner deallocates it.
@usableFromInline
struct KeyBatch {
    /// Where each key starts in `bytes`; `starts[count]` is where the next one would.
    @usableFromInline var starts: UnsafeMutableBufferPointer<Int>
    @usableFromInline var bytes: UnsafeMutableRawBufferPointer
    @usableFromInline var count = 0

    /// Room for a batch of keys of up to 64 bytes from the start.
    @inlinable init() {
        starts = .allocate(capacity: Cache.batchWidth + 1)
        starts.initialize(repeating: 0)
        bytes = .allocate(byteCount: Cache.batchWidth * 64, alignment: 8)
    }

    @inlinable func deallocate() {
        starts.deallocate()
        bytes.deallocate()
    }

    @inlinable mutating func removeAll() { count = 0 }

    @inlinable mutating func append(_ key: UnsafeRawBufferPointer) {
        precondition(count < Cache.batchWidth, "a batch holds \(Cache.batchWidth) keys")
        let start = starts[count], end = start + key.count
        if end > bytes.count { grow(toHold: end) }
        if let source = key.baseAddress, key.count > 0 {
            bytes.baseAddress!.advanced(by: start).copyMemory(from: source, byteCount: key.count)
        }
        count += 1
        starts[count] = end
    }

    /// Moves the bytes into memory of at least `byteCount` bytes: long keys, rare.
    @usableFromInline mutating func grow(toHold byteCount: Int) {
        let larger = UnsafeMutableRawBufferPointer.allocate(byteCount: max(byteCount, 2 * bytes.count), alignment: 8)
        larger.copyMemory(from: UnsafeRawBufferPointer(rebasing: bytes[..<starts[count]]))
        bytes.deallocate()
        bytes = larger
    }

    /// The bytes of the key at `index` (below `count`), valid until the batch changes.
    @inlinable func key(at index: Int) -> UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(start: bytes.baseAddress!.advanced(by: starts[index]), count: starts[index + 1] - starts[index])
    }
}

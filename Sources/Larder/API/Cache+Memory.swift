import CLarderSupport
import Foundation

/// The memory tier: typed values kept decoded in memory, in front of the file, and checked
/// against the file on every read (<doc:ObjectsInMemory>).
extension Cache {
    // MARK: - Values with a conversion

    /// Stores `value` for `key`, turned into bytes by `conversion`, and keeps the object in
    /// memory as `placement` says.
    ///
    /// - Parameters:
    ///   - value: The value.
    ///   - key: 1 to 4096 bytes.
    ///   - conversion: How to turn it into bytes, and what it costs in memory.
    ///   - expiry: When the entry stops being returned; `nil` uses `options.defaultExpiry`.
    ///   - compression: How to store the bytes; `nil` uses `options.compression`.
    ///   - placement: Memory and file (the default), memory only, or file only.
    /// - Throws: `.invalidArgument` when the conversion throws, when its cost for `value` is not
    ///   positive, or for `.memoryOnly` without a memory tier; otherwise as
    ///   ``set(_:forKey:expiry:compression:)-(_,CacheKey,_,_)``. Nothing is written then.
    public func set<Conversion: CacheConversion>(_ value: Conversion.Value, forKey key: some CacheKey, using conversion: Conversion,
                                                 expiry: Expiry? = nil, compression: Compression? = nil,
                                                 placement: Placement = .memoryAndFile) throws(LarderError) {
        try converting {
            try store(value, forKey: key, kind: MemoryKind(Conversion.self), placement: placement,
                      expiry: expiry, compression: compression,
                      encode: conversion.bytes(from:), cost: { value, _ in conversion.memoryCost(of: value) })
        }
    }

    /// The value stored for `key`, turned back by `conversion`: from memory when the object kept
    /// there is still the file's value, otherwise read from the file (and kept in memory).
    ///
    /// - Parameters:
    ///   - key: 1 to 4096 bytes.
    ///   - conversion: How the value was turned into bytes.
    ///   - placement: Where to look: memory and file (the default), memory only (never reads
    ///     the file), or file only (neither reads nor fills memory).
    /// - Returns: The value, or `nil` when the key is missing or expired.
    /// - Throws: `.invalidArgument` when the conversion throws (the bytes are not a `Value`) or
    ///   its cost is not positive; otherwise as ``data(forKey:)-(CacheKey)``.
    @inlinable
    public func value<Conversion: CacheConversion>(forKey key: some CacheKey, using conversion: Conversion,
                                                   placement: Placement = .memoryAndFile) throws(LarderError) -> Conversion.Value? {
        // Inlined, so that a hit is a copy of the value specialized for its type. `self` is
        // borrowed (the caller holds it through the call): a retain would write the handle's
        // first line, which every thread reading through the handle shares.
        let handle = Unmanaged.passUnretained(self)
        let kind = MemoryKind(Conversion.self)
        if placement != .fileOnly,
           let value = key.withCacheKeyBytes({ bytes in
               handle._withUnsafeGuaranteedRef { $0.rememberedObject(forKey: bytes, kind: kind)?.value(as: Conversion.Value.self) }
           }) {
            return value
        }
        return try convertedValue(forKey: key, using: conversion, placement: placement)
    }

    /// `value(forKey:using:placement:)` after a miss in memory.
    @usableFromInline
    func convertedValue<Conversion: CacheConversion>(forKey key: some CacheKey, using conversion: Conversion,
                                                     placement: Placement) throws(LarderError) -> Conversion.Value? {
        try converting {
            try missedValue(forKey: key, kind: MemoryKind(Conversion.self), placement: placement,
                            decode: conversion.value(from:), cost: { value, _ in conversion.memoryCost(of: value) })
        }
    }

    // MARK: - The tier

    /// Drops objects from memory, the least useful first, until they cost at most `bytes`. The
    /// file is not touched.
    ///
    /// - Throws: `.invalidArgument` for a negative `bytes`.
    public func trimMemory(toBytes bytes: Int) throws(LarderError) {
        guard bytes >= 0 else { throw LarderError(.invalidArgument, "cannot trim memory to \(bytes) bytes", path: path) }
        memory?.trim(toCost: bytes)
    }

    /// Drops every object from memory. The file is not touched.
    public func emptyMemory() {
        memory?.removeAll()
    }

    /// The number of objects in memory, and what they cost together (0 and 0 without a tier).
    public var memoryUsage: (count: Int, cost: Int) {
        guard let memory else { return (0, 0) }
        return (memory.count, memory.currentCost)
    }

    /// What the system's memory pressure asks of the tier (Apple platforms call it from a
    /// dispatch source; tests call it directly).
    func relieveMemory(_ pressure: MemoryPressure) {
        memory?.relieve(pressure)
    }

    // MARK: - Reading and writing through the tier

    /// Runs `body`, turning what a conversion threw into a `LarderError`.
    func converting<R>(_ body: () throws -> R) throws(LarderError) -> R {
        do {
            return try body()
        } catch let error as LarderError {
            throw error
        } catch {
            throw LarderError(.invalidArgument, "the conversion failed: \(error)", path: path)
        }
    }

    /// Checks that `cost` is one the tier can count.
    private func checkedCost(_ cost: Int) throws(LarderError) -> Int {
        guard cost > 0 else {
            throw LarderError(.invalidArgument, "a memory cost must be positive; the conversion said \(cost)", path: path)
        }
        return cost
    }

    /// The object kept in memory for the key `bytes` by a conversion of kind `kind`, while the
    /// key's entry in the file is still the record it came from (one lookup, no decoding), or
    /// nil. A hit is counted; a miss is left to the caller (which reads the file and counts it).
    ///
    /// It hashes the key once (for the tier and the file's index) and allocates nothing. While
    /// nothing was written, it returns the object borrowed from its shard: the caller copies the
    /// value out through the lease at once (`MemoryLease.value(as:)`).
    @usableFromInline
    func rememberedObject(forKey bytes: UnsafeRawBufferPointer, kind: MemoryKind) -> MemoryLease? {
        guard let unretainedMemory, (try? checkOpen()) != nil else { return nil }
        return unretainedMemory._withUnsafeGuaranteedRef { memory in
            storeReference._withUnsafeGuaranteedRef { store in rememberedObject(forKey: bytes, kind: kind, in: memory, store: store) }
        }
    }

    /// `rememberedObject(forKey:kind:)` with the tier and the store borrowed.
    @inline(__always)
    private func rememberedObject(forKey bytes: UnsafeRawBufferPointer, kind: MemoryKind, in memory: MemoryTier,
                                  store: CacheStore) -> MemoryLease? {
        let hash = KeyHash(bytes).value
        guard let hit = memory.object(forKey: bytes, hash: hash, kind: kind) else { return nil }
        guard let identity = hit.origin.record else { return MemoryLease(borrowing: hit.object, readerWord: hit.readerWord) }
        // No writer has changed the file since the last check: only the clock can end the entry.
        let state = store.state
        let last = hit.check
        if last.store == store.serial, last.writeCount == state.writeCount, state.countsWrites,
           last.deadline == .max || SystemCall.nowMilliseconds() < last.deadline {
            return MemoryLease(borrowing: hit.object, readerWord: hit.readerWord)
        }
        // The checks below take locks and write to the shard: the object is retained first.
        let object = hit.object.retain()
        memory.leave(hit)
        return checkedObject(object, forKey: bytes, hash: hash, identity: identity, origin: hit.origin, in: memory, store: store)
    }

    /// The end of `rememberedObject(forKey:kind:)` when a writer changed the file since the last
    /// check: `object` (retained once, and given back on a miss) while the key's entry is still
    /// `identity`.
    @inline(never)
    private func checkedObject(_ object: Unmanaged<MemoryObject>, forKey bytes: UnsafeRawBufferPointer, hash: UInt64,
                               identity: RecordIdentity, origin: MemoryOrigin, in memory: MemoryTier,
                               store: CacheStore) -> MemoryLease? {
        object._withUnsafeGuaranteedRef { $0.prefetch() }
        let state = store.state
        let view = store.publishedViewIfCurrent()
        // The record's header and the index slots start loading together.
        if let view, identity.offset < view.limit { lrd_prefetch(view.base + identity.offset) }
        view?.prefetchHomes(of: KeyHash(precomputed: hash))
        // The shortcut (slot, first word, sequence number) settles the usual check; the full
        // lookup everything else. A shortcut that no write overlapped stands for the next reads.
        let writeCount = state.writeCount
        if let view, let deadline = store.stillEntryDeadline(identity, hash: KeyHash(precomputed: hash), in: view) {
            lrd_fence_acquire()
            if writeCount & 1 == 0, state.writeCount == writeCount {
                let check = MemoryCheck(store: store.serial, writeCount: writeCount, deadline: deadline)
                memory.noteCheck(check, forKey: bytes, hash: hash, origin: origin)
            }
            return MemoryLease(owning: object)
        }
        let now = liveIdentity(forKey: bytes, hash: hash, in: view, store: store)
        guard now == .entry(identity) else {
            object.release()
            memory.retractHit(forHash: hash)
            if now != nil { memory.remove(MemoryKey(bytes, hash: hash), ifOrigin: origin) }
            return nil
        }
        return MemoryLease(owning: object)
    }

    /// The identity of the key `bytes`'s entry (XXH64 `hash`), by a full lookup: through `view`
    /// if it is still current, otherwise (or on `.staleView`) through `read`, which refreshes
    /// it. Nil on an error (a key's length), which is the read's to throw: the caller reads the
    /// file.
    @inline(never)
    private func liveIdentity(forKey bytes: UnsafeRawBufferPointer, hash: UInt64, in view: ReadView?,
                              store: CacheStore) -> CacheStore.IdentityLookup? {
        (view.flatMap { try? store.liveIdentity(forKey: bytes, hash: hash, in: $0) }) ?? (try? liveIdentity(forKey: bytes, hash: hash))
    }

    /// The value of `key`: the object kept in memory while the key's entry in the file is still
    /// the record it came from (one lookup, no decoding), otherwise decoded from the file and
    /// kept. `kind` names the conversion (objects kept by another are not returned).
    func rememberedValue<Value>(forKey key: some CacheKey, kind: MemoryKind, placement: Placement,
                                decode: (Data) throws -> Value, cost: (Value, Int?) throws -> Int) throws -> Value? {
        let handle = Unmanaged.passUnretained(self)
        if placement != .fileOnly,
           let value = key.withCacheKeyBytes({ bytes in
               handle._withUnsafeGuaranteedRef { $0.rememberedObject(forKey: bytes, kind: kind)?.value(as: Value.self) }
           }) {
            return value
        }
        return try missedValue(forKey: key, kind: kind, placement: placement, decode: decode, cost: cost)
    }

    /// The `Codable` value of `key`, through memory, or what the read or the decoding threw.
    func rememberedCodable<Value: Decodable>(_ type: Value.Type, forKey key: Data,
                                             coder: (any CacheCoder)?) -> Result<Value?, any Error> {
        Result {
            try rememberedValue(forKey: key, kind: MemoryKind(Value.self, coder: coder ?? options.coder),
                                placement: Cache.placement(.memoryAndFile, of: Value.self),
                                decode: { try decoded(type, from: $0, coder: coder) },
                                cost: { _, byteCount in Cache.codableCost(byteCount ?? 0) })
        }
    }

    /// The value of `key` after `rememberedObject` found none: read from the file, decoded, and
    /// kept in memory (unless `placement` says otherwise).
    func missedValue<Value>(forKey key: some CacheKey, kind: MemoryKind, placement: Placement,
                            decode: (Data) throws -> Value, cost: (Value, Int?) throws -> Int) throws -> Value? {
        guard let memory, placement != .fileOnly else {
            guard let data = try data(forKey: key) else { return nil }
            return try decode(data)
        }
        let memoryKey = MemoryKey(key)
        try checkOpen()
        memory.countMiss(forKey: memoryKey)
        if placement == .memoryOnly {
            try memoryKey.withBytes { bytes in Result { () throws(LarderError) in try store.validateKey(bytes) } }.get()
            return nil
        }
        // The identity before and after the copy: a key's current sequence number only grows, so
        // equal ones mean the bytes copied were that record's (FORMAT.md 7.7.8).
        let before = try liveIdentity(forKey: memoryKey)
        guard let data = try data(forKey: memoryKey.bytes) else { return nil }
        let value = try decode(data)
        let valueCost = try checkedCost(cost(value, data.count))
        if case .entry(let identity) = before, try liveIdentity(forKey: memoryKey) == before {
            memory.insert(value, forKey: memoryKey, kind: kind, origin: .record(identity), cost: valueCost)
        }
        return value
    }

    /// Stores `value` for `key` as `placement` says: its bytes (from `encode`) in the file, the
    /// object in memory with the identity of the record written. `cost` is given the length of
    /// the bytes, or nil for a value kept in memory only (never encoded).
    func store<Value>(_ value: Value, forKey key: some CacheKey, kind: MemoryKind, placement: Placement,
                      expiry: Expiry?, compression: Compression?,
                      encode: (Value) throws -> Data, cost: (Value, Int?) throws -> Int) throws {
        let memoryKey = MemoryKey(key)
        let keyData = memoryKey.bytes
        if placement == .memoryOnly {
            guard let memory else {
                throw LarderError(.invalidArgument, "a memory-only write needs a memory tier (Options.memory)", path: path)
            }
            try checkOpen()
            try keyData.withUnsafeBytes { bytes in Result { () throws(LarderError) in try store.validateKey(bytes) } }.get()
            if let expiry, !expiry.isNumber { throw notANumber() }
            let valueCost = try checkedCost(cost(value, nil))
            memory.insert(value, forKey: memoryKey, kind: kind, origin: .memoryOnly, cost: valueCost)
            return
        }
        let data = try encode(value)
        let keep = placement == .memoryAndFile && memory != nil
        // Checked before the write: a cost refused leaves the file as it was.
        let valueCost = keep ? try checkedCost(cost(value, data.count)) : 0
        let identity = try keyData.withUnsafeBytes { keyBytes in
            data.withUnsafeBytes { valueBytes in
                Result { () throws(LarderError) in
                    try setValueReturningIdentity(valueBytes, forKey: keyBytes, expiry: expiry, compression: compression)
                }
            }
        }.get()
        if keep, let identity {
            memory?.insert(value, forKey: memoryKey, kind: kind, origin: .record(identity), cost: valueCost)
        } else {
            memory?.remove(memoryKey)
        }
    }

    /// `setValue`, returning the identity of the record written (nil if the key has none after).
    func setValueReturningIdentity(_ value: UnsafeRawBufferPointer, forKey key: UnsafeRawBufferPointer, expiry: Expiry?,
                                   compression: Compression?) throws(LarderError) -> RecordIdentity? {
        if let expiry, !expiry.isNumber { throw notANumber() }
        let (expiry, compress) = settings(expiry: expiry, compression: compression, valueLength: value.count)
        return try write { (store) throws(LarderError) in
            try store.put(key: key, value: value, compress: compress, expiry: expiry)
            return store.identityOfEntry(forKey: key)
        }
    }

    /// The identity of `key`'s live, unexpired entry, from one lookup without a lock.
    func liveIdentity(forKey key: MemoryKey) throws(LarderError) -> CacheStore.IdentityLookup {
        try key.withBytes { bytes in
            Result { () throws(LarderError) in try liveIdentity(forKey: bytes, hash: key.hash) }
        }.get()
    }

    /// The identity of the key `bytes`'s live, unexpired entry; `hash` is their XXH64.
    @inline(__always)
    func liveIdentity(forKey bytes: UnsafeRawBufferPointer, hash: UInt64) throws(LarderError) -> CacheStore.IdentityLookup {
        try read(bytes) { (loan, view) throws(LarderError) in
            try loan.lend { (store) throws(LarderError) in try store.liveIdentity(forKey: bytes, hash: hash, in: view) }
        }
    }

    /// Drops the object of `key` from memory (removed from the file through this handle).
    func forgetInMemory(_ key: UnsafeRawBufferPointer) {
        memory?.remove(MemoryKey(key))
    }
}

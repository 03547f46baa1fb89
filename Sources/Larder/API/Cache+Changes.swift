import Foundation

/// Watching: changes to a key, to keys with a prefix or to every key, made by any process that
/// has the file open.
///
/// Each watch waits on a thread of its own, which sleeps in the kernel until a writer changes
/// the file. Cancelling the task that iterates the sequence, or dropping the sequence, ends the
/// watch and its thread.
extension Cache {
    /// The changes to `key` from now on: ``CacheChange/Kind/stored``, ``CacheChange/Kind/removed``,
    /// ``CacheChange/Kind/evicted``, ``CacheChange/Kind/expired`` or ``CacheChange/Kind/cleared``.
    ///
    /// ```swift
    /// for await change in try cache.changes(forKey: "user/42") {
    ///     if change.kind == .stored { reloadUser() }
    /// }
    /// ```
    ///
    /// Changes may be coalesced; the last one delivered describes the last write.
    ///
    /// - Throws: `.invalidArgument` for a key that is empty or longer than 4096 bytes,
    ///   `.closed` when the cache is closed.
    ///
    /// The corresponding C functions are `larder_wait_change` and `larder_read_changes`.
    public func changes(forKey key: some CacheKey) throws(LarderError) -> AsyncStream<CacheChange> {
        let key = key.withCacheKeyBytes { Data($0) }
        guard (1...Cache.maximumKeyLength).contains(key.count) else {
            throw LarderError(.invalidArgument, "a key is 1 to \(Cache.maximumKeyLength) bytes, not \(key.count)", path: path)
        }
        return try watch(.key(key))
    }

    /// The changes to keys that start with `prefix` from now on. When the watch cannot read which
    /// keys changed (more than the file keeps, 128, came before it could read them, or, on a
    /// read-only handle, no read-write handle watched), it lists the keys again, delivers those
    /// that appeared as stored and those that went as removed, then
    /// ``CacheChange/Kind/resynced``: look at the keys again.
    ///
    /// The watch lists the keys under the prefix once when it starts (it names the keys of
    /// removals by them), and again after a resync: work and memory proportional to those keys.
    ///
    /// - Throws: `.closed` when the cache is closed.
    public func changes(forKeysWithPrefix prefix: some CacheKey) throws(LarderError) -> AsyncStream<CacheChange> {
        try watch(.prefix(prefix.withCacheKeyBytes { Data($0) }))
    }

    /// The changes to every key from now on, as ``changes(forKeysWithPrefix:)`` delivers them.
    ///
    /// - Throws: `.closed` when the cache is closed.
    public func changes() throws(LarderError) -> AsyncStream<CacheChange> {
        try watch(.prefix(Data()))
    }

    private func watch(_ subject: ChangeWatch.Subject) throws(LarderError) -> AsyncStream<CacheChange> {
        try checkOpen()
        let (stream, continuation) = AsyncStream.makeStream(of: CacheChange.self, bufferingPolicy: .bufferingNewest(4096))
        let watch = try ChangeWatch(cache: self, subject: subject, continuation: continuation)
        continuation.onTermination = { _ in watch.stop() }
        watch.begin()
        return stream
    }

    /// The store a watch reads now: nil while the cache is suspended (``isSuspended``) or closed.
    func storeForWatching() -> CacheStore? {
        lifeCycle.lock()
        defer { lifeCycle.unlock() }
        return isClosed ? nil : store
    }

    /// The keys of live entries whose hash has `hashBits` (the change ring's 61 bits).
    func liveKeys(hashedAs hashBits: UInt64) throws(LarderError) -> [[UInt8]] {
        try read(UnsafeRawBufferPointer(start: nil, count: 0)) { _, view in view.liveKeys(hashedAs: hashBits) }
    }
}

/// The change ring by number and hash, for the C API (`larder_wait_change`, `larder_read_changes`):
/// a program that keeps its own cursor and knows its keys' hashes (`changeHash(of:)`).
@_spi(Changes)
extension Cache {
    /// One change as the file keeps it: the key's hash (`changeHash(of:)`) and the kind, 1 to 5
    /// as `larder_change` has them, or 6 when changes were lost (look at your keys again).
    public struct NumberedChange: Sendable, Equatable {
        public let keyHash: UInt64
        public let kind: UInt32
    }

    /// The kind of a `NumberedChange` that says changes were lost.
    public static let lostChangesKind: UInt32 = UInt32(ChangeRing.Kind.rebuilt.rawValue)

    /// The hash a change of `key` carries.
    public static func changeHash(of key: UnsafeRawBufferPointer) -> UInt64 { KeyHash(key).value & ~7 }

    /// The cursor of changes from now on. From the first one taken, the handle counts as a
    /// watcher until it closes: writers record which keys they change only while one is counted.
    public var changeCursor: UInt64 {
        get throws(LarderError) {
            lifeCycle.lock()
            defer { lifeCycle.unlock() }
            try checkOpen()
            watchTally.beginStanding(in: store)
            return store.changes.nextNumber
        }
    }

    /// Blocks the calling thread until a change after `cursor` or until `milliseconds` pass.
    /// Returns whether there is one. Never call it from a task of Swift's shared pool.
    public func waitForChange(after cursor: UInt64, milliseconds: UInt32) throws(LarderError) -> Bool {
        try checkOpen()
        let ring = store.changes
        let counted = !store.isReadOnly
        if counted { ring.addWatcher() }
        defer { if counted { ring.removeWatcher() } }
        let deadline = ContinuousClock.now + .milliseconds(milliseconds)
        var slice = counted ? ChangeWatch.firstWaitMilliseconds : ChangeWatch.pollMilliseconds
        while ring.nextNumber == cursor {
            let left = deadline - ContinuousClock.now
            guard left > .zero else { return false }
            let leftMilliseconds = left.components.seconds * 1000 + left.components.attoseconds / 1_000_000_000_000_000 + 1
            ring.wait(whileAt: cursor, milliseconds: UInt32(clamping: min(Int64(slice), leftMilliseconds)))
            if counted { slice = ChangeWatch.countedWaitMilliseconds }
            try checkOpen()
        }
        return true
    }

    /// Up to `limit` changes after `cursor`, oldest first, moving `cursor` past them. When the
    /// file no longer holds them all, one change of `lostChangesKind`, and `cursor` moves to now.
    public func readChanges(since cursor: inout UInt64, limit: Int) throws(LarderError) -> [NumberedChange] {
        try checkOpen()
        guard limit > 0 else { return [] }
        switch store.changes.changes(since: cursor) {
        case .changes(let changes, _):
            let taken = changes.prefix(limit)
            cursor &+= UInt64(taken.count)
            return taken.map { NumberedChange(keyHash: $0.hashBits, kind: UInt32($0.kind.rawValue)) }
        case .lost(let next):
            cursor = next
            return [NumberedChange(keyHash: 0, kind: Cache.lostChangesKind)]
        }
    }
}

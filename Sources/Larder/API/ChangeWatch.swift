import Foundation

/// One watch of a cache: a thread of its own waits for the change ring to move, reads it, and
/// yields what its subject cares about. Never a thread of Swift's shared pool: it blocks in the
/// kernel between changes.
final class ChangeWatch: @unchecked Sendable {
    /// What the watch reports changes of: one key, or every key with a prefix (empty: all).
    enum Subject {
        case key(Data)
        case prefix(Data)
    }

    /// How long a counted watch sleeps at most between looks: how soon a stopped watch ends.
    static let countedWaitMilliseconds: UInt32 = 100
    /// How often a watch of a read-only handle looks: writers do not know it waits, and wake it
    /// only when a counted watch waits too.
    static let pollMilliseconds: UInt32 = 20
    /// How long a watch sleeps at most right after it is counted in: a writer that read the
    /// count just before may not wake it (FORMAT.md 3.3).
    static let firstWaitMilliseconds: UInt32 = 20
    /// Looks at a key's entry while writers keep changing the index, before the careful read.
    static let identityAttempts = 16

    private let cache: Cache
    private let subject: Subject
    private let continuation: AsyncStream<CacheChange>.Continuation
    private let stopped = AtomicWord()
    /// The store the watch started on, and the change number it starts from there.
    private let startStore: CacheStore
    private let start: UInt64
    /// A watch of a prefix names the keys of removals by the keys it has seen: those there when
    /// it started, and those it saw stored. Touched only by the watch's thread once it runs.
    private var known: [UInt64: Data]
    /// A watch of a key: its entry when a look at the cache last reported it (nil: unknown, or
    /// reported from the ring since), so that a look that finds it unchanged reports nothing.
    /// Touched only by the watch's thread.
    private var reported: CacheStore.IdentityLookup?

    /// A watch from now on; its thread starts with `start()`. The cache is open.
    init(cache: Cache, subject: Subject, continuation: AsyncStream<CacheChange>.Continuation) throws(LarderError) {
        self.cache = cache
        self.subject = subject
        self.continuation = continuation
        cache.lifeCycle.lock()
        defer { cache.lifeCycle.unlock() }
        try cache.checkOpen()
        startStore = cache.store
        // Counted before the number is read: a writer that saw no watcher leaves that change's
        // slot stale, which the watch reads as lost, never as another change.
        cache.watchTally.begin(in: startStore)
        start = startStore.changes.nextNumber
        known = ChangeWatch.keys(of: subject, in: cache)
    }

    func begin() {
        let thread = Thread { [self] in run() }
        thread.name = "Larder watch"
        thread.start()
    }

    /// Ends the watch: its thread stops waiting now, and finishes the stream.
    func stop() {
        stopped.store(1)
        cache.store.changes.wakeWatchers()
    }

    private func run() {
        defer {
            cache.lifeCycle.lock()
            cache.watchTally.end()
            cache.lifeCycle.unlock()
            continuation.finish()
        }
        var store = startStore
        var cursor = start
        var known = self.known
        // Set when a look at the cache failed (the cache was suspended meanwhile): the watch
        // looks again once it can.
        var mustResync = false
        var isFirstWait = true
        while stopped.load() == 0 {
            guard let current = cache.storeForWatching() else {
                // Closed: the watch ends. Suspended: it waits for `resume()`, on its own thread.
                if !cache.isSuspended { return }
                Thread.sleep(forTimeInterval: Double(ChangeWatch.pollMilliseconds) / 1000)
                continue
            }
            if current !== store {
                // Resumed on a store opened anew: its ring is another's; look at the keys again.
                store = current
                cursor = current.changes.nextNumber
                reported = nil
                mustResync = true
                isFirstWait = true
            }
            if mustResync {
                mustResync = (try? resync(known: &known)) == nil
                // A look that failed again (suspended, busy) is tried again in a while.
                if mustResync { Thread.sleep(forTimeInterval: Double(ChangeWatch.pollMilliseconds) / 1000) }
                continue
            }
            let ring = store.changes
            ring.wait(whileAt: cursor, milliseconds: store.isReadOnly ? ChangeWatch.pollMilliseconds
                                                     : isFirstWait ? ChangeWatch.firstWaitMilliseconds : ChangeWatch.countedWaitMilliseconds)
            isFirstWait = false
            guard stopped.load() == 0 else { return }
            switch ring.changes(since: cursor) {
            case .changes(let changes, let next):
                cursor = next
                mustResync = (try? deliver(changes, known: &known)) == nil
            case .lost(let next):
                cursor = next
                mustResync = (try? resync(known: &known)) == nil
            }
        }
    }

    private func deliver(_ changes: [ChangeRing.Change], known: inout [UInt64: Data]) throws(LarderError) {
        switch subject {
        case .key(let key):
            let hash = key.withUnsafeBytes { KeyHash($0).value }
            // One change per batch: the last one of the key says its state.
            var last: CacheChange?
            for change in changes {
                switch change.kind {
                case .cleared: last = CacheChange(.cleared, key: key)
                case .rebuilt: last = try currentState(of: key)
                default: if change.isOfKey(hashed: hash) { last = CacheChange(.init(change.kind), key: key) }
                }
            }
            if let last {
                reported = nil
                continuation.yield(last)
            }
        case .prefix(let prefix):
            for change in changes {
                switch change.kind {
                case .stored:
                    let keys = try cache.liveKeys(hashedAs: change.hashBits)
                    for key in keys where key.starts(with: prefix) {
                        known[change.hashBits] = Data(key)
                        continuation.yield(CacheChange(.stored, key: Data(key)))
                    }
                case .removed, .evicted, .expired:
                    if let key = known.removeValue(forKey: change.hashBits) {
                        continuation.yield(CacheChange(.init(change.kind), key: key))
                    }
                case .cleared:
                    known.removeAll()
                    continuation.yield(CacheChange(.cleared, key: nil))
                case .rebuilt:
                    try resync(known: &known)
                }
            }
        }
    }

    /// After changes the ring no longer holds: a watch of a key reports the key's state; a watch
    /// of a prefix lists its keys again, reports those that came as stored and those that went as
    /// removed, then `resynced` (a key there before and after may hold another value).
    private func resync(known: inout [UInt64: Data]) throws(LarderError) {
        switch subject {
        case .key(let key):
            // The identity of the key's entry (a read-write handle marks it visited, as a read),
            // looked at again a few times while a writer is in the way.
            var now = CacheStore.IdentityLookup.unsettled
            for attempt in 0..<ChangeWatch.identityAttempts where now == .unsettled {
                if attempt > 0 { Thread.sleep(forTimeInterval: 0.001) }
                now = try key.withUnsafeBytes { bytes in
                    Result { () throws(LarderError) in try cache.liveIdentity(forKey: bytes, hash: KeyHash(bytes).value) }
                }.get()
            }
            if now == .unsettled {
                reported = nil
                continuation.yield(try currentState(of: key))
            } else if now != reported {
                // Another record, or none: a change since the last report. The same record is
                // the same value (FORMAT.md 7.7.8): nothing to report.
                reported = now
                continuation.yield(CacheChange(now == .absent ? .removed : .stored, key: key))
            }
        case .prefix:
            let now = try ChangeWatch.listKeys(of: subject, in: cache)
            for (hash, key) in now where known[hash] == nil { continuation.yield(CacheChange(.stored, key: key)) }
            for (hash, key) in known where now[hash] == nil { continuation.yield(CacheChange(.removed, key: key)) }
            known = now
            continuation.yield(CacheChange(.resynced, key: nil))
        }
    }

    private func currentState(of key: Data) throws(LarderError) -> CacheChange {
        CacheChange(try cache.containsValue(forKey: key) ? .stored : .removed, key: key)
    }

    /// The keys under the prefix now, by the ring's hash bits; none for a watch of a key.
    private static func keys(of subject: Subject, in cache: Cache) -> [UInt64: Data] {
        (try? listKeys(of: subject, in: cache)) ?? [:]
    }

    private static func listKeys(of subject: Subject, in cache: Cache) throws(LarderError) -> [UInt64: Data] {
        guard case .prefix(let prefix) = subject else { return [:] }
        var known: [UInt64: Data] = [:]
        for key in try cache.keys(withPrefix: prefix) { known[key.withUnsafeBytes { KeyHash($0).value } & ~7] = key }
        return known
    }
}

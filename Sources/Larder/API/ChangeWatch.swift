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

    private let cache: Cache
    private let subject: Subject
    private let continuation: AsyncStream<CacheChange>.Continuation
    private let stopped = AtomicWord()
    /// Whether writers count this watch (a read-write handle's), so that they wake it.
    private let isCounted: Bool
    /// The change number the watch starts from: the changes made once it was asked for.
    private let start: UInt64
    /// A watch of a prefix names the keys of removals by the keys it has seen: those there when
    /// it started, and those it saw stored. Touched only by the watch's thread once it runs.
    private var known: [UInt64: Data]

    /// A watch from now on; its thread starts with `start()`.
    init(cache: Cache, subject: Subject, continuation: AsyncStream<CacheChange>.Continuation) {
        self.cache = cache
        self.subject = subject
        self.continuation = continuation
        let ring = cache.store.changes
        isCounted = !cache.store.isReadOnly
        if isCounted { ring.addWatcher() }
        start = ring.nextNumber
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

    private var isWatching: Bool { stopped.load() == 0 && (try? cache.checkOpen()) != nil }

    private func run() {
        let ring = cache.store.changes
        let counted = isCounted
        defer {
            if counted { ring.removeWatcher() }
            continuation.finish()
        }
        var cursor = start
        var known = self.known
        while isWatching {
            ring.wait(whileAt: cursor, milliseconds: counted ? ChangeWatch.countedWaitMilliseconds : ChangeWatch.pollMilliseconds)
            guard isWatching else { return }
            switch ring.changes(since: cursor) {
            case .changes(let changes, let next):
                cursor = next
                deliver(changes, known: &known)
            case .lost(let next):
                cursor = next
                resync(known: &known)
            }
        }
    }

    private func deliver(_ changes: [ChangeRing.Change], known: inout [UInt64: Data]) {
        switch subject {
        case .key(let key):
            let hash = key.withUnsafeBytes { KeyHash($0).value }
            // One change per batch: the last one of the key says its state.
            var last: CacheChange?
            for change in changes {
                switch change.kind {
                case .cleared: last = CacheChange(.cleared, key: key)
                case .rebuilt: last = currentState(of: key)
                default: if change.isOfKey(hashed: hash) { last = CacheChange(.init(change.kind), key: key) }
                }
            }
            if let last { continuation.yield(last) }
        case .prefix(let prefix):
            for change in changes {
                switch change.kind {
                case .stored:
                    let keys = (try? cache.liveKeys(hashedAs: change.hashBits)) ?? []
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
                    resync(known: &known)
                }
            }
        }
    }

    /// After changes the ring no longer holds: a watch of a key reports the key's state, a watch
    /// of a prefix lists its keys again and reports `resynced`.
    private func resync(known: inout [UInt64: Data]) {
        switch subject {
        case .key(let key):
            continuation.yield(currentState(of: key))
        case .prefix:
            known = ChangeWatch.keys(of: subject, in: cache)
            continuation.yield(CacheChange(.resynced, key: nil))
        }
    }

    private func currentState(of key: Data) -> CacheChange {
        CacheChange(cache.contains(key) ? .stored : .removed, key: key)
    }

    /// The keys under the prefix now, by the ring's hash bits; none for a watch of a key.
    private static func keys(of subject: Subject, in cache: Cache) -> [UInt64: Data] {
        guard case .prefix(let prefix) = subject, let keys = try? cache.keys(withPrefix: prefix) else { return [:] }
        var known: [UInt64: Data] = [:]
        for key in keys { known[key.withUnsafeBytes { KeyHash($0).value } & ~7] = key }
        return known
    }
}

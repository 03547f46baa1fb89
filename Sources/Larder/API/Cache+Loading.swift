import Foundation

/// How a read-through call (``Cache/load(_:forKey:expiry:policy:coder:using:)``) uses the cache
/// and the loader.
public struct LoadPolicy: Hashable, Sendable {
    /// Call the loader even when the cache holds an unexpired value, to refresh it.
    public var reloadsFreshValues: Bool
    /// When the loader throws, return the copy the cache still holds for the key (expired, or
    /// unexpired when reloading), marked ``LoadResult/Source-swift.enum/stale``, instead of
    /// throwing.
    public var servesStaleOnFailure: Bool

    /// A policy; the named ones below cover the usual cases.
    public init(reloadsFreshValues: Bool = false, servesStaleOnFailure: Bool = false) {
        self.reloadsFreshValues = reloadsFreshValues
        self.servesStaleOnFailure = servesStaleOnFailure
    }

    /// An unexpired cached value if there is one, otherwise the loader's; a failed load throws.
    public static let cacheFirst = LoadPolicy()
    /// As ``cacheFirst``, but when the loader fails, an expired copy still in the file is
    /// returned, marked stale: the screen shows something while the network is down.
    public static let offlineFirst = LoadPolicy(servesStaleOnFailure: true)
    /// Always call the loader; when it fails, return whatever the cache holds, marked stale: the
    /// "refresh when the network answers" half of an offline-first screen.
    public static let refresh = LoadPolicy(reloadsFreshValues: true, servesStaleOnFailure: true)
}

/// A value from a read-through call, and where it came from.
public struct LoadResult<Value> {
    /// Where a value came from.
    public enum Source: Hashable, Sendable {
        /// An unexpired value from the cache; the loader was not called.
        case cache
        /// The loader's value, now stored in the cache when the cache could keep it (not on a
        /// read-only handle, nor a value too large, nor when the disk was full) and nothing
        /// newer was stored for the key while it loaded.
        case loader
        /// The loader failed (see ``LoadResult/loadError``); this is the copy the cache held,
        /// possibly expired.
        case stale
    }

    /// The value.
    public let value: Value
    /// Where it came from.
    public let source: Source
    /// What the loader threw, when ``source`` is ``Source-swift.enum/stale``.
    public let loadError: (any Error)?

    /// Whether the value is the cache's copy returned because the loader failed.
    public var isStale: Bool { source == .stale }
}

extension LoadResult: Sendable where Value: Sendable {}

extension Cache {
    /// The value for `key`; on a miss or an expired entry, the one `loader` makes, stored for
    /// next time.
    ///
    /// ```swift
    /// let user = try await cache.value(User.self, forKey: "user/42", expiry: .seconds(300)) {
    ///     try await api.user(42)
    /// }
    /// ```
    ///
    /// Concurrent callers for the same key share one call of the loader (single flight): a
    /// hundred tasks asking for a missing key at once cause one load, and all get its value, or
    /// all its error. The load runs at the priority of its most urgent caller: a prefetch started
    /// in the background is raised when the interface asks for the same key (on Apple platforms
    /// from macOS 26 and iOS 26, where tasks can be raised). A stored value that no longer
    /// decodes as `Value`, or that fails its checksum, counts as a miss.
    ///
    /// This is ``load(_:forKey:expiry:policy:coder:using:)`` with ``LoadPolicy/cacheFirst``;
    /// use that to fall back on stale values when the loader fails.
    ///
    /// - Parameters:
    ///   - type: The type of the value; it can be left out where the loader's result says it.
    ///     `Data` and `[UInt8]` are stored as they are.
    ///   - key: 1 to 4096 bytes.
    ///   - expiry: How long the loaded value stays fresh; `nil` uses `options.defaultExpiry`.
    ///   - coder: How to encode and decode; `nil` uses `options.coder` (JSON by default).
    ///   - loader: Makes the value: a network request, a computation, ...
    /// - Throws: What `loader` throws; a coder's error; a ``LarderError`` from the cache's read
    ///   or its write (a loaded value the cache cannot store, too large or refused by a read-only
    ///   handle or a full disk, is returned all the same);
    ///   `CancellationError` when the calling task is cancelled while it waits (the shared load
    ///   goes on, and its value is stored).
    public func value<Value: Codable & SendableMetatype>(_ type: Value.Type = Value.self, forKey key: some CacheKey,
                                      expiry: Expiry? = nil, coder: (any CacheCoder)? = nil,
                                      orLoad loader: @escaping @Sendable () async throws -> Value) async throws -> Value {
        try await load(type, forKey: key, expiry: expiry, policy: .cacheFirst, coder: coder, using: loader).value
    }

    /// The value for `key` from the cache or from `loader`, as `policy` says, and where it came
    /// from: the offline-first read.
    ///
    /// ```swift
    /// let news = try await cache.load(Headlines.self, forKey: "headlines", expiry: .seconds(60)) {
    ///     try await server.headlines()
    /// }
    /// show(news.value)
    /// if news.isStale { showBanner("Offline: showing headlines from earlier") }
    /// ```
    ///
    /// With ``LoadPolicy/offlineFirst`` (the default), an unexpired entry is returned as it is;
    /// otherwise `loader` is called and its value stored; when the loader throws, an expired
    /// copy still in the file is returned with ``LoadResult/isStale`` set, and only when there is
    /// none does the loader's error reach you. Expired entries stay in the file until the ring
    /// reclaims their space or ``removeExpired()-20x73`` removes them.
    ///
    /// Concurrent callers for one key share one call of the loader (whose value the first
    /// caller's `expiry` and `coder` store): those that reload (``LoadPolicy/refresh``) share
    /// theirs, the others theirs. Each caller's own policy decides whether it falls back on a
    /// stale copy when that load fails. Callers of one key should agree on its type and coder.
    /// A loader may read its key, but a read-through call for it from inside its own loader
    /// that would load it again, with the same policy, throws
    /// ``LarderError/Code-swift.struct/invalidArgument`` (it would wait for itself). When
    /// every caller of a load has been cancelled, the next caller starts a new load.
    ///
    /// A loaded value is stored unless the key's value was stored since the load began, by a
    /// `set` or by a load that began later, in any process: a slow load (a request sent before a
    /// refresh's, or before the program set a newer value) never puts its older value over a
    /// newer one, and its callers get their value all the same. A removal while a load runs does
    /// not stop it from storing. The entry's time stored is when its load began.
    ///
    /// - Parameters:
    ///   - type: The type of the value; it can be left out where the loader's result says it.
    ///   - key: 1 to 4096 bytes.
    ///   - expiry: How long a loaded value stays fresh; `nil` uses `options.defaultExpiry`.
    ///   - policy: When to call the loader and whether to fall back on a stale copy.
    ///   - coder: How to encode and decode; `nil` uses `options.coder` (JSON by default).
    ///   - loader: Makes the value.
    /// - Returns: The value, and whether it came from the cache, the loader, or is stale.
    /// - Throws: As ``value(_:forKey:expiry:coder:orLoad:)``, when no stale copy may or can stand
    ///   in.
    public func load<Value: Codable & SendableMetatype>(_ type: Value.Type = Value.self, forKey key: some CacheKey,
                                     expiry: Expiry? = nil, policy: LoadPolicy = .offlineFirst,
                                     coder: (any CacheCoder)? = nil,
                                     using loader: @escaping @Sendable () async throws -> Value) async throws -> LoadResult<Value> {
        let keyBytes = key.withCacheKeyBytes { Data($0) }
        // Refused before the loader runs, rather than its value not stored on every call.
        if let expiry, !expiry.isNumber { throw notANumber() }
        var reload = policy.reloadsFreshValues
        if !reload {
            switch try cachedValue(type, forKey: keyBytes, coder: coder) {
            case .fresh(let value): return LoadResult(value: value, source: .cache, loadError: nil)
            case .missing: break
            case .unusable: reload = true
            }
        }
        let flight = LoadFlights.Key(file: ObjectIdentifier(entry), key: keyBytes, reloads: reload)
        let outcome = await LoadFlights.shared.share(flight) { [reload] () async -> LoadFlights.Outcome in
            do {
                // A load that finished since this caller looked may have stored the value. (A
                // handle closed meanwhile, another handle's caller waiting, just loads.)
                if !reload, let data = (try? self.unexpiredData(forKey: keyBytes)) ?? nil { return .success((data, true)) }
                let began = self.loadStart()
                let value = try await loader()
                return .success((try self.keep(value, forKey: keyBytes, expiry: expiry, coder: coder, loadBegan: began), false))
            } catch {
                return .failure(error)
            }
        }
        switch outcome {
        case .success(let found):
            return LoadResult(value: try decoded(type, from: found.data, coder: coder),
                              source: found.fromCache ? .cache : .loader, loadError: nil)
        case .failure(let error as CancellationError) where Task.isCancelled:
            // This caller was cancelled; a loader that threw `CancellationError` of its own (a
            // request it cancelled) failed like any other, below.
            throw error
        case .failure(let error):
            guard policy.servesStaleOnFailure, let stale = staleValue(type, forKey: keyBytes, coder: coder) else { throw error }
            return LoadResult(value: stale, source: .stale, loadError: error)
        }
    }

    /// What the cache holds for a read-through call.
    private enum Cached<Value> {
        case fresh(Value)
        case missing
        /// Damaged, or stored by another version of the program: the loaded value replaces it.
        case unusable
    }

    /// The unexpired value of `key`, if it is there and decodes.
    private func cachedValue<Value: Decodable>(_ type: Value.Type, forKey key: Data,
                                               coder: (any CacheCoder)?) throws(LarderError) -> Cached<Value> {
        switch rememberedCodable(type, forKey: key, coder: coder) {
        case .success(let value?): return .fresh(value)
        case .success(nil): return .missing
        case .failure(let error as LarderError) where error.code != .corrupt: throw error
        // Damaged, or not a `Value` (a value stored by another version of the program).
        case .failure: return .unusable
        }
    }

    /// The copy of `key` the cache holds, expired or not, if it decodes.
    private func staleValue<Value: Decodable>(_ type: Value.Type, forKey key: Data, coder: (any CacheCoder)?) -> Value? {
        let data = try? key.withUnsafeBytes { bytes throws(LarderError) in try copyData(forKey: bytes, includingExpired: true) }
        return data.flatMap { try? decoded(type, from: $0, coder: coder) }
    }

    /// `data(forKey:)`, named apart from its `async` overload.
    private func unexpiredData(forKey key: Data) throws(LarderError) -> Data? {
        try data(forKey: key)
    }

    /// Stores the loaded `value`, unless the key was written since the load began, and returns
    /// its bytes. A value the cache cannot keep (too large, a read-only handle, a full disk, a
    /// handle closed meanwhile) is still returned: the load succeeded, and a cache may always
    /// lose a value. Any other failure (a damaged file, an I/O error, the coder failing to
    /// encode) is thrown.
    private func keep<Value: Encodable>(_ value: Value, forKey key: Data, expiry: Expiry?,
                                        coder: (any CacheCoder)?, loadBegan: LoadStart) throws -> Data {
        let data = try encoded(value, coder: coder)
        if let identity = try storeLoadedIfPossible(data, forKey: key, expiry: expiry, loadBegan: loadBegan),
           Cache.placement(.memoryAndFile, of: Value.self) == .memoryAndFile {
            memory?.insert(value, forKey: MemoryKey(key), kind: MemoryKind(Value.self, coder: coder ?? options.coder),
                           origin: .record(identity), cost: Cache.codableCost(data.count))
        }
        return data
    }

    /// `storeLoaded`, answering nil for a value the cache cannot keep.
    private func storeLoadedIfPossible(_ data: Data, forKey key: Data, expiry: Expiry?,
                                       loadBegan: LoadStart) throws(LarderError) -> RecordIdentity? {
        do {
            return try storeLoaded(data, forKey: key, expiry: expiry, loadBegan: loadBegan)
        } catch where [LarderError.Code.tooLarge, .readOnly, .full, .closed].contains(error.code) {
            // Returned all the same.
            return nil
        }
    }

    /// Stores `data`, loaded by a load that began at `loadBegan`, as stored then: unless the
    /// key's value was stored since, by a `set` or by a load that began since, of any process.
    /// A slow load (a request sent before a refresh's, or before the program set a newer value)
    /// then never puts its older value over the newer one. The record's time stored is when the
    /// load began: a load that began later still replaces it.
    ///
    /// - Returns: The identity of the record written, nil when none was.
    private func storeLoaded(_ data: Data, forKey key: Data, expiry: Expiry?, loadBegan: LoadStart) throws(LarderError) -> RecordIdentity? {
        let (expiry, compress) = settings(expiry: expiry, compression: nil, valueLength: data.count)
        return try key.withUnsafeBytes { keyBytes in
            data.withUnsafeBytes { valueBytes in
                Result { () throws(LarderError) -> RecordIdentity? in
                    try write { (store) throws(LarderError) -> RecordIdentity? in
                        if let stored = store.lookup(keyBytes, hash: KeyHash(keyBytes)), loadBegan.precedes(stored.header) { return nil }
                        try store.put(key: keyBytes, value: valueBytes, compress: compress, expiry: expiry, storedAt: loadBegan.time)
                        return store.identityOfEntry(forKey: keyBytes)
                    }
                }
            }
        }.get()
    }

    /// When a load began, in the file's history: the record sequence number the next record
    /// would take, and the clock in milliseconds (the unit of a record's time stored).
    struct LoadStart {
        let time: UInt64
        let sequence: UInt64

        /// Whether the record with `header` was stored after the load began: written since
        /// (sequence numbers tell that apart within a millisecond) with a time stored no earlier
        /// (a record stored before and only relocated since, which takes a new sequence number,
        /// keeps its time stored).
        func precedes(_ header: RecordHeader) -> Bool {
            header.sequence >= sequence && header.storedAt >= time
        }
    }

    /// Now, as a load's start: the clock first, so that a record numbered after it was also
    /// stored no earlier.
    private func loadStart() -> LoadStart {
        let time = SystemCall.nowMilliseconds()
        return LoadStart(time: time, sequence: store.state.nextSequence)
    }

    /// How many callers share the load of `key` in flight (0 when none is): for tests.
    func loadCallers(forKey key: some CacheKey) -> Int {
        let key = key.withCacheKeyBytes { Data($0) }
        return LoadFlights.shared.callers(LoadFlights.Key(file: ObjectIdentifier(entry), key: key))
            + LoadFlights.shared.callers(LoadFlights.Key(file: ObjectIdentifier(entry), key: key, reloads: true))
    }
}

/// The loads in flight, one per open file and key, each shared by every caller that asks for
/// its key meanwhile (single flight).
///
/// The first caller starts the load as a task of its own, so that cancelling one caller does
/// not fail the others; each caller waits for the outcome, or for its own cancellation. The task
/// starts at the first caller's priority and is raised to each later caller's: a prefetch in the
/// background must not keep the interface waiting at background priority for the value it asks for.
final class LoadFlights: @unchecked Sendable {
    static let shared = LoadFlights()

    struct Key: Hashable {
        /// The open file (`OpenFileRegistry.Entry`): every `Cache` on one file shares its loads.
        let file: ObjectIdentifier
        let key: Data
        /// Whether the load calls the loader whatever the cache holds (`reloadsFreshValues`, or
        /// an unusable entry): a caller that asked for that must not get the value that a load
        /// which first looked in the cache again found there.
        var reloads = false
    }

    /// The encoded value, and whether it was found in the cache rather than loaded.
    typealias Value = (data: Data, fromCache: Bool)
    typealias Outcome = Result<Value, any Error>

    /// One load and its callers; every field but `key` is guarded by `LoadFlights.lock`.
    private final class Flight: @unchecked Sendable {
        let key: Key
        var outcome: Outcome?
        var waiters: [Int: CheckedContinuation<Outcome, Never>] = [:]
        /// Callers cancelled before they began to wait.
        var cancelled: Set<Int> = []
        var callers = 0
        /// Callers neither cancelled nor given the outcome.
        var waiting = 0
        /// The task running the load.
        var loader: Task<Void, Never>?

        init(key: Key) { self.key = key }
    }

    private let lock = NSLock()
    private var flights: [Key: Flight] = [:]

    /// The loads the current task runs as their loader (inherited by the tasks it starts): a
    /// loader that asks for its own key would wait for itself.
    @TaskLocal private static var loading: Set<Key> = []

    /// Joins the load of `key` in flight, or starts it with `load`, and waits for its outcome.
    func share(_ key: Key, load: @escaping @Sendable () async -> Outcome) async -> Outcome {
        if LoadFlights.loading.contains(key) {
            return .failure(LarderError(.invalidArgument, "a loader asked the cache for the key it is loading"))
        }
        let (flight, caller, joinedLoader) = lock.withLock { () -> (Flight, Int, Task<Void, Never>?) in
            let existing = flights[key]
            let flight = existing ?? Flight(key: key)
            flights[key] = flight
            flight.callers += 1
            flight.waiting += 1
            if existing == nil {
                flight.loader = Task {
                    let outcome = await LoadFlights.$loading.withValue(LoadFlights.loading.union([key])) { await load() }
                    self.finish(flight, with: outcome)
                }
                return (flight, flight.callers, nil)
            }
            return (flight, flight.callers, flight.loader)
        }
        if let joinedLoader { LoadFlights.raise(joinedLoader, to: Task.currentPriority) }
        return await wait(for: flight, as: caller)
    }

    /// Raises `loader` to `priority` if it runs below it; where the system has no way to (Apple
    /// platforms before 26), it runs on at the priority it started with.
    private static func raise(_ loader: Task<Void, Never>, to priority: TaskPriority) {
        if #available(macOS 26.0, iOS 26.0, tvOS 26.0, watchOS 26.0, visionOS 26.0, *) {
            loader.escalatePriority(to: priority)
        }
    }

    private func wait(for flight: Flight, as caller: Int) async -> Outcome {
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let ready: Outcome? = lock.withLock {
                    if let outcome = flight.outcome { return outcome }
                    if flight.cancelled.remove(caller) != nil { return .failure(CancellationError()) }
                    flight.waiters[caller] = continuation
                    return nil
                }
                if let ready { continuation.resume(returning: ready) }
            }
        } onCancel: {
            let waiting = lock.withLock {
                let waiting = flight.waiters.removeValue(forKey: caller)
                if flight.outcome == nil && (waiting != nil || flight.cancelled.insert(caller).inserted) {
                    leave(flight)
                }
                return waiting
            }
            waiting?.resume(returning: .failure(CancellationError()))
        }
    }

    /// A caller gave up waiting. Under `lock`. When none is left, the load is no longer shared:
    /// the next caller starts another (a loader that never returns holds up no one for good).
    private func leave(_ flight: Flight) {
        flight.waiting -= 1
        if flight.waiting == 0 && flights[flight.key] === flight { flights[flight.key] = nil }
    }

    private func finish(_ flight: Flight, with outcome: Outcome) {
        let waiters = lock.withLock {
            flight.outcome = outcome
            if flights[flight.key] === flight { flights[flight.key] = nil }
            defer { flight.waiters = [:] }
            return Array(flight.waiters.values)
        }
        for waiter in waiters { waiter.resume(returning: outcome) }
    }

    /// How many callers joined the load of `key` in flight, 0 when there is none.
    func callers(_ key: Key) -> Int {
        lock.withLock { flights[key]?.callers ?? 0 }
    }
}

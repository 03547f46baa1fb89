import Foundation

/// `async` overloads of the calls that can take a while: writes and reads of large values,
/// compression, decoding, and the maintenance calls that look at every entry.
///
/// Each runs on the global concurrent executor (it is `@concurrent`), never on the caller's
/// actor, so the main actor stays free while a megabyte is compressed or a cache is trimmed.
/// Otherwise they behave exactly as their synchronous twins, which stay as they are: a read of a
/// small value is a lookup in mapped memory and is best called directly.
///
/// They run on the executor's threads, not on threads of their own: a write waits there, holding
/// its thread, while a writer of another process (or a long `trim` of this one) has the file,
/// as a blocking call does in any task. An app that expects long waits of that kind should keep
/// its writes to a few tasks at a time, or run them on a thread of its own.
///
/// In `async` code the compiler picks these overloads and asks for `await`. Writing `Codable`
/// values has no `async` overload: one would also capture every `[UInt8]` write in `async` code.
/// Encode first, then `await` the `Data` overload of `set(_:forKey:expiry:compression:)`.
extension Cache {
    /// Stores `value` for `key`, off the caller's actor: ``set(_:forKey:expiry:compression:)-(_,CacheKey,_,_)``
    /// for large or compressed values in `async` code.
    ///
    /// The corresponding C function is `larder_put`.
    @concurrent
    public func set(_ value: Data, forKey key: some CacheKey & Sendable, expiry: Expiry? = nil,
                    compression: Compression? = nil) async throws(LarderError) {
        try synchronously { () throws(LarderError) in try set(value, forKey: key, expiry: expiry, compression: compression) }
    }

    /// Stores the value of each of `entries` for its key, in order, off the caller's actor:
    /// ``set(_:expiry:compression:)-(Collection,_,_)`` in `async` code. For `Data` values, as
    /// the single write's overload: entries of other value types get the synchronous call.
    ///
    /// The corresponding C function is `larder_put_many`.
    @concurrent
    public func set<Key: CacheKey & Sendable>(_ entries: some Collection<(key: Key, value: Data)> & Sendable,
                                              expiry: Expiry? = nil, compression: Compression? = nil) async throws(LarderError) {
        try synchronously { () throws(LarderError) in try set(entries, expiry: expiry, compression: compression) }
    }

    /// The value for `key` as `Data`, or `nil` when it is missing or expired, read off the
    /// caller's actor: ``data(forKey:)-(CacheKey)`` in `async` code.
    ///
    /// The corresponding C function is `larder_get_alloc`.
    @concurrent
    public func data(forKey key: some CacheKey & Sendable) async throws(LarderError) -> Data? {
        try synchronously { () throws(LarderError) in try data(forKey: key) }
    }

    /// The values of `keys`, in order (nil where a key is missing or expired), read off the
    /// caller's actor: ``data(forKeys:)-1u80q`` in `async` code.
    ///
    /// The corresponding C function is `larder_get_many`.
    @concurrent
    public func data<Keys: Collection & Sendable>(forKeys keys: Keys) async throws(LarderError) -> [Data?]
    where Keys.Element: CacheKey {
        try synchronously { () throws(LarderError) in try data(forKeys: keys) }
    }

    /// The value stored for `key`, from memory or read and decoded off the caller's actor:
    /// ``value(_:forKey:coder:placement:)-(_,CacheKey,_,_)`` in `async` code.
    ///
    /// The corresponding C function is `larder_get_alloc` (which returns the bytes).
    @concurrent
    public func value<Value: Decodable & Sendable>(_ type: Value.Type = Value.self, forKey key: some CacheKey & Sendable,
                                                   coder: (any CacheCoder)? = nil,
                                                   placement: Placement = .memoryAndFile) async throws -> Value? {
        try synchronously { () throws in try value(type, forKey: key, coder: coder, placement: placement) }
    }

    /// The keys that start with `prefix`, collected off the caller's actor:
    /// ``keys(withPrefix:)-(CacheKey)`` in `async` code.
    ///
    /// The corresponding C function is `larder_foreach`.
    @concurrent
    public func keys(withPrefix prefix: some CacheKey & Sendable) async throws(LarderError) -> [Data] {
        try synchronously { () throws(LarderError) in try keys(withPrefix: prefix) }
    }

    /// ``removeExpired()-20x73``, off the caller's actor.
    @concurrent @discardableResult
    public func removeExpired() async throws(LarderError) -> Int {
        try synchronously { () throws(LarderError) in try removeExpired() }
    }

    /// ``removeOlder(than:)-dd4l``, off the caller's actor.
    @concurrent @discardableResult
    public func removeOlder(than age: TimeInterval) async throws(LarderError) -> Int {
        try synchronously { () throws(LarderError) in try removeOlder(than: age) }
    }

    /// ``trim(toBytes:)-4hcpt``, off the caller's actor.
    @concurrent @discardableResult
    public func trim(toBytes bytes: Int) async throws(LarderError) -> Int {
        try synchronously { () throws(LarderError) in try trim(toBytes: bytes) }
    }

    /// ``trim(toCount:)-5uegc``, off the caller's actor.
    @concurrent @discardableResult
    public func trim(toCount count: Int) async throws(LarderError) -> Int {
        try synchronously { () throws(LarderError) in try trim(toCount: count) }
    }

    /// Removes the value of each of `keys`, in order, off the caller's actor:
    /// ``removeValues(forKeys:)-5si73`` in `async` code.
    ///
    /// The corresponding C function is `larder_delete_many`.
    @concurrent @discardableResult
    public func removeValues<Keys: Collection & Sendable>(forKeys keys: Keys) async throws(LarderError) -> Int
    where Keys.Element: CacheKey {
        try synchronously { () throws(LarderError) in try removeValues(forKeys: keys) }
    }

    /// ``removeAll(withPrefix:)-(CacheKey)``, off the caller's actor.
    @concurrent @discardableResult
    public func removeAll(withPrefix prefix: some CacheKey & Sendable) async throws(LarderError) -> Int {
        try synchronously { () throws(LarderError) in try removeAll(withPrefix: prefix) }
    }

    /// Runs `body` as synchronous code, where the compiler picks the synchronous overloads.
    func synchronously<R, E: Error>(_ body: () throws(E) -> R) throws(E) -> R {
        try body()
    }
}

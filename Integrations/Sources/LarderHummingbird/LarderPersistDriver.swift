import Foundation
import Hummingbird
import Larder

/// Hummingbird's persist driver in a Larder file: what `MemoryPersistDriver` keeps, kept across
/// restarts and shared by every process of the host that opens the same file.
///
/// ```swift
/// let persist = try LarderPersistDriver(path: "/var/cache/app/persist.larder")
/// router.add(middleware: SessionMiddleware(storage: persist))
/// let app = Application(router: router, services: [persist])
/// ```
///
/// Values go through the cache's coder (JSON unless its options name another); a `String`,
/// `Data` or `[UInt8]` is stored as its bytes. A small header before them holds their deadline,
/// which `getWithTTL` and a `set` without `expires` read back (`StoredValue`). Larder's own
/// expiry drops them at the same deadline, in every process.
///
/// Reads and `set` go through the cache's memory tier: a read of a key returns the object an
/// earlier read or write of this process kept, without decoding, while the file still holds that
/// record. A write of another process, a removal or the deadline ends it. `String` and `Codable`
/// values are kept; `Data` and `[UInt8]` are not (a copy costs what a hit saves). The tier's
/// limits are the cache's (`Cache.Options.memory`: 64 MiB and 10,000 objects by default).
public struct LarderPersistDriver: PersistDriver {
    /// The cache the values are stored in.
    public let cache: Cache
    /// Whether `shutdown()` closes the cache: only one this driver opened.
    private let ownsCache: Bool

    /// A driver storing its values in `cache`, which stays open on `shutdown()`.
    public init(cache: Cache) {
        self.cache = cache
        self.ownsCache = false
    }

    /// A driver storing its values in the Larder file at `path`, created if needed, and closed on
    /// `shutdown()`.
    ///
    /// - Throws: `LarderError`, as `Cache(path:options:)`.
    public init(path: String, options: Cache.Options = .init()) throws {
        self.cache = try Cache(path: path, options: options)
        self.ownsCache = true
    }

    /// Stores `value` for `key` unless the key has a live value.
    ///
    /// The look and the store are one write of the file (`Cache.insert`): of two processes
    /// racing to create a key, exactly one succeeds.
    ///
    /// - Throws: `PersistError.duplicate` when the key has a live value; `LarderError`.
    public func create<Object: Codable & Sendable>(key: String, value: Object, expires: Duration?) async throws {
        let deadline = (expires.map(Expiry.init) ?? cache.options.defaultExpiry).deadline
        let stored = try StoredValue.encode(value, deadline: deadline, coder: cache.options.coder)
        guard try cache.insert(stored, forKey: key, expiry: Expiry(deadline)) else { throw PersistError.duplicate }
    }

    /// Stores `value` for `key`, replacing any earlier value.
    ///
    /// Without `expires`, a value that replaces one keeps its deadline, as the protocol asks;
    /// a new one takes the cache's default expiry (none, unless its options set one). That
    /// deadline is read, then written: a write of another process between the two may have its
    /// deadline replaced by the one read.
    public func set<Object: Codable & Sendable>(key: String, value: Object, expires: Duration?) async throws {
        let deadline: Date?
        if let expires {
            deadline = Expiry(expires).deadline
        } else if let earlier = earlierDeadline(of: key) {
            deadline = earlier
        } else {
            deadline = cache.options.defaultExpiry.deadline
        }
        let stored = try StoredValue.encode(value, deadline: deadline, coder: cache.options.coder)
        // The object stays in memory too, with the identity of the record written.
        try cache.set(StoredObject(object: value, expiresAt: deadline, cost: stored.count), forKey: key,
                      using: StoredConversion(coder: cache.options.coder, encoded: stored),
                      expiry: Expiry(deadline), placement: StoredConversion<Object>.placement)
    }

    /// The value of `key`, or `nil` when it is missing or expired.
    ///
    /// - Throws: `PersistError.invalidConversion` when the value stored is not an `Object`.
    public func get<Object: Codable & Sendable>(key: String, as type: Object.Type) async throws -> Object? {
        try stored(key, as: type)?.object
    }

    /// The value of `key` and the time it has left (`nil` for none), or `nil` when it is missing
    /// or expired.
    ///
    /// - Throws: `PersistError.invalidConversion` when the value stored is not an `Object`.
    public func getWithTTL<Object: Codable & Sendable>(key: String, as type: Object.Type) async throws -> (object: Object, ttl: Duration?)? {
        guard let stored = try stored(key, as: type) else { return nil }
        guard let expiresAt = stored.expiresAt else { return (stored.object, nil) }
        let left = expiresAt.timeIntervalSinceNow
        // Larder keeps deadlines in whole milliseconds: the last one may still find the value.
        guard left > 0 else { return nil }
        return (stored.object, .milliseconds(Int64((left * 1000).rounded(.down))))
    }

    /// Removes the value of `key`, if any.
    public func remove(key: String) async throws {
        try cache.removeValue(forKey: key)
    }

    /// Closes the cache when this driver opened it.
    public func shutdown() async throws {
        if ownsCache { try cache.close() }
    }

    /// The deadline of the value stored for `key` (`.some(nil)` for none), or `nil` when there is
    /// no value, or none this driver stored.
    private func earlierDeadline(of key: String) -> Date?? {
        (try? cache.withValue(forKey: key) { StoredValue.deadline(in: $0) }) ?? nil
    }

    /// The value stored for `key`, as an `Object`, and its deadline: the object the cache's memory
    /// tier kept, while the file still holds the record it came from, or else decoded from the
    /// file (and kept). Synchronous: a read is a lookup in mapped memory, best made without a hop
    /// to another executor.
    private func stored<Object: Codable & Sendable>(_ key: String, as type: Object.Type) throws -> StoredObject<Object>? {
        let conversion = StoredConversion<Object>(coder: cache.options.coder)
        let result = Result { () throws(LarderError) in
            try cache.value(forKey: key, using: conversion, placement: StoredConversion<Object>.placement)
        }
        guard case .failure(let error) = result, error.code == .invalidArgument else { return try result.get() }
        // What the conversion threw arrives as `.invalidArgument`, as a bad key does. Reading
        // the bytes again tells them apart: `PersistError.invalidConversion` or the key's error.
        return try storedAgain(key, using: conversion)
    }

    /// The value stored for `key`, decoded from the bytes the file lends, past the memory tier.
    private func storedAgain<Object>(_ key: String, using conversion: StoredConversion<Object>) throws -> StoredObject<Object>? {
        try cache.withValue(forKey: key) { try conversion.value(from: Data($0)) }
    }
}

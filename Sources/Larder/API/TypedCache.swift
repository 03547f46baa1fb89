import Foundation

/// A view of a ``Cache`` for one kind of value: keys of your type, and the value's type and
/// coder (or conversion) fixed once, so that call sites say neither.
///
/// ```swift
/// struct Article: Codable, Sendable { var title: String }
/// let articles = TypedCache<URL, Article>(cache, prefix: "article/")
/// try articles.set(article, forKey: url)
/// let again = try articles.value(forKey: url)     // from memory while the file holds it
/// ```
///
/// A key is stored as the UTF-8 bytes of `prefix` followed by the key's text
/// (``CacheKeyConvertible/cacheKey``, or the `key` closure you give): views with different
/// prefixes share a file without sharing keys. Values go through the cache's memory tier
/// (<doc:ObjectsInMemory>). Any number of views may use one cache, and a view may be used from
/// any thread.
public struct TypedCache<Key, Value>: Sendable {
    /// The cache the values are in.
    public let cache: Cache
    /// What every key of this view starts with.
    public let prefix: String
    // Inlinable, with the initializers and the reads and writes, so that a view's calls are
    // specialized for its types where it is made (unspecialized, a hit took 3 times as long).
    @usableFromInline let text: @Sendable (Key) -> String
    /// The coder of a view of `Codable` values (nil: the cache's), or nil.
    @usableFromInline let coder: (any CacheCoder)?
    /// Whether values go through a conversion rather than a coder.
    @usableFromInline let converts: Bool
    @usableFromInline let read: @Sendable (Cache, String, Cache.Placement) throws -> Value?
    @usableFromInline let write: @Sendable (Cache, Value, String, Expiry?, Cache.Placement) throws -> Void

    /// A view whose values `conversion` turns into bytes, and whose keys `key` names.
    ///
    /// Its calls throw ``LarderError`` only: what the conversion throws arrives as
    /// `.invalidArgument`.
    @inlinable
    public init<Conversion: CacheConversion<Value>>(_ cache: Cache, prefix: String = "",
                                                    key: @escaping @Sendable (Key) -> String,
                                                    conversion: Conversion) {
        self.cache = cache
        self.prefix = prefix
        text = key
        coder = nil
        converts = true
        read = { cache, key, placement in try cache.value(forKey: key, using: conversion, placement: placement) }
        write = { cache, value, key, expiry, placement in
            try cache.set(value, forKey: key, using: conversion, expiry: expiry, placement: placement)
        }
    }

    /// The full key of `key`: the prefix, then its text.
    @inlinable
    public func storedKey(for key: Key) -> String {
        prefix + text(key)
    }

    /// The value of `key`: from memory while the file still holds the record it came from,
    /// otherwise from the file.
    ///
    /// - Parameters:
    ///   - key: The key, of this view's type.
    ///   - placement: Where to look (see ``Cache/Placement``); memory, then the file, by
    ///     default.
    /// - Returns: The value, or `nil` when the key is missing or expired.
    /// - Throws: As ``Cache/value(_:forKey:coder:placement:)-(_,CacheKey,_,_)`` or
    ///   ``Cache/value(forKey:using:placement:)``.
    @inlinable
    public func value(forKey key: Key, placement: Cache.Placement = .memoryAndFile) throws -> Value? {
        try read(cache, storedKey(for: key), placement)
    }

    /// Stores `value` for `key`.
    ///
    /// - Parameters:
    ///   - value: The value.
    ///   - key: The key, of this view's type.
    ///   - expiry: When the entry stops being returned; `nil` uses the cache's default.
    ///   - placement: Memory and file (the default), memory only or file only.
    /// - Throws: As ``Cache/set(_:forKey:expiry:compression:coder:placement:)`` or
    ///   ``Cache/set(_:forKey:using:expiry:compression:placement:)``.
    @inlinable
    public func set(_ value: Value, forKey key: Key, expiry: Expiry? = nil,
                    placement: Cache.Placement = .memoryAndFile) throws {
        try write(cache, value, storedKey(for: key), expiry, placement)
    }

    /// The value of `key`; on a miss, the one `loader` makes, stored for next time and kept in
    /// memory. (For `Codable` values, concurrent callers share one load; with a conversion, each
    /// caller that misses calls its loader.)
    public func value(forKey key: Key, expiry: Expiry? = nil,
                      orLoad loader: @escaping @Sendable () async throws -> Value) async throws -> Value {
        try await readOrLoad(key, expiry: expiry, loader)
    }

    private func readOrLoad(_ key: Key, expiry: Expiry?, _ loader: @Sendable () async throws -> Value) async throws -> Value {
        if let cached = try value(forKey: key) { return cached }
        let loaded = try await loader()
        try set(loaded, forKey: key, expiry: expiry)
        return loaded
    }

    /// Removes the value of `key`, from the file and from memory.
    ///
    /// - Returns: Whether the file had a live value to remove.
    @discardableResult
    public func removeValue(forKey key: Key) throws(LarderError) -> Bool {
        try cache.removeValue(forKey: storedKey(for: key))
    }

    /// Whether the file holds a live, unexpired value for `key`.
    public func contains(_ key: Key) -> Bool {
        cache.contains(storedKey(for: key))
    }

    /// What the file holds for `key` (see ``Cache/entryDetails(forKey:)``); nil when the key is
    /// missing or expired.
    public func entryDetails(forKey key: Key) throws(LarderError) -> EntryDetails? {
        try cache.entryDetails(forKey: storedKey(for: key))
    }

    /// Removes every value of this view (every key with its prefix) from the file and memory.
    ///
    /// - Returns: How many live entries the file had.
    /// - Throws: `.invalidArgument` for a view without a prefix (use ``Cache/removeAll()``);
    ///   otherwise as ``Cache/removeAll(withPrefix:)-(CacheKey)``.
    @discardableResult
    public func removeAll() throws(LarderError) -> Int {
        guard !prefix.isEmpty else {
            throw LarderError(.invalidArgument, "a typed cache without a prefix cannot tell its keys from others", path: cache.path)
        }
        return try cache.removeAll(withPrefix: prefix)
    }
}

extension TypedCache where Key: CacheKeyConvertible & SendableMetatype {
    /// A view whose values `conversion` turns into bytes, keyed by ``CacheKeyConvertible/cacheKey``.
    @inlinable
    public init<Conversion: CacheConversion<Value>>(_ cache: Cache, prefix: String = "", conversion: Conversion) {
        self.init(cache, prefix: prefix, key: { $0.cacheKey }, conversion: conversion)
    }
}

extension TypedCache where Value: Codable & SendableMetatype {
    /// A view of `Codable` values, encoded by `coder` (`nil`: the cache's, JSON by default), whose
    /// keys `key` names. Its calls throw what the coder throws, and ``LarderError``.
    @inlinable
    public init(_ cache: Cache, prefix: String = "", key: @escaping @Sendable (Key) -> String,
                coder: (any CacheCoder)? = nil) {
        self.cache = cache
        self.prefix = prefix
        text = key
        self.coder = coder
        converts = false
        read = { cache, key, placement in try cache.value(Value.self, forKey: key, coder: coder, placement: placement) }
        write = { cache, value, key, expiry, placement in
            try cache.set(value, forKey: key, expiry: expiry, coder: coder, placement: placement)
        }
    }
}

extension TypedCache where Key: CacheKeyConvertible & SendableMetatype, Value: Codable & SendableMetatype {
    /// A view of `Codable` values, encoded by `coder` (`nil`: the cache's, JSON by default),
    /// keyed by ``CacheKeyConvertible/cacheKey``.
    @inlinable
    public init(_ cache: Cache, prefix: String = "", coder: (any CacheCoder)? = nil) {
        self.init(cache, prefix: prefix, key: { $0.cacheKey }, coder: coder)
    }
}

extension TypedCache where Value: Codable & SendableMetatype {
    /// The value of `key`; on a miss, the one `loader` makes, stored for next time and kept in
    /// memory: ``Cache/value(_:forKey:expiry:coder:orLoad:)`` (one load for concurrent callers).
    public func value(forKey key: Key, expiry: Expiry? = nil,
                      orLoad loader: @escaping @Sendable () async throws -> Value) async throws -> Value {
        guard converts else {
            return try await cache.value(Value.self, forKey: storedKey(for: key), expiry: expiry, coder: coder, orLoad: loader)
        }
        return try await readOrLoad(key, expiry: expiry, loader)
    }
}

import Foundation

/// Enumeration: what a cache holds, found again after a restart, and removal by prefix.
///
/// Keys come from the index in the file, so they are there for any process that opens it, in no
/// particular order. A key is a `Data` whatever type it was written with; a `String` key reads
/// back with `String(decoding: key, as: UTF8.self)`.
extension Cache {
    /// The keys of every live, unexpired entry, in no particular order.
    /// The corresponding C function is `larder_foreach`.
    public var keys: [Data] {
        get throws(LarderError) { try keys(withPrefix: Data()) }
    }

    /// The keys that start with the bytes of `prefix`, in no particular order.
    ///
    /// - Parameter prefix: A `String`, `Data`, ...; an empty one matches every key.
    ///
    /// The corresponding C function is `larder_foreach`.
    public func keys(withPrefix prefix: some CacheKey) throws(LarderError) -> [Data] {
        let prefix = prefix.withCacheKeyBytes { Data($0) }
        var keys: [Data] = []
        try listEntries { key, _ in
            if key.starts(with: prefix) { keys.append(Data(key)) }
            return true
        }
        return keys
    }

    /// Calls `body` with the key and the value, decoded as `Value`, of every live entry whose
    /// key starts with `prefix`, in no particular order.
    ///
    /// ```swift
    /// try cache.forEach(Article.self, withPrefix: "article/") { key, article in
    ///     print(article.title)
    /// }
    /// ```
    ///
    /// The keys are taken first; an entry removed or expired before its turn is skipped, and so
    /// is one whose bytes do not decode as `Value` (with `Data` or `[UInt8]`, none is). Each
    /// value is read as by ``value(_:forKey:coder:placement:)-(_,CacheKey,_,_)``, through memory:
    /// it counts as a hit (in memory or in the file) and as recent use.
    /// `body` may change the cache.
    ///
    /// - Parameters:
    ///   - type: The type to decode values as.
    ///   - prefix: A `String`, `Data`, ...; empty (the default) for every entry.
    ///   - coder: How to decode; `nil` uses `options.coder` (JSON by default).
    ///   - body: Called with each key and value; it may throw to stop.
    /// - Throws: A ``LarderError`` from the cache, or what `body` throws.
    ///
    /// The corresponding C function is `larder_foreach`.
    public func forEach<Value: Decodable>(_ type: Value.Type, withPrefix prefix: some CacheKey = "",
                                          coder: (any CacheCoder)? = nil,
                                          _ body: (_ key: Data, _ value: Value) throws -> Void) throws {
        for key in try keys(withPrefix: prefix) {
            switch rememberedCodable(type, forKey: key, coder: coder) {
            case .success(let value?): try body(key, value)
            case .success(nil): continue
            case .failure(let error as LarderError): throw error
            case .failure: continue  // Not a `Value`.
            }
        }
    }

    /// Removes every entry whose key starts with the bytes of `prefix`: everything cached for one
    /// user, one host, one screen.
    ///
    /// ```swift
    /// try cache.removeAll(withPrefix: "https://api.example.com/user/42/")
    /// ```
    ///
    /// It looks at every entry once, under the exclusive lock; for an empty prefix,
    /// ``removeAll()`` does the same in constant time.
    ///
    /// - Returns: How many live, unexpired entries were removed (none for a prefix longer than
    ///   ``maximumKeyLength``, which no key that can be removed starts with).
    ///
    /// The corresponding C function is `larder_delete_prefix`.
    @discardableResult
    public func removeAll(withPrefix prefix: some CacheKey) throws(LarderError) -> Int {
        // Not copied when it is longer than any key (a C caller's length may be wrong); the
        // write's checks (closed, read-only, inside a lent value) are made all the same.
        let prefix = prefix.withCacheKeyBytes { $0.count <= Cache.maximumKeyLength ? Data($0) : nil }
        defer { if let prefix { memory?.removeAll(where: { $0.starts(with: prefix) }) } }
        return try write { (store) throws(LarderError) in
            guard let prefix else { return 0 }
            return store.removeEntries(counting: .removals) { key, _ in key.starts(with: prefix) }.live
        }
    }
}

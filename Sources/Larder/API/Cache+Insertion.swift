import Foundation

/// Storing a value only when its key has none: one write, so that of two writers (threads or
/// processes) racing to store a key, exactly one stores it.
extension Cache {
    /// Stores `value` for `key` when the key has no live value, and answers whether it did.
    ///
    /// The look and the store are one write, under the lock every process's writes take: no
    /// other write comes between them. An expired entry counts as absent. A session store's
    /// "create this ID unless it exists" is this call.
    ///
    /// ```swift
    /// if try cache.insert(Data("worker-1".utf8), forKey: "job/42/owner", expiry: .seconds(30)) {
    ///     // This process runs job 42.
    /// }
    /// ```
    ///
    /// - Returns: `true` when `value` was stored; `false` when `key` had a live value, which is
    ///   left as it was.
    /// - Throws: As ``set(_:forKey:expiry:compression:)-(_,CacheKey,_,_)``.
    @inlinable @discardableResult
    public func insert(_ value: some ContiguousBytes, forKey key: some CacheKey, expiry: Expiry? = nil,
                       compression: Compression? = nil) throws(LarderError) -> Bool {
        try key.withCacheKeyBytes { keyBytes in
            value.withUnsafeBytes { valueBytes in
                Result { () throws(LarderError) in
                    try insertValue(valueBytes, forKey: keyBytes, expiry: expiry, compression: compression)
                }
            }
        }.get()
    }

    /// Stores `value`, encoded by `coder`, for `key` when the key has no live value, and answers
    /// whether it did: ``insert(_:forKey:expiry:compression:)`` for `Codable` values, encoded as
    /// ``set(_:forKey:expiry:compression:coder:placement:)`` encodes them.
    ///
    /// - Throws: What the coder throws when it cannot encode `value`; otherwise a ``LarderError``.
    @_disfavoredOverload @discardableResult
    public func insert(_ value: some Encodable, forKey key: some CacheKey, expiry: Expiry? = nil,
                       compression: Compression? = nil, coder: (any CacheCoder)? = nil) throws -> Bool {
        try insert(encoded(value, coder: coder), forKey: key, expiry: expiry, compression: compression)
    }

    /// `insert` without the generic key and value.
    @usableFromInline
    func insertValue(_ value: UnsafeRawBufferPointer, forKey key: UnsafeRawBufferPointer, expiry: Expiry?,
                     compression: Compression?) throws(LarderError) -> Bool {
        if let expiry, !expiry.isNumber { throw notANumber() }
        let (expiry, compress) = settings(expiry: expiry, compression: compression, valueLength: value.count)
        return try write { (store) throws(LarderError) -> Bool in
            try store.validateKey(key)
            // Under the writer lock the view is the file as it is: what `remove` looks at.
            if let found = store.lookup(key, hash: KeyHash(key)), !found.header.isExpiredNow(maximumAge: store.maximumAge) { return false }
            try store.put(key: key, value: value, compress: compress, expiry: expiry)
            return true
        }
    }
}

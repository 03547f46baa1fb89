import Foundation

/// Turns `Codable` values into the bytes a cache stores, and back.
///
/// A cache uses ``JSONCacheCoder`` unless its ``Cache/Options/coder`` or a call's `coder:` names
/// another: ``PropertyListCacheCoder`` or your own (a binary format, an encrypting wrapper, ...).
///
/// ```swift
/// struct Plain: CacheCoder {
///     func encode<Value: Encodable>(_ value: Value) throws -> Data { ... }
///     func decode<Value: Decodable>(_ type: Value.Type, from data: Data) throws -> Value { ... }
/// }
/// let cache = try Cache(path: "app.larder", options: .init(coder: Plain()))
/// ```
///
/// Raw bytes (`Data` and `[UInt8]`) never go through a coder: they are stored and read as they
/// are, so `value(Data.self, forKey:)` returns exactly what `set(_:forKey:)` stored.
public protocol CacheCoder: Sendable {
    /// The bytes to store for `value`.
    func encode<Value: Encodable>(_ value: Value) throws -> Data
    /// The value that `encode(_:)` turned into `data`.
    func decode<Value: Decodable>(_ type: Value.Type, from data: Data) throws -> Value
}

/// Stores `Codable` values as JSON (the default coder).
public struct JSONCacheCoder: CacheCoder {
    /// The encoder used; configure dates, keys and formatting on it.
    public var encoder: JSONEncoder
    /// The decoder used; configure it to match the encoder.
    public var decoder: JSONDecoder

    /// A coder using `encoder` and `decoder` (by default, freshly made ones).
    public init(encoder: JSONEncoder = JSONEncoder(), decoder: JSONDecoder = JSONDecoder()) {
        self.encoder = encoder
        self.decoder = decoder
    }

    /// The JSON form of `value`.
    public func encode<Value: Encodable>(_ value: Value) throws -> Data {
        try encoder.encode(value)
    }

    /// The value whose JSON form is `data`.
    public func decode<Value: Decodable>(_ type: Value.Type, from data: Data) throws -> Value {
        try decoder.decode(type, from: data)
    }
}

/// Stores `Codable` values as property lists (binary by default): compact, and readable by any
/// property-list tool. A property list needs an array or a dictionary at the top, so a value
/// that encodes as a single number or string cannot be stored this way (use JSON for those).
public struct PropertyListCacheCoder: CacheCoder {
    /// The encoder used; its `outputFormat` is `.binary` unless you pass another encoder.
    public var encoder: PropertyListEncoder
    /// The decoder used.
    public var decoder: PropertyListDecoder

    /// A coder writing property lists in `format`.
    public init(format: PropertyListDecoder.PropertyListFormat = .binary) {
        let encoder = PropertyListEncoder()
        encoder.outputFormat = format
        self.init(encoder: encoder, decoder: PropertyListDecoder())
    }

    /// A coder using `encoder` and `decoder` as they are configured.
    public init(encoder: PropertyListEncoder, decoder: PropertyListDecoder) {
        self.encoder = encoder
        self.decoder = decoder
    }

    /// The property-list form of `value`.
    public func encode<Value: Encodable>(_ value: Value) throws -> Data {
        try encoder.encode(value)
    }

    /// The value whose property-list form is `data`.
    public func decode<Value: Decodable>(_ type: Value.Type, from data: Data) throws -> Value {
        try decoder.decode(type, from: data)
    }
}

extension CacheCoder where Self == JSONCacheCoder {
    /// JSON, with a default `JSONEncoder` and `JSONDecoder`.
    public static var json: JSONCacheCoder { JSONCacheCoder() }
}

extension CacheCoder where Self == PropertyListCacheCoder {
    /// Binary property lists.
    public static var propertyList: PropertyListCacheCoder { PropertyListCacheCoder() }
}

extension Cache {
    /// Stores `value`, encoded by `coder`, for `key`, replacing any earlier value.
    ///
    /// ```swift
    /// struct Profile: Codable { var name: String; var avatar: URL }
    /// try cache.set(profile, forKey: "profile/42", expiry: .seconds(600))
    /// let cached = try cache.value(Profile.self, forKey: "profile/42")
    /// ```
    ///
    /// `Data` and `[UInt8]` are stored as they are, not encoded. For raw bytes the overload
    /// ``set(_:forKey:expiry:compression:)-(_,CacheKey,_,_)`` is chosen anyway; this one is
    /// preferred only for values that are not bytes.
    ///
    /// - Parameters:
    ///   - value: Any `Encodable` value.
    ///   - key: 1 to 4096 bytes.
    ///   - expiry: When the entry stops being returned; `nil` uses `options.defaultExpiry`.
    ///   - compression: How to store the encoded bytes; `nil` uses `options.compression`.
    ///   - coder: How to encode; `nil` uses `options.coder` (JSON by default).
    ///   - placement: Where the value goes: the object in memory and its bytes in the file (the
    ///     default), memory only, or the file only (<doc:ObjectsInMemory>).
    /// - Throws: What the coder throws when it cannot encode `value`; `.invalidArgument` for
    ///   `.memoryOnly` without a memory tier; otherwise a ``LarderError`` as from
    ///   ``set(_:forKey:expiry:compression:)-(_,CacheKey,_,_)``.
    ///
    /// The corresponding C function is `larder_put` (with bytes you encode yourself).
    @_disfavoredOverload
    public func set<Value: Encodable>(_ value: Value, forKey key: some CacheKey, expiry: Expiry? = nil,
                                      compression: Compression? = nil, coder: (any CacheCoder)? = nil,
                                      placement: Placement = .memoryAndFile) throws {
        try store(value, forKey: key, kind: MemoryKind(Value.self, coder: coder ?? options.coder),
                  placement: Cache.placement(placement, of: Value.self),
                  expiry: expiry, compression: compression, encode: { try encoded($0, coder: coder) },
                  cost: { value, byteCount in try Cache.codableCost(byteCount ?? encoded(value, coder: coder).count) })
    }

    /// The value stored for `key`, decoded by `coder` as a `Value`, or `nil` when the key is
    /// missing or expired.
    ///
    /// `Data` and `[UInt8]` are returned as stored, without decoding: `value(Data.self, forKey:)`
    /// reads any entry, whoever wrote it (C, the `larder` tool, ...).
    ///
    /// - Parameters:
    ///   - type: The type to decode; it can be left out where the result's type says it.
    ///   - key: 1 to 4096 bytes.
    ///   - coder: How to decode; `nil` uses `options.coder` (JSON by default). It must match the
    ///     coder the value was stored with.
    ///   - placement: Where to look: memory, then the file (the default); memory only; or the
    ///     file only, which neither reads nor fills memory (<doc:ObjectsInMemory>). An object in
    ///     memory is returned only while the file still holds the record it came from.
    /// - Throws: What the coder throws when the stored bytes are not a `Value` (a value stored
    ///   by an older version of your app, say); otherwise a ``LarderError`` as from
    ///   ``data(forKey:)-(CacheKey)``.
    ///
    /// The corresponding C function is `larder_get_alloc` (which returns the bytes).
    @inlinable
    public func value<Value: Decodable>(_ type: Value.Type = Value.self, forKey key: some CacheKey,
                                        coder: (any CacheCoder)? = nil, placement: Placement = .memoryAndFile) throws -> Value? {
        // Inlined, so that a hit is a copy of the value specialized for its type. `self` is
        // borrowed (the caller holds it through the call): a retain would write the handle's
        // first line, which every thread reading through the handle shares.
        let handle = Unmanaged.passUnretained(self)
        let kind = MemoryKind(Value.self, coderType: coder.map { ObjectIdentifier(Swift.type(of: $0)) } ?? defaultCoderType)
        if Cache.placement(placement, of: Value.self) != .fileOnly,
           let value = key.withCacheKeyBytes({ bytes in
               handle._withUnsafeGuaranteedRef { $0.rememberedObject(forKey: bytes, kind: kind)?.value(as: Value.self) }
           }) {
            return value
        }
        return try decodedValue(type, forKey: key, coder: coder, placement: placement)
    }

    /// `value(_:forKey:coder:placement:)` after a miss in memory.
    @usableFromInline
    func decodedValue<Value: Decodable>(_ type: Value.Type, forKey key: some CacheKey, coder: (any CacheCoder)?,
                                        placement: Placement) throws -> Value? {
        try missedValue(forKey: key, kind: MemoryKind(Value.self, coder: coder ?? options.coder),
                        placement: Cache.placement(placement, of: Value.self),
                        decode: { try decoded(type, from: $0, coder: coder) },
                        cost: { _, byteCount in Cache.codableCost(byteCount ?? 0) })
    }

    /// Where a typed call of `Value` goes when it asked for `placement`: raw bytes (`Data`,
    /// `[UInt8]`) are not kept in memory beside the file (their "decoding" is a copy), only when
    /// a call asks for memory alone.
    @usableFromInline
    static func placement(_ placement: Placement, of type: Any.Type) -> Placement {
        placement == .memoryAndFile && (type == Data.self || type == [UInt8].self) ? .fileOnly : placement
    }

    /// What a `Codable` value costs in memory: the length of its encoded bytes, at least 1.
    static func codableCost(_ byteCount: Int) -> Int { max(byteCount, 1) }

    /// The bytes to store for `value`: raw bytes as they are, anything else through the coder.
    func encoded<Value: Encodable>(_ value: Value, coder: (any CacheCoder)?) throws -> Data {
        // The type itself, not a cast, which would also see `Data` in a `Data?` (stored raw,
        // then decoded with the coder): `decoded` takes the same decision.
        if Value.self == Data.self { return value as! Data }
        if Value.self == [UInt8].self { return Data(value as! [UInt8]) }
        return try (coder ?? options.coder).encode(value)
    }

    /// The `Value` that `encoded(_:coder:)` stored as `data`.
    func decoded<Value: Decodable>(_ type: Value.Type, from data: Data, coder: (any CacheCoder)?) throws -> Value {
        if Value.self == Data.self { return data as! Value }
        if Value.self == [UInt8].self { return [UInt8](data) as! Value }
        return try (coder ?? options.coder).decode(type, from: data)
    }
}

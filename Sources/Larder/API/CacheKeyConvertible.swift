import Foundation

/// A type of your own that names cache keys: a URL, a number, an ID. ``TypedCache`` stores a
/// value under the UTF-8 bytes of its ``cacheKey`` (after the typed cache's prefix).
///
/// `String`, `Substring`, `URL`, `UUID` and the integer types conform; so does any
/// `RawRepresentable` whose raw value does, once you declare it:
///
/// ```swift
/// struct UserID: RawRepresentable, Hashable { var rawValue: Int }
/// extension UserID: CacheKeyConvertible {}
/// ```
public protocol CacheKeyConvertible {
    /// The text of the key: equal values give equal text, different ones different text.
    var cacheKey: String { get }
}

extension String: CacheKeyConvertible {
    /// The string itself.
    public var cacheKey: String { self }
}

extension Substring: CacheKeyConvertible {
    /// The substring's text.
    public var cacheKey: String { String(self) }
}

extension URL: CacheKeyConvertible {
    /// The URL's absolute string.
    public var cacheKey: String { absoluteString }
}

extension UUID: CacheKeyConvertible {
    /// The UUID's uppercase text.
    public var cacheKey: String { uuidString }
}

extension Int: CacheKeyConvertible {
    /// The number in decimal.
    public var cacheKey: String { String(self) }
}

extension Int64: CacheKeyConvertible {
    /// The number in decimal.
    public var cacheKey: String { String(self) }
}

extension UInt64: CacheKeyConvertible {
    /// The number in decimal.
    public var cacheKey: String { String(self) }
}

extension Int32: CacheKeyConvertible {
    /// The number in decimal.
    public var cacheKey: String { String(self) }
}

extension UInt32: CacheKeyConvertible {
    /// The number in decimal.
    public var cacheKey: String { String(self) }
}

extension RawRepresentable where RawValue: CacheKeyConvertible {
    /// The raw value's key.
    public var cacheKey: String { rawValue.cacheKey }
}

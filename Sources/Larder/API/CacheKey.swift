import Foundation

/// A type whose bytes can serve as a key: `String` (its UTF-8), `[UInt8]`, `Data`, and more.
///
/// Keys are 1 to 4096 bytes, compared byte for byte: "é" precomposed and decomposed are two keys.
public protocol CacheKey {
    /// Calls `body` with the key's bytes, valid only during the call.
    func withCacheKeyBytes<R>(_ body: (UnsafeRawBufferPointer) -> R) -> R
}

extension String: CacheKey {
    @inlinable
    public func withCacheKeyBytes<R>(_ body: (UnsafeRawBufferPointer) -> R) -> R {
        if let result = utf8.withContiguousStorageIfAvailable({ body(UnsafeRawBufferPointer($0)) }) {
            return result
        }
        var copy = self
        return copy.withUTF8 { body(UnsafeRawBufferPointer($0)) }
    }
}

extension Substring: CacheKey {
    public func withCacheKeyBytes<R>(_ body: (UnsafeRawBufferPointer) -> R) -> R {
        String(self).withCacheKeyBytes(body)
    }
}

extension Array: CacheKey where Element == UInt8 {
    public func withCacheKeyBytes<R>(_ body: (UnsafeRawBufferPointer) -> R) -> R {
        withUnsafeBytes(body)
    }
}

extension Data: CacheKey {
    public func withCacheKeyBytes<R>(_ body: (UnsafeRawBufferPointer) -> R) -> R {
        withUnsafeBytes(body)
    }
}

extension UnsafeRawBufferPointer: CacheKey {
    public func withCacheKeyBytes<R>(_ body: (UnsafeRawBufferPointer) -> R) -> R {
        body(self)
    }
}

import Foundation

/// Turns values that are not `Codable` into the bytes a cache stores and back, and says what the
/// decoded value costs in memory: images, `NSSecureCoding` objects, your own types.
///
/// ```swift
/// struct Thumbnail { var pixels: [UInt8] }
/// struct ThumbnailConversion: CacheConversion {
///     func bytes(from value: Thumbnail) throws -> Data { Data(value.pixels) }
///     func value(from bytes: Data) throws -> Thumbnail { Thumbnail(pixels: [UInt8](bytes)) }
///     func memoryCost(of value: Thumbnail) -> Int { value.pixels.count }
/// }
/// try cache.set(thumbnail, forKey: "thumb/7", using: ThumbnailConversion())
/// let again = try cache.value(forKey: "thumb/7", using: ThumbnailConversion())
/// ```
///
/// What a conversion throws reaches the caller as a ``LarderError`` with code
/// ``LarderError/Code-swift.struct/invalidArgument``; the file is left as it was.
public protocol CacheConversion<Value>: Sendable {
    /// The type of the values converted.
    associatedtype Value

    /// The bytes to store for `value`.
    func bytes(from value: Value) throws -> Data
    /// The value whose bytes `bytes(from:)` made.
    func value(from bytes: Data) throws -> Value
    /// What `value` costs in memory, in bytes: what ``MemoryLimits/cost`` counts. It must be
    /// positive; a cost of 0 or less is refused (`.invalidArgument`).
    func memoryCost(of value: Value) -> Int
}

/// Stores `NSSecureCoding` objects by keyed archiving, as `NSKeyedArchiver` does with secure
/// coding required; reads them back with `NSKeyedUnarchiver`, allowing `Object` and the classes
/// you name.
public struct SecureCodingConversion<Object: NSObject & NSSecureCoding>: CacheConversion {
    /// Further classes the archive may contain (those of an array's elements, say).
    public var allowedClasses: [AnyClass]
    /// What an object costs in memory; `nil` counts the length of its archive, which archives it
    /// again: give an estimate when you have a cheaper one.
    public var cost: (@Sendable (Object) -> Int)?

    /// A conversion for `Object`, allowing `allowedClasses` too in an archive.
    public init(_ type: Object.Type = Object.self, allowedClasses: [AnyClass] = [],
                cost: (@Sendable (Object) -> Int)? = nil) {
        self.allowedClasses = allowedClasses
        self.cost = cost
    }

    /// The keyed archive of `value`.
    public func bytes(from value: Object) throws -> Data {
        try NSKeyedArchiver.archivedData(withRootObject: value, requiringSecureCoding: true)
    }

    /// The object archived in `bytes`.
    public func value(from bytes: Data) throws -> Object {
        let decoded = try NSKeyedUnarchiver.unarchivedObject(ofClasses: [Object.self] + allowedClasses, from: bytes)
        guard let object = decoded as? Object else {
            throw LarderError(.invalidArgument, "the archive holds no \(Object.self)")
        }
        return object
    }

    /// `cost`'s answer, or the length of the object's archive.
    public func memoryCost(of value: Object) -> Int {
        if let cost { return cost(value) }
        return (try? bytes(from: value).count) ?? 1
    }
}

// Holds only classes (never mutated) and a @Sendable closure.
extension SecureCodingConversion: @unchecked Sendable {}

import Foundation
import Larder

/// A value as the driver stores it: the object, its deadline, and what it costs in memory.
struct StoredObject<Object: Codable & Sendable>: Sendable {
    let object: Object
    /// When Larder stops returning it; `nil` for never.
    let expiresAt: Date?
    /// The length of its stored bytes, header included: what the memory tier counts.
    let cost: Int
}

/// The driver's stored bytes (`StoredValue`) as a conversion of the core, so that reads go
/// through its memory tier: a second read of a key returns the object decoded by the first, as
/// long as the file still holds the record it came from (in any process).
struct StoredConversion<Object: Codable & Sendable>: CacheConversion {
    let coder: any CacheCoder
    /// The bytes a write has already made for its object, so that it encodes once.
    var encoded: Data? = nil

    func bytes(from value: StoredObject<Object>) throws -> Data {
        if let encoded { return encoded }
        return try StoredValue.encode(value.object, deadline: value.expiresAt, coder: coder)
    }

    /// - Throws: `PersistError.invalidConversion` when `bytes` hold no `Object`.
    func value(from bytes: Data) throws -> StoredObject<Object> {
        let (object, expiresAt) = try bytes.withUnsafeBytes { try StoredValue.decode(Object.self, from: $0, coder: coder) }
        return StoredObject(object: object, expiresAt: expiresAt, cost: bytes.count)
    }

    func memoryCost(of value: StoredObject<Object>) -> Int { max(value.cost, 1) }

    /// Where objects of this type go: raw bytes stay in the file only, as the core keeps them
    /// (a copy costs what a hit saves).
    static var placement: Cache.Placement {
        Object.self == Data.self || Object.self == [UInt8].self ? .fileOnly : .memoryAndFile
    }
}

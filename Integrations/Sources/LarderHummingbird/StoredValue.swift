import Foundation

/// What the driver stores for a key: the value and its deadline, which Larder's expiry drops
/// it at and `getWithTTL` reports.
struct StoredValue<Value: Codable & Sendable>: Codable, Sendable {
    var value: Value
    /// When the value stops being returned; `nil` for never.
    var expiresAt: Date?
}

/// The deadline of a stored value, read without decoding the value.
struct StoredDeadline: Decodable {
    var expiresAt: Date?
}

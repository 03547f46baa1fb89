import Foundation
import Hummingbird
import Larder

/// What the driver stores for a key: a header of 9 bytes, then the value.
///
/// - Byte 0 says how the value is stored: 1, a `String` as its UTF-8 bytes; 2, `Data` or
///   `[UInt8]` as they are; 3, any other value through the cache's coder (JSON by default).
/// - Bytes 1-8 hold the deadline, milliseconds since 1970, little-endian; 0 for none. Larder's
///   expiry drops the value then, and `getWithTTL` reports the time left.
///
/// Text and bytes skip the coder: a JSON string of 2 KB of HTML or JSON has hundreds of escapes,
/// and decoding them took longer than the rest of a cached response (`Integrations/bench`).
enum StoredValue {
    static let headerSize = 9

    private enum Form: UInt8 {
        case text = 1
        case bytes = 2
        case coded = 3
    }

    /// The bytes to store for `value`, which stops being returned at `deadline`.
    static func encode<Value: Encodable>(_ value: Value, deadline: Date?, coder: any CacheCoder) throws -> Data {
        let (form, payload): (Form, Data) =
            if Value.self == String.self { (.text, Data((value as! String).utf8)) }
            else if Value.self == Data.self { (.bytes, value as! Data) }
            else if Value.self == [UInt8].self { (.bytes, Data(value as! [UInt8])) }
            else { (.coded, try coder.encode(value)) }
        var stored = Data(capacity: headerSize + payload.count)
        stored.append(form.rawValue)
        withUnsafeBytes(of: milliseconds(deadline).littleEndian) { stored.append(contentsOf: $0) }
        stored.append(payload)
        return stored
    }

    /// The deadline stored in `bytes` (`.some(nil)` for none), or `nil` when `bytes` are not a
    /// stored value.
    static func deadline(in bytes: UnsafeRawBufferPointer) -> Date?? {
        guard bytes.count >= headerSize, Form(rawValue: bytes[0]) != nil else { return nil }
        let milliseconds = Int64(littleEndian: bytes.loadUnaligned(fromByteOffset: 1, as: Int64.self))
        return .some(milliseconds == 0 ? nil : Date(timeIntervalSince1970: Double(milliseconds) / 1000))
    }

    /// The value in `bytes`, as a `Value`, and its deadline.
    ///
    /// - Throws: `PersistError.invalidConversion` when `bytes` hold no `Value`.
    static func decode<Value: Decodable>(_ type: Value.Type, from bytes: UnsafeRawBufferPointer,
                                         coder: any CacheCoder) throws -> (value: Value, expiresAt: Date?) {
        guard case .some(let deadline) = deadline(in: bytes), let form = Form(rawValue: bytes[0]) else {
            throw PersistError.invalidConversion
        }
        let payload = UnsafeRawBufferPointer(rebasing: bytes[headerSize...])
        let value: Value
        switch form {
        case .text where Value.self == String.self:
            value = String(decoding: payload, as: UTF8.self) as! Value
        case .bytes where Value.self == Data.self:
            value = Data(payload) as! Value
        case .bytes where Value.self == [UInt8].self:
            value = [UInt8](payload) as! Value
        case .coded:
            do {
                value = try coder.decode(type, from: Data(payload))
            } catch {
                throw PersistError.invalidConversion
            }
        default:
            throw PersistError.invalidConversion
        }
        return (value, deadline)
    }

    /// `deadline` in whole milliseconds since 1970, rounded up as Larder rounds it; 0 for none.
    private static func milliseconds(_ deadline: Date?) -> Int64 {
        guard let deadline else { return 0 }
        return max(1, Int64((deadline.timeIntervalSince1970 * 1000).rounded(.up)))
    }
}

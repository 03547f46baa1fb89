import Foundation
@testable import Larder
import Testing

/// The memory tier's keys: held inline up to 16 bytes, in an array beyond. A lookup compares
/// bytes only where hashes are equal, so these keys share one hash on purpose.
@Suite("Memory keys")
struct MemoryKeyTests {
    @Test func aKeyMatchesItsOwnBytesAndNoOthersAtEveryLength() {
        for length in 0...40 {
            let bytes = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 11) }
            let key = bytes.withUnsafeBytes { MemoryKey($0, hash: 7) }
            #expect(key.count == length)
            #expect(key.bytes == Data(bytes))
            #expect(bytes.withUnsafeBytes { key.matches($0) }, "length \(length)")
            // One byte changed, at each position, and one byte more or less.
            for position in 0..<length {
                var other = bytes
                other[position] ^= 0x80
                #expect(!other.withUnsafeBytes { key.matches($0) }, "length \(length), byte \(position)")
                #expect(other.withUnsafeBytes { MemoryKey($0, hash: 7) } != key)
            }
            #expect(!(bytes + [0]).withUnsafeBytes { key.matches($0) })
            if length > 0 { #expect(!bytes.dropLast().withUnsafeBytes { key.matches($0) }) }
            #expect(bytes.withUnsafeBytes { MemoryKey($0, hash: 7) } == key)
        }
    }

    @Test func keysOfOneHashLiveSideBySideInATier() throws {
        let tier = MemoryTier(limits: MemoryLimits(cost: .megabytes(1), count: 1_000))
        let kind = MemoryKind(Int.self)
        let keys = (1...40).map { length in [UInt8](repeating: UInt8(length), count: length) }
        for (value, bytes) in keys.enumerated() {
            tier.insert(value, forKey: bytes.withUnsafeBytes { MemoryKey($0, hash: 42) }, kind: kind, origin: .memoryOnly, cost: 1)
        }
        for (value, bytes) in keys.enumerated() {
            let found = bytes.withUnsafeBytes { tier.object(forKey: $0, hash: 42, kind: kind) }
            let read = found.map { hit in
                defer { tier.leave(hit) }
                return hit.object._withUnsafeGuaranteedRef { $0.value(as: Int.self) }
            }
            #expect(read == value)
        }
    }
}

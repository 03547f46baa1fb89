import CLarderSupport
import Testing
@testable import Larder

/// The checksum and the hash are part of the file format: other implementations must be able to
/// reproduce them from the published algorithms. These are the algorithms' reference vectors.
@Suite("Checksum and hash")
struct ChecksumAndHashTests {
    private func crc(_ text: String, seed: UInt32 = 0) -> UInt32 {
        Array(text.utf8).withUnsafeBytes { lrd_crc32c(seed, $0.baseAddress, $0.count) }
    }

    private func xxh64(_ bytes: [UInt8]) -> UInt64 {
        bytes.withUnsafeBytes { lrd_xxh64($0.baseAddress, $0.count, 0) }
    }

    @Test func crc32cMatchesTheCastagnoliCheckValue() {
        #expect(crc("123456789") == 0xE306_9283)
        #expect(crc("") == 0)
        // RFC 3720 B.4: 32 bytes of zeros.
        let zeros = [UInt8](repeating: 0, count: 32)
        #expect(zeros.withUnsafeBytes { lrd_crc32c(0, $0.baseAddress, 32) } == 0x8A91_36AA)
    }

    @Test func crc32cChainsAcrossPieces() {
        let whole = crc("hello, larder")
        let chained = Array(", larder".utf8).withUnsafeBytes { lrd_crc32c(crc("hello"), $0.baseAddress, $0.count) }
        #expect(whole == chained)
    }

    @Test func crc32cOfOddLengthsAgreesWithBytewise() {
        // Every length from 0 to 100 through the word-at-a-time path equals a byte-at-a-time chain.
        let bytes = (0..<100).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ 3) }
        for length in 0...bytes.count {
            let fast = bytes.withUnsafeBytes { lrd_crc32c(0, $0.baseAddress, length) }
            var slow: UInt32 = 0
            for index in 0..<length {
                slow = bytes.withUnsafeBytes { lrd_crc32c(slow, $0.baseAddress! + index, 1) }
            }
            #expect(fast == slow, "length \(length)")
        }
    }

    @Test func copyingWithTheChecksumEqualsCopyingThenChecksumming() {
        let source = (0..<300).map { UInt8(truncatingIfNeeded: $0 &* 13 &+ 5) }
        for length in [0, 1, 7, 8, 9, 15, 16, 17, 63, 64, 65, 299, 300] {
            var destination = [UInt8](repeating: 0, count: 300)
            let fused = source.withUnsafeBytes { from in
                destination.withUnsafeMutableBytes { lrd_crc32c_then_copy(0x1234, nil, 0, $0.baseAddress, from.baseAddress, length) }
            }
            let separate = source.withUnsafeBytes { lrd_crc32c(0x1234, $0.baseAddress, length) }
            #expect(fused == separate, "length \(length)")
            #expect(destination.prefix(length).elementsEqual(source.prefix(length)))
            #expect(destination.dropFirst(length).allSatisfy { $0 == 0 })
        }
    }

    /// Keys are compared as overlapping words from 8 to 32 bytes: every byte must count.
    @Test func keyComparisonSeesEveryByte() {
        for count in 0...70 {
            let original = (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 5) }
            original.withUnsafeBytes { key in
                original.withUnsafeBytes { #expect(key.sameBytes(as: $0), "\(count) equal bytes") }
                for position in 0..<count {
                    for bit in [0, 7] {
                        var changed = original
                        changed[position] ^= UInt8(1 << bit)
                        changed.withUnsafeBytes { #expect(!key.sameBytes(as: $0), "\(count) bytes, bit \(bit) of byte \(position)") }
                    }
                }
                if count > 0 {
                    original.dropLast().withUnsafeBytes { #expect(!key.sameBytes(as: $0), "\(count) against \(count - 1)") }
                }
            }
        }
    }

    @Test func xxh64MatchesReferenceVectors() {
        #expect(xxh64([]) == 0xEF46_DB37_51D8_E999)
        #expect(xxh64(Array("a".utf8)) == 0xD24E_C4F1_A98C_6E5B)
        #expect(xxh64(Array("abc".utf8)) == 0x44BC_2CF5_AD77_0999)
        #expect(xxh64(Array("Nobody inspects the spammish repetition".utf8)) == 0xFBCE_A83C_8A37_8BF1)
    }
}

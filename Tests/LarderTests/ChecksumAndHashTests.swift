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

    /// A writer's check of a record header, from words it loaded, covers the bytes of the header
    /// checksum (FORMAT.md 4.4) and no others: any of bytes 0-3 and 6-43 changed fails it, and
    /// the state and access bytes (4-5) may be anything.
    @Test func theWritersHeaderCheckCoversTheChecksummedBytes() {
        var generator = SplitMix(seed: 7)
        let seed: UInt32 = 0x5EED_1234
        for _ in 0..<50 {
            var header = (0..<48).map { _ in UInt8.random(in: 0...255, using: &generator) }
            let checksum = header.withUnsafeBytes { lrd_crc32c_record_header(seed, $0.baseAddress) }
            withUnsafeBytes(of: checksum.littleEndian) { header.replaceSubrange(44..<48, with: $0) }
            func holds(_ bytes: [UInt8]) -> Bool {
                bytes.withUnsafeBytes { raw in
                    lrd_record_header_holds(seed, raw.baseAddress, raw.load(as: UInt64.self),
                                            raw.load(fromByteOffset: 8, as: UInt64.self),
                                            raw.load(fromByteOffset: 40, as: UInt64.self)) != 0
                }
            }
            #expect(holds(header))
            for byte in 0..<48 {
                var changed = header
                changed[byte] ^= 0x10
                #expect(holds(changed) == (byte == 4 || byte == 5), "byte \(byte)")
            }
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

    /// Every way a key's tail can end (0-3 bytes, with or without a 4-byte and 8-byte lanes,
    /// before and after the 32-byte stripes): the hash is part of the file format.
    @Test func xxh64MatchesTheReferenceForEveryTail() {
        // XXH64, seed 0, of the first n bytes of `text`, n = 0...40, from a transcription of
        // xxHash's doc/xxhash_spec.md that passes the vectors above.
        let expected: [UInt64] = [
            0xEF46_DB37_51D8_E999, 0x5B4D_6AF2_47A3_CF7B, 0x4D9D_D5B2_D061_3C90, 0x4108_F90B_5DE1_4D15,
            0xCDF1_3A49_D263_200F, 0xF0D7_A3AD_CFA8_C683, 0x645E_5D66_6AC3_E66D, 0xC6FC_E9D7_2E31_0949,
            0xD07B_38A7_8A15_3B0B, 0x9D12_14DB_001D_FC69, 0xDB39_1947_5AB1_CF22, 0x61CB_DF23_C67A_F875,
            0xB2ED_3801_7844_F789, 0xED6D_C8C5_841A_51E4, 0x5E5D_DB1F_AE22_9E50, 0x59BF_1A33_358C_7D98,
            0x0F7E_6701_4943_A311, 0x6BF8_7C8B_1FD9_ED1A, 0xA2D3_1BB8_D44B_0557, 0xC9B4_E7B3_C328_D9E0,
            0x457C_D265_0FE6_AA94, 0x3C58_3124_8B53_4326, 0x645C_543C_B504_EFAD, 0xB91F_8B16_17C1_1212,
            0xE5BC_C54F_9811_D5DE, 0x1EB6_1388_311E_1536, 0x54AD_75AB_2F5C_BF06, 0x425F_794B_47C2_BD48,
            0x1DCD_16DD_1531_7465, 0x2FCA_2D55_FCC6_C2CF, 0xCBD4_7A9C_2BF5_830B, 0x3F8D_95AB_32C1_27D9,
            0xE2BB_C913_6629_A4EE, 0x6D92_FE2E_BAB7_DB31, 0x20C5_0C76_3D3E_7180, 0x2D27_CBA0_D248_72DE,
            0x9457_EE2B_0CAC_E793, 0x675A_F3B6_C6F5_1195, 0xB3E5_AE9E_C090_534C, 0xE015_09EC_7BDD_4B5E,
            0x581A_9E84_F2AB_44EF,
        ]
        let text = Array("The quick brown fox jumps over the lazy dog, again and again.".utf8)
        for (length, hash) in expected.enumerated() {
            #expect(xxh64(Array(text[0..<length])) == hash, "length \(length)")
        }
        #expect(text.withUnsafeBytes { lrd_xxh64($0.baseAddress, 23, 0x9E37_79B9) } == 0xD233_F6FE_5078_DB90)
        #expect(text.withUnsafeBytes { lrd_xxh64($0.baseAddress, $0.count, UInt64.max) } == 0xC7DC_DDF4_AF9E_14C8)
    }
}

import CLarderSupport
#if canImport(CLZ4)
import CLZ4
#endif
import Foundation
import Testing
@testable import Larder

/// JSON-like text, the kind of value LZ4 is for.
func jsonLike(_ seed: Int, count: Int) -> [UInt8] {
    var text = ""
    var index = seed
    while text.utf8.count < count {
        text += "{\"id\":\(index),\"name\":\"user \(index % 97)\",\"active\":\(index % 2 == 0),\"tags\":[\"a\",\"b\"]},"
        index += 1
    }
    return Array(text.utf8.prefix(count))
}

@Suite("LZ4 compression")
struct CompressionTests {
    private func lz4Cache(_ path: String, capacity: Int = 8 << 20, threshold: Int = 128) throws -> Cache {
        try Cache(path: path, options: .init(capacity: .bytes(capacity), compression: .lz4, compressionThreshold: threshold))
    }

    @Test(arguments: [0, 1, 12, 13, 127, 128, 129, 4047, 4048, 4095, 4096, 4097, 65_536, 1 << 20])
    func valuesRoundTripAtEverySize(size: Int) throws {
        let directory = TemporaryDirectory()
        do {
            let cache = try lz4Cache(directory.path())
            try cache.set(jsonLike(size, count: size), forKey: "json")
            try cache.set(pattern(size, count: size), forKey: "noise")
            #expect(try cache.bytes(forKey: "json") == jsonLike(size, count: size))
            #expect(try cache.data(forKey: "json") == Data(jsonLike(size, count: size)))
            #expect(try cache.withValue(forKey: "json") { Array($0) } == jsonLike(size, count: size))
            #expect(try cache.bytes(forKey: "noise") == pattern(size, count: size))
            try cache.close()
        }
        // Read back by a cache opened without compression.
        let plain = try Cache(path: directory.path())
        #expect(try plain.bytes(forKey: "json") == jsonLike(size, count: size))
        #expect(try plain.bytes(forKey: "noise") == pattern(size, count: size))
    }

    /// One LZ4 block built by hand from the block format's rules (FORMAT.md 4.2; the worked
    /// example of section 9 is its 300-byte case), decoded by whichever LZ4 the platform has
    /// (liblz4, or Apple's Compression framework): only into exactly its length. A block decoding
    /// to more or fewer bytes than the header's raw length is damage.
    @Test(arguments: [13, 300, 65_536, 4 << 20])
    func aBlockWrittenByTheRulesDecodesToExactlyItsLength(length: Int) {
        // One literal "A", a match of the byte before (offset 1) up to 5 bytes from the end, and
        // the 5 literals every block ends with.
        let matchLength = length - 6
        var block: [UInt8] = [0x10 | UInt8(min(matchLength - 4, 15)), 0x41, 0x01, 0x00]
        if matchLength - 4 >= 15 {
            var rest = matchLength - 4 - 15
            while rest >= 255 { block.append(255); rest -= 255 }
            block.append(UInt8(rest))
        }
        block += [0x50, 0x41, 0x41, 0x41, 0x41, 0x41]
        if length == 300 { #expect(block == [0x1f, 0x41, 0x01, 0x00, 0xff, 0x14, 0x50, 0x41, 0x41, 0x41, 0x41, 0x41]) }
        for size in [length, length - 1, length + 1] {
            var decoded = [UInt8](repeating: 0, count: size)
            let fits = block.withUnsafeBytes { source in
                decoded.withUnsafeMutableBytes { LZ4Codec.decompress(source, into: $0) }
            }
            #expect(fits == (size == length), "\(length) bytes into \(size)")
            if size == length { #expect(decoded.allSatisfy { $0 == 0x41 }) }
        }
    }

    #if canImport(CLZ4)
    /// The codec's own limit and bound (Apple platforms use the Compression framework, which has
    /// neither) are liblz4's, so that a record sized for one fits what the other writes.
    @Test func theBoundAndTheLimitAreLiblz4s() {
        #expect(LZ4Codec.maximumInputSize == Int(LZ4_MAX_INPUT_SIZE))
        for count in [0, 1, 15, 16, 254, 255, 256, 4096, 65_535, 1 << 20, LZ4Codec.maximumInputSize,
                      LZ4Codec.maximumInputSize + 1, Int(Int32.max)] {
            #expect(LZ4Codec.bound(count) == Int(LZ4_compressBound(Int32(count))), "\(count)")
        }
    }
    #endif

    @Test func compressibleValuesAreStoredCompressedAndNoiseIsStoredRaw() throws {
        let directory = TemporaryDirectory()
        let cache = try lz4Cache(directory.path())
        try cache.set(jsonLike(1, count: 4096), forKey: "json")
        let afterJSON = cache.stats
        #expect(afterJSON.liveBytes == 4096)
        #expect(afterJSON.storedBytes < 4096 / 2)
        try cache.set(pattern(1, count: 4096), forKey: "noise")
        let afterNoise = cache.stats
        #expect(afterNoise.storedBytes - afterJSON.storedBytes == 4096, "incompressible data must be stored raw")
        #expect(afterNoise.compressionRatio > 1)
    }

    @Test func incompressibleValuesTakeOnlyTheirRawRoomAndTheRingStaysWhole() throws {
        // Room for LZ4's worst case is reserved; a value stored raw must still advance the head
        // by its own record only, or the tail later meets bytes that are no record and rebuilds.
        let directory = TemporaryDirectory()
        let cache = try lz4Cache(directory.path(), capacity: 256 << 10)
        for index in 0..<3000 {
            try cache.set(pattern(index, count: 200), forKey: "noise-\(10_000 + index)")
        }
        let stats = cache.stats
        #expect(stats.recoveries == 0)
        #expect(stats.evictions > 0)
        #expect(stats.recordBytes == stats.entryCount * RecordHeader.entrySize(keyLength: 11, storedLength: 200))
        #expect(try cache.bytes(forKey: "noise-12999") == pattern(2999, count: 200))
    }

    @Test func valuesUnderTheThresholdAndPerWriteOverridesAreHonoured() throws {
        let directory = TemporaryDirectory()
        let cache = try lz4Cache(directory.path(), threshold: 1000)
        try cache.set(jsonLike(1, count: 999), forKey: "small")
        #expect(cache.stats.storedBytes == 999)
        try cache.set(jsonLike(1, count: 2000), forKey: "raw", compression: Compression.none)
        #expect(cache.stats.storedBytes == 2999)
        let plain = try Cache(path: directory.path("plain.larder"))
        try plain.set(jsonLike(1, count: 2000), forKey: "packed", compression: .lz4)
        #expect(plain.stats.storedBytes < 1000)
        #expect(try plain.bytes(forKey: "packed") == jsonLike(1, count: 2000))
    }

    @Test func aValueThatCompressesToAlmostNothingRoundTrips() throws {
        let directory = TemporaryDirectory()
        let cache = try lz4Cache(directory.path())
        let zeros = [UInt8](repeating: 0, count: 4 << 20)
        try cache.set(zeros, forKey: "zeros")
        #expect(cache.stats.storedBytes < 20_000)
        #expect(try cache.bytes(forKey: "zeros") == zeros)
    }

    @Test func aMixedFileServesBothKindsAfterReopen() throws {
        let directory = TemporaryDirectory()
        do {
            let cache = try lz4Cache(directory.path())
            for index in 0..<300 {
                let value = index % 2 == 0 ? jsonLike(index, count: 100 + index * 13) : pattern(index, count: 100 + index * 13)
                try cache.set(value, forKey: "k\(index)", compression: index % 3 == 0 ? Compression.none : .lz4)
            }
            try cache.close()
        }
        let cache = try Cache(path: directory.path())
        for index in 0..<300 {
            let value = index % 2 == 0 ? jsonLike(index, count: 100 + index * 13) : pattern(index, count: 100 + index * 13)
            #expect(try cache.bytes(forKey: "k\(index)") == value)
        }
    }

    @Test func textTakesClearlyLessSpaceWithLZ4() throws {
        let directory = TemporaryDirectory()
        func fill(_ cache: Cache) throws {
            for index in 0..<500 { try cache.set(jsonLike(index, count: 4096), forKey: "doc\(index)") }
        }
        let plain = try Cache(at: directory.path("plain.larder"), capacity: 64 << 20)
        let packed = try lz4Cache(directory.path("lz4.larder"), capacity: 64 << 20)
        try fill(plain)
        try fill(packed)
        #expect(packed.stats.recordBytes * 2 < plain.stats.recordBytes)
        #expect(packed.stats.compressionRatio > 2.5)
    }

    @Test func aDamagedCompressedRecordIsAnError() throws {
        let directory = TemporaryDirectory()
        let value = jsonLike(5, count: 8192)
        do {
            let cache = try lz4Cache(directory.path())
            try cache.set(value, forKey: "doc")
            try cache.close()
        }
        let url = URL(fileURLWithPath: directory.path())
        let original = try [UInt8](Data(contentsOf: url))
        let keyStart = try #require(original.firstRange(of: Array("doc".utf8))).lowerBound
        let recordStart = keyStart - RecordHeader.size
        let stored = Int(original[(recordStart + 8)..<(recordStart + 12)].withUnsafeBytes { UInt32(littleEndian: $0.loadUnaligned(as: UInt32.self)) })
        let seed = try original.prefix(Meta.encodedSize).withUnsafeBytes { Meta.decode($0) }.get().checksumSeed

        // 1. A flipped byte: the checksum catches it.
        var flipped = original
        flipped[keyStart + 3 + stored / 2] ^= 0x40
        try Data(flipped).write(to: url)
        do {
            let cache = try Cache(path: directory.path())
            #expect(throws: LarderError.self) { try cache.bytes(forKey: "doc") }
            #expect(throws: LarderError.self) { try cache.withValue(forKey: "doc") { _ in 0 } }
        }

        // 2. A hostile record: garbage LZ4 with a correct checksum. The decoder must refuse it.
        var hostile = original
        for index in (keyStart + 3)..<(keyStart + 3 + stored) { hostile[index] = 0xFF }
        let crc = hostile[keyStart..<(keyStart + 3 + stored)].withUnsafeBytes { lrd_crc32c(seed, $0.baseAddress, $0.count) }
        withUnsafeBytes(of: crc.littleEndian) { hostile.replaceSubrange((recordStart + 40)..<(recordStart + 44), with: $0) }
        // The header checksum covers the data checksum: recompute it as well.
        let firstPart = hostile[recordStart..<(recordStart + 4)].withUnsafeBytes { lrd_crc32c(seed, $0.baseAddress, 4) }
        let headerCRC = hostile[(recordStart + 6)..<(recordStart + 44)].withUnsafeBytes { lrd_crc32c(firstPart, $0.baseAddress, $0.count) }
        withUnsafeBytes(of: headerCRC.littleEndian) { hostile.replaceSubrange((recordStart + 44)..<(recordStart + 48), with: $0) }
        #expect(hostile != original)
        try Data(hostile).write(to: url)
        let cache = try Cache(path: directory.path())
        for read in [{ _ = try cache.bytes(forKey: "doc") }, { _ = try cache.data(forKey: "doc") },
                     { _ = try cache.withValue(forKey: "doc") { $0.count } }] {
            do {
                try read()
                Issue.record("a hostile compressed record was decoded")
            } catch let error as LarderError {
                // The checksum holds, so it is the bounds-checked decoder that refuses.
                #expect(error.code == .corrupt)
                #expect(error.message.contains("does not decode"))
            }
        }
    }
}

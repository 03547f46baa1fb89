import CLarderSupport
import Foundation
import Testing

/// Long buffers are folded with carry-less multiplication (blocks of 128 bytes, on x86-64 CPUs
/// with VPCLMULQDQ, from 256 bytes on) or take the hardware path's three interleaved chains
/// (blocks of 3 × 8192 bytes, then of 3 × 256) joined by shift tables; short ones take a single
/// chain. Whatever the path, the checksum is the one in the file format: these compare every
/// long-path result, with folding allowed and not, against a chain of calls on pieces short
/// enough for the single chain, at and around every block boundary and for several
/// misalignments. Serialized: each test sets whether folding is allowed for its whole run.
@Suite("Checksum of long buffers", .serialized)
struct ChecksumLongBufferTests {
    static let longBlock = 3 * 8192
    static let shortBlock = 3 * 256
    static let maximum = 100_000
    static let offsets = [0, 1, 3, 7]
    static let seed: UInt32 = 0x1234_5678

    /// Every length to 2 × 3 × 256 + 64, then a window around every multiple of 3 × 256 (which
    /// includes the multiples of 3 × 8192), and a few sizes values often have.
    static let lengths: [Int] = {
        var lengths = Set(0...(2 * shortBlock + 64))
        for boundary in stride(from: shortBlock, through: maximum + 9, by: shortBlock) {
            lengths.formUnion((boundary - 9)...(boundary + 9))
        }
        for boundary in stride(from: longBlock, through: maximum + 9, by: longBlock) {
            lengths.formUnion([boundary - shortBlock - 1, boundary - shortBlock, boundary + shortBlock,
                               boundary + shortBlock + 1, boundary + 2 * shortBlock - 1])
        }
        for boundary in stride(from: 128, through: 8192, by: 128) {
            lengths.formUnion((boundary - 2)...(boundary + 2))
        }
        lengths.formUnion([4096, 16383, 16384, 16385, 65536, maximum - 1, maximum])
        return lengths.filter { $0 <= maximum }.sorted()
    }()

    /// Source bytes (with room for every offset), read by the reference and the code under test.
    final class Buffers {
        let source: UnsafeMutableRawBufferPointer
        /// Where copies go, with `guardBytes` of the allocation on either side that no copy may touch.
        let destination: UnsafeMutableRawBufferPointer
        private let destinationAllocation: UnsafeMutableRawBufferPointer
        static let guardBytes = 64
        /// Per offset, the chained CRC of the first k × `piece` bytes from that offset.
        let checkpoints: [[UInt32]]
        static let piece = 128 // below 2 × 128 and 3 × 256: the single chain

        init() {
            let size = ChecksumLongBufferTests.maximum + 16
            source = .allocate(byteCount: size, alignment: 64)
            destinationAllocation = .allocate(byteCount: size + 2 * Self.guardBytes, alignment: 64)
            destination = UnsafeMutableRawBufferPointer(rebasing: destinationAllocation[Self.guardBytes..<(Self.guardBytes + size)])
            source.copyBytes(from: pattern(42, count: size))
            let source = UnsafeRawBufferPointer(self.source)
            checkpoints = ChecksumLongBufferTests.offsets.map { offset in
                var crc = ChecksumLongBufferTests.seed
                var chain = [crc]
                // Whole pieces within `maximum` bytes of the offset: the allocation ends 16 bytes after.
                for start in stride(from: 0, through: ChecksumLongBufferTests.maximum - Self.piece, by: Self.piece) {
                    crc = lrd_crc32c(crc, source.baseAddress! + offset + start, Self.piece)
                    chain.append(crc)
                }
                return chain
            }
        }

        deinit {
            source.deallocate()
            destinationAllocation.deallocate()
        }

        /// The CRC of `length` bytes from `offset` as a chain of short pieces.
        func reference(offset: Int, length: Int) -> UInt32 {
            let index = ChecksumLongBufferTests.offsets.firstIndex(of: offset)!
            let whole = length / Self.piece * Self.piece
            return lrd_crc32c(checkpoints[index][length / Self.piece], source.baseAddress! + offset + whole,
                              length - whole)
        }

        /// Whether `length` bytes at `destinationOffset` equal those at `sourceOffset`.
        func copied(_ length: Int, from sourceOffset: Int, to destinationOffset: Int) -> Bool {
            memcmp(destination.baseAddress! + destinationOffset, source.baseAddress! + sourceOffset, length) == 0
        }

        func clearDestination() {
            memset(destinationAllocation.baseAddress!, 0xA5, destinationAllocation.count)
        }

        /// Whether the `guardBytes` before and after `length` bytes at `destinationOffset` are
        /// as `clearDestination` left them.
        func untouchedAround(_ length: Int, at destinationOffset: Int) -> Bool {
            let start = Self.guardBytes + destinationOffset
            return destinationAllocation[(start - Self.guardBytes)..<start].allSatisfy { $0 == 0xA5 }
                && destinationAllocation[(start + length)..<(start + length + Self.guardBytes)].allSatisfy { $0 == 0xA5 }
        }
    }

    @Test func theCheckValueStillHolds() {
        let text = Array("123456789".utf8)
        #expect(text.withUnsafeBytes { lrd_crc32c(0, $0.baseAddress, $0.count) } == 0xE306_9283)
    }

    @Test(arguments: [true, false]) func wholeBufferEqualsTheChainOfShortPieces(folding: Bool) {
        let folds = lrd_crc32c_allow_folding(folding ? 1 : 0) != 0
        defer { lrd_crc32c_allow_folding(1) }
        // Off means off; on folds only where the CPU can (elsewhere both cases take the chains).
        #expect(folding || !folds)
        let buffers = Buffers()
        var wrong: [String] = []
        for length in Self.lengths {
            for offset in Self.offsets {
                let whole = lrd_crc32c(Self.seed, buffers.source.baseAddress! + offset, length)
                if whole != buffers.reference(offset: offset, length: length) { wrong.append("\(length)@\(offset)") }
            }
        }
        #expect(wrong.isEmpty, "\(wrong.count) wrong, first length@offset: \(wrong.prefix(8))")
    }

    /// The two copying checksums: out of the file (reads) and into it (puts, which ask for the
    /// destination ahead); the same checksum and bytes either way.
    enum Copier: String, CaseIterable, CustomTestStringConvertible {
        case copy, store
        var testDescription: String { rawValue }

        func callAsFunction(_ seed: UInt32, _ prefix: UnsafeRawPointer?, _ prefixLength: Int,
                            _ destination: UnsafeMutableRawPointer, _ source: UnsafeRawPointer, _ length: Int) -> UInt32 {
            switch self {
            case .copy: lrd_crc32c_then_copy(seed, prefix, prefixLength, destination, source, length)
            case .store: lrd_crc32c_then_store(seed, prefix, prefixLength, destination, source, length)
            }
        }
    }

    @Test(arguments: [true, false], Copier.allCases)
    func copyingChecksumsTheBytesItCopies(folding: Bool, copier: Copier) {
        let folds = lrd_crc32c_allow_folding(folding ? 1 : 0) != 0
        defer { lrd_crc32c_allow_folding(1) }
        // Off means off; on folds only where the CPU can (elsewhere both cases take the chains).
        #expect(folding || !folds)
        let buffers = Buffers()
        var wrong: [String] = []
        for (index, length) in Self.lengths.enumerated() {
            for offset in [Self.offsets[index % 4], Self.offsets[(index + 1) % 4]] {
                let destinationOffset = (offset + 5) % 8
                buffers.clearDestination()
                let crc = copier(Self.seed, nil, 0, buffers.destination.baseAddress! + destinationOffset,
                                 buffers.source.baseAddress! + offset, length)
                if crc != buffers.reference(offset: offset, length: length) { wrong.append("crc \(length)@\(offset)") }
                if !buffers.copied(length, from: offset, to: destinationOffset) { wrong.append("copy \(length)@\(offset)") }
                if !buffers.untouchedAround(length, at: destinationOffset) { wrong.append("outside \(length)@\(offset)") }
            }
        }
        #expect(wrong.isEmpty, "\(wrong.count) wrong, first: \(wrong.prefix(8))")
    }

    @Test(arguments: [true, false], Copier.allCases)
    func copyingAfterAPrefixChecksumsBoth(folding: Bool, copier: Copier) {
        let folds = lrd_crc32c_allow_folding(folding ? 1 : 0) != 0
        defer { lrd_crc32c_allow_folding(1) }
        // Off means off; on folds only where the CPU can (elsewhere both cases take the chains).
        #expect(folding || !folds)
        let buffers = Buffers()
        var wrong: [String] = []
        for (index, length) in Self.lengths.enumerated() {
            let offset = Self.offsets[index % 4]
            for prefix in [0, 1, 13, 37, 255, 256, 300].filter({ $0 <= length }) {
                let destinationOffset = (index + prefix) % 8
                buffers.clearDestination()
                let source = buffers.source.baseAddress! + offset
                let crc = copier(Self.seed, source, prefix, buffers.destination.baseAddress! + destinationOffset,
                                 source + prefix, length - prefix)
                let at = "\(length)@\(offset)+\(prefix)"
                if crc != buffers.reference(offset: offset, length: length) { wrong.append("crc \(at)") }
                if !buffers.copied(length - prefix, from: offset + prefix, to: destinationOffset) { wrong.append("copy \(at)") }
                if !buffers.untouchedAround(length - prefix, at: destinationOffset) { wrong.append("outside \(at)") }
            }
        }
        #expect(wrong.isEmpty, "\(wrong.count) wrong, first: \(wrong.prefix(8))")
    }
}

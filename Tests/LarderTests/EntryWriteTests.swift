import CLarderSupport
import Testing
@testable import Larder

/// `lrd_entry_write`, the usual put's record in one C call, lays out the record again, apart from
/// `RecordHeader.write`, which every other write uses. Both must write the same bytes: otherwise
/// the careful reads, recovery and listings would turn down what a put wrote.
@Suite("Entry write")
struct EntryWriteTests {
    private let seed: UInt32 = 0x8765_4321

    /// 16-byte-aligned memory, filled with a byte that no record field is made of.
    private final class Memory {
        let bytes = UnsafeMutableRawPointer.allocate(byteCount: 1024, alignment: 16)
        init() { bytes.initializeMemory(as: UInt8.self, repeating: 0xA5, count: 1024) }
        deinit { bytes.deallocate() }
        var all: [UInt8] { Array(UnsafeRawBufferPointer(start: bytes, count: 1024)) }
    }

    /// The record as FORMAT.md 4 lays it out, built field by field.
    private func expected(key: [UInt8], value: [UInt8], flags: UInt8, visited: Bool, sequence: UInt64) -> [UInt8] {
        let memory = Memory()
        let raw = memory.bytes
        var word0 = RecordHeader.Word0.compose(kind: .entry, flags: flags, keyLength: key.count) | RecordHeader.Word0.liveBit
        if visited { word0 |= RecordHeader.Word0.visitedBit }
        raw.storeBytes(of: word0.littleEndian, toByteOffset: 0, as: UInt64.self)
        raw.storeBytes(of: (UInt64(value.count) | UInt64(value.count) << 32).littleEndian, toByteOffset: 8, as: UInt64.self)
        raw.storeBytes(of: sequence.littleEndian, toByteOffset: 16, as: UInt64.self)
        raw.storeBytes(of: UInt64(1_800_000_000_000).littleEndian, toByteOffset: 24, as: UInt64.self)
        raw.storeBytes(of: UInt64(1_700_000_000_000).littleEndian, toByteOffset: 32, as: UInt64.self)
        (raw + RecordHeader.size).copyMemory(from: key, byteCount: key.count)
        if !value.isEmpty { (raw + RecordHeader.size + key.count).copyMemory(from: value, byteCount: value.count) }
        let data = lrd_crc32c(seed, raw + RecordHeader.size, key.count + value.count)
        raw.storeBytes(of: data.littleEndian, toByteOffset: 40, as: UInt32.self)
        raw.storeBytes(of: lrd_crc32c_record_header(seed, raw).littleEndian, toByteOffset: 44, as: UInt32.self)
        return memory.all
    }

    private func written(key: [UInt8], value: [UInt8], flags: UInt8, visited: Bool, sequence: UInt64,
                         keyInPlace: Bool = false) -> (bytes: [UInt8], checksum: UInt32, memory: Memory) {
        let memory = Memory()
        if keyInPlace { (memory.bytes + RecordHeader.size).copyMemory(from: key, byteCount: key.count) }
        let lengths = UInt64(value.count) | UInt64(value.count) << 32
        let checksum = key.withUnsafeBytes { key in
            value.withUnsafeBytes { value in
                lrd_entry_write(memory.bytes, seed, UInt32(flags) | (visited ? LRD_ENTRY_VISITED : 0),
                                keyInPlace ? nil : key.baseAddress, key.count, value.baseAddress, lengths, sequence,
                                1_800_000_000_000, 1_700_000_000_000)
            }
        }
        return (memory.all, checksum, memory)
    }

    @Test(arguments: [(1, 0), (7, 1), (18, 100), (24, 255), (33, 256), (300, 40), (16, 700)])
    func writesTheBytesOfTheFormat(keyLength: Int, valueLength: Int) {
        let key = (0..<keyLength).map { UInt8(truncatingIfNeeded: $0 &* 13 &+ 1) }
        let value = (0..<valueLength).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }
        for (flags, visited, keyInPlace) in [(UInt8(0), false, false), (RecordHeader.placedInSpanFlag, true, true)] {
            let result = written(key: key, value: value, flags: flags, visited: visited, sequence: 42, keyInPlace: keyInPlace)
            #expect(result.bytes == expected(key: key, value: value, flags: flags, visited: visited, sequence: 42),
                    "key \(keyLength), value \(valueLength), flags \(flags)")
            // What the careful reads make of it.
            let header = RecordHeader.read(from: result.memory.bytes, at: 0, limit: 1024, seed: seed, liveEntryKeyLength: keyLength)
            #expect(header?.isLive == true && header?.sequence == 42 && header?.storedLength == valueLength)
            #expect(header?.flags == flags && header?.dataChecksum == result.checksum)
            #expect(header?.dataIsIntact(record: result.memory.bytes, seed: seed) == true)
        }
    }
}

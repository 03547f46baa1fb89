import CLarderSupport
import Testing
@testable import Larder

/// `lrd_entry_copy`, the usual get in one C call, makes the format's checks again, apart from
/// `RecordHeader.read`, which every other read uses. Both must accept the same entries: otherwise
/// a get would disagree with a careful read or a listing of the same file.
@Suite("Entry read")
struct EntryReadTests {
    private let seed: UInt32 = 0x1234_5678
    private let key = Array("entry-read-key-18b".utf8)
    private let value = (0..<100).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }

    /// A record laid out as FORMAT.md 4 says, at the start of 16-byte-aligned memory, with room to
    /// spare after it.
    private final class Record {
        let bytes = UnsafeMutableRawPointer.allocate(byteCount: 1024, alignment: 16)
        deinit { bytes.deallocate() }
    }

    private func record(sequence: UInt64 = 5, expiresAt: UInt64 = 0, key: [UInt8]? = nil,
                        value: [UInt8]? = nil) -> Record {
        let key = key ?? self.key, value = value ?? self.value
        let record = Record()
        let raw = record.bytes
        raw.initializeMemory(as: UInt8.self, repeating: 0, count: 1024)
        let word0 = RecordHeader.Word0.compose(kind: .entry, flags: 0, keyLength: key.count) | RecordHeader.Word0.liveBit
        raw.storeBytes(of: word0.littleEndian, toByteOffset: 0, as: UInt64.self)
        raw.storeBytes(of: (UInt64(value.count) | UInt64(value.count) << 32).littleEndian, toByteOffset: 8, as: UInt64.self)
        raw.storeBytes(of: sequence.littleEndian, toByteOffset: 16, as: UInt64.self)
        raw.storeBytes(of: expiresAt.littleEndian, toByteOffset: 24, as: UInt64.self)
        raw.storeBytes(of: UInt64(1_700_000_000_000).littleEndian, toByteOffset: 32, as: UInt64.self)
        (raw + RecordHeader.size).copyMemory(from: key, byteCount: key.count)
        (raw + RecordHeader.size + key.count).copyMemory(from: value, byteCount: value.count)
        let data = lrd_crc32c(seed, raw + RecordHeader.size, key.count + value.count)
        raw.storeBytes(of: data.littleEndian, toByteOffset: 40, as: UInt32.self)
        raw.storeBytes(of: lrd_crc32c_record_header(seed, raw).littleEndian, toByteOffset: 44, as: UInt32.self)
        return record
    }

    private func copy(_ record: Record, room: Int = 512, firstValid: UInt64 = 0, key: [UInt8]? = nil,
                      into buffer: UnsafeMutableRawBufferPointer) -> (status: Int32, sequence: UInt64, length: Int) {
        let result = (key ?? self.key).withUnsafeBytes { key in
            lrd_entry_copy(record.bytes, UInt64(room), seed, firstValid, key.baseAddress, key.count,
                           buffer.baseAddress, buffer.count, 0)
        }
        return (Int32(result.outcome & 0xFF), result.sequence, Int(result.outcome >> 32))
    }

    /// What the careful reads take for a live entry of the key (`ReadView.entryHeader`).
    private func carefulReadAccepts(_ record: Record, room: Int = 512, firstValid: UInt64 = 0) -> Bool {
        guard let header = RecordHeader.read(from: record.bytes, at: 0, limit: room, seed: seed,
                                             liveEntryKeyLength: key.count) else { return false }
        return header.kind == .entry && header.isLive && header.sequence >= firstValid
    }

    @Test func copiesAWholeEntryAndChecksIt() {
        let record = record()
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 128, alignment: 16)
        defer { buffer.deallocate() }
        let result = copy(record, into: buffer)
        #expect(result.status == Int32(LRD_ENTRY_COPIED))
        #expect(result.sequence == 5)
        #expect(result.length == value.count)
        #expect(Array(buffer[0..<value.count]) == value)
    }

    /// Every key and value length the checksum takes in its short steps (below 256 bytes), and a
    /// few past them: the value copied whole, the checksum of key and value held.
    @Test func copiesEntriesOfEveryShortLength() {
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 512, alignment: 16)
        defer { buffer.deallocate() }
        let bytes = (0..<300).map { UInt8(truncatingIfNeeded: $0 &* 151 &+ 3) }
        let lengths = (1...300).map { ($0, value.count) } + (0...300).map { (key.count, $0) }
        for (keyLength, valueLength) in lengths {
            let key = Array(bytes.reversed().prefix(keyLength)), value = Array(bytes.prefix(valueLength))
            let result = copy(record(key: key, value: value), room: 1024, key: key, into: buffer)
            #expect(result.status == Int32(LRD_ENTRY_COPIED), "key \(keyLength), value \(valueLength)")
            #expect(result.length == valueLength && Array(buffer[0..<valueLength]) == value)
        }
    }

    @Test func acceptsTheHeadersTheCarefulReadAccepts() {
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 128, alignment: 16)
        defer { buffer.deallocate() }
        // Every bit of the header flipped on its own: the access bit is the one change both take.
        for byte in 0..<RecordHeader.size {
            for bit in 0..<8 {
                let record = record()
                record.bytes.storeBytes(of: record.bytes.load(fromByteOffset: byte, as: UInt8.self) ^ (1 << bit),
                                        toByteOffset: byte, as: UInt8.self)
                let accepted = copy(record, into: buffer).status != Int32(LRD_ENTRY_OTHER)
                #expect(accepted == carefulReadAccepts(record), "byte \(byte), bit \(bit)")
            }
        }
        // A record longer than the file's end, and one numbered below the first valid sequence.
        let whole = RecordHeader.entrySize(keyLength: key.count, storedLength: value.count)
        for room in [whole - 16, whole - 1, whole, RecordHeader.size - 1] {
            #expect((copy(record(), room: room, into: buffer).status != Int32(LRD_ENTRY_OTHER))
                == carefulReadAccepts(record(), room: room), "room \(room)")
        }
        #expect(copy(record(sequence: 5), firstValid: 6, into: buffer).status == Int32(LRD_ENTRY_OTHER))
        #expect(copy(record(sequence: 1 << 62), into: buffer).status == Int32(LRD_ENTRY_OTHER))
    }

    @Test func leavesToTheCarefulReadWhatItDoesNotCopy() {
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 128, alignment: 16)
        defer { buffer.deallocate() }
        // Expired: nothing is copied.
        buffer.initializeMemory(as: UInt8.self, repeating: 0xEE)
        let expired = copy(record(expiresAt: 1), into: buffer)
        #expect(expired.status == Int32(LRD_ENTRY_UNSETTLED))
        #expect(buffer.allSatisfy { $0 == 0xEE })
        // Not expired yet: copied.
        #expect(copy(record(expiresAt: UInt64.max), into: buffer).status == Int32(LRD_ENTRY_COPIED))
        // Too long for the buffer: its length comes back.
        let small = UnsafeMutableRawBufferPointer(rebasing: buffer[0..<99])
        let tooLong = copy(record(), into: small)
        #expect(tooLong.status == Int32(LRD_ENTRY_UNSETTLED) && tooLong.length == value.count)
        // A value byte damaged: the data checksum fails over the copy.
        let damaged = record()
        damaged.bytes.storeBytes(of: 0x55, toByteOffset: RecordHeader.size + key.count + 40, as: UInt8.self)
        #expect(copy(damaged, into: buffer).status == Int32(LRD_ENTRY_UNSETTLED))
    }
}

#if canImport(Compression)
// Internal: the module shares its name with Larder's own `Compression` type.
internal import Compression
#else
import CLZ4
#endif

/// LZ4 block compression of values: the system's LZ4, which is liblz4 on Linux and Apple's
/// Compression framework on Apple platforms (`COMPRESSION_LZ4_RAW`: the same block format, with
/// nothing to install, and on iOS, tvOS, watchOS and visionOS the only system LZ4 there is).
///
/// The LZ4 block format stores neither sizes nor a checksum; the record header keeps both the
/// stored and the raw length, and the record checksum covers the compressed bytes, so a damaged
/// block is caught before it reaches the decoder, and the decoder is the bounds-checked one.
enum LZ4Codec {
    /// liblz4's limit on one block's input (`LZ4_MAX_INPUT_SIZE`), kept on every platform so that
    /// what one writes, another reads.
    static let maximumInputSize = 0x7E00_0000

    /// Whether a block of `storedLength` bytes could decompress to `rawLength` bytes: each byte of
    /// a block yields at most 255 bytes, and no writer compresses more than liblz4 takes. A
    /// reader sets aside the raw length before it decodes, so a header claiming more is damage,
    /// not a reason to allocate gigabytes (FORMAT.md 4.2).
    static func mayDecompress(_ storedLength: Int, to rawLength: Int) -> Bool {
        storedLength > 0 && rawLength > 0 && rawLength <= maximumInputSize && rawLength <= storedLength &* 255 &+ 16
    }

    /// The most bytes compressing `count` bytes can produce (liblz4's `LZ4_COMPRESSBOUND`), 0
    /// past the limit.
    static func bound(_ count: Int) -> Int {
        count >= 0 && count <= maximumInputSize ? count + count / 255 + 16 : 0
    }

    /// Compresses `source` into `destination` (at least `bound(source.count)` bytes). Returns the
    /// compressed length, or nil when compression failed or would not save a byte.
    static func compress(_ source: UnsafeRawBufferPointer, into destination: UnsafeMutableRawBufferPointer) -> Int? {
        guard source.count > 0, source.count <= maximumInputSize, destination.count >= bound(source.count) else { return nil }
        #if canImport(Compression)
        let written = compression_encode_buffer(
            destination.baseAddress!.assumingMemoryBound(to: UInt8.self), destination.count,
            source.baseAddress!.assumingMemoryBound(to: UInt8.self), source.count, nil, COMPRESSION_LZ4_RAW)
        #else
        let written = Int(LZ4_compress_default(
            source.baseAddress!.assumingMemoryBound(to: CChar.self),
            destination.baseAddress!.assumingMemoryBound(to: CChar.self),
            Int32(source.count), Int32(clamping: destination.count)))
        #endif
        guard written > 0, written < source.count else { return nil }
        return written
    }

    /// Decompresses `source` into `destination`, which must come out exactly full.
    static func decompress(_ source: UnsafeRawBufferPointer, into destination: UnsafeMutableRawBufferPointer) -> Bool {
        guard source.count > 0, source.count <= Int(Int32.max), destination.count <= Int(Int32.max) else { return false }
        if destination.count == 0 { return false }
        #if canImport(Compression)
        // Apple's decoder stops when its destination is full, so that a block decoding to more
        // than the raw length would pass for one decoding to exactly that (FORMAT.md 4.2 asks
        // for the exact length): it decodes into room for one byte more, which then stays free.
        return withUnsafeTemporaryAllocation(of: UInt8.self, capacity: destination.count + 1) { room in
            let produced = compression_decode_buffer(
                room.baseAddress!, room.count,
                source.baseAddress!.assumingMemoryBound(to: UInt8.self), source.count, nil, COMPRESSION_LZ4_RAW)
            guard produced == destination.count else { return false }
            destination.copyMemory(from: UnsafeRawBufferPointer(start: room.baseAddress, count: produced))
            return true
        }
        #else
        let produced = Int(LZ4_decompress_safe(
            source.baseAddress!.assumingMemoryBound(to: CChar.self),
            destination.baseAddress!.assumingMemoryBound(to: CChar.self),
            Int32(source.count), Int32(destination.count)))
        return produced == destination.count
        #endif
    }
}

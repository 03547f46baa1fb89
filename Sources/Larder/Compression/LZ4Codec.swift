import CLZ4

/// LZ4 block compression of values (the system liblz4).
///
/// The LZ4 block format stores neither sizes nor a checksum; the record header keeps both the
/// stored and the raw length, and the record checksum covers the compressed bytes, so a damaged
/// block is caught before it reaches the decoder, and the decoder is the bounds-checked one.
enum LZ4Codec {
    /// liblz4's limit on one block's input.
    static let maximumInputSize = Int(LZ4_MAX_INPUT_SIZE)

    /// Whether a block of `storedLength` bytes could decompress to `rawLength` bytes: each byte of
    /// a block yields at most 255 bytes, and no writer compresses more than liblz4 takes. A
    /// reader sets aside the raw length before it decodes, so a header claiming more is damage,
    /// not a reason to allocate gigabytes (FORMAT.md 4.2).
    static func mayDecompress(_ storedLength: Int, to rawLength: Int) -> Bool {
        storedLength > 0 && rawLength > 0 && rawLength <= maximumInputSize && rawLength <= storedLength &* 255 &+ 16
    }

    /// The most bytes compressing `count` bytes can produce.
    static func bound(_ count: Int) -> Int {
        Int(LZ4_compressBound(Int32(clamping: count)))
    }

    /// Compresses `source` into `destination` (at least `bound(source.count)` bytes). Returns the
    /// compressed length, or nil when compression failed or would not save a byte.
    static func compress(_ source: UnsafeRawBufferPointer, into destination: UnsafeMutableRawBufferPointer) -> Int? {
        guard source.count > 0, source.count <= maximumInputSize, destination.count >= bound(source.count) else { return nil }
        let written = LZ4_compress_default(
            source.baseAddress!.assumingMemoryBound(to: CChar.self),
            destination.baseAddress!.assumingMemoryBound(to: CChar.self),
            Int32(source.count), Int32(clamping: destination.count))
        guard written > 0, Int(written) < source.count else { return nil }
        return Int(written)
    }

    /// Decompresses `source` into `destination`, which must come out exactly full.
    static func decompress(_ source: UnsafeRawBufferPointer, into destination: UnsafeMutableRawBufferPointer) -> Bool {
        guard source.count > 0, source.count <= Int(Int32.max), destination.count <= Int(Int32.max) else { return false }
        if destination.count == 0 { return false }
        let produced = LZ4_decompress_safe(
            source.baseAddress!.assumingMemoryBound(to: CChar.self),
            destination.baseAddress!.assumingMemoryBound(to: CChar.self),
            Int32(source.count), Int32(destination.count))
        return Int(produced) == destination.count
    }
}

/// How values are stored.
///
/// Compression is decided per value: a value under the cache's `compressionThreshold`, or one that
/// LZ4 does not shrink, is stored raw. A file may hold both kinds, and every process reads both
/// whatever it was opened with.
public enum Compression: Hashable, Sendable {
    /// Values are stored as given.
    case none
    /// Values are compressed with LZ4: the system's, liblz4 on Linux and the Compression framework
    /// on Apple platforms.
    case lz4
}

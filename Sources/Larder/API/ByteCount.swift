import Foundation

/// A number of bytes, written the way people think of sizes: `.megabytes(64)`.
///
/// Units are binary: a kilobyte here is 1024 bytes, a megabyte 1024 kilobytes.
public struct ByteCount: Hashable, Comparable, Sendable, CustomStringConvertible {
    public var bytes: Int

    public init(bytes: Int) { self.bytes = bytes }

    public static func bytes(_ count: Int) -> ByteCount { ByteCount(bytes: count) }
    public static func kilobytes(_ count: Int) -> ByteCount { ByteCount(bytes: count << 10) }
    public static func megabytes(_ count: Int) -> ByteCount { ByteCount(bytes: count << 20) }
    public static func gigabytes(_ count: Int) -> ByteCount { ByteCount(bytes: count << 30) }

    public static func < (lhs: ByteCount, rhs: ByteCount) -> Bool { lhs.bytes < rhs.bytes }

    public var description: String {
        let units = ["bytes", "KiB", "MiB", "GiB", "TiB"]
        var value = Double(bytes)
        var unit = 0
        while value >= 1024 && unit < units.count - 1 {
            value /= 1024
            unit += 1
        }
        return unit == 0 ? "\(bytes) bytes" : String(format: "%.1f %@", value, units[unit])
    }
}

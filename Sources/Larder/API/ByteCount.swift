import Foundation

/// A number of bytes, written the way people think of sizes: `.megabytes(64)`.
///
/// Units are binary: a kilobyte here is 1024 bytes, a megabyte 1024 kilobytes.
public struct ByteCount: Hashable, Comparable, Sendable, CustomStringConvertible {
    /// The number of bytes.
    public var bytes: Int

    /// A size of `bytes` bytes.
    public init(bytes: Int) { self.bytes = bytes }

    /// `count` bytes.
    public static func bytes(_ count: Int) -> ByteCount { ByteCount(bytes: count) }
    /// `count` KiB: `count` × 1024 bytes.
    public static func kilobytes(_ count: Int) -> ByteCount { ByteCount(bytes: scaled(count, 10)) }
    /// `count` MiB: `count` × 1024² bytes.
    public static func megabytes(_ count: Int) -> ByteCount { ByteCount(bytes: scaled(count, 20)) }
    /// `count` GiB: `count` × 1024³ bytes.
    public static func gigabytes(_ count: Int) -> ByteCount { ByteCount(bytes: scaled(count, 30)) }

    /// `count` × 2^`shift`, or `Int.max` (a capacity every cache refuses as too large) when that
    /// does not fit: a shift would drop the high bits and make a huge size a small one.
    private static func scaled(_ count: Int, _ shift: Int) -> Int {
        let (product, overflow) = count.multipliedReportingOverflow(by: 1 << shift)
        return overflow ? (count < 0 ? Int.min : Int.max) : product
    }

    /// Whether `lhs` is fewer bytes than `rhs`.
    public static func < (lhs: ByteCount, rhs: ByteCount) -> Bool { lhs.bytes < rhs.bytes }

    /// The size in the largest unit that keeps it at 1 or more, with one decimal: "1.5 MiB".
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

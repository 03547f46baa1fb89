/// How many decoded objects a cache keeps in memory in front of its file
/// (<doc:ObjectsInMemory>).
///
/// Both limits must be positive: ``Cache/init(path:options:)`` refuses others with
/// ``LarderError/Code-swift.struct/invalidArgument``. Set ``Cache/Options/memory`` to `nil` for
/// no memory tier at all.
public struct MemoryLimits: Hashable, Sendable {
    /// The most the objects may cost together (default 64 MiB). A `Codable` value costs the
    /// length of its encoded bytes; a value with a ``CacheConversion`` what the conversion says.
    public var cost: ByteCount
    /// The most objects kept (default 10,000).
    public var count: Int

    /// Limits of `cost` and `count`.
    public init(cost: ByteCount = .megabytes(64), count: Int = 10_000) {
        self.cost = cost
        self.count = count
    }

    /// 64 MiB and 10,000 objects.
    public static let `default` = MemoryLimits()
}

extension Cache {
    /// Where a typed write puts its value, and where a typed read looks.
    public enum Placement: Hashable, Sendable {
        /// Both: the object in memory and its bytes in the file (the default).
        case memoryAndFile
        /// Memory only: the object never reaches the file (a decoded bitmap whose bytes are
        /// cached elsewhere, say). A read this way never reads the file.
        case memoryOnly
        /// The file only: the memory tier keeps nothing new (a bulk import that should not push
        /// the working set out of memory). A write this way drops the key's own object from
        /// memory and leaves every other one as it was; a read this way does not look in memory.
        case fileOnly
    }
}

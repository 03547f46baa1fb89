/// A snapshot of what a cache holds and how it has been used.
///
/// The counters persist in the file and add up over every process that used it; the hits and
/// misses of other read-write processes appear once those processes sync or close (a read-only
/// handle keeps its own to itself).
public struct CacheStatistics: Hashable, Sendable {
    /// Entries stored, expired ones included until they are reclaimed (as ``Cache/count``).
    public var entryCount: Int
    /// Bytes of live values as the caller sees them (decompressed).
    public var liveBytes: Int
    /// Bytes of live values as stored (after compression).
    public var storedBytes: Int
    /// Bytes the live records occupy, headers and keys included.
    public var recordBytes: Int
    /// Size of the file.
    public var fileBytes: Int
    /// The byte limit the file never exceeds.
    public var capacity: Int
    /// Reads that found an unexpired value.
    public var hits: UInt64
    /// Reads that found nothing, or only an expired value.
    public var misses: UInt64
    /// Keys stored that were not in the cache.
    public var inserts: UInt64
    /// Keys stored that replaced a value.
    public var updates: UInt64
    /// Entries removed by a call: `removeValue`, `removeValues(forKeys:)`,
    /// `removeAll(withPrefix:)`, `removeOlder(than:)` (an expired one counts as an expiration),
    /// and `removeAll()` (every entry, expired ones too).
    public var removals: UInt64
    /// Entries dropped to make room, and by `trim(toCount:)` and `trim(toBytes:)`.
    public var evictions: UInt64
    /// Entries dropped because their time was up.
    public var expirations: UInt64
    /// Entries moved to the head of the ring because they were read (CLOCK's second chance).
    public var relocations: UInt64
    /// How many times the file was rebuilt after an unclean close.
    public var recoveries: UInt64
    /// Typed reads answered from memory by this handle (<doc:ObjectsInMemory>): the object kept
    /// there was still the file's value. Not counted in ``hits``, nor kept in the file.
    public var memoryHits: UInt64 = 0
    /// Typed reads through memory that found no object there, or one the file had replaced (the
    /// read then went to the file, and counts there too).
    public var memoryMisses: UInt64 = 0
    /// Objects in memory now.
    public var memoryCount = 0
    /// What the objects in memory cost together, in bytes (``MemoryLimits/cost``).
    public var memoryCost = 0

    /// Live bytes per stored byte: above 1 when compression pays.
    public var compressionRatio: Double {
        storedBytes == 0 ? 1 : Double(liveBytes) / Double(storedBytes)
    }

    /// Memory hits per typed read through memory, 0 when there were none.
    public var memoryHitRatio: Double {
        memoryHits == 0 && memoryMisses == 0 ? 0 : Double(memoryHits) / (Double(memoryHits) + Double(memoryMisses))
    }

    /// Hits per lookup, 0 when there were none.
    public var hitRatio: Double {
        // In doubles: the counters come from the file, where a damaged one may hold any value.
        hits == 0 && misses == 0 ? 0 : Double(hits) / (Double(hits) + Double(misses))
    }
}

#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import CLarderABI
import Larder

// The maintenance calls of include/larder.h: limits by age, count and bytes, and removal by
// key prefix, which `Cache+Maintenance.swift` and `Cache+Enumeration.swift` implement.

@c(larder_remove_expired)
public func larderRemoveExpired(_ db: UnsafeMutablePointer<larder>?, _ removed: UnsafeMutablePointer<UInt64>?) -> Int32 {
    withCache(db) { cache in report(try cache.removeExpired(), to: removed) }
}

@c(larder_remove_older)
public func larderRemoveOlder(_ db: UnsafeMutablePointer<larder>?, _ ageMilliseconds: UInt64,
                              _ removed: UnsafeMutablePointer<UInt64>?) -> Int32 {
    withCache(db) { cache in report(try cache.removeOlder(thanMilliseconds: ageMilliseconds), to: removed) }
}

@c(larder_trim_bytes)
public func larderTrimBytes(_ db: UnsafeMutablePointer<larder>?, _ maximumBytes: UInt64,
                            _ removed: UnsafeMutablePointer<UInt64>?) -> Int32 {
    withCache(db) { cache in report(try cache.trim(toBytes: Int(clamping: maximumBytes)), to: removed) }
}

@c(larder_trim_count)
public func larderTrimCount(_ db: UnsafeMutablePointer<larder>?, _ maximumEntries: UInt64,
                            _ removed: UnsafeMutablePointer<UInt64>?) -> Int32 {
    withCache(db) { cache in report(try cache.trim(toCount: Int(clamping: maximumEntries)), to: removed) }
}

@c(larder_delete_prefix)
public func larderDeletePrefix(_ db: UnsafeMutablePointer<larder>?, _ prefix: UnsafeRawPointer?, _ prefixLength: size_t,
                               _ removed: UnsafeMutablePointer<UInt64>?) -> Int32 {
    withCache(db) { cache in
        let prefix = try Arguments.bytes(prefix, prefixLength, "the prefix").get()
        return report(try cache.removeAll(withPrefix: prefix), to: removed)
    }
}

/// `LARDER_OK`, with how many entries went in `*removed` when the caller asked for it.
private func report(_ count: Int, to removed: UnsafeMutablePointer<UInt64>?) -> Int32 {
    removed?.pointee = UInt64(count)
    return Status.ok
}

import CLarderABI
@_spi(Changes) import Larder

// The watching calls of include/larder.h, over `Cache+Changes.swift`.

@c(larder_key_hash)
public func larderKeyHash(_ key: UnsafeRawPointer?, _ keyLength: size_t) -> UInt64 {
    guard let key else { return 0 }
    return Cache.changeHash(of: UnsafeRawBufferPointer(start: key, count: keyLength))
}

@c(larder_change_cursor)
public func larderChangeCursor(_ db: UnsafeMutablePointer<larder>?, _ cursor: UnsafeMutablePointer<UInt64>?) -> Int32 {
    withCache(db) { cache in
        guard let cursor else { return Status.invalid("cursor is NULL") }
        cursor.pointee = try cache.changeCursor
        return Status.ok
    }
}

@c(larder_wait_change)
public func larderWaitChange(_ db: UnsafeMutablePointer<larder>?, _ cursor: UInt64, _ timeoutMilliseconds: UInt32) -> Int32 {
    withCache(db) { cache in
        try cache.waitForChange(after: cursor, milliseconds: timeoutMilliseconds) ? Status.ok : Status.notFound
    }
}

@c(larder_read_changes)
public func larderReadChanges(_ db: UnsafeMutablePointer<larder>?, _ cursor: UnsafeMutablePointer<UInt64>?,
                              _ changes: UnsafeMutablePointer<larder_change>?, _ capacity: size_t,
                              _ count: UnsafeMutablePointer<size_t>?) -> Int32 {
    withCache(db) { cache in
        guard let cursor, let count else { return Status.invalid("cursor or count is NULL") }
        guard changes != nil || capacity == 0 else { return Status.invalid("changes is NULL with a capacity of \(capacity)") }
        let read = try cache.readChanges(since: &cursor.pointee, limit: Int(clamping: capacity))
        for (index, change) in read.enumerated() {
            changes![index] = larder_change(key_hash: change.keyHash, kind: change.kind, reserved: 0)
        }
        count.pointee = read.count
        return Status.ok
    }
}

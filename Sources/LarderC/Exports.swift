#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import CLarderABI
import CLarderSupport
import Larder

// The C API of include/larder.h. Each function converts its arguments, calls the Swift core and
// converts the outcome to a status code; no logic lives here, and no Swift error or trap crosses
// into C.

/// Runs `body` with the cache behind `db`: a NULL handle, and any error `body` throws, become a
/// status code (with the thread's last error message set).
func withCache(_ db: UnsafeMutablePointer<larder>?, _ body: (Cache) throws -> Int32) -> Int32 {
    LastError.clear()
    guard let handle = Arguments.handle(db) else { return Status.invalid("the handle is NULL") }
    // The handle holds a reference until larder_close: no retain and release around each call.
    return handle._withUnsafeGuaranteedRef { cache in
        do {
            return try body(cache)
        } catch {
            return Status.of(error)
        }
    }
}

/// The first `larder_options` (format of larder.h 0.1): what the exported `larder_options_init`
/// fills, whatever the struct has grown to since.
private let firstOptionsSize = 40

@c(larder_options_init)
public func larderOptionsInit(_ opts: UnsafeMutablePointer<larder_options>?) {
    larderOptionsInitSized(opts, firstOptionsSize)
}

@c(larder_options_init_sized)
public func larderOptionsInitSized(_ opts: UnsafeMutablePointer<larder_options>?, _ size: size_t) {
    // `size` is the caller's sizeof, which may be smaller (an older header) or larger (a newer
    // one) than this library's: its bytes are written, and no others.
    guard let opts, size >= MemoryLayout<UInt32>.size, size <= UInt32.max else { return }
    let raw = UnsafeMutableRawPointer(opts)
    raw.initializeMemory(as: UInt8.self, repeating: 0, count: size)
    var defaults = larder_options(
        struct_size: UInt32(size), flags: 0, capacity_bytes: 0, page_size: 0,
        compression: LARDER_COMPRESSION_NONE, default_ttl_ms: 0, file_mode: 0, compression_threshold: 0,
        count_limit: 0, max_age_ms: 0, sweep_interval_ms: 0, file_protection: LARDER_PROTECTION_DEFAULT)
    withUnsafeBytes(of: &defaults) { raw.copyMemory(from: $0.baseAddress!, byteCount: min(size, $0.count)) }
}

@c(larder_open)
public func larderOpen(_ path: UnsafePointer<CChar>?, _ opts: UnsafePointer<larder_options>?,
                       _ out: UnsafeMutablePointer<UnsafeMutablePointer<larder>?>?) -> Int32 {
    LastError.clear()
    guard let out else { return Status.invalid("out is NULL") }
    out.pointee = nil
    guard let path else { return Status.invalid("path is NULL") }
    // Repaired, its bad bytes would become U+FFFD: another file, shared by every such name.
    guard let pathText = String(validatingCString: path) else { return Status.invalid("the path is not UTF-8") }
    let options: Cache.Options
    switch Arguments.options(opts) {
    case .success(let value): options = value
    case .failure(let error): return error.status
    }
    do {
        out.pointee = Arguments.handle(for: try Cache(path: pathText, options: options))
        return Status.ok
    } catch {
        return Status.of(error)
    }
}

@c(larder_close)
public func larderClose(_ db: UnsafeMutablePointer<larder>?) -> Int32 {
    LastError.clear()
    guard let db else { return Status.ok }
    let cache = Unmanaged<Cache>.fromOpaque(UnsafeRawPointer(db))
    let status: Int32
    do {
        try cache.takeUnretainedValue().close()
        status = Status.ok
    } catch where error.code == .invalidArgument {
        // Inside a larder_foreach or larder_with_value callback of this handle: freeing it would
        // pull the cache from under the iteration or the bytes lent. The handle stays open.
        return Status.of(error)
    } catch {
        // Closed anyway (the next open repairs what was not written back); freed below.
        status = Status.of(error)
    }
    cache.release()
    return status
}

@c(larder_put)
public func larderPut(_ db: UnsafeMutablePointer<larder>?, _ key: UnsafeRawPointer?, _ keyLength: size_t,
                      _ value: UnsafeRawPointer?, _ valueLength: size_t, _ ttl: UInt64) -> Int32 {
    withCache(db) { cache in try put(in: cache, key, keyLength, value, valueLength, ttl) }
}

@c(larder_put_sliding)
public func larderPutSliding(_ db: UnsafeMutablePointer<larder>?, _ key: UnsafeRawPointer?, _ keyLength: size_t,
                             _ value: UnsafeRawPointer?, _ valueLength: size_t, _ window: UInt64) -> Int32 {
    withCache(db) { cache in
        guard window != 0, window < 1 << 63 else { return Status.invalid("window_ms is \(window)") }
        let write = try Arguments.write(key: key, keyLength, value: value, valueLength).get()
        try cache.set(write.value, forKey: write.key, expiry: .sliding(Double(window) / 1000))
        return Status.ok
    }
}

@c(larder_put_many)
public func larderPutMany(_ db: UnsafeMutablePointer<larder>?, _ requests: UnsafeMutablePointer<larder_put_request>?,
                          _ count: size_t) -> Int32 {
    withCache(db) { cache in
        try answerEach(of: requests, count, in: cache) { request in
            try? Arguments.write(key: request.key, request.key_len, value: request.value, request.value_len).get().key
        } answer: { request in
            try put(in: cache, request.key, request.key_len, request.value, request.value_len, request.ttl_ms)
        }
    }
}

/// What larder_put does once its handle is checked.
private func put(in cache: Cache, _ key: UnsafeRawPointer?, _ keyLength: Int, _ value: UnsafeRawPointer?,
                 _ valueLength: Int, _ ttl: UInt64) throws -> Int32 {
    let write = try Arguments.write(key: key, keyLength, value: value, valueLength).get()
    try cache.set(write.value, forKey: write.key, expiry: Arguments.expiry(ttlMilliseconds: ttl))
    return Status.ok
}

@c(larder_get)
public func larderGet(_ db: UnsafeMutablePointer<larder>?, _ key: UnsafeRawPointer?, _ keyLength: size_t,
                      _ buffer: UnsafeMutableRawPointer?, _ bufferLength: size_t,
                      _ valueLength: UnsafeMutablePointer<size_t>?) -> Int32 {
    // The usual hit and miss first, in one C call without `withCache`'s closure and error path:
    // a thread with no message to clear, an open handle, and arguments `Arguments.read` takes.
    // What that call does not settle it passes to `larderGetCarefully`, where nothing was counted.
    if lrd_has_error_message() == 0, let db, let valueLength, let key, buffer != nil || bufferLength == 0,
       let view = Unmanaged<Cache>.fromOpaque(UnsafeRawPointer(db))._withUnsafeGuaranteedRef({
           $0.readView(forKeyLength: keyLength)
       }) {
        return lrd_view_get(view, key, keyLength, buffer, bufferLength, valueLength, UnsafeMutableRawPointer(db)) {
            larderGetCarefully($0, $1, $2, $3, $4, $5)
        }
    }
    return larderGetCarefully(UnsafeMutableRawPointer(db), key, keyLength, buffer, bufferLength, valueLength)
}

/// larder_get for every case: a NULL or closed handle, invalid arguments, a view to refresh,
/// and what the store's careful read handles.
private func larderGetCarefully(_ db: UnsafeMutableRawPointer?, _ key: UnsafeRawPointer?, _ keyLength: size_t,
                                _ buffer: UnsafeMutableRawPointer?, _ bufferLength: size_t,
                                _ valueLength: UnsafeMutablePointer<size_t>?) -> Int32 {
    withCache(db?.assumingMemoryBound(to: larder.self)) { cache in
        guard let valueLength else { throw StatusError.invalid("value_len is NULL") }
        return try copyValue(in: cache, key, keyLength, buffer, bufferLength, valueLength)
    }
}

@c(larder_get_many)
public func larderGetMany(_ db: UnsafeMutablePointer<larder>?, _ requests: UnsafeMutablePointer<larder_get_request>?,
                          _ count: size_t) -> Int32 {
    withCache(db) { cache in
        try answerEach(of: requests, count, in: cache) { request in
            try? Arguments.read(key: request.key, request.key_len, into: request.buf, request.buf_len).get().key
        } answer: { request in
            try copyValue(in: cache, request.key, request.key_len, request.buf, request.buf_len, &request.value_len)
        }
    }
}

/// What larder_get does once its handle and `value_len` are checked.
private func copyValue(in cache: Cache, _ key: UnsafeRawPointer?, _ keyLength: Int, _ buffer: UnsafeMutableRawPointer?,
                       _ bufferLength: Int, _ valueLength: UnsafeMutablePointer<size_t>) throws -> Int32 {
    let read = try Arguments.read(key: key, keyLength, into: buffer, bufferLength).get()
    // Straight into the caller's buffer: no pin, no allocation.
    let length = try cache.copyValue(forKey: read.key, into: read.buffer)
    guard let length else { return Status.notFound }
    valueLength.pointee = length
    return length <= read.buffer.count ? Status.ok : Status.bufferTooSmall
}

@c(larder_with_value)
public func larderWithValue(_ db: UnsafeMutablePointer<larder>?, _ key: UnsafeRawPointer?, _ keyLength: size_t,
                            _ fn: larder_value_fn?, _ context: UnsafeMutableRawPointer?) -> Int32 {
    withCache(db) { cache in
        guard let fn else { throw StatusError.invalid("fn is NULL") }
        let keyBytes = try Arguments.key(key, keyLength).get()
        let lent: Void? = try cache.withValue(forKey: keyBytes) { value in
            fn(context, value.isEmpty ? nil : value.baseAddress, value.count)
        }
        return lent == nil ? Status.notFound : Status.ok
    }
}

@c(larder_get_alloc)
public func larderGetAlloc(_ db: UnsafeMutablePointer<larder>?, _ key: UnsafeRawPointer?, _ keyLength: size_t,
                           _ value: UnsafeMutablePointer<UnsafeMutableRawPointer?>?,
                           _ valueLength: UnsafeMutablePointer<size_t>?) -> Int32 {
    withCache(db) { cache in
        guard let value, let valueLength else { throw StatusError.invalid("value or value_len is NULL") }
        value.pointee = nil
        let keyBytes = try Arguments.key(key, keyLength).get()
        // Ask for the length, allocate, copy; again if the value changed size in between.
        var memory: UnsafeMutableRawPointer?
        var capacity = 0
        while true {
            let target = UnsafeMutableRawBufferPointer(start: memory, count: capacity)
            let copied: Int?
            do {
                copied = try cache.copyValue(forKey: keyBytes, into: target)
            } catch {
                free(memory)
                throw error
            }
            guard let length = copied else {
                free(memory)
                return Status.notFound
            }
            if length <= capacity && memory != nil {
                value.pointee = memory
                valueLength.pointee = length
                return Status.ok
            }
            free(memory)
            capacity = length
            memory = malloc(max(length, 1))
            guard memory != nil else {
                LastError.set(LarderError(.noMemory, "could not allocate \(length) bytes").description)
                return LARDER_NO_MEMORY
            }
        }
    }
}

@c(larder_free)
public func larderFree(_ pointer: UnsafeMutableRawPointer?) {
    free(pointer)
}

@c(larder_delete)
public func larderDelete(_ db: UnsafeMutablePointer<larder>?, _ key: UnsafeRawPointer?, _ keyLength: size_t) -> Int32 {
    withCache(db) { cache in try remove(in: cache, key, keyLength) }
}

@c(larder_delete_many)
public func larderDeleteMany(_ db: UnsafeMutablePointer<larder>?, _ requests: UnsafeMutablePointer<larder_delete_request>?,
                             _ count: size_t) -> Int32 {
    withCache(db) { cache in
        try answerEach(of: requests, count, in: cache) { request in
            try? Arguments.key(request.key, request.key_len).get()
        } answer: { request in
            try remove(in: cache, request.key, request.key_len)
        }
    }
}

/// The calls on many keys (larder_get_many, larder_put_many, larder_delete_many): each request
/// answered as its single call would answer it, in order, its status in the request. `key` is the
/// key a request's call would look up, nil when the call would refuse the request before that:
/// the batch starts loading what those keys look at before answering them
/// (`Cache.forEachInBatches`). A request that fails gets its status; the others are answered all
/// the same.
private func answerEach<Request: BatchRequest>(of requests: UnsafeMutablePointer<Request>?, _ count: Int, in cache: Cache,
                                               key: (Request) -> UnsafeRawBufferPointer?,
                                               answer: (inout Request) throws -> Int32) throws -> Int32 {
    let requests = try Arguments.requests(requests, count).get()
    let noKey = UnsafeRawBufferPointer(start: nil, count: 0)
    cache.forEachInBatches(count: requests.count, key: { key(requests[$0]) ?? noKey }) { index in
        do {
            requests[index].status = try answer(&requests[index])
        } catch {
            requests[index].status = Status.of(error)
        }
    }
    return Status.ok
}

/// A request of a call on many keys: it receives its status.
private protocol BatchRequest {
    var status: Int32 { get set }
}

extension larder_get_request: BatchRequest {}
extension larder_put_request: BatchRequest {}
extension larder_delete_request: BatchRequest {}

/// What larder_delete does once its handle is checked. Inlined: a frame of its own cost a
/// delete more than its body.
@inline(__always)
private func remove(in cache: Cache, _ key: UnsafeRawPointer?, _ keyLength: Int) throws -> Int32 {
    try cache.removeValue(forKey: try Arguments.key(key, keyLength).get()) ? Status.ok : Status.notFound
}

@c(larder_contains)
public func larderContains(_ db: UnsafeMutablePointer<larder>?, _ key: UnsafeRawPointer?, _ keyLength: size_t) -> Int32 {
    withCache(db) { cache in
        try cache.containsValue(forKey: try Arguments.key(key, keyLength).get()) ? Status.ok : Status.notFound
    }
}

@c(larder_clear)
public func larderClear(_ db: UnsafeMutablePointer<larder>?) -> Int32 {
    withCache(db) { cache in
        try cache.removeAll()
        return Status.ok
    }
}

@c(larder_sync)
public func larderSync(_ db: UnsafeMutablePointer<larder>?) -> Int32 {
    withCache(db) { cache in
        try cache.sync()
        return Status.ok
    }
}

@c(larder_stats)
public func larderStats(_ db: UnsafeMutablePointer<larder>?, _ out: UnsafeMutablePointer<larder_stats>?) -> Int32 {
    withCache(db) { cache in
        guard let out else { throw StatusError.invalid("out is NULL") }
        let size = try Arguments.structSize(of: out, "larder_stats").get()
        let stats = cache.stats
        let filled = larder_stats(
            struct_size: UInt32(min(size, MemoryLayout<larder_stats>.size)), reserved: 0,
            entries: UInt64(clamping: stats.entryCount), live_bytes: UInt64(clamping: stats.liveBytes),
            stored_bytes: UInt64(clamping: stats.storedBytes), file_bytes: UInt64(clamping: stats.fileBytes),
            capacity_bytes: UInt64(clamping: stats.capacity), hits: stats.hits, misses: stats.misses,
            inserts: stats.inserts, evictions: stats.evictions, expirations: stats.expirations,
            updates: stats.updates, removals: stats.removals, relocations: stats.relocations,
            recoveries: stats.recoveries)
        Arguments.fill(out, size, with: filled)
        return Status.ok
    }
}

@c(larder_foreach)
public func larderForEach(_ db: UnsafeMutablePointer<larder>?, _ fn: larder_foreach_fn?,
                          _ context: UnsafeMutableRawPointer?) -> Int32 {
    withCache(db) { cache in
        guard let fn else { throw StatusError.invalid("fn is NULL") }
        var result = Status.ok
        try cache.forEachEntry { key, valueLength in
            result = fn(context, key.baseAddress, key.count, valueLength)
            return result == 0
        }
        return result
    }
}

@c(larder_strerror)
public func larderStrerror(_ status: Int32) -> UnsafePointer<CChar> {
    CString.of(Status.describe(status))
}

@c(larder_last_error_message)
public func larderLastErrorMessage() -> UnsafePointer<CChar> {
    LastError.message
}

@c(larder_version)
public func larderVersion() -> UnsafePointer<CChar> {
    CString.of(Cache.versionString)
}

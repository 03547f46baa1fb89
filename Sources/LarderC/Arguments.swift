import CLarderABI
import Larder

/// Turning C arguments into Swift values, refusing the ones that cannot be right.
enum Arguments {
    /// The `Cache` behind a handle: the retained reference made by `larder_open`.
    static func handle(_ db: UnsafeMutablePointer<larder>?) -> Unmanaged<Cache>? {
        db.map { Unmanaged<Cache>.fromOpaque(UnsafeRawPointer($0)) }
    }

    static func handle(for cache: Cache) -> UnsafeMutablePointer<larder> {
        Unmanaged.passRetained(cache).toOpaque().assumingMemoryBound(to: larder.self)
    }

    /// A key's bytes: non-empty, and a pointer behind them.
    @inline(__always)
    static func key(_ pointer: UnsafeRawPointer?, _ length: Int) -> Result<UnsafeRawBufferPointer, StatusError> {
        guard length > 0, let pointer else { return .failure(refusal("the key", pointer, length)) }
        return .success(UnsafeRawBufferPointer(start: pointer, count: length))
    }

    /// A value's bytes: a NULL pointer is allowed only with length 0.
    @inline(__always)
    static func bytes(_ pointer: UnsafeRawPointer?, _ length: Int, _ name: String) -> Result<UnsafeRawBufferPointer, StatusError> {
        guard length >= 0, pointer != nil || length == 0 else { return .failure(refusal(name, pointer, length)) }
        return .success(UnsafeRawBufferPointer(start: length == 0 ? nil : pointer, count: length))
    }

    /// Why bytes named `name` are refused, off the path of the calls that pass. A `size_t` of
    /// 2^63 or more, which Swift sees as negative, is too large: no memory holds that many bytes,
    /// so it is a length computed wrong (often `(size_t)-1`).
    @inline(never)
    private static func refusal(_ name: String, _ pointer: UnsafeRawPointer?, _ length: Int) -> StatusError {
        if length < 0 {
            return StatusError(status: Status.of(LarderError(.tooLarge, "\(name) has a length of \(UInt(bitPattern: length)) bytes")))
        }
        if length == 0 { return StatusError.invalid("\(name) is empty") }
        return StatusError.invalid("\(name) is NULL with a length of \(length)")
    }

    /// The requests of a batch (`larder_get_many`, `larder_put_many`, `larder_delete_many`): NULL
    /// only when there are none, and fewer than 2^63.
    static func requests<Request>(_ pointer: UnsafeMutablePointer<Request>?, _ count: Int)
        -> Result<UnsafeMutableBufferPointer<Request>, StatusError> {
        guard count >= 0 else { return .failure(StatusError.invalid("count is \(UInt(bitPattern: count))")) }
        guard pointer != nil || count == 0 else { return .failure(StatusError.invalid("requests is NULL")) }
        return .success(UnsafeMutableBufferPointer(start: pointer, count: count))
    }

    /// The key and value of a write (`larder_put`, a `larder_put_request`): the key checked
    /// first, then the value.
    @inline(__always)
    static func write(key: UnsafeRawPointer?, _ keyLength: Int, value: UnsafeRawPointer?, _ valueLength: Int)
        -> Result<(key: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer), StatusError> {
        Self.key(key, keyLength).flatMap { key in bytes(value, valueLength, "value").map { (key, $0) } }
    }

    /// The key and the caller's buffer of a read (`larder_get`, a `larder_get_request`): the
    /// buffer may be NULL only with length 0, and one of 2^63 bytes or more holds any value.
    static func read(key: UnsafeRawPointer?, _ keyLength: Int, into buffer: UnsafeMutableRawPointer?, _ bufferLength: Int)
        -> Result<(key: UnsafeRawBufferPointer, buffer: UnsafeMutableRawBufferPointer), StatusError> {
        guard buffer != nil || bufferLength == 0 else {
            return .failure(StatusError.invalid("buf is NULL with a length of \(bufferLength)"))
        }
        let capacity = bufferLength < 0 ? Int.max : bufferLength
        return Self.key(key, keyLength).map { ($0, UnsafeMutableRawBufferPointer(start: buffer, count: capacity)) }
    }

    /// The expiry a `ttl_ms` stands for: nil for the cache's default.
    static func expiry(ttlMilliseconds ttl: UInt64) -> Expiry? {
        switch ttl {
        case 0: nil
        case UInt64.max: .never
        default: .seconds(Double(ttl) / 1000)
        }
    }

    /// The `struct_size` a caller set in a struct the library fills (`larder_stats`,
    /// `larder_entry_info`): 8 or more.
    static func structSize<Out>(of out: UnsafeMutablePointer<Out>, _ name: String) -> Result<Int, StatusError> {
        let size = Int(UnsafeRawPointer(out).loadUnaligned(as: UInt32.self))
        return size >= 8 ? .success(size) : .failure(StatusError.invalid("\(name).struct_size is \(size)"))
    }

    /// Writes the first `size` bytes of `value` to `out`, no more than it has: only the fields the
    /// caller's version of the struct has.
    static func fill<Out>(_ out: UnsafeMutablePointer<Out>, _ size: Int, with value: Out) {
        withUnsafeBytes(of: value) { bytes in
            UnsafeMutableRawPointer(out).copyMemory(from: bytes.baseAddress!, byteCount: min(size, bytes.count))
        }
    }

    /// The largest `struct_size` taken (a newer header's options, grown): larger is garbage.
    static let maximumOptionsSize = 4096

    /// `Cache.Options` from a `larder_options`, reading only the fields `struct_size` covers.
    static func options(_ pointer: UnsafePointer<larder_options>?) -> Result<Cache.Options, StatusError> {
        // C callers read bytes only: no memory tier of decoded objects.
        var options = Cache.Options(memory: nil)
        guard let pointer else { return .success(options) }
        let raw = UnsafeRawPointer(pointer)
        let size = Int(raw.loadUnaligned(as: UInt32.self))
        // Bytes past the struct are read below: a size no larder_options has is refused first.
        guard size >= 8, size <= maximumOptionsSize else {
            return .failure(StatusError.invalid("larder_options.struct_size is \(size); call larder_options_init"))
        }
        // A newer header's fields past this library's: unset (0) they ask for nothing it lacks.
        let known = MemoryLayout<larder_options>.size
        if size > known, UnsafeRawBufferPointer(start: raw + known, count: size - known).contains(where: { $0 != 0 }) {
            return .failure(StatusError.invalid("larder_options sets options this library does not know (it is older than the header the program was built with)"))
        }
        func field<T>(_ path: KeyPath<larder_options, T>, _: T.Type) -> T? {
            guard let offset = MemoryLayout<larder_options>.offset(of: path),
                  offset + MemoryLayout<T>.size <= size else { return nil }
            return raw.loadUnaligned(fromByteOffset: offset, as: T.self)
        }
        let flags = field(\.flags, UInt32.self) ?? 0
        guard flags & ~(LARDER_FLAG_READ_ONLY | LARDER_FLAG_EXCLUDE_FROM_BACKUP) == 0 else {
            return .failure(StatusError.invalid("unknown flags \(flags)"))
        }
        options.readOnly = flags & LARDER_FLAG_READ_ONLY != 0
        options.excludedFromBackup = flags & LARDER_FLAG_EXCLUDE_FROM_BACKUP != 0
        if let capacity = field(\.capacity_bytes, UInt64.self), capacity != 0 {
            guard capacity <= UInt64(Int.max) else { return .failure(StatusError.invalid("capacity \(capacity)")) }
            options.capacity = .bytes(Int(capacity))
        }
        if let pageSize = field(\.page_size, UInt32.self), pageSize != 0 { options.pageSize = Int(pageSize) }
        switch field(\.compression, UInt32.self) ?? LARDER_COMPRESSION_NONE {
        case LARDER_COMPRESSION_NONE: options.compression = .none
        case LARDER_COMPRESSION_LZ4: options.compression = .lz4
        case let other: return .failure(StatusError.invalid("unknown compression \(other)"))
        }
        if let ttl = field(\.default_ttl_ms, UInt64.self), let expiry = expiry(ttlMilliseconds: ttl) {
            options.defaultExpiry = expiry
        }
        if let mode = field(\.file_mode, UInt32.self), mode != 0 {
            guard mode <= 0o7777 else { return .failure(StatusError.invalid("file mode \(mode)")) }
            options.permissions = UInt16(mode)
        }
        if let threshold = field(\.compression_threshold, UInt32.self), threshold != 0 {
            options.compressionThreshold = Int(threshold)
        }
        // UInt64.max is LARDER_LIMIT_NONE (a macro Swift does not import).
        for (name, path) in [("count_limit", \larder_options.count_limit), ("max_age_ms", \.max_age_ms), ("sweep_interval_ms", \.sweep_interval_ms)] {
            guard let value = field(path, UInt64.self), value != 0 else { continue }
            guard value < 1 << 63 || (value == UInt64.max && path != \.sweep_interval_ms) else {
                return .failure(StatusError.invalid("larder_options.\(name) is \(value)"))
            }
            switch path {
            case \.count_limit: options.countLimit = value == UInt64.max ? .max : Int(value)
            case \.max_age_ms: options.maximumAge = value == UInt64.max ? .infinity : Double(value) / 1000
            default: options.sweepInterval = Double(value) / 1000
            }
        }
        if let protection = field(\.file_protection, UInt32.self) {
            guard let value = FileProtection(rawValue: protection) else {
                return .failure(StatusError.invalid("unknown file protection \(protection)"))
            }
            options.fileProtection = value
        }
        return .success(options)
    }
}

#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Each libc call the library makes on files, wrapped once.
///
/// A call that fails with `EINTR` is made again; any other failure becomes a `LarderError` that
/// names the operation (`SystemCall.error`). Callers add the path with `at(_:)`.
/// `close` is the exception: it is never retried, as the descriptor is gone whatever it returns.
extension SystemCall {
    /// The corresponding C function is `stat`.
    static func status(_ path: String) throws(LarderError) -> stat {
        var info = stat()
        try retrying("stat") { stat(path, &info) }
        return info
    }

    /// The corresponding C function is `fstat`.
    static func status(descriptor: Int32) throws(LarderError) -> stat {
        var info = stat()
        try retrying("fstat") { fstat(descriptor, &info) }
        return info
    }

    /// The corresponding C function is `open`.
    static func open(_ path: String, _ flags: Int32, _ permissions: mode_t) throws(LarderError) -> Int32 {
        #if canImport(Darwin)
        try retrying("open") { Darwin.open(path, flags, permissions) }
        #elseif canImport(Glibc)
        try retrying("open") { Glibc.open(path, flags, permissions) }
        #else
        try retrying("open") { Musl.open(path, flags, permissions) }
        #endif
    }

    /// The corresponding C function is `close`. Not retried: the number is released either way.
    static func close(_ descriptor: Int32) {
        #if canImport(Darwin)
        _ = Darwin.close(descriptor)
        #elseif canImport(Glibc)
        _ = Glibc.close(descriptor)
        #else
        _ = Musl.close(descriptor)
        #endif
    }

    /// Whether `descriptor` was opened read-only. The corresponding C function is `fcntl(F_GETFL)`.
    static func isReadOnly(_ descriptor: Int32) -> Bool {
        guard let flags = try? retrying("fcntl", { fcntl(descriptor, F_GETFL) }) else { return false }
        return flags & O_ACCMODE == O_RDONLY
    }

    /// Reads up to `count` bytes at `offset` into `buffer`; 0 at the end of the file.
    /// The corresponding C function is `pread`.
    static func read(_ descriptor: Int32, into buffer: UnsafeMutableRawPointer, count: Int, at offset: Int) throws(LarderError) -> Int {
        try retrying("read") { pread(descriptor, buffer, count, off_t(offset)) }
    }

    /// Writes up to `count` bytes at `offset`; returns how many it wrote.
    /// The corresponding C function is `pwrite`.
    static func write(_ descriptor: Int32, from buffer: UnsafeRawPointer, count: Int, at offset: Int) throws(LarderError) -> Int {
        try retrying("write") { pwrite(descriptor, buffer, count, off_t(offset)) }
    }

    /// Waits until what was written to the file is on the disk. The corresponding C function is
    /// `fsync`; on Apple platforms `fcntl(F_FULLFSYNC)` first, as their `fsync` does not flush
    /// the drive's cache.
    static func synchronize(_ descriptor: Int32) throws(LarderError) {
        #if canImport(Darwin)
        if (try? retrying("fcntl") { fcntl(descriptor, F_FULLFSYNC) }) != nil { return }
        #endif
        try retrying("fsync") { fsync(descriptor) }
    }

    /// The corresponding C function is `ftruncate`.
    static func truncate(_ descriptor: Int32, to length: Int) throws(LarderError) {
        try retrying("ftruncate") { ftruncate(descriptor, off_t(length)) }
    }

    /// Removes the name `path`; false when it could not (none there, say).
    /// The corresponding C function is `unlink`.
    @discardableResult
    static func remove(_ path: String) -> Bool {
        (try? retrying("unlink") { unlink(path) }) != nil
    }

    /// The corresponding C function is `rename`.
    static func rename(_ source: String, to destination: String) throws(LarderError) {
        #if canImport(Darwin)
        try retrying("rename to \(destination)") { Darwin.rename(source, destination) }
        #elseif canImport(Glibc)
        try retrying("rename to \(destination)") { Glibc.rename(source, destination) }
        #else
        try retrying("rename to \(destination)") { Musl.rename(source, destination) }
        #endif
    }

    /// The corresponding C function is `chmod`.
    static func changeMode(_ path: String, to permissions: mode_t) throws(LarderError) {
        try retrying("chmod") { chmod(path, permissions) }
    }

    /// The corresponding C function is `chown`.
    static func changeOwner(_ path: String, user: UInt32, group: UInt32) throws(LarderError) {
        try retrying("give the new file the old one's owner") { chown(path, uid_t(user), gid_t(group)) }
    }

    /// The absolute path `path` names, symbolic links resolved. The corresponding C function is
    /// `realpath`.
    static func resolve(_ path: String) throws(LarderError) -> String {
        guard let resolved = realpath(path, nil) else { throw error("realpath", errno: errno) }
        defer { free(resolved) }
        return String(cString: resolved)
    }

    /// Maps `length` bytes of `descriptor`'s file, shared. The corresponding C function is `mmap`.
    static func map(_ descriptor: Int32, length: Int, writable: Bool) throws(LarderError) -> UnsafeMutableRawPointer {
        let protection = writable ? (PROT_READ | PROT_WRITE) : PROT_READ
        guard let address = mmap(nil, length, protection, MAP_SHARED, descriptor, 0), address != MAP_FAILED else {
            throw error("mmap", errno: errno)
        }
        return address
    }

    /// The corresponding C function is `munmap`.
    static func unmap(_ address: UnsafeMutableRawPointer, length: Int) {
        _ = munmap(address, length)
    }

    /// Writes the dirty pages of `[address, address + length)` back and waits for them.
    /// The corresponding C function is `msync(MS_SYNC)`.
    static func flush(_ address: UnsafeMutableRawPointer, length: Int) throws(LarderError) {
        try retrying("msync") { msync(address, length, MS_SYNC) }
    }

    /// The size of the system's memory pages. The corresponding C function is `getpagesize`.
    static let systemPageSize = Int(getpagesize())

    /// The corresponding C function is `getpid`.
    static func processID() -> Int32 { getpid() }
}

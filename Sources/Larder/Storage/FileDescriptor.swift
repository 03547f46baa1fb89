#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import CLarderSupport

/// An open file descriptor with the few operations a cache file needs before and besides its
/// mapping: size, positioned reads, advisory locks. `MappedFile` takes ownership of it.
struct FileDescriptor {
    let rawValue: Int32
    let path: String

    /// Opens `path`; creates it with `permissions` when `create` is set and it does not exist.
    static func open(_ path: String, create: Bool, readOnly: Bool, permissions: UInt16) throws(LarderError) -> FileDescriptor {
        guard !path.isEmpty else { throw LarderError(.invalidArgument, "empty path") }
        var flags = (readOnly ? O_RDONLY : O_RDWR) | O_CLOEXEC
        var info = stat()
        // A directory is refused the same way in either mode (opening one for writing fails).
        if stat(path, &info) == 0 && (info.st_mode & S_IFMT) != S_IFREG {
            throw LarderError(.invalidArgument, "not a regular file", path: path)
        }
        if create && !readOnly { flags |= O_CREAT }
        do throws(LarderError) {
            #if canImport(Darwin)
            let fd = try SystemCall.retrying("open") { Darwin.open(path, flags, mode_t(permissions)) }
            #elseif canImport(Glibc)
            let fd = try SystemCall.retrying("open") { Glibc.open(path, flags, mode_t(permissions)) }
            #else
            let fd = try SystemCall.retrying("open") { Musl.open(path, flags, mode_t(permissions)) }
            #endif
            if fstat(fd, &info) != 0 || (info.st_mode & S_IFMT) != S_IFREG {
                FileDescriptor(rawValue: fd, path: path).close()
                throw LarderError(.invalidArgument, "not a regular file")
            }
            return FileDescriptor(rawValue: fd, path: path)
        } catch {
            throw error.at(path)
        }
    }

    func size() throws(LarderError) -> Int {
        var info = stat()
        do throws(LarderError) {
            try SystemCall.retrying("fstat") { fstat(rawValue, &info) }
        } catch {
            throw error.at(path)
        }
        return Int(info.st_size)
    }

    /// Reads up to `count` bytes at `offset`; fewer at the end of the file.
    func read(count: Int, at offset: Int) throws(LarderError) -> [UInt8] {
        var buffer = [UInt8](repeating: 0, count: count)
        var done = 0
        while done < count {
            let result = buffer.withUnsafeMutableBytes { raw in
                pread(rawValue, raw.baseAddress! + done, count - done, off_t(offset + done))
            }
            if result == 0 { break }
            if result < 0 {
                if errno == EINTR { continue }
                throw SystemCall.error("read", errno: errno).at(path)
            }
            done += result
        }
        return Array(buffer.prefix(done))
    }

    /// Whether `path` still names the file this descriptor has open. A file renamed over it
    /// (a compaction) or its removal leaves the descriptor on a file no one else will open.
    func isStillLinked(at path: String) throws(LarderError) -> Bool {
        var open = stat()
        var named = stat()
        do throws(LarderError) {
            try SystemCall.retrying("fstat") { fstat(rawValue, &open) }
        } catch {
            throw error.at(path)
        }
        guard stat(path, &named) == 0 else { return false }
        return open.st_dev == named.st_dev && open.st_ino == named.st_ino
    }

    enum LockMode: Int32 {
        case unlock = 0, shared = 1, exclusive = 2
    }

    /// Whether the locks of `lock(byte:_:wait:)` belong to this descriptor (Linux: open file
    /// description locks) rather than to the process (elsewhere: closing any descriptor of the
    /// file drops every lock the process holds on it).
    #if os(Linux)
    static let locksBelongToDescriptors = true
    #else
    static let locksBelongToDescriptors = false
    #endif

    /// Sets the advisory lock on one byte of the file's lock space. Returns false when `wait` is
    /// not set and another holder conflicts.
    @discardableResult
    func lock(byte: UInt64, _ mode: LockMode, wait: Bool) throws(LarderError) -> Bool {
        let rc = lrd_lock_byte(rawValue, byte, mode.rawValue, wait ? 1 : 0)
        if rc == 0 { return true }
        if rc == EAGAIN || rc == EACCES || rc == EWOULDBLOCK { return false }
        throw SystemCall.error("lock", errno: rc).at(path)
    }

    /// Whether another holder has `byte` locked, in either mode (asked, not taken: a read-only
    /// descriptor may ask too).
    func isLockedByOthers(byte: UInt64) throws(LarderError) -> Bool {
        let rc = lrd_byte_is_locked(rawValue, byte)
        if rc < 0 { throw SystemCall.error("query a lock", errno: -rc).at(path) }
        return rc == 1
    }

    /// Closes the file but keeps the number, which names `/dev/null` until `close()`. Where locks
    /// belong to the process (Apple platforms), closing any descriptor of a file drops every lock
    /// the process holds on it: a store's descriptor closed only when its last `Cache` goes away,
    /// which may be long after the store closed and the process opened the file anew, would drop
    /// the new store's locks. A closing store retires its descriptor instead, under the
    /// registry's lock, while its mapping, which needs none, lives on. The number stays taken so
    /// that nothing still holding it can reach a file opened later under the same number.
    func retire() {
        _ = lrd_retire_descriptor(rawValue)
    }

    func close() {
        #if canImport(Darwin)
        _ = Darwin.close(rawValue)
        #elseif canImport(Glibc)
        _ = Glibc.close(rawValue)
        #else
        _ = Musl.close(rawValue)
        #endif
    }
}

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
        // A directory is refused the same way in either mode (opening one for writing fails).
        if let info = try? SystemCall.status(path), (info.st_mode & S_IFMT) != S_IFREG {
            throw LarderError(.invalidArgument, "not a regular file", path: path)
        }
        if create && !readOnly { flags |= O_CREAT }
        if lockOwner == .process, let reused = ProcessLockTable.shared.reuse(path: path, readOnly: readOnly) {
            return FileDescriptor(rawValue: reused, path: path)
        }
        lrd_fill_standard_descriptors()
        do throws(LarderError) {
            let fd = try SystemCall.open(path, flags, mode_t(permissions))
            guard let info = try? SystemCall.status(descriptor: fd), (info.st_mode & S_IFMT) == S_IFREG else {
                closeNumber(fd)
                throw LarderError(.invalidArgument, "not a regular file")
            }
            if lockOwner == .process { ProcessLockTable.shared.register(fd) }
            // Its retirement, should it come, then needs no descriptor of its own.
            lrd_prepare_retirement()
            return FileDescriptor(rawValue: fd, path: path)
        } catch {
            throw error.at(path)
        }
    }

    func size() throws(LarderError) -> Int {
        do throws(LarderError) {
            return Int(try SystemCall.status(descriptor: rawValue).st_size)
        } catch {
            throw error.at(path)
        }
    }

    /// Reads up to `count` bytes at `offset`; fewer at the end of the file.
    func read(count: Int, at offset: Int) throws(LarderError) -> [UInt8] {
        var buffer = [UInt8](repeating: 0, count: count)
        var done = 0
        while done < count {
            let result = buffer.withUnsafeMutableBytes { raw in
                Result { () throws(LarderError) in
                    try SystemCall.read(rawValue, into: raw.baseAddress! + done, count: count - done, at: offset + done)
                }
            }
            switch result {
            case .success(0): return Array(buffer.prefix(done))
            case .success(let count): done += count
            case .failure(let error): throw error.at(path)
            }
        }
        return Array(buffer.prefix(done))
    }

    /// Writes all of `bytes` at `offset`.
    func write(_ bytes: [UInt8], at offset: Int) throws(LarderError) {
        var done = 0
        while done < bytes.count {
            let result = bytes.withUnsafeBytes { raw in
                Result { () throws(LarderError) in
                    try SystemCall.write(rawValue, from: raw.baseAddress! + done, count: bytes.count - done, at: offset + done)
                }
            }
            switch result {
            case .success(let count): done += count
            case .failure(let error): throw error.at(path)
            }
        }
    }

    /// Waits until what was written to the file is on the disk.
    func synchronize() throws(LarderError) {
        do throws(LarderError) {
            try SystemCall.synchronize(rawValue)
        } catch {
            throw error.at(path)
        }
    }

    /// Whether `path` still names the file this descriptor has open. A file renamed over it
    /// (a compaction) or its removal leaves the descriptor on a file no one else will open.
    func isStillLinked(at path: String) throws(LarderError) -> Bool {
        let open: FileIdentity
        do throws(LarderError) {
            open = FileIdentity(try SystemCall.status(descriptor: rawValue))
        } catch {
            throw error.at(path)
        }
        return FileIdentity(path: path) == open
    }

    enum LockMode: Int32 {
        case unlock = 0, shared = 1, exclusive = 2
    }

    /// Who owns the locks of `lock(byte:_:wait:)`.
    enum LockOwner {
        /// The open file description (Linux's `F_OFD_SETLK`): each descriptor's locks are its own.
        case descriptor
        /// The process (POSIX record locks, Apple platforms): every descriptor of a file shares
        /// them, and closing any one drops them all. `ProcessLockTable` keeps them apart.
        case process
    }

    /// The descriptor on Linux, the process elsewhere. Tests set `.process` on Linux, in a child
    /// process before it opens any file, to run Apple platforms' locking where they run: the
    /// writer lock too then becomes Apple platforms' (a record lock on byte 2, not a mutex).
    #if os(Linux)
    nonisolated(unsafe) static var lockOwner = LockOwner.descriptor {
        didSet { lrd_use_record_writer_lock(lockOwner == .process ? 1 : 0) }
    }
    #else
    nonisolated(unsafe) static var lockOwner = LockOwner.process
    #endif

    static var locksBelongToDescriptors: Bool { lockOwner == .descriptor }

    /// Sets the advisory lock on one byte of the file's lock space. Returns false when `wait` is
    /// not set and another holder conflicts (where locks belong to the process, another
    /// descriptor of the process's that holds the byte conflicts too).
    @discardableResult
    func lock(byte: UInt64, _ mode: LockMode, wait: Bool) throws(LarderError) -> Bool {
        let rc = Self.locksBelongToDescriptors ? lrd_lock_byte(rawValue, byte, mode.rawValue, wait ? 1 : 0, 0)
            : ProcessLockTable.shared.lock(rawValue, byte: byte, mode, wait: wait)
        if rc == 0 { return true }
        if rc == EAGAIN || rc == EACCES || rc == EWOULDBLOCK {
            // A wait ends only in the lock (or an error): a conflict then is with the process itself.
            guard wait else { return false }
            throw LarderError(.busy, "another handle of this process holds the file's lock byte \(byte)", path: path)
        }
        throw SystemCall.error("lock", errno: rc).at(path)
    }

    /// Whether another holder has `byte` locked, in either mode (asked, not taken: a read-only
    /// descriptor may ask too). Where locks belong to the process, another descriptor of the
    /// process's that holds the byte counts too.
    func isLockedByOthers(byte: UInt64) throws(LarderError) -> Bool {
        let rc = Self.locksBelongToDescriptors ? lrd_byte_is_locked(rawValue, byte, 0)
            : ProcessLockTable.shared.isLockedByOthers(rawValue, byte: byte)
        if rc < 0 { throw SystemCall.error("query a lock", errno: -rc).at(path) }
        return rc == 1
    }

    /// Closes the file but keeps the number, which names `/dev/null` until `close()`.
    ///
    /// Where locks belong to the process (Apple platforms), closing any descriptor of a file
    /// drops every lock the process holds on it. A store's descriptor closed only when its last
    /// `Cache` goes away would drop the locks of a store opened on the file since. So a closing
    /// store retires its descriptor instead; its mapping needs none. The number stays taken, so
    /// that nothing still holding it reaches a file opened later under that number. Where the
    /// process has the file open on another descriptor, the number names the file until that
    /// one goes (`ProcessLockTable`).
    func retire() {
        if Self.locksBelongToDescriptors {
            _ = lrd_retire_descriptor(rawValue)
        } else {
            ProcessLockTable.shared.release(rawValue, closing: false)
        }
    }

    /// Closes the descriptor; where locks belong to the process and the process has the file open
    /// on another descriptor, only once that one goes (`ProcessLockTable`).
    func close() {
        if Self.locksBelongToDescriptors {
            Self.closeNumber(rawValue)
        } else {
            ProcessLockTable.shared.release(rawValue, closing: true)
        }
    }

    /// `close(2)`, for a number that is closed for good.
    static func closeNumber(_ descriptor: Int32) {
        SystemCall.close(descriptor)
    }
}

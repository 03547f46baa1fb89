#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import CLarderSupport
import Foundation

/// The file locks of a process whose record locks belong to the process (Apple platforms), kept
/// per file so that one descriptor's locking and closing leave its siblings' locks alone.
///
/// There the kernel keeps one lock per byte for the whole process, whatever descriptor took it,
/// and closing any descriptor of a file drops all of them. A process with a read-only and a
/// read-write store of one file holds two descriptors of it, as does one that inspects or
/// repairs a file it has open. Left to the kernel:
/// - the first descriptor's close, or its unlock of a byte both hold, would drop the other's
///   locks, and another process could recover the file under a running writer;
/// - a sole writer's test of the users byte would answer "alone" while the process's read-only
///   store maps the file;
/// - a compaction could rewrite a file the process has open.
/// SQLite keeps a table of the same kind for the same reason (`unixInodeInfo`).
///
/// So every descriptor the library opens is registered here, by device and inode, and its
/// locks go through the table, which knows what each sibling holds:
/// - a request that conflicts with a sibling's lock waits for the sibling, or fails, as with
///   another process (the kernel would grant it at once); one that waits for another process
///   waits without holding the table;
/// - the kernel's lock is changed only when the strongest mode among the siblings changes, so an
///   unlock by one leaves the byte shared while another still holds it;
/// - a descriptor closed (or retired) while a sibling is still open stays open, parked here,
///   until the file's last open descriptor goes: only then are they closed (or retired) together;
///   an open of the file in the same mode meanwhile takes a closed one up again (`reuse`), so
///   that opens and closes beside an open store do not pile descriptors up.
///
/// Where locks belong to descriptors (Linux) the table is not used: each descriptor's locks are
/// its own. Tests there run this table on Linux's process-owned record locks
/// (`FileDescriptor.lockOwner`), which behave as Apple platforms' do.
final class ProcessLockTable: @unchecked Sendable {
    static let shared = ProcessLockTable()

    /// What a parked descriptor waits for: to be retired (its owner closes the number later, so
    /// it must stay taken) or closed (its owner has let go of the number, which a later open of
    /// the file in the same mode may take up again).
    private enum Parked {
        case retire, close
    }

    private struct File {
        /// The descriptors in use: registered and neither closed nor retired.
        var open: Set<Int32> = []
        /// Each descriptor's locks, by byte: those it holds, and one it waits for another
        /// process to give up (see `lock`).
        var held: [Int32: [UInt64: FileDescriptor.LockMode]] = [:]
        var waitingFor: [Int32: UInt64] = [:]
        var parked: [Int32: Parked] = [:]

        /// The strongest lock on `byte` among the descriptors other than `descriptor`.
        func strongest(on byte: UInt64, besides descriptor: Int32) -> FileDescriptor.LockMode {
            var mode = FileDescriptor.LockMode.unlock
            for (holder, locks) in held where holder != descriptor {
                if let lock = locks[byte], lock > mode { mode = lock }
            }
            return mode
        }

        /// Whether a sibling of `descriptor` waits for another process's lock on `byte`.
        func siblingWaits(on byte: UInt64, besides descriptor: Int32) -> Bool {
            waitingFor.contains { $0.key != descriptor && $0.value == byte }
        }
    }

    /// One lock for the whole table, held for bookkeeping, for the lock calls that do not wait
    /// and for closes; a request that waits for a sibling waits on it, as a condition, for a
    /// change.
    private let condition = NSCondition()
    private var files: [FileIdentity: File] = [:]
    private var fileOfDescriptor: [Int32: FileIdentity] = [:]
    /// Whether the locks noted here are the parent's, in a child after fork.
    private var forks = ForkWatch()

    /// In a child forked since the locks noted here were taken: forgets them, and the waits the
    /// parent's threads had under way, for a child inherits no record lock. The descriptors
    /// stay known (the child has them open too), so that closing one still parks it while the
    /// file's other descriptors are in use, rather than drop the locks of the child's own
    /// stores. Under `condition`.
    private func forgetParentLocks() {
        guard forks.forkedSinceLastAsked() else { return }
        for id in files.keys {
            files[id]?.held = [:]
            files[id]?.waitingFor = [:]
        }
    }

    /// A descriptor of the file at `path` that the process gave up while it had the file open on
    /// another, opened in the same mode, taken up again (registered as in use): so that opens and
    /// closes beside an open store, such as an open's repeated waits for another process, do not
    /// pile up descriptors. Nil when there is none. (The file's permissions are not asked again:
    /// a process that has the file open in that mode already keeps its right to it.)
    func reuse(path: String, readOnly: Bool) -> Int32? {
        guard let id = FileIdentity(path: path) else { return nil }
        return condition.withLock {
            forgetParentLocks()
            guard var file = files[id],
                  let reused = file.parked.first(where: { $0.value == .close && SystemCall.isReadOnly($0.key) == readOnly })?.key
            else { return nil }
            file.parked[reused] = nil
            file.open.insert(reused)
            files[id] = file
            return reused
        }
    }

    /// Registers a descriptor just opened.
    func register(_ descriptor: Int32) {
        guard let id = FileIdentity(descriptor: descriptor) else { return }
        condition.withLock {
            forgetParentLocks()
            files[id, default: File()].open.insert(descriptor)
            fileOfDescriptor[descriptor] = id
        }
    }

    /// `FileDescriptor.lock(byte:_:wait:)` for a registered descriptor. A request that conflicts
    /// with a sibling's lock waits for the sibling as it would for another process (a store
    /// opening while a thread of the process compacts the file, say), or fails at once.
    /// A request that has to wait for another process does so without the table's lock, so that
    /// the process's other files open and close meanwhile: it is noted as waited for, and a
    /// sibling's request for the byte waits until it is granted or refused.
    /// - Returns: an `errno` value, or 0 (as `lrd_lock_byte`); EAGAIN for a conflict with a
    ///   sibling when `wait` is not set.
    func lock(_ descriptor: Int32, byte: UInt64, _ mode: FileDescriptor.LockMode, wait: Bool) -> Int32 {
        condition.lock()
        forgetParentLocks()
        while true {
            guard let id = fileOfDescriptor[descriptor], var file = files[id] else {
                condition.unlock()
                return lrd_lock_byte(descriptor, byte, mode.rawValue, wait ? 1 : 0, 1)
            }
            guard file.open.contains(descriptor) else {
                // Given up (parked): its lock calls would change its siblings' locks.
                condition.unlock()
                return EBADF
            }
            let siblings = file.strongest(on: byte, besides: descriptor)
            if mode != .unlock && (siblings == .exclusive || (mode == .exclusive && siblings != .unlock)
                                   || file.siblingWaits(on: byte, besides: descriptor)) {
                guard wait else {
                    condition.unlock()
                    return EAGAIN
                }
                condition.wait()
                continue
            }
            let mine = file.held[descriptor]?[byte] ?? .unlock
            let before = max(mine, siblings)
            let after = max(mode, siblings)
            var rc: Int32 = 0
            if after != before {
                rc = lrd_lock_byte(descriptor, byte, after.rawValue, 0, 1)
                if wait && (rc == EAGAIN || rc == EACCES) {
                    // No sibling holds the byte or asks for it meanwhile (they wait for this
                    // request), and this descriptor's own entries change only through its caller.
                    file.waitingFor[descriptor] = byte
                    files[id] = file
                    condition.unlock()
                    rc = lrd_lock_byte(descriptor, byte, after.rawValue, 1, 1)
                    condition.lock()
                    files[id]?.waitingFor[descriptor] = nil
                    condition.broadcast()
                    guard let current = files[id], current.open.contains(descriptor) else {
                        // Given up by another thread meanwhile (a misuse): what the kernel
                        // granted goes with the descriptor, whose number may be another's now.
                        condition.unlock()
                        return EBADF
                    }
                    file = current
                }
            }
            if rc == 0 {
                file.held[descriptor, default: [:]][byte] = mode == .unlock ? nil : mode
                files[id] = file
                condition.broadcast()
            }
            condition.unlock()
            return rc
        }
    }

    /// `FileDescriptor.isLockedByOthers(byte:)` for a registered descriptor: a sibling's lock
    /// counts, as another process's does (the kernel reports only those), and so does a lock a
    /// sibling waits for.
    /// - Returns: 1 or 0, or -errno (as `lrd_byte_is_locked`).
    func isLockedByOthers(_ descriptor: Int32, byte: UInt64) -> Int32 {
        condition.withLock {
            forgetParentLocks()
            if let id = fileOfDescriptor[descriptor], let file = files[id],
               file.strongest(on: byte, besides: descriptor) != .unlock || file.siblingWaits(on: byte, besides: descriptor) {
                return 1
            }
            return lrd_byte_is_locked(descriptor, byte, 1)
        }
    }

    /// Closes `descriptor`, or retires it (`FileDescriptor.retire`), once its locks are given
    /// up: at once when it is its file's last descriptor in use (with the file's parked ones),
    /// else only when the file's last descriptor in use goes. All under the table's lock, so that
    /// no descriptor of the file registered meanwhile takes a lock the close would drop.
    func release(_ descriptor: Int32, closing: Bool) {
        condition.lock()
        defer {
            condition.broadcast()
            condition.unlock()
        }
        forgetParentLocks()
        guard let id = fileOfDescriptor[descriptor], var file = files[id] else {
            Self.finish(descriptor, closing ? .close : .retire)
            return
        }
        if file.parked[descriptor] != nil {
            // Retired while a sibling was open, and now let go of: closed with the rest.
            if closing { file.parked[descriptor] = .close }
            files[id] = file
            return
        }
        // Its locks go first (a store that failed to open may close with some held): a
        // sibling's keep the bytes they share at its mode. (Should giving one up fail, the
        // process keeps a stronger lock than the table says: others are kept out longer, never
        // let in early.)
        for (byte, mode) in file.held[descriptor] ?? [:] {
            let siblings = file.strongest(on: byte, besides: descriptor)
            if siblings != mode { _ = lrd_lock_byte(descriptor, byte, siblings.rawValue, 0, 1) }
        }
        file.held[descriptor] = nil
        file.open.remove(descriptor)
        guard file.open.isEmpty else {
            file.parked[descriptor] = closing ? .close : .retire
            files[id] = file
            return
        }
        // The file's last descriptor in use: the parked ones go with it.
        for (parked, fate) in file.parked {
            fileOfDescriptor[parked] = nil
            Self.finish(parked, fate)
        }
        fileOfDescriptor[descriptor] = nil
        files[id] = nil
        Self.finish(descriptor, closing ? .close : .retire)
    }

    private static func finish(_ descriptor: Int32, _ fate: Parked) {
        switch fate {
        case .retire: _ = lrd_retire_descriptor(descriptor)
        case .close: SystemCall.close(descriptor)
        }
    }

    /// How many descriptors the table holds parked, and how many wait for another process's
    /// lock, for tests.
    var counts: (parked: Int, waiting: Int) {
        condition.withLock {
            (files.values.reduce(0) { $0 + $1.parked.count }, files.values.reduce(0) { $0 + $1.waitingFor.count })
        }
    }
}

extension FileDescriptor.LockMode: Comparable {
    static func < (lhs: Self, rhs: Self) -> Bool { lhs.rawValue < rhs.rawValue }
}

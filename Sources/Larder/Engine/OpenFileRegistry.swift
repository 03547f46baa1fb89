#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import Foundation

/// One open store per file (and mode) per process, shared by every `Cache` that names it.
///
/// A second `Cache` on a path this process already has open gets the same mapping, the same
/// in-process lock and the same view of the file, instead of a second descriptor whose locks
/// could exclude (Linux) or silently drop (Apple platforms, where record locks belong to the
/// process) the first one's.
final class OpenFileRegistry: @unchecked Sendable {
    static let shared = OpenFileRegistry()

    /// A store and the lock its `Cache`s share.
    final class Entry {
        let store: CacheStore
        let lock = ReadWriteLock()
        fileprivate var users = 1
        fileprivate let key: Key
        /// Its last user is closing it (outside the registry's lock): an open of its file waits
        /// until it is gone, then opens the file anew.
        fileprivate var isClosing = false

        fileprivate init(store: CacheStore, key: Key) {
            self.store = store
            self.key = key
        }
    }

    fileprivate struct Key: Hashable {
        let device: UInt64
        let inode: UInt64
        var readOnly: Bool

        init(_ info: stat, readOnly: Bool) {
            device = UInt64(truncatingIfNeeded: info.st_dev)
            inode = UInt64(truncatingIfNeeded: info.st_ino)
            self.readOnly = readOnly
        }

        /// The same file in the other mode.
        var otherMode: Key {
            var key = self
            key.readOnly.toggle()
            return key
        }
    }

    /// Recursive: shrinking a file at open (`CacheStore.rewrite`) opens the smaller copy
    /// through a `Cache` of its own.
    private let lock = NSRecursiveLock()
    private var entries: [Key: Entry] = [:]
    /// How many opens have started over after waiting for another process, for tests to tell a
    /// wait from a spin.
    var restartsAfterWaiting: Int { lock.withLock { restarts } }
    private var restarts = 0

    /// The open store for `path`, opening it when this process does not have it open yet.
    ///
    /// Every open of the process runs under the registry's one lock, and every store stays
    /// registered until its close is done, so that two spellings of one path, or an open racing a
    /// close, never make two stores of one file. What waits for another process (an open while
    /// another process, or another thread of this one, recovers or compacts the file, which can
    /// take seconds; a close while another process opens) waits outside that lock, so that the
    /// process's opens and closes of other files go on meanwhile. (Where locks belong to the
    /// process, the descriptors that waiting opens and closes beside the file's other stores are
    /// kept from dropping those stores' locks by `ProcessLockTable`.)
    func open(path: String, configuration: CacheStore.Configuration) throws(LarderError) -> Entry {
        try CacheStore.validate(configuration, path: path)
        // Kept across attempts: an attempt that could not shrink the file leaves it as it is.
        var configuration = configuration
        while true {
            do {
                if let entry = try openNow(path: path, configuration: &configuration) { return entry }
                // A store of the file is closing in this process: a close that waits for another
                // process, then holds the file's transition lock, which the wait blocks on (for
                // as long as it can; a close that has not reached the lock yet is polled).
                _ = try CacheStore.waitForOtherProcesses(path: path, readOnly: configuration.readOnly)
                usleep(200)
            } catch where error.code == LarderError.otherProcessInTransition.code {
                if try !CacheStore.waitForOtherProcesses(path: path, readOnly: configuration.readOnly) { usleep(1000) }
                lock.withLock { restarts += 1 }
            }
        }
    }

    /// One attempt at `open`: nil while a store of the file is closing.
    private func openNow(path: String, configuration: inout CacheStore.Configuration) throws(LarderError) -> Entry? {
        lock.lock()
        defer { lock.unlock() }
        let named = Self.key(path: path, readOnly: configuration.readOnly)
        if let named, let entry = entries[named] {
            guard !entry.isClosing else { return nil }
            entry.users += 1
            return entry
        }
        let otherModeIsOpen = named.map { entries[$0.otherMode] != nil } ?? false
        var attempt = configuration
        attempt.mayReplaceFile = configuration.mayReplaceFile && !otherModeIsOpen
        attempt.waitsForOtherProcesses = false
        // What the next attempt keeps is a shrink that failed, not the other mode's being open now.
        defer { if !otherModeIsOpen { configuration.mayReplaceFile = attempt.mayReplaceFile } }
        let store = try CacheStore.open(path: path, configuration: &attempt)
        var info = stat()
        fstat(store.file.descriptor.rawValue, &info)
        let key = Key(info, readOnly: configuration.readOnly)
        let entry = Entry(store: store, key: key)
        entries[key] = entry
        return entry
    }

    /// Gives a user's share back; the last one closes the store.
    func release(_ entry: Entry) throws(LarderError) {
        lock.lock()
        entry.users -= 1
        guard entry.users == 0 else {
            lock.unlock()
            return
        }
        entry.isClosing = true
        lock.unlock()
        defer { lock.withLock { entries[entry.key] = nil } }
        try entry.lock.withWriteLock { () throws(LarderError) in try entry.store.close() }
    }

    private static func key(path: String, readOnly: Bool) -> Key? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        return Key(info, readOnly: readOnly)
    }
}

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

        fileprivate init(store: CacheStore, key: Key) {
            self.store = store
            self.key = key
        }
    }

    fileprivate struct Key: Hashable {
        let device: UInt64
        let inode: UInt64
        let readOnly: Bool
    }

    /// Recursive: shrinking a file at open (`CacheStore.rewrite`) opens the smaller copy
    /// through a `Cache` of its own.
    private let lock = NSRecursiveLock()
    private var entries: [Key: Entry] = [:]

    /// The open store for `path`, opening it when this process does not have it open yet.
    ///
    /// Every open and close of the process runs under the registry's one lock, so that two
    /// spellings of one path, or an open racing a close, never make two stores of one file. An
    /// open that would wait for another process (recovering or compacting the file can take
    /// seconds) waits outside that lock where it can, so that the process's other opens and closes
    /// go on meanwhile, and then starts over.
    func open(path: String, configuration: CacheStore.Configuration) throws(LarderError) -> Entry {
        while true {
            do {
                return try openNow(path: path, configuration: configuration)
            } catch where error.code == LarderError.otherProcessInTransition.code {
                try CacheStore.waitForOtherProcesses(path: path, readOnly: configuration.readOnly)
            }
        }
    }

    private func openNow(path: String, configuration: CacheStore.Configuration) throws(LarderError) -> Entry {
        lock.lock()
        defer { lock.unlock() }
        let named = Self.key(path: path, readOnly: configuration.readOnly)
        if let named, let entry = entries[named] {
            entry.users += 1
            return entry
        }
        var configuration = configuration
        configuration.mayReplaceFile = named.map { entries[Key(device: $0.device, inode: $0.inode, readOnly: !$0.readOnly)] == nil } ?? true
        // Waiting elsewhere closes a descriptor of the file afterwards, which on Apple platforms
        // drops the locks of every store of it in the process.
        configuration.waitsForOtherProcesses = !FileDescriptor.locksBelongToDescriptors
        let store = try CacheStore.open(path: path, configuration: configuration)
        var info = stat()
        fstat(store.file.descriptor.rawValue, &info)
        let key = Key(device: UInt64(truncatingIfNeeded: info.st_dev), inode: UInt64(truncatingIfNeeded: info.st_ino), readOnly: configuration.readOnly)
        let entry = Entry(store: store, key: key)
        entries[key] = entry
        return entry
    }

    /// Gives a user's share back; the last one closes the store.
    func release(_ entry: Entry) throws(LarderError) {
        lock.lock()
        defer { lock.unlock() }
        entry.users -= 1
        guard entry.users == 0 else { return }
        entries[entry.key] = nil
        try entry.lock.withWriteLock { () throws(LarderError) in try entry.store.close() }
    }

    private static func key(path: String, readOnly: Bool) -> Key? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        return Key(device: UInt64(truncatingIfNeeded: info.st_dev), inode: UInt64(truncatingIfNeeded: info.st_ino), readOnly: readOnly)
    }
}

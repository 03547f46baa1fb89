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
///
/// Opening and closing a store can wait for other processes (one that is recovering or
/// compacting the file holds its transition lock for a while), so the registry's lock is not
/// held meanwhile: the file is marked as in transition instead, and only threads that open or
/// close that same file wait for it.
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

    /// A file as the registry knows it: its device and inode, or the path of one that does
    /// not exist yet (an open creates it).
    fileprivate enum FileName: Hashable {
        case inode(device: UInt64, inode: UInt64)
        case path(String)

        init(path: String) {
            var info = stat()
            guard stat(path, &info) == 0 else {
                self = .path(path)
                return
            }
            self = .inode(device: UInt64(truncatingIfNeeded: info.st_dev), inode: UInt64(truncatingIfNeeded: info.st_ino))
        }

        init(descriptor: FileDescriptor) {
            var info = stat()
            fstat(descriptor.rawValue, &info)
            self = .inode(device: UInt64(truncatingIfNeeded: info.st_dev), inode: UInt64(truncatingIfNeeded: info.st_ino))
        }
    }

    fileprivate struct Key: Hashable {
        let file: FileName
        let readOnly: Bool
    }

    private let lock = NSCondition()
    private var entries: [Key: Entry] = [:]
    /// Files a thread of this process is opening or closing.
    private var inTransition: Set<FileName> = []

    /// The open store for `path`, opening it when this process does not have it open yet.
    func open(path: String, configuration: CacheStore.Configuration) throws(LarderError) -> Entry {
        lock.lock()
        // The path too: a file this open creates gets an inode before the open is done.
        let pathName = FileName.path(path)
        var name = FileName(path: path)
        while inTransition.contains(name) || inTransition.contains(pathName) {
            lock.wait()
            name = FileName(path: path)
        }
        if let entry = entries[Key(file: name, readOnly: configuration.readOnly)] {
            entry.users += 1
            lock.unlock()
            return entry
        }
        inTransition.formUnion([name, pathName])
        var configuration = configuration
        configuration.mayReplaceFile = entries[Key(file: name, readOnly: !configuration.readOnly)] == nil
        lock.unlock()

        let opened = Result { () throws(LarderError) in try CacheStore.open(path: path, configuration: configuration) }
        lock.lock()
        defer {
            inTransition.subtract([name, pathName])
            lock.broadcast()
            lock.unlock()
        }
        let store = try opened.get()
        let key = Key(file: FileName(descriptor: store.file.descriptor), readOnly: configuration.readOnly)
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
        entries[entry.key] = nil
        while inTransition.contains(entry.key.file) { lock.wait() }
        inTransition.insert(entry.key.file)
        lock.unlock()
        defer {
            lock.lock()
            inTransition.remove(entry.key.file)
            lock.broadcast()
            lock.unlock()
        }
        try entry.lock.withWriteLock { () throws(LarderError) in try entry.store.close() }
    }
}

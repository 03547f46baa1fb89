#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import CLarderSupport
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
        let file: FileIdentity
        var readOnly: Bool

        /// The same file in the other mode.
        var otherMode: Key {
            var key = self
            key.readOnly.toggle()
            return key
        }
    }

    /// Recursive: shrinking a file at open (`CacheStore.rewrite`) opens the smaller copy
    /// through a `Cache` of its own, under the lock when the file was created meanwhile by
    /// another process (`openNow`).
    private let lock = NSRecursiveLock()
    private var entries: [Key: Entry] = [:]
    /// Existing files a thread is opening outside the lock (`openNow`), in the mode opened.
    private var opening: Set<Key> = []
    /// Whether the registered stores are the parent's, in a child after fork.
    private var forks = ForkWatch()
    /// How many opens have started over after waiting for another process or thread, for tests
    /// to tell a wait from a spin.
    var restartsAfterWaiting: Int { lock.withLock { restarts } }
    private var restarts = 0

    /// The open store for `path`, opening it when this process does not have it open yet.
    ///
    /// Every store stays registered until its close is done, and a file is registered once, so
    /// that two spellings of one path, or an open racing a close, never hand out two stores of
    /// one file. The creation of a file runs under the registry's one lock; the open of an
    /// existing file, which may recover it (seconds, for a large one), runs outside it, with the
    /// file claimed in `opening`: other threads' opens of it wait, in either mode. A store opened
    /// for a path that meanwhile named a file another thread has (a compaction elsewhere renamed
    /// a new file over it) is closed again; the file's locks keep the two opens apart as they
    /// keep two processes'. What waits for another process or thread (an open while the file is
    /// being opened, recovered or compacted; a close while another process opens) waits outside
    /// the lock too, so that the process's opens and closes of other files go on meanwhile: on
    /// the file's transition lock, which a read-write open holds throughout, or by polling every
    /// 200 µs where that lock does not hold it back (a read-only open waiting for another
    /// thread's read-only open, the moments before and after an open holds the lock). (Where
    /// locks belong to the process, the descriptors that waiting opens and closes beside the
    /// file's other stores are kept from dropping those stores' locks, and from sharing their
    /// exclusive ones, by `ProcessLockTable`.)
    func open(path: String, configuration: CacheStore.Configuration) throws(LarderError) -> Entry {
        try CacheStore.validate(configuration, path: path)
        // Kept across attempts: an attempt that could not shrink the file leaves it as it is.
        var configuration = configuration
        while true {
            do {
                if let entry = try openNow(path: path, configuration: &configuration) { return entry }
                // A store of the file is closing in this process, or another thread is opening
                // the file: a close that waits for another process, then holds the file's
                // transition lock, as a read-write open does throughout, which the wait blocks on
                // (for as long as it can; the rest is polled).
                _ = try CacheStore.waitForOtherProcesses(path: path, readOnly: configuration.readOnly)
                usleep(200)
                lock.withLock { restarts += 1 }
            } catch where error.code == LarderError.otherProcessInTransition.code {
                if try !CacheStore.waitForOtherProcesses(path: path, readOnly: configuration.readOnly) { usleep(1000) }
                lock.withLock { restarts += 1 }
            }
        }
    }

    /// One attempt at `open`: nil while a store of the file is closing, or another thread is
    /// opening the file (in either mode).
    private func openNow(path: String, configuration: inout CacheStore.Configuration) throws(LarderError) -> Entry? {
        lock.lock()
        var isLocked = true
        defer { if isLocked { lock.unlock() } }
        forgetParentStores()
        let named = Self.key(path: path, readOnly: configuration.readOnly)
        if let named, let entry = entries[named] {
            guard !entry.isClosing else { return nil }
            entry.users += 1
            return entry
        }
        if let named, isBeingOpened(named) { return nil }
        let otherModeIsOpen = named.map { entries[$0.otherMode] != nil } ?? false
        var attempt = configuration
        attempt.mayReplaceFile = configuration.mayReplaceFile && !otherModeIsOpen
        attempt.waitsForOtherProcesses = false
        // What the next attempt keeps is a shrink that failed, not the other mode's being open now.
        defer { if !otherModeIsOpen { configuration.mayReplaceFile = attempt.mayReplaceFile } }
        if let named {
            opening.insert(named)
            lock.unlock()
            isLocked = false
        }
        let opened = Result { () throws(LarderError) in try CacheStore.open(path: path, configuration: &attempt) }
        if !isLocked {
            lock.lock()
            isLocked = true
        }
        if let named { opening.remove(named) }
        let store = try opened.get()
        // A descriptor fstat cannot read keys as no file (device and inode 0), as before.
        let key = Key(file: FileIdentity(descriptor: store.file.descriptor.rawValue) ?? FileIdentity(stat()),
                      readOnly: configuration.readOnly)
        // The path named another file by the time the open reached it (a compaction in another
        // process), and another thread has that one open or is opening it: one store is enough.
        guard key == named || (entries[key] == nil && !isBeingOpened(key)) else {
            lock.unlock()
            isLocked = false
            // Never used: whatever its close meets (a full disk) is the other store's to report.
            try? store.close()
            return nil
        }
        let entry = Entry(store: store, key: key)
        entries[key] = entry
        return entry
    }

    /// In a child forked since the registered stores were opened: forgets them, and the opens
    /// other threads of the parent had under way, so that the child opens its files anew (the
    /// parent's stores refuse the child, and their handles leave the file to the parent), and
    /// gives up the child's copies of their descriptors. Under `lock`.
    private func forgetParentStores() {
        guard forks.forkedSinceLastAsked() else { return }
        for entry in entries.values { entry.store.releaseInheritedDescriptor() }
        entries = [:]
        opening = []
    }

    /// Whether a thread is opening the file of `key` in either mode. Under `lock`.
    private func isBeingOpened(_ key: Key) -> Bool {
        opening.contains(key) || opening.contains(key.otherMode)
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
        defer { lock.withLock { if entries[entry.key] === entry { entries[entry.key] = nil } } }
        try entry.lock.withWriteLock { () throws(LarderError) in try entry.store.close() }
    }

    private static func key(path: String, readOnly: Bool) -> Key? {
        guard let file = FileIdentity(path: path) else { return nil }
        return Key(file: file, readOnly: readOnly)
    }
}

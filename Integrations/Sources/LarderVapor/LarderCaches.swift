import Foundation
import Larder
import Vapor

/// The Larder files an application opened for its caches, one handle per path, closed when the
/// application shuts down.
final class LarderCaches: @unchecked Sendable {
    /// Guards `opened`.
    private let lock = NSLock()
    private var opened: [String: Larder.Cache] = [:]

    /// The cache at `path`, opened with `options` the first time it is asked for.
    func open(path: String, options: Larder.Cache.Options) throws -> Larder.Cache {
        try lock.withLock {
            if let cache = opened[path] { return cache }
            let cache = try Larder.Cache(path: path, options: options)
            opened[path] = cache
            return cache
        }
    }

    /// Closes every cache; a later `open` opens its file again.
    func closeAll() throws {
        let caches = lock.withLock {
            defer { opened = [:] }
            return Array(opened.values)
        }
        for cache in caches { try cache.close() }
    }
}

extension Application {
    private struct LarderCachesKey: StorageKey, LockKey {
        typealias Value = LarderCaches
    }

    /// This application's Larder files.
    var larderCaches: LarderCaches {
        let lock = locks.lock(for: LarderCachesKey.self)
        lock.lock()
        defer { lock.unlock() }
        if let existing = storage[LarderCachesKey.self] { return existing }
        let caches = LarderCaches()
        storage.set(LarderCachesKey.self, to: caches, onShutdown: { try $0.closeAll() })
        return caches
    }
}

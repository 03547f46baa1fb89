import Foundation
import Larder
import NIOCore
import Vapor

/// Vapor's `Cache` in a Larder file: what `MemoryCache` keeps, kept across restarts and shared
/// by every process of the host that opens the same file.
///
/// ```swift
/// app.caches.use(.larder(path: "/var/cache/app/vapor.larder"))
/// try await req.cache.set("greeting", to: "hello", expiresIn: .minutes(5))
/// ```
///
/// Values are stored through the cache's coder (JSON unless its options name another), as
/// `Cache.set(_:forKey:expiry:)` stores them, so other readers of the file decode them alike.
/// A stored value that does not decode as the type asked for reads as `nil`, as in
/// `MemoryCache`: a cache answers a miss rather than fail the request.
///
/// Reads and writes go through the cache's memory tier, as the core's typed calls do: a read
/// returns the object kept by an earlier read or write of this process, without decoding, while
/// the file still holds that record. A write of another process, a removal or expiry ends it.
/// The tier's limits are the cache's (`Cache.Options.memory`: 64 MiB, 10,000 objects by default).
public struct LarderCache: Vapor.Cache, Sendable {
    /// The cache the values are stored in.
    public let cache: Larder.Cache
    /// The event loop the futures complete on.
    public let eventLoop: any EventLoop

    /// A Vapor cache over `cache`, completing its futures on `eventLoop`.
    public init(cache: Larder.Cache, on eventLoop: any EventLoop) {
        self.cache = cache
        self.eventLoop = eventLoop
    }

    /// The value of `key` as a `T`, or `nil` when it is missing, expired or not a `T`.
    ///
    /// A read is a lookup in mapped memory: it runs on the event loop itself.
    public func get<T: Decodable>(_ key: String, as type: T.Type) -> EventLoopFuture<T?> {
        let value: T?
        do {
            value = try cache.value(type, forKey: key)
        } catch let error as LarderError {
            return eventLoop.makeFailedFuture(error)
        } catch {
            value = nil
        }
        // `T` need not be `Sendable`: the value is handed to the event loop, whose callbacks
        // alone use it.
        if eventLoop.inEventLoop { return eventLoop.makeSucceededIsolatedFuture(value).nonisolated() }
        let promise = eventLoop.makePromise(of: T?.self)
        nonisolated(unsafe) let succeed = { promise.assumeIsolated().succeed(value) }
        eventLoop.execute { succeed() }
        return promise.futureResult
    }

    /// Stores `value` for `key` with the cache's default expiry (none, unless its options set
    /// one); `nil` removes the key.
    public func set<T: Encodable>(_ key: String, to value: T?) -> EventLoopFuture<Void> {
        set(key, to: value, expiresIn: nil)
    }

    /// Stores `value` for `key` until `expirationTime` has passed; `nil` removes the key.
    ///
    /// A write may wait for writers of other processes, so it runs off the event loop, in a
    /// task.
    public func set<T: Encodable>(_ key: String, to value: T?, expiresIn expirationTime: CacheExpirationTime?) -> EventLoopFuture<Void> {
        let cache = self.cache
        let expiry = expirationTime.map { Expiry.seconds(Double($0.seconds)) }
        // Handed to the task, which alone calls it: `T` need not be `Sendable`.
        nonisolated(unsafe) let write: () throws -> Void = {
            if let value {
                try cache.set(value, forKey: key, expiry: expiry)
            } else {
                try cache.removeValue(forKey: key)
            }
        }
        return eventLoop.makeFutureWithTask { try write() }
    }

    /// The same cache, completing its futures on `request`'s event loop.
    public func `for`(_ request: Request) -> LarderCache {
        LarderCache(cache: cache, on: request.eventLoop)
    }
}

import Larder
import Vapor

extension Application.Caches {
    /// A Vapor cache over the Larder file at `path`, opened once per application and closed
    /// when it shuts down.
    ///
    /// - Throws: `LarderError`, as `Cache(path:options:)`.
    public func larder(path: String, options: Larder.Cache.Options = .init()) throws -> LarderCache {
        LarderCache(cache: try application.larderCaches.open(path: path, options: options),
                    on: application.eventLoopGroup.next())
    }
}

extension Application.Caches.Provider {
    /// Caches in the Larder file at `path`: `app.caches.use(.larder(path: "app.larder"))`.
    ///
    /// The file is opened when the provider is used, so a file that cannot be opened stops the
    /// application at its start: the error is fatal, as a misconfigured cache is.
    public static func larder(path: String, options: Larder.Cache.Options = .init()) -> Self {
        .init { application in
            let cache: Larder.Cache
            do {
                cache = try application.larderCaches.open(path: path, options: options)
            } catch {
                fatalError("Cannot open the Larder cache at \(path): \(error)")
            }
            application.caches.use { application in
                LarderCache(cache: cache, on: application.eventLoopGroup.next())
            }
        }
    }
}

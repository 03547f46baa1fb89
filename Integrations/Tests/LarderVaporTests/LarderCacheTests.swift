import Foundation
import IntegrationTestSupport
import Larder
import LarderVapor
import Testing
import Vapor
import VaporTesting

struct Profile: Codable, Equatable, Sendable {
    var name: String
    var visits: Int
}

@Suite("Vapor cache")
struct LarderCacheTests {
    @Test func theAsyncCallsStoreReadExpireAndDelete() async throws {
        let file = try TemporaryFile()
        try await withApp(configure: { $0.caches.use(.larder(path: file.path)) }) { app in
            #expect(app.cache is LarderCache)
            #expect(try await app.cache.get("profile", as: Profile.self) == nil)
            try await app.cache.set("profile", to: Profile(name: "Ada", visits: 3))
            #expect(try await app.cache.get("profile", as: Profile.self) == Profile(name: "Ada", visits: 3))

            let stopwatch = Stopwatch()
            try await app.cache.set("short", to: "lived", expiresIn: .seconds(1))
            let lived = try await app.cache.get("short", as: String.self)
            if stopwatch.isWithin(.seconds(1)) { #expect(lived == "lived") }
            try await Task.sleep(for: .milliseconds(1100))
            #expect(try await app.cache.get("short", as: String.self) == nil)

            try await app.cache.delete("profile")
            #expect(try await app.cache.get("profile", as: Profile.self) == nil)
            // Storing nil removes, as Vapor's caches do.
            try await app.cache.set("gone", to: 1)
            try await app.cache.set("gone", to: Int?.none)
            #expect(try await app.cache.get("gone", as: Int.self) == nil)
        }
    }

    @Test func theFutureCallsCompleteOnTheRequestsEventLoop() async throws {
        let file = try TemporaryFile()
        try await withApp(configure: { $0.caches.use(.larder(path: file.path)) }) { app in
            app.get("count") { request -> EventLoopFuture<String> in
                request.cache.get("count", as: Int.self).flatMap { count in
                    #expect(request.eventLoop.inEventLoop)
                    let next = (count ?? 0) + 1
                    return request.cache.set("count", to: next, expiresIn: .minutes(1)).map { "\(next)" }
                }
            }
            for expected in 1...3 {
                try await app.testing().test(.GET, "count") { response in
                    #expect(response.status == .ok)
                    #expect(response.body.string == "\(expected)")
                }
            }
        }
    }

    @Test func aValueOfAnotherTypeReadsAsAMiss() async throws {
        let file = try TemporaryFile()
        try await withApp(configure: { $0.caches.use(.larder(path: file.path)) }) { app in
            try await app.cache.set("profile", to: Profile(name: "Ada", visits: 3))
            #expect(try await app.cache.get("profile", as: [Int].self) == nil)
            #expect(try await app.cache.get("profile", as: Profile.self) != nil)
        }
    }

    @Test func aSecondReadIsAMemoryHitUntilTheValueChangesOrExpires() async throws {
        let file = try TemporaryFile()
        try await withApp(configure: { $0.caches.use(.larder(path: file.path)) }) { app in
            let larder = try #require(app.cache as? LarderCache).cache
            try await app.cache.set("profile", to: Profile(name: "Ada", visits: 3))
            let hits = larder.stats.memoryHits
            #expect(try await app.cache.get("profile", as: Profile.self) == Profile(name: "Ada", visits: 3))
            #expect(larder.stats.memoryHits == hits + 1)
            // Another handle on the file (another process's) replaces, then removes the value.
            let other = try Larder.Cache(path: file.path)
            try other.set(Profile(name: "Ada", visits: 4), forKey: "profile")
            #expect(try await app.cache.get("profile", as: Profile.self)?.visits == 4)
            try other.removeValue(forKey: "profile")
            #expect(try await app.cache.get("profile", as: Profile.self) == nil)
            // Expiry ends a value kept in memory.
            let stopwatch = Stopwatch()
            try await app.cache.set("short", to: Profile(name: "Bob", visits: 1), expiresIn: .seconds(1))
            let bob = try await app.cache.get("short", as: Profile.self)
            let hitsAfter = larder.stats.memoryHits
            if stopwatch.isWithin(.seconds(1)) {
                #expect(bob?.name == "Bob")
                #expect(hitsAfter == hits + 2)
            }
            try await Task.sleep(for: .milliseconds(1100))
            #expect(try await app.cache.get("short", as: Profile.self) == nil)
            #expect(larder.stats.memoryHits == hitsAfter)
            try other.close()
        }
    }

    @Test func valuesAreTheCoresTypedValues() async throws {
        let file = try TemporaryFile()
        try await withApp(configure: { $0.caches.use(.larder(path: file.path)) }) { app in
            try await app.cache.set("profile", to: Profile(name: "Ada", visits: 3))
            try await app.cache.set("bytes", to: Data([1, 2, 3]))
        }
        // Another reader of the file (here the core API itself) decodes them alike.
        let cache = try Larder.Cache(path: file.path)
        #expect(try await cache.value(Profile.self, forKey: "profile") == Profile(name: "Ada", visits: 3))
        #expect(try await cache.data(forKey: "bytes") == Data([1, 2, 3]))
    }

    @Test func valuesSurviveARestartOfTheApplication() async throws {
        let file = try TemporaryFile()
        try await withApp(configure: { $0.caches.use(.larder(path: file.path)) }) { app in
            try await app.cache.set("kept", to: "across restarts")
        }
        try await withApp(configure: { $0.caches.use(.larder(path: file.path)) }) { app async throws in
            #expect(try await app.cache.get("kept", as: String.self) == "across restarts")
        }
    }

    @Test func aFailureOfTheFileAnswersAsAServerError() async throws {
        let file = try TemporaryFile()
        try await withApp(configure: { $0.caches.use(.larder(path: file.path)) }) { app in
            app.get("empty-key") { request async throws -> String in
                try await request.cache.set("", to: "refused")
                return "stored"
            }
            try await app.testing().test(.GET, "empty-key") { response in
                #expect(response.status == .internalServerError)
            }
            let busy = LarderError(.busy, "held")
            #expect(busy.status == .serviceUnavailable)
            #expect(busy.headers.first(name: "Retry-After") == "1")
        }
    }
}

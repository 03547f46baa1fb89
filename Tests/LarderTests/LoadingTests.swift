import Foundation
import Testing
@testable import Larder

struct LoaderFailure: Error, Equatable {
    var attempt = 0
}

/// Waits (in a loader) until `callers` callers share the load of `key`, so that a test knows
/// every one of them joined before the load ends. Gives up after 10 minutes (the assertions then
/// fail): the callers are tasks of Swift's shared pool, which in a parallel test run wait behind
/// other tests for as long as those take, and the loader runs in a task of its own, which no
/// time limit of the test cancels.
func waitForCallers(_ callers: Int, of key: String, in cache: Cache) async {
    let deadline = Date().addingTimeInterval(600)
    while cache.loadCallers(forKey: key) < callers && Date() < deadline {
        try? await Task.sleep(for: .milliseconds(1))
    }
}

@Suite("Read-through")
struct LoadingTests {
    @Test func aMissLoadsStoresAndTheNextCallIsServedFromTheCache() async throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(path: directory.path())
        let loads = LockedCounter()
        let load: @Sendable () async throws -> Article = {
            loads.increment()
            return Article.sample(loads.value)
        }
        #expect(try await cache.value(forKey: "a", orLoad: load) == Article.sample(1))
        #expect(try await cache.value(forKey: "a", orLoad: load) == Article.sample(1))
        #expect(loads.value == 1)
        #expect(try await cache.value(Article.self, forKey: "a") == Article.sample(1))
        let again = try await cache.load(Article.self, forKey: "a", using: load)
        #expect(again.source == .cache && !again.isStale && again.loadError == nil)
        // Raw bytes load as they are.
        let bytes = try await cache.value(forKey: "raw") { Data([9, 8, 7]) }
        #expect(bytes == Data([9, 8, 7]))
        #expect(try cache.bytes(forKey: "raw") == [9, 8, 7])
    }

    /// The load succeeded; that the cache could not keep its value (a read-only handle here) is
    /// no reason to throw it away. Before, the caller got `.readOnly`, or a stale copy with the
    /// store's error as the loader's.
    @Test func aLoadedValueTheCacheCannotKeepIsReturnedAllTheSame() async throws {
        let directory = TemporaryDirectory()
        try Cache(path: directory.path()).set(Article.sample(1), forKey: "old", expiry: .seconds(0.001))
        try await Task.sleep(for: .milliseconds(5))
        let reader = try Cache(path: directory.path(), options: .init(readOnly: true))
        let fresh = try await reader.load(Article.self, forKey: "old") { Article.sample(2) }
        #expect(fresh.value == Article.sample(2) && fresh.source == .loader && fresh.loadError == nil)
        #expect(try await reader.value(forKey: "new") { Article.sample(3) } == Article.sample(3))
        #expect(try reader.bytes(forKey: "new") == nil)
    }

    /// `Data?` is not `Data`: it goes through the coder both ways (before, it was stored raw and
    /// decoded as JSON, and every read-through of it loaded again and threw).
    @Test func anOptionalOfRawBytesRoundTrips() async throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(path: directory.path())
        let bytes: Data? = Data("abc".utf8)
        try cache.set(bytes, forKey: "k")
        #expect(try await cache.value(Data?.self, forKey: "k") == .some(bytes))
        let loads = LockedCounter()
        for _ in 0..<2 {
            let loaded: Data? = try await cache.value(forKey: "u") {
                loads.increment()
                return Data([1, 2])
            }
            #expect(loaded == Data([1, 2]))
        }
        #expect(loads.value == 1)
    }

    @Test func anExpiredEntryIsLoadedAgainWithTheExpiryOfTheCall() async throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(path: directory.path())
        let loads = LockedCounter()
        let load: @Sendable () async throws -> Int = {
            loads.increment()
            return loads.value
        }
        // Stored with an expiry already past: the next call loads again.
        let past = Date(timeIntervalSinceNow: -1)
        #expect(try await cache.value(forKey: "k", expiry: .date(past), orLoad: load) == 1)
        #expect(try await cache.value(forKey: "k", expiry: .date(past), orLoad: load) == 2)
        let result = try await cache.load(Int.self, forKey: "k", expiry: .never, using: load)
        #expect(result.value == 3 && result.source == .loader)
        #expect(try await cache.value(forKey: "k", expiry: .date(past), orLoad: load) == 3)
        #expect(loads.value == 3)
    }

    @Test func oneHundredConcurrentCallersShareOneLoad() async throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(path: directory.path())
        let loads = LockedCounter()
        let values = try await withThrowingTaskGroup(of: Article.self) { group in
            for _ in 0..<100 {
                group.addTask {
                    try await cache.value(Article.self, forKey: "shared") {
                        loads.increment()
                        await waitForCallers(100, of: "shared", in: cache)
                        return Article.sample(42)
                    }
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(loads.value == 1)
        #expect(values.count == 100 && values.allSatisfy { $0 == Article.sample(42) })
        #expect(cache.loadCallers(forKey: "shared") == 0)
        #expect(cache.stats.inserts == 1)
    }

    @Test func eachKeyHasItsOwnFlight() async throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(path: directory.path())
        let keys = (0..<5).map { "key-\($0)" }
        let loads = (0..<5).map { _ in LockedCounter() }
        let results = try await withThrowingTaskGroup(of: (Int, [UInt8]).self) { group in
            for (index, key) in keys.enumerated() {
                for _ in 0..<40 {
                    group.addTask {
                        let value = try await cache.value([UInt8].self, forKey: key) {
                            loads[index].increment()
                            await waitForCallers(40, of: key, in: cache)
                            return pattern(index, count: 1000)
                        }
                        return (index, value)
                    }
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(loads.map(\.value) == [1, 1, 1, 1, 1])
        #expect(results.count == 200 && results.allSatisfy { $0.1 == pattern($0.0, count: 1000) })
    }

    @Test func aFailingLoadIsSharedTooAndTheNextCallTriesAgain() async throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(path: directory.path())
        let loads = LockedCounter()
        let failures = await withTaskGroup(of: LoaderFailure?.self) { group in
            for _ in 0..<50 {
                group.addTask {
                    do {
                        _ = try await cache.value(Int.self, forKey: "down") {
                            loads.increment()
                            await waitForCallers(50, of: "down", in: cache)
                            throw LoaderFailure(attempt: loads.value)
                        }
                        return nil
                    } catch {
                        return error as? LoaderFailure
                    }
                }
            }
            return await group.reduce(into: []) { $0.append($1) }
        }
        #expect(loads.value == 1)
        #expect(failures.count == 50 && failures.allSatisfy { $0 == LoaderFailure(attempt: 1) })
        #expect(!cache.contains("down"))
        // Nothing was cached: the next caller loads anew.
        #expect(try await cache.value(forKey: "down") { 5 } == 5)
    }

    @Test func offlineFirstServesTheExpiredCopyWhenTheLoaderFailsAndSaysItIsStale() async throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(path: directory.path())
        try cache.set(Article.sample(1), forKey: "news", expiry: .date(Date(timeIntervalSinceNow: -1)))
        #expect(try await cache.value(Article.self, forKey: "news") == nil)

        let offline: @Sendable () async throws -> Article = { throw LoaderFailure(attempt: 9) }
        let stale = try await cache.load(Article.self, forKey: "news", policy: .offlineFirst, using: offline)
        #expect(stale.value == Article.sample(1))
        #expect(stale.isStale && stale.source == .stale)
        #expect(stale.loadError as? LoaderFailure == LoaderFailure(attempt: 9))
        // Still expired: nothing was stored.
        #expect(try await cache.value(Article.self, forKey: "news") == nil)

        // Without the fallback, the loader's error comes through.
        await #expect(throws: LoaderFailure.self) {
            try await cache.load(Article.self, forKey: "news", policy: .cacheFirst, using: offline)
        }
        await #expect(throws: LoaderFailure.self) { try await cache.value(forKey: "news", orLoad: offline) }
        // Nor can a key never stored fall back on anything.
        await #expect(throws: LoaderFailure.self) {
            try await cache.load(Article.self, forKey: "never", policy: .offlineFirst, using: offline)
        }

        // Online again: a fresh copy, stored.
        let fresh = try await cache.load(Article.self, forKey: "news", expiry: .seconds(60)) { Article.sample(2) }
        #expect(fresh.value == Article.sample(2) && fresh.source == .loader && !fresh.isStale)
        #expect(try await cache.value(Article.self, forKey: "news") == Article.sample(2))
    }

    @Test func theStaleCopyIsGoneOnceExpiredEntriesAreRemoved() async throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(path: directory.path())
        try cache.set(Article.sample(1), forKey: "news", expiry: .date(Date(timeIntervalSinceNow: -1)))
        #expect(try await cache.removeExpired() == 1)
        await #expect(throws: LoaderFailure.self) {
            try await cache.load(Article.self, forKey: "news") { throw LoaderFailure() }
        }
    }

    @Test func refreshLoadsOverAFreshCopyAndFallsBackOnIt() async throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(path: directory.path())
        try cache.set(1, forKey: "count")
        let refreshed = try await cache.load(Int.self, forKey: "count", policy: .refresh) { 2 }
        #expect(refreshed.value == 2 && refreshed.source == .loader)
        let failed = try await cache.load(Int.self, forKey: "count", policy: .refresh) { throw LoaderFailure() }
        #expect(failed.value == 2 && failed.isStale)
        let strict = LoadPolicy(reloadsFreshValues: true, servesStaleOnFailure: false)
        await #expect(throws: LoaderFailure.self) {
            try await cache.load(Int.self, forKey: "count", policy: strict) { throw LoaderFailure() }
        }
    }

    /// A loader that throws `CancellationError` itself (it cancelled its request) failed as any
    /// loader does: the stale copy stands in. Only the caller's own cancellation skips it.
    @Test func aLoaderThatThrowsCancellationFallsBackOnTheStaleCopy() async throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(path: directory.path())
        try cache.set(1, forKey: "count")
        let failed = try await cache.load(Int.self, forKey: "count", policy: .refresh) { throw CancellationError() }
        #expect(failed.value == 1 && failed.isStale && failed.loadError is CancellationError)
    }

    /// A `.refresh` caller that comes while a cache-first load of its key is in flight gets a
    /// load of its own: the other load may answer from the cache, which it asked not to.
    @Test func aRefreshDoesNotShareACacheFirstLoad() async throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(path: directory.path())
        let release = LockedCounter()
        let first = Task {
            try await cache.value(Int.self, forKey: "k") {
                // Until the refresh is done, or for two seconds, should it be waiting for this.
                let deadline = Date().addingTimeInterval(2)
                while release.value == 0 && Date() < deadline { try await Task.sleep(for: .milliseconds(1)) }
                return 1
            }
        }
        await waitForCallers(1, of: "k", in: cache)
        let loads = LockedCounter()
        let refresh = Task {
            try await cache.load(Int.self, forKey: "k", policy: .refresh) {
                loads.increment()
                return 2
            }
        }
        let refreshed = try await refresh.value
        release.increment()
        #expect(try await first.value == 1)
        #expect(refreshed.value == 2 && refreshed.source == .loader && loads.value == 1)
        // The slower load began first: its older value does not go over the refresh's.
        #expect(try await cache.value(Int.self, forKey: "k") == 2)
    }

    /// A value set while a load runs (an invalidation: the program learnt something newer) is
    /// not written over by the load's older value; the load's callers get theirs all the same.
    @Test func aLoadDoesNotWriteOverAValueSetWhileItRan() async throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(path: directory.path())
        let started = LockedCounter(), release = LockedCounter()
        let load = Task {
            try await cache.value(Int.self, forKey: "k") {
                started.increment()
                while release.value == 0 { try await Task.sleep(for: .milliseconds(1)) }
                return 1
            }
        }
        while started.value == 0 { try await Task.sleep(for: .milliseconds(1)) }
        try cache.set(99, forKey: "k")
        release.increment()
        #expect(try await load.value == 1)
        #expect(try await cache.value(Int.self, forKey: "k") == 99)
    }

    /// A handle closed while a load it started runs does not fail the callers that joined the
    /// load through another handle of the file.
    @Test func closingTheHandleThatStartedALoadFailsNoOtherHandlesCaller() async throws {
        let directory = TemporaryDirectory()
        let first = try Cache(path: directory.path())
        let second = try Cache(path: directory.path())
        let release = LockedCounter()
        let load: @Sendable () async throws -> Int = {
            while release.value == 0 { try await Task.sleep(for: .milliseconds(1)) }
            return 5
        }
        let a = Task { try await first.value(Int.self, forKey: "k", orLoad: load) }
        await waitForCallers(1, of: "k", in: first)
        let b = Task { try await second.value(Int.self, forKey: "k", orLoad: load) }
        await waitForCallers(2, of: "k", in: second)
        try first.close()
        release.increment()
        #expect(try await b.value == 5)
        _ = try? await a.value
    }

    /// A loader that asks the cache to load its own key would wait for itself for good: it is
    /// refused instead.
    @Test(.failsIfItHangs) func aLoaderLoadingItsOwnKeyIsRefused() async throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(path: directory.path())
        let thrown = await #expect(throws: LarderError.self) {
            try await cache.value(Int.self, forKey: "k") {
                try await cache.value(Int.self, forKey: "k") { 1 }
            }
        }
        #expect(thrown?.code == .invalidArgument)
        // Another key is another load.
        #expect(try await cache.value(Int.self, forKey: "outer") { try await cache.value(Int.self, forKey: "inner") { 2 } } == 2)
    }

    /// Once every caller of a load has been cancelled, the next caller starts a load of its own
    /// rather than join one that may never end.
    @Test(.failsIfItHangs) func aLoadEveryCallerLeftIsNotJoined() async throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(path: directory.path())
        let release = LockedCounter()
        let stuck = Task {
            try await cache.value(Int.self, forKey: "k") {
                while release.value == 0 { try? await Task.sleep(for: .milliseconds(1)) }
                return 1
            }
        }
        await waitForCallers(1, of: "k", in: cache)
        stuck.cancel()
        await #expect(throws: CancellationError.self) { try await stuck.value }
        #expect(cache.loadCallers(forKey: "k") == 0)
        #expect(try await cache.value(Int.self, forKey: "k") { 2 } == 2)
        release.increment()
    }

    @Test func aCachedValueThatNoLongerDecodesIsLoadedAnew() async throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(path: directory.path())
        try cache.set("an older shape", forKey: "article")
        let loaded = try await cache.load(Article.self, forKey: "article") { Article.sample(3) }
        #expect(loaded.value == Article.sample(3) && loaded.source == .loader)
        #expect(try await cache.value(Article.self, forKey: "article") == Article.sample(3))
    }

    @Test func aCancelledCallerStopsWaitingWhileTheOthersGetTheValue() async throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(path: directory.path())
        let release = LockedCounter()
        let load: @Sendable () async throws -> Int = {
            while release.value == 0 { try? await Task.sleep(for: .milliseconds(1)) }
            return 7
        }
        let patient = Task { try await cache.value(Int.self, forKey: "slow", orLoad: load) }
        let impatient = Task { try await cache.value(Int.self, forKey: "slow", orLoad: load) }
        await waitForCallers(2, of: "slow", in: cache)
        impatient.cancel()
        await #expect(throws: CancellationError.self) { try await impatient.value }
        release.increment()
        #expect(try await patient.value == 7)
        // The shared load finished and stored its value although one caller left.
        #expect(try await cache.value(Int.self, forKey: "slow") == 7)
    }

    /// A load a caller started in the background runs at the priority of a more urgent caller
    /// that joins it, which would otherwise wait for it at background priority.
    @Test func aLoadRunsAtThePriorityOfItsMostUrgentCaller() async throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(path: directory.path())
        let load: @Sendable () async throws -> UInt8 = {
            await waitForCallers(2, of: "image", in: cache)
            // The joining caller raises the load just after it has joined.
            let deadline = Date().addingTimeInterval(30)
            while Task.currentPriority < .high && Date() < deadline { try? await Task.sleep(for: .milliseconds(1)) }
            return Task.currentPriority.rawValue
        }
        let prefetch = Task(priority: .background) { try await cache.value(UInt8.self, forKey: "image", orLoad: load) }
        await waitForCallers(1, of: "image", in: cache)
        let needed = Task(priority: .high) { try await cache.value(UInt8.self, forKey: "image", orLoad: load) }
        #expect(try await needed.value == TaskPriority.high.rawValue)
        #expect(try await prefetch.value == TaskPriority.high.rawValue)
    }

    @Test func aLoadedValueTooLargeToKeepIsStillReturned() async throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(at: directory.path(), capacity: 1 << 20)
        let huge = Data(pattern(3, count: 2 << 20))
        #expect(try await cache.value(forKey: "huge") { huge } == huge)
        #expect(!cache.contains("huge"))
    }

    @Test func twoHandlesOnOneFileShareLoads() async throws {
        let directory = TemporaryDirectory()
        let first = try Cache(path: directory.path())
        let second = try Cache(path: directory.path())
        let loads = LockedCounter()
        async let a = first.value(Int.self, forKey: "k") {
            loads.increment()
            await waitForCallers(2, of: "k", in: first)
            return 1
        }
        async let b = second.value(Int.self, forKey: "k") {
            loads.increment()
            await waitForCallers(2, of: "k", in: second)
            return 2
        }
        let values = try await [a, b]
        #expect(loads.value == 1)
        #expect(values[0] == values[1])
    }
}

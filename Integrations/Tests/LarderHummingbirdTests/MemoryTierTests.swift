import Foundation
import Hummingbird
import IntegrationTestSupport
import Larder
import LarderHummingbird
import Testing

/// The driver's reads through the cache's memory tier: objects kept decoded, never past their
/// deadline, never hiding a write of another handle.
@Suite("Persist driver in memory")
struct MemoryTierTests {
    @Test func aSecondReadIsAMemoryHit() async throws {
        let file = try TemporaryFile()
        let cache = try Cache(path: file.path)
        let driver = LarderPersistDriver(cache: cache)
        try await driver.create(key: "account", value: Account(name: "Ada", credits: 3))
        #expect(try await driver.get(key: "account", as: Account.self) == Account(name: "Ada", credits: 3))
        let hits = cache.stats.memoryHits
        #expect(try await driver.get(key: "account", as: Account.self) == Account(name: "Ada", credits: 3))
        #expect(try await driver.getWithTTL(key: "account", as: Account.self)?.object == Account(name: "Ada", credits: 3))
        #expect(cache.stats.memoryHits == hits + 2)
        // A value set is kept as it is written: its first read is a hit too.
        try await driver.set(key: "page", value: "<p>kept</p>")
        #expect(try await driver.get(key: "page", as: String.self) == "<p>kept</p>")
        #expect(cache.stats.memoryHits == hits + 3)
        // Another type of the same key is no hit, and still an invalid conversion.
        await #expect(throws: PersistError.invalidConversion) { try await driver.get(key: "account", as: [String].self) }
        #expect(cache.stats.memoryHits == hits + 3)
    }

    @Test func bytesAreNotKeptInMemory() async throws {
        let file = try TemporaryFile()
        let cache = try Cache(path: file.path)
        let driver = LarderPersistDriver(cache: cache)
        try await driver.set(key: "data", value: Data([1, 2, 3]))
        #expect(try await driver.get(key: "data", as: Data.self) == Data([1, 2, 3]))
        #expect(try await driver.get(key: "data", as: Data.self) == Data([1, 2, 3]))
        #expect(cache.memoryUsage.count == 0)
        #expect(cache.stats.memoryHits == 0)
    }

    @Test func aRememberedObjectEndsAtItsDeadline() async throws {
        let file = try TemporaryFile()
        let cache = try Cache(path: file.path)
        let driver = LarderPersistDriver(cache: cache)
        let stopwatch = Stopwatch()
        try await driver.set(key: "token", value: "short", expires: .milliseconds(300))
        let remembered = try await driver.getWithTTL(key: "token", as: String.self)
        let hits = cache.stats.memoryHits
        if stopwatch.isWithin(.milliseconds(300)) {
            #expect(remembered?.object == "short" && remembered?.ttl.map { $0 <= .milliseconds(300) } == true)
            #expect(hits == 1)
        }
        try await Task.sleep(for: .milliseconds(400))
        #expect(try await driver.get(key: "token", as: String.self) == nil)
        #expect(try await driver.getWithTTL(key: "token", as: String.self) == nil)
        #expect(cache.stats.memoryHits == hits)
    }

    @Test func aRememberedObjectNeverHidesAnotherHandlesWrite() async throws {
        let file = try TemporaryFile()
        let driver = try LarderPersistDriver(path: file.path)
        // Another handle on the file: what another process's driver writes.
        let other = try LarderPersistDriver(path: file.path)
        try await driver.set(key: "session", value: Account(name: "Ada", credits: 1), expires: .seconds(60))
        #expect(try await driver.get(key: "session", as: Account.self)?.credits == 1)
        try await other.set(key: "session", value: Account(name: "Ada", credits: 2), expires: .seconds(5))
        let changed = try #require(try await driver.getWithTTL(key: "session", as: Account.self))
        #expect(changed.object.credits == 2 && changed.ttl.map { $0 <= .seconds(5) } == true)
        try await other.remove(key: "session")
        #expect(try await driver.get(key: "session", as: Account.self) == nil)
        // A key created elsewhere after a removal here.
        try await driver.set(key: "claim", value: "mine")
        try await driver.remove(key: "claim")
        try await other.create(key: "claim", value: "theirs", expires: nil)
        #expect(try await driver.get(key: "claim", as: String.self) == "theirs")
        try await driver.shutdown()
        try await other.shutdown()
    }
}

import Foundation
import Hummingbird
import IntegrationTestSupport
import Larder
import LarderHummingbird
import Testing

struct Account: Codable, Equatable, Sendable {
    var name: String
    var credits: Int
}

/// The persist driver's contract, checked on Larder's driver and, as the reference, on
/// Hummingbird's memory driver: the same test passes on both.
@Suite("Persist driver")
struct PersistDriverTests {
    /// A driver of each kind, over a new file for Larder's.
    static let drivers: [@Sendable (TemporaryFile) throws -> any PersistDriver] = [
        { try LarderPersistDriver(path: $0.path) },
        { _ in MemoryPersistDriver() },
    ]

    @Test(arguments: 0..<2)
    func createStoresANewKeyAndRefusesAnExistingOne(driver kind: Int) async throws {
        let file = try TemporaryFile()
        let driver = try Self.drivers[kind](file)
        try await driver.create(key: "account", value: Account(name: "Ada", credits: 3))
        await #expect(throws: PersistError.duplicate) {
            try await driver.create(key: "account", value: Account(name: "Bob", credits: 0))
        }
        #expect(try await driver.get(key: "account", as: Account.self) == Account(name: "Ada", credits: 3))
        // Removed, the key can be created again.
        try await driver.remove(key: "account")
        #expect(try await driver.get(key: "account", as: Account.self) == nil)
        try await driver.create(key: "account", value: Account(name: "Bob", credits: 0))
        #expect(try await driver.get(key: "account", as: Account.self)?.name == "Bob")
    }

    /// Larder's driver only: the memory driver refuses an expired key until its next tidy.
    @Test func anExpiredKeyIsGoneAndCanBeCreatedAgain() async throws {
        let file = try TemporaryFile()
        let driver = try LarderPersistDriver(path: file.path)
        let stopwatch = Stopwatch()
        try await driver.create(key: "token", value: "first", expires: .milliseconds(200))
        let first = try await driver.get(key: "token", as: String.self)
        if stopwatch.isWithin(.milliseconds(200)) { #expect(first == "first") }
        try await Task.sleep(for: .milliseconds(300))
        #expect(try await driver.get(key: "token", as: String.self) == nil)
        #expect(try await driver.getWithTTL(key: "token", as: String.self) == nil)
        try await driver.create(key: "token", value: "second", expires: .seconds(60))
        #expect(try await driver.get(key: "token", as: String.self) == "second")
    }

    @Test(arguments: 0..<2)
    func getWithTTLReportsTheTimeLeft(driver kind: Int) async throws {
        let file = try TemporaryFile()
        let driver = try Self.drivers[kind](file)
        let stopwatch = Stopwatch()
        try await driver.set(key: "timed", value: 1, expires: .seconds(30))
        try await driver.set(key: "untimed", value: 2, expires: nil)
        let timed = try #require(try await driver.getWithTTL(key: "timed", as: Int.self))
        let elapsed = stopwatch.elapsed
        #expect(timed.object == 1)
        let ttl = try #require(timed.ttl)
        // What is left of the 30 s, to the clocks' rounding, however long the calls took.
        #expect(ttl > .seconds(30) - elapsed - .milliseconds(100) && ttl <= .seconds(30))
        let untimed = try #require(try await driver.getWithTTL(key: "untimed", as: Int.self))
        #expect(untimed.object == 2 && untimed.ttl == nil)
        #expect(try await driver.getWithTTL(key: "missing", as: Int.self) == nil)
    }

    @Test(arguments: 0..<2)
    func setWithoutExpiryKeepsTheEarlierDeadline(driver kind: Int) async throws {
        let file = try TemporaryFile()
        let driver = try Self.drivers[kind](file)
        let stopwatch = Stopwatch()
        try await driver.set(key: "session", value: "v1", expires: .milliseconds(300))
        try await driver.set(key: "session", value: "v2", expires: nil)
        let replaced = try await driver.getWithTTL(key: "session", as: String.self)
        if stopwatch.isWithin(.milliseconds(300)) {
            #expect(replaced?.object == "v2")
            #expect(replaced?.ttl.map { $0 <= .milliseconds(300) } == true)
        }
        // The earlier deadline holds: gone after it.
        try await Task.sleep(for: .milliseconds(400))
        #expect(try await driver.get(key: "session", as: String.self) == nil)
        // A new deadline replaces the earlier one.
        try await driver.set(key: "session", value: "v3", expires: .milliseconds(200))
        try await driver.set(key: "session", value: "v4", expires: .seconds(60))
        try await Task.sleep(for: .milliseconds(300))
        #expect(try await driver.get(key: "session", as: String.self) == "v4")
    }

    @Test(arguments: 0..<2)
    func aValueReadAsAnotherTypeIsAnInvalidConversion(driver kind: Int) async throws {
        let file = try TemporaryFile()
        let driver = try Self.drivers[kind](file)
        try await driver.set(key: "account", value: Account(name: "Ada", credits: 3))
        await #expect(throws: PersistError.invalidConversion) {
            try await driver.get(key: "account", as: [String].self)
        }
        await #expect(throws: PersistError.invalidConversion) {
            try await driver.getWithTTL(key: "account", as: Int.self)
        }
    }

    @Test func valuesSurviveANewDriverOnTheSameFile() async throws {
        let file = try TemporaryFile()
        let first = try LarderPersistDriver(path: file.path)
        let stopwatch = Stopwatch()
        try await first.set(key: "kept", value: Account(name: "Ada", credits: 3), expires: .seconds(60))
        try await first.shutdown()
        await #expect(throws: LarderError.self) { try await first.get(key: "kept", as: Account.self) }

        let second = try LarderPersistDriver(path: file.path)
        let kept = try #require(try await second.getWithTTL(key: "kept", as: Account.self))
        #expect(kept.object == Account(name: "Ada", credits: 3))
        #expect(try #require(kept.ttl) > .seconds(60) - stopwatch.elapsed - .milliseconds(100))
    }

    @Test func aDriverOverACacheItWasGivenLeavesItOpen() async throws {
        let file = try TemporaryFile()
        let cache = try Cache(path: file.path)
        let driver = LarderPersistDriver(cache: cache)
        try await driver.set(key: "k", value: "v")
        try await driver.shutdown()
        #expect(try await LarderPersistDriver(cache: cache).get(key: "k", as: String.self) == "v")
    }

    @Test func textAndBytesAreStoredAsTheyAreAfterTheDeadline() async throws {
        let file = try TemporaryFile()
        let cache = try Cache(path: file.path)
        let driver = LarderPersistDriver(cache: cache)
        let page = #"{"title":"a \"quoted\" word"}"#
        try await driver.set(key: "text", value: page)
        try await driver.set(key: "data", value: Data([0, 1, 2]))
        try await driver.set(key: "array", value: [UInt8]([3, 4]))
        try await driver.set(key: "account", value: Account(name: "Ada", credits: 3))
        // A header of 9 bytes (form, deadline), then the value's own bytes.
        #expect(try await cache.data(forKey: "text")?.dropFirst(9) == Data(page.utf8))
        #expect(try await cache.data(forKey: "data")?.dropFirst(9) == Data([0, 1, 2]))
        let coded = try #require(try await cache.data(forKey: "account")).dropFirst(9)
        #expect(try JSONDecoder().decode(Account.self, from: coded) == Account(name: "Ada", credits: 3))
        #expect(try await driver.get(key: "text", as: String.self) == page)
        #expect(try await driver.get(key: "data", as: Data.self) == Data([0, 1, 2]))
        #expect(try await driver.get(key: "array", as: [UInt8].self) == [3, 4])
        // Each form reads as its own type only.
        await #expect(throws: PersistError.invalidConversion) { try await driver.get(key: "text", as: Data.self) }
        await #expect(throws: PersistError.invalidConversion) { try await driver.get(key: "account", as: String.self) }
        // Bytes another writer stored are no value of the driver's.
        try await cache.set(Data("x".utf8), forKey: "foreign")
        await #expect(throws: PersistError.invalidConversion) { try await driver.get(key: "foreign", as: String.self) }
    }

    @Test func badInputIsALarderErrorAndLosesNothing() async throws {
        let file = try TemporaryFile()
        let driver = try LarderPersistDriver(path: file.path)
        try await driver.set(key: "k", value: "kept")
        await #expect(throws: LarderError.self) { try await driver.set(key: "", value: "x") }
        await #expect(throws: LarderError.self) { try await driver.create(key: String(repeating: "k", count: 5000), value: "x") }
        #expect(try await driver.get(key: "k", as: String.self) == "kept")
        #expect(LarderError(.busy, "held").status == .serviceUnavailable)
        #expect(LarderError(.io, "failed").status == .internalServerError)
    }
}

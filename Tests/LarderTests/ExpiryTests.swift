import Foundation
import Testing
@testable import Larder

@Suite("Expiry")
struct ExpiryTests {
    @Test(.waitsOnItsOwnThreads) func anEntryIsNotReturnedAfterItsTime() throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(path: directory.path())
        try cache.set([1], forKey: "short", expiry: .seconds(0.05))
        try cache.set([2], forKey: "long", expiry: .seconds(3600))
        try cache.set([3], forKey: "forever", expiry: .never)
        // Before its time: an hour's expiry, which no slow machine outlasts.
        #expect(try cache.bytes(forKey: "long") == [2])
        Thread.sleep(forTimeInterval: 0.1)
        #expect(try cache.bytes(forKey: "short") == nil)
        #expect(!cache.contains("short"))
        #expect(try cache.withValue(forKey: "short") { _ in true } == nil)
        #expect(try cache.bytes(forKey: "long") == [2])
        #expect(try cache.bytes(forKey: "forever") == [3])
    }

    /// NaN is no time: the write is refused and the value stored before stays (before, an entry
    /// expired at once replaced it).
    @Test func anExpiryThatIsNotANumberIsRefused() throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(path: directory.path())
        try cache.set([1], forKey: "a")
        for expiry in [Expiry.seconds(.nan), .date(Date(timeIntervalSince1970: .nan))] {
            #expect(errorCode { try cache.set([2], forKey: "a", expiry: expiry) } == .invalidArgument)
        }
        #expect(errorCode { _ = try Cache(path: directory.path("b"), options: .init(defaultExpiry: .seconds(.nan))).set([1], forKey: "x") }
                == .invalidArgument)
        #expect(try cache.bytes(forKey: "a") == [1])
    }

    @Test func datesInThePastExpireAtOnceAndFutureDatesHold() throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(path: directory.path())
        try cache.set([1], forKey: "past", expiry: .date(Date(timeIntervalSinceNow: -10)))
        try cache.set([2], forKey: "future", expiry: .date(Date(timeIntervalSinceNow: 3600)))
        try cache.set([3], forKey: "zero", expiry: .seconds(0))
        #expect(try cache.bytes(forKey: "past") == nil)
        #expect(try cache.bytes(forKey: "zero") == nil)
        #expect(try cache.bytes(forKey: "future") == [2])
    }

    @Test(.waitsOnItsOwnThreads) func theDefaultExpiryAppliesWhenAWriteNamesNone() throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(at: directory.path(), expiry: .seconds(0.05))
        try cache.set([1], forKey: "default")
        try cache.set([2], forKey: "explicit", expiry: .never)
        Thread.sleep(forTimeInterval: 0.1)
        #expect(try cache.bytes(forKey: "default") == nil)
        #expect(try cache.bytes(forKey: "explicit") == [2])
    }

    @Test(.waitsOnItsOwnThreads) func expiryPersistsAcrossReopen() throws {
        let directory = TemporaryDirectory()
        do {
            let cache = try Cache(path: directory.path())
            try cache.set([1], forKey: "short", expiry: .seconds(0.05))
            try cache.close()
        }
        Thread.sleep(forTimeInterval: 0.1)
        let cache = try Cache(path: directory.path())
        #expect(try cache.bytes(forKey: "short") == nil)
    }

    @Test(.waitsOnItsOwnThreads) func expiredEntriesAreReclaimedBeforeLiveOnes() throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(at: directory.path(), capacity: 1 << 20)
        for index in 0..<50 { try cache.set(pattern(index, count: 5_000), forKey: "old\(index)", expiry: .seconds(0.05)) }
        Thread.sleep(forTimeInterval: 0.1)
        for index in 0..<300 { try cache.set(pattern(index, count: 5_000), forKey: "new\(index)") }
        let stats = cache.stats
        #expect(stats.expirations == 50)
        #expect(cache.count <= 300)
        #expect(try cache.bytes(forKey: "new299") == pattern(299, count: 5_000))
    }

    @Test(.waitsOnItsOwnThreads) func removingAnExpiredKeyReportsNothingRemoved() throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(path: directory.path())
        try cache.set([1], forKey: "a", expiry: .seconds(0.01))
        Thread.sleep(forTimeInterval: 0.05)
        #expect(try !cache.removeValue(forKey: "a"))
        #expect(cache.count == 0)
    }
}

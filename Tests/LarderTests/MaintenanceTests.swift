import Foundation
import Testing
@testable import Larder

@Suite("Maintenance")
struct MaintenanceTests {
    @Test(.waitsOnItsOwnThreads) func removeExpiredRemovesOnlyTheExpired() throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(path: directory.path())
        let past = Date(timeIntervalSinceNow: -1)
        for index in 0..<30 { try cache.set(pattern(index, count: 100), forKey: "expired-\(index)", expiry: .date(past)) }
        for index in 0..<20 { try cache.set(pattern(index, count: 100), forKey: "long-\(index)", expiry: .seconds(3600)) }
        try cache.set([1], forKey: "forever")
        try cache.set([2], forKey: "short", expiry: .seconds(0.05))
        Thread.sleep(forTimeInterval: 0.1)
        // Expired entries count until they are reclaimed.
        #expect(cache.count == 52)
        #expect(try cache.removeExpired() == 31)
        #expect(cache.count == 21)
        #expect(cache.stats.expirations == 31)
        #expect(try cache.removeExpired() == 0)
        for index in 0..<20 { #expect(try cache.bytes(forKey: "long-\(index)") == pattern(index, count: 100)) }
        #expect(try cache.bytes(forKey: "forever") == [1])
        #expect(cache.totalBytes == 20 * 100 + 1)
    }

    @Test(.waitsOnItsOwnThreads) func removeOlderThanIsALimitByAge() throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(path: directory.path())
        // Stored an hour before `between`: no stall of a loaded machine closes that gap.
        let between = Date()
        let storedAt = UInt64(between.timeIntervalSince1970 * 1000) - 3_600_000
        for index in 0..<10 {
            try Array("old-\(index)".utf8).withUnsafeBytes { key in
                try [UInt8(index)].withUnsafeBytes { value in
                    try cache.write { _ throws(LarderError) in
                        try cache.store.put(key: key, value: value, compress: false, expiry: .seconds(7200), storedAt: storedAt)
                    }
                }
            }
        }
        for index in 0..<5 { try cache.set([UInt8(index)], forKey: "new-\(index)") }
        // Reading does not make an entry younger.
        #expect(try cache.bytes(forKey: "old-3") == [3])
        #expect(try cache.removeOlder(than: .infinity) == 0)
        // Older than anything written since `between`, younger than anything written before.
        #expect(try cache.removeOlder(than: Date().timeIntervalSince(between) + 1800) == 10)
        #expect(cache.count == 5)
        #expect(try cache.keys.allSatisfy { $0.starts(with: Data("new-".utf8)) })
        #expect(cache.stats.removals == 10)
        #expect(throws: LarderError(.invalidArgument, "the age must be zero or more seconds, not -1.0", path: directory.path())) {
            try cache.removeOlder(than: -1)
        }
        #expect(throws: LarderError.self) { try cache.removeOlder(than: .nan) }
        // Every entry is older than no time at all once a millisecond (the stamps' unit) has passed.
        Thread.sleep(forTimeInterval: 0.01)
        #expect(try cache.removeOlder(than: 0) == 5)
        #expect(cache.count == 0)
    }

    /// A negative limit is a mistake, not a request to empty the cache (which it did).
    @Test func aNegativeTrimLimitIsRefused() throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(path: directory.path())
        try cache.set([1], forKey: "a")
        #expect(errorCode { try cache.trim(toBytes: -1) } == .invalidArgument)
        #expect(errorCode { try cache.trim(toCount: -1) } == .invalidArgument)
        #expect(cache.count == 1)
    }

    @Test func trimToCountKeepsTheRecentlyReadThenTheNewest() throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(path: directory.path())
        for index in 0..<100 { try cache.set(pattern(index, count: 200), forKey: "k\(index)") }
        // Read the ten oldest: they become the most recently used.
        for index in 0..<10 { #expect(try cache.bytes(forKey: "k\(index)") != nil) }
        #expect(try cache.trim(toCount: 20) == 80)
        #expect(cache.count == 20)
        let kept = Set(try cache.keys.map { String(decoding: $0, as: UTF8.self) })
        #expect(kept == Set((0..<10).map { "k\($0)" } + (90..<100).map { "k\($0)" }))
        for index in 0..<10 { #expect(try cache.bytes(forKey: "k\(index)") == pattern(index, count: 200)) }
        #expect(cache.stats.evictions == 80)
        #expect(try cache.trim(toCount: 50) == 0)
        #expect(try cache.trim(toCount: 0) == 20)
        #expect(cache.count == 0 && cache.totalBytes == 0)
    }

    @Test(.waitsOnItsOwnThreads) func trimToBytesEvictsTheExpiredFirstThenTheLeastRecentlyUsed() throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(path: directory.path())
        for index in 0..<50 { try cache.set(pattern(index, count: 1_000), forKey: "k\(index)") }
        for index in 50..<55 { try cache.set(pattern(index, count: 1_000), forKey: "k\(index)", expiry: .seconds(0.05)) }
        Thread.sleep(forTimeInterval: 0.1)
        for index in [3, 7, 11] { _ = try cache.data(forKey: "k\(index)") }
        #expect(try cache.trim(toBytes: 15_500) == 35)
        #expect(cache.totalBytes == 15_000)
        let kept = Set(try cache.keys.map { String(decoding: $0, as: UTF8.self) })
        #expect(kept == Set([3, 7, 11].map { "k\($0)" } + (38..<50).map { "k\($0)" }))
        #expect(cache.stats.expirations == 5)
    }

    @Test func aTrimmedCacheKeepsWorkingAndReopensClean() throws {
        let directory = TemporaryDirectory()
        var model: [String: [UInt8]] = [:]
        do {
            let cache = try Cache(at: directory.path(), capacity: 1 << 20)
            for round in 0..<6 {
                for index in 0..<400 {
                    let key = "r\(round)-\(index)"
                    let value = pattern(round * 1000 + index, count: 50 + index % 2000)
                    try cache.set(value, forKey: key)
                    model[key] = value
                }
                try cache.trim(toBytes: 200_000)
                try cache.trim(toCount: 150)
                #expect(cache.totalBytes <= 200_000 && cache.count <= 150)
                #expect(cache.fileBytes <= 1 << 20)
            }
            let keys = try cache.keys
            #expect(keys.count == cache.count)
            for key in keys {
                let name = String(decoding: key, as: UTF8.self)
                #expect(try cache.bytes(forKey: key) == model[name], "\(name)")
            }
            try cache.close()
        }
        let cache = try Cache(path: directory.path())
        #expect(!cache.wasRecovered)
        #expect(cache.count <= 150)
        for key in try cache.keys {
            #expect(try cache.bytes(forKey: key) == model[String(decoding: key, as: UTF8.self)])
        }
    }

    @Test func trimmingWhileTheIndexGrowsSeesBothTables() throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(at: directory.path(), capacity: 16 << 20)
        // Enough small entries that the index doubles, and stop while it drains.
        var index = 0
        while cache.entry.store.draining == nil || index < 1000 {
            try cache.set([UInt8(truncatingIfNeeded: index)], forKey: "k\(index)")
            index += 1
            if index > 200_000 { break }
        }
        #expect(cache.entry.store.draining != nil)
        let before = cache.count
        #expect(try cache.keys.count == before)
        #expect(try cache.trim(toCount: before / 2) == before - before / 2)
        #expect(try cache.keys.count == before / 2)
        #expect(try cache.removeAll(withPrefix: "k") == before / 2)
        #expect(cache.count == 0)
    }

    @Test func asyncOverloadsDoTheSame() async throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(path: directory.path())
        for index in 0..<20 { try cache.set(pattern(index, count: 100), forKey: "k\(index)", expiry: index < 5 ? .seconds(0.01) : .never) }
        try await Task.sleep(for: .milliseconds(50))
        #expect(try await cache.removeExpired() == 5)
        #expect(try await cache.trim(toCount: 10) == 5)
        #expect(try await cache.trim(toBytes: 500) == 5)
        #expect(try await cache.removeOlder(than: 0) == 5)
        #expect(cache.count == 0)
    }

    @Test func aReadOnlyOrClosedCacheRefusesMaintenance() throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(path: directory.path())
        try cache.set([1], forKey: "k")
        let reader = try Cache(at: directory.path(), readOnly: true)
        #expect(throws: LarderError.self) { try reader.trim(toCount: 0) }
        #expect(throws: LarderError.self) { try reader.removeExpired() }
        #expect(try reader.keys == [Data("k".utf8)])
        try cache.close()
        #expect(throws: LarderError.self) { try cache.trim(toBytes: 0) }
        #expect(throws: LarderError.self) { try cache.keys }
    }
}

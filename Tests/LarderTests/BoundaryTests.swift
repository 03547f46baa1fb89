import Foundation
import Testing
@testable import Larder

/// Every page size against every value size around the page and header boundaries.
@Suite("Boundaries")
struct BoundaryTests {
    static let pageSizes = [4096, 8192, 16384, 65536]

    static func valueSizes(pageSize: Int) -> [Int] {
        let header = 48
        return [0, 1, 15, 16, 17, pageSize - header - 1, pageSize - header, pageSize - 1, pageSize, pageSize + 1,
                3 * pageSize + 7, 5 * pageSize]
    }

    @Test(arguments: pageSizes)
    func valuesOfEverySizeRoundTripAndSurviveReopen(pageSize: Int) throws {
        let directory = TemporaryDirectory()
        let sizes = Self.valueSizes(pageSize: pageSize)
        do {
            let cache = try Cache(at: directory.path(), capacity: 4 << 20, pageSize: pageSize)
            for (index, size) in sizes.enumerated() {
                try cache.set(pattern(index, count: size), forKey: "v\(size)")
                #expect(try cache.bytes(forKey: "v\(size)") == pattern(index, count: size), "size \(size)")
            }
            try cache.close()
        }
        let cache = try Cache(at: directory.path(), pageSize: 4096)
        for (index, size) in sizes.enumerated() {
            #expect(try cache.bytes(forKey: "v\(size)") == pattern(index, count: size), "size \(size) after reopen")
            #expect(try cache.withValue(forKey: "v\(size)") { $0.count } == size)
        }
        #expect(cache.count == sizes.count)
    }

    @Test(arguments: [1, 2, 100, 4095, 4096])
    func keysOfEveryLengthUpToTheLimitWork(length: Int) throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(path: directory.path())
        let key = pattern(length, count: length)
        try cache.set([UInt8(length & 0xFF)], forKey: key)
        #expect(try cache.bytes(forKey: key) == [UInt8(length & 0xFF)])
    }

    @Test func theLargestValueTheCacheAdvertisesFits() throws {
        // A value of a large fraction of the capacity is accepted even when the cache is full.
        let directory = TemporaryDirectory()
        let capacity = 8 << 20
        let cache = try Cache(at: directory.path(), capacity: capacity)
        for index in 0..<100 { try cache.set(pattern(index, count: 40_000), forKey: "fill\(index)") }
        let big = pattern(-7, count: 3 << 20)
        try cache.set(big, forKey: "big")
        #expect(try cache.bytes(forKey: "big") == big)
        #expect(cache.fileBytes <= capacity)
        try cache.set(pattern(1, count: 10), forKey: "small")
        #expect(try cache.bytes(forKey: "big") == big)
    }

    /// A put that makes the index double places a new segment in the ring first; a value that
    /// fitted before that is then placed or refused as too large, never reported as damage.
    @Test(arguments: [-66, -4_096, -9_000])
    func aLargeValueThatMakesTheIndexGrowIsPlacedOrRefusedAsTooLarge(margin: Int) throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(at: directory.path(), capacity: 256 << 10)
        let store = cache.entry.store
        var count = 0
        while store.state.entryCount < store.active.loadLimit {
            try cache.set([UInt8(truncatingIfNeeded: count)], forKey: "k\(count)")
            count += 1
        }
        let value = pattern(3, count: store.largestPlaceableRecord + margin)
        do {
            try cache.set(value, forKey: "big")
            #expect(try cache.bytes(forKey: "big") == value)
        } catch {
            #expect(error.code == .tooLarge, "\(error)")
        }
        try cache.set([1], forKey: "after")
        #expect(try cache.bytes(forKey: "after") == [1])
    }

    @Test func aValueLargerThanTheCapacityIsRejectedAndLosesNothing() throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(at: directory.path(), capacity: 1 << 20)
        try cache.set([1, 2, 3], forKey: "keep")
        do {
            try cache.set(pattern(0, count: 2 << 20), forKey: "huge")
            Issue.record("expected tooLarge")
        } catch {
            #expect(error.code == .tooLarge)
        }
        #expect(try cache.bytes(forKey: "keep") == [1, 2, 3])
        #expect(try cache.bytes(forKey: "huge") == nil)
    }
}

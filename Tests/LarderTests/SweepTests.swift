import Foundation
import Testing
@testable @_spi(Inspection) import Larder

/// The automatic sweep (`Cache.Options.sweepInterval`).
@Suite("Sweep")
struct SweepTests {
    /// Expired at once: a deadline in the past.
    private static let past = Expiry.date(Date(timeIntervalSince1970: 1))

    /// Whether the file at `path` holds an indexed entry that is expired now.
    private func holdsAnExpiredEntry(_ path: String) throws -> Bool {
        let inspector = try FileInspector(path: path)
        let now = SystemCall.nowMilliseconds()
        return inspector.walk().entries.contains {
            $0.isCurrent && $0.isIndexed && $0.isExpired(now: now, maximumAge: inspector.summary.maximumAge)
        }
    }

    @Test func aSweepRemovesEveryExpiredEntryInBoundedSteps() throws {
        let directory = TemporaryDirectory()
        let path = directory.path()
        let cache = try Cache(path: path, options: .init(capacity: .megabytes(4)))
        for key in 0..<3000 {
            try cache.set(pattern(key, count: 40), forKey: "k\(key)", expiry: key % 3 == 0 ? .never : Self.past)
        }
        #expect(try holdsAnExpiredEntry(path))
        let slots = cache.store.active.slotCount + (cache.store.draining?.slotCount ?? 0)
        var cursor: Int? = 0
        var steps = 0
        while let position = cursor {
            let step = try cache.write { _ throws(LarderError) in cache.store.sweepStep(from: position) }
            #expect(step.examined <= CacheStore.sweepStepSlots)
            cursor = step.next
            steps += 1
        }
        #expect(steps >= slots / CacheStore.sweepStepSlots)
        #expect(try !holdsAnExpiredEntry(path))
        #expect(cache.count == 1000)
        #expect(try cache.bytes(forKey: "k2998") == nil)
        #expect(try cache.bytes(forKey: "k2997") == pattern(2997, count: 40))
    }

    @Test func aSweepRemovesEntriesPastTheMaximumAge() throws {
        let directory = TemporaryDirectory()
        let path = directory.path()
        let cache = try Cache(path: path, options: .init(maximumAge: 60))
        let old = SystemCall.nowMilliseconds() - 120_000
        for key in 0..<100 {
            try Array("k\(key)".utf8).withUnsafeBytes { keyBytes in
                try [UInt8(key)].withUnsafeBytes { value in
                    try cache.write { _ throws(LarderError) in
                        try cache.store.put(key: keyBytes, value: value, compress: false, expiry: .never,
                                            storedAt: key < 50 ? old : nil)
                    }
                }
            }
        }
        let step = try cache.write { _ throws(LarderError) in cache.store.sweepStep(from: 0, slots: .max) }
        #expect(step.removed == 50)
        #expect(cache.count == 50)
        #expect(try !holdsAnExpiredEntry(path))
    }

    @Test(.failsIfItHangs) func theBackgroundSweepEmptiesTheFileOfExpiredEntriesAndStopsWithTheHandle() async throws {
        let directory = TemporaryDirectory()
        let path = directory.path()
        let cache = try Cache(path: path, options: .init(capacity: .megabytes(4), sweepInterval: 0.01))
        for key in 0..<2000 { try cache.set([UInt8(key & 0xFF)], forKey: "k\(key)", expiry: key < 1500 ? Self.past : .never) }
        let sweeper = try #require(cache.sweeper)
        while cache.count > 500 { try await Task.sleep(for: .milliseconds(10)) }
        #expect(try !holdsAnExpiredEntry(path))
        #expect(cache.stats.expirations >= 1500)
        try await onOwnThread { try cache.close() }
        #expect(!sweeper.isRunning)
    }

    @Test func aReadOnlyHandleRunsNoSweep() throws {
        let directory = TemporaryDirectory()
        let path = directory.path()
        try Cache(path: path).close()
        let reader = try Cache(path: path, options: .init(readOnly: true, sweepInterval: 1))
        #expect(reader.sweeper == nil)
    }
}

import Foundation
import Testing
@_spi(Inspection) @testable import Larder

/// Expiries that reads push back (`Expiry.sliding`, FORMAT.md 4.8).
@Suite("Sliding expiry")
struct SlidingExpiryTests {
    /// A window of 8 hours: what is left of it outlasts any wait of a loaded machine (a child
    /// process's start once took minutes).
    private static let window: UInt64 = 8 * 3_600_000

    /// Stores `key` with a sliding window of 8 hours whose expiry is 1 hour away: as if stored
    /// 7 hours ago.
    private func setMostlySpent(_ key: String, in cache: Cache) throws {
        let storedAt = SystemCall.nowMilliseconds() - 7 * 3_600_000
        try Array(key.utf8).withUnsafeBytes { keyBytes in
            try [UInt8]([7, 7]).withUnsafeBytes { value in
                try cache.write { _ throws(LarderError) in
                    try cache.store.put(key: keyBytes, value: value, compress: false,
                                        expiry: .sliding(Double(Self.window) / 1000), storedAt: storedAt)
                }
            }
        }
    }

    private func entry(_ key: String, in cache: Cache) throws -> CacheStore.FoundEntry {
        try #require(try cache.write { _ throws(LarderError) in
            Array(key.utf8).withUnsafeBytes { cache.store.lookup($0, hash: KeyHash($0)) }
        })
    }

    @Test(.waitsOnItsOwnThreads) func aReadInAnotherProcessPushesTheExpiryBackAndKeepsTheEntryFromTheReclaimer() async throws {
        let directory = TemporaryDirectory()
        let path = directory.path()
        let cache = try Cache(path: path)
        try setMostlySpent("s", in: cache)
        let before = try entry("s", in: cache)
        #expect(before.header.isSliding && before.header.slideWindow == Self.window)
        #expect(before.header.isExpired(now: before.header.expiresAt, maximumAge: 0))
        let readStarted = SystemCall.nowMilliseconds()

        await #expect(processExitsWith: .success) { [path = path as String] in
            let child = try Cache(path: path)
            exit(try child.bytes(forKey: "s") == [7, 7] ? 0 : 1)
        }

        let after = try entry("s", in: cache)
        #expect(after.header.slideCount > 0)
        #expect(after.header.expiry(slideCount: after.header.slideCount) >= readStarted + Self.window)
        #expect(!after.header.isExpired(now: before.header.expiresAt, maximumAge: 0))
        // A writer that found the entry expired by what it read before the push does not drop it.
        let kept = try cache.write { _ throws(LarderError) in
            !RecordHeader.markDeadIfStillExpired(cache.store.file.mutableBytes(at: after.offset, count: 48).baseAddress!,
                                                 header: before.header, now: before.header.expiresAt, maximumAge: 0)
        }
        #expect(kept)
        #expect(try cache.bytes(forKey: "s") == [7, 7])
    }

    @Test func detailsAndInspectionShowThePushedExpiry() throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(path: directory.path())
        try setMostlySpent("s", in: cache)
        let stored = try entry("s", in: cache).header.expiresAt
        #expect(try cache.bytes(forKey: "s") == [7, 7])
        let pushed = try entry("s", in: cache).header.effectiveExpiry
        #expect(pushed > stored)
        let details = try #require(try cache.entryDetails(forKey: "s"))
        #expect(details.sliding && details.expiresAt == Date(millisecondsSince1970: pushed))
        let record = try #require(try FileInspector(path: directory.path()).walk().entries.first { $0.key == Array("s".utf8) })
        #expect(record.isSliding && record.expiresAt == pushed)
        #expect(!record.isExpired(now: stored))
    }

    @Test func withoutReadsASlidingEntryExpiresAtItsWindow() throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(path: directory.path())
        try cache.set([1], forKey: "s", expiry: .sliding(30))
        let header = try entry("s", in: cache).header
        #expect(header.isSliding && header.slideWindow == 30_000 && header.slideCount == 0)
        #expect(header.isExpired(now: header.expiresAt, maximumAge: 0))
        #expect(RecordHeader.markDeadIfStillExpired(cache.store.file.mutableBytes(at: try entry("s", in: cache).offset, count: 48).baseAddress!,
                                                    header: header, now: header.expiresAt, maximumAge: 0))
        // A window already over is stored as expired, like a negative expiry.
        try cache.set([2], forKey: "gone", expiry: .sliding(-1))
        #expect(try cache.bytes(forKey: "gone") == nil)
        #expect(errorCode { try cache.set([3], forKey: "nan", expiry: .sliding(.nan)) } == .invalidArgument)
    }

    @Test func aReadIntoTheCallersBufferPushesToo() throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(path: directory.path())
        try setMostlySpent("s", in: cache)
        // larder_get's read, which copies most entries in one call, leaves sliding ones to the
        // read that pushes.
        var buffer = [UInt8](repeating: 0, count: 8)
        #expect(try buffer.withUnsafeMutableBytes { try cache.copyValue(forKey: "s", into: $0) } == 2)
        #expect(try entry("s", in: cache).header.slideCount > 0)
    }

    @Test func eachReadPushesAtMostAWindowAheadInSteps() throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(path: directory.path())
        try setMostlySpent("s", in: cache)
        let header = try entry("s", in: cache).header
        // Pushed in eighths of the window, up to 127 of them.
        #expect(header.slideStep == Self.window / 8)
        #expect(header.slideCount(forReadAt: header.expiresAt - Self.window) == 0)
        #expect(header.slideCount(forReadAt: header.expiresAt - 1) == 8)
        #expect(header.slideCount(forReadAt: header.expiresAt + 128 * Self.window) == RecordHeader.maximumSlideCount)
        // Reads through this handle push too, as far as a read between these two readings of
        // the clock asks.
        let readStarted = SystemCall.nowMilliseconds()
        #expect(try cache.bytes(forKey: "s") == [7, 7])
        let readEnded = SystemCall.nowMilliseconds()
        let pushed = try entry("s", in: cache).header.slideCount
        #expect(pushed >= header.slideCount(forReadAt: readStarted) && pushed <= header.slideCount(forReadAt: readEnded))
        // A read-only handle's read pushes nothing.
        let reader = try Cache(path: directory.path(), options: .init(readOnly: true))
        #expect(try reader.bytes(forKey: "s") == [7, 7])
        #expect(try entry("s", in: cache).header.slideCount == pushed)
    }
}

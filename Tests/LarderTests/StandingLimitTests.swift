import Foundation
import Testing
@testable @_spi(Inspection) import Larder

/// The standing count limit and maximum age, kept in the file for every process (FORMAT.md 2.1).
@Suite("Standing limits")
struct StandingLimitTests {
    /// Writes `key` as if stored `secondsAgo` seconds ago.
    private func set(_ value: [UInt8], forKey key: String, storedSecondsAgo secondsAgo: UInt64, in cache: Cache) throws {
        let storedAt = SystemCall.nowMilliseconds() - secondsAgo * 1000
        try Array(key.utf8).withUnsafeBytes { keyBytes in
            try value.withUnsafeBytes { valueBytes in
                try cache.write { _ throws(LarderError) in
                    try cache.store.put(key: keyBytes, value: valueBytes, compress: false, expiry: .never, storedAt: storedAt)
                }
            }
        }
    }

    @Test func theFileNeverHoldsMoreEntriesThanItsCountLimit() throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(path: directory.path(), options: .init(capacity: .megabytes(1), countLimit: 50))
        for key in 0..<400 {
            try cache.set(pattern(key, count: 100), forKey: "k\(key)")
            #expect(cache.count <= 50)
        }
        #expect(cache.count == 50)
        #expect(try cache.bytes(forKey: "k399") == pattern(399, count: 100))
        // Replacing a key keeps the count: nothing else is evicted for it.
        try cache.set([1], forKey: "k399")
        #expect(cache.count == 50)
        #expect(try cache.bytes(forKey: "k350") == pattern(350, count: 100))
        let walk = try FileInspector(path: directory.path()).walk()
        #expect(walk.entries.filter(\.isCurrent).count == 50)
    }

    @Test func aCountLimitGivesEntriesReadSinceTheTailLastPassedASecondChance() throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(path: directory.path(), options: .init(countLimit: 10))
        for key in 0..<10 { try cache.set([UInt8(key)], forKey: "k\(key)") }
        #expect(try cache.bytes(forKey: "k0") == [0])
        try cache.set([10], forKey: "k10")
        #expect(cache.contains("k0"))
        #expect(!cache.contains("k1"))
        #expect(cache.count == 10)
    }

    @Test(.waitsOnItsOwnThreads) func theCountLimitHoldsUnderWritesFromTwoProcesses() async throws {
        let directory = TemporaryDirectory()
        let path = directory.path()
        let cache = try Cache(path: path, options: .init(capacity: .megabytes(2), countLimit: 64))
        let parentWrites = Task.detached {
            for key in 0..<600 { try cache.set(pattern(key, count: 200), forKey: "parent\(key)") }
        }
        await #expect(processExitsWith: .success) { [path = path as String] in
            // No limit asked: the file's is kept, and honoured.
            let child = try Cache(path: path)
            var held = child.countLimit == 64
            for key in 0..<600 {
                try child.set(pattern(key, count: 200), forKey: "child\(key)")
                held = held && child.count <= 64
            }
            exit(held ? 0 : 1)
        }
        try await parentWrites.value
        #expect(cache.count == 64)
        let walk = try FileInspector(path: path).walk()
        #expect(walk.entries.filter { $0.isCurrent && $0.isIndexed }.count == 64)
    }

    /// A maximum age of 8 hours: an entry that is to stay young stays so however slow the
    /// machine (a child process's start once took minutes).
    private static let maximumAge: TimeInterval = 8 * 3600

    @Test func entriesPastTheMaximumAgeAreNeverReturnedAndTheirRoomIsReclaimed() throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(path: directory.path(), options: .init(maximumAge: Self.maximumAge))
        try set([1, 2, 3], forKey: "old", storedSecondsAgo: 16 * 3600, in: cache)
        try set([4, 5, 6], forKey: "young", storedSecondsAgo: 4 * 3600, in: cache)
        #expect(try cache.bytes(forKey: "old") == nil)
        #expect(try cache.data(forKey: "old") == nil)
        #expect(!cache.contains("old"))
        #expect(try cache.withValue(forKey: "old") { _ in true } == nil)
        // The read into the caller's buffer (larder_get's), which checks the record in one call.
        var buffer = [UInt8](repeating: 0, count: 16)
        #expect(try buffer.withUnsafeMutableBytes { try cache.copyValue(forKey: "old", into: $0) } == nil)
        #expect(try buffer.withUnsafeMutableBytes { try cache.copyValue(forKey: "young", into: $0) } == 3)
        var listed: [String] = []
        try cache.forEachEntry { key, _ in listed.append(String(decoding: key, as: UTF8.self)); return true }
        #expect(listed == ["young"])
        // Not even as a stale copy to fall back on.
        #expect(try Array("old".utf8).withUnsafeBytes { try cache.copyData(forKey: $0, includingExpired: true) } == nil)
        #expect(try cache.bytes(forKey: "young") == [4, 5, 6])
        #expect(try cache.removeExpired() == 1)
        #expect(cache.count == 1)
    }

    @Test(.waitsOnItsOwnThreads) func anotherProcessAppliesTheMaximumAge() async throws {
        let directory = TemporaryDirectory()
        let path = directory.path()
        let cache = try Cache(path: path, options: .init(maximumAge: Self.maximumAge))
        try set([1], forKey: "old", storedSecondsAgo: 16 * 3600, in: cache)
        try cache.set([2], forKey: "young")
        await #expect(processExitsWith: .success) { [path = path as String] in
            let reader = try Cache(path: path, options: .init(readOnly: true))
            let applied = try reader.bytes(forKey: "old") == nil && reader.bytes(forKey: "young") == [2]
                && reader.maximumAge == StandingLimitTests.maximumAge
            exit(applied ? 0 : 1)
        }
    }

    @Test func limitsStayInTheFileUntilASoleWriterChangesThem() throws {
        let directory = TemporaryDirectory()
        let path = directory.path()
        do {
            let cache = try Cache(path: path, options: .init(countLimit: 100, maximumAge: 3600))
            for key in 0..<80 { try cache.set([UInt8(key)], forKey: "k\(key)") }
            try cache.close()
        }
        do {
            let cache = try Cache(path: path)
            #expect(cache.countLimit == 100)
            #expect(cache.maximumAge == 3600)
            try cache.close()
        }
        do {
            // Lowered below the entries held: the least recently used go at once.
            let cache = try Cache(path: path, options: .init(countLimit: 20, maximumAge: .infinity))
            #expect(cache.countLimit == 20)
            #expect(cache.maximumAge == nil)
            #expect(cache.count == 20)
            #expect(cache.contains("k79"))
            try cache.close()
        }
        let cache = try Cache(path: path, options: .init(countLimit: .max))
        #expect(cache.countLimit == nil)
        for key in 0..<80 { try cache.set([UInt8(key)], forKey: "k\(key)") }
        #expect(cache.count == 80)
    }

    @Test(.waitsOnItsOwnThreads) func anOpenBesideAnotherWriterKeepsTheFilesLimits() async throws {
        let directory = TemporaryDirectory()
        let path = directory.path()
        let cache = try Cache(path: path, options: .init(countLimit: 10))
        await #expect(processExitsWith: .success) { [path = path as String] in
            let child = try Cache(path: path, options: .init(countLimit: 500, maximumAge: 1))
            exit(child.countLimit == 10 && child.maximumAge == nil ? 0 : 1)
        }
        #expect(cache.countLimit == 10)
    }

    @Test func aFileWithAMaximumAgeNeedsAVersion2Reader() throws {
        let directory = TemporaryDirectory()
        let path = directory.path()
        try Cache(path: path, options: .init(countLimit: 5)).close()
        var summary = try FileInspector(path: path).summary
        #expect((summary.writeVersion, summary.readVersion, summary.countLimit) == (2, 1, 5))
        try Cache(path: path, options: .init(maximumAge: 1.5)).close()
        summary = try FileInspector(path: path).summary
        #expect((summary.writeVersion, summary.readVersion, summary.maximumAge) == (2, 2, 1500))
        try Cache(path: path, options: .init(maximumAge: .infinity)).close()
        #expect(try FileInspector(path: path).summary.readVersion == 1)
    }

    @Test(arguments: [
        Cache.Options(countLimit: 0), Cache.Options(countLimit: -1),
        Cache.Options(maximumAge: -1), Cache.Options(maximumAge: 0), Cache.Options(maximumAge: .nan),
        Cache.Options(sweepInterval: 0), Cache.Options(sweepInterval: -2), Cache.Options(sweepInterval: .nan),
        Cache.Options(sweepInterval: .infinity),
    ])
    func badLimitsAreRefusedAndLoseNothing(options: Cache.Options) throws {
        let directory = TemporaryDirectory()
        let path = directory.path()
        let cache = try Cache(path: path, options: .init(countLimit: 3))
        try cache.set([1], forKey: "kept")
        try cache.close()
        #expect(errorCode { _ = try Cache(path: path, options: options) } == .invalidArgument)
        let reopened = try Cache(path: path)
        #expect(try reopened.bytes(forKey: "kept") == [1])
        #expect(reopened.countLimit == 3)
    }
}

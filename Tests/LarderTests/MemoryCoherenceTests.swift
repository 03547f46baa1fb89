import Foundation
import Testing
@testable import Larder

/// Objects in memory never outlive the file's value: another process changes or removes a key
/// through the file (its children here, exit tests), and this one's next typed read returns the
/// new value or nil. (The `larder` tool and a C writer: LarderToolTests/MemoryCoherenceToolTests.)
@Suite("Memory tier across processes", .waitsOnItsOwnThreads)
struct MemoryCoherenceTests {
    /// A cache whose key "p" is in this process's memory tier at version 1, read once from memory.
    private func remembered(at path: String, capacity: ByteCount = .megabytes(4)) throws -> Cache {
        let cache = try Cache(path: path, options: .init(capacity: capacity))
        try cache.set(Profile.make(1, version: 1), forKey: "p")
        #expect(try cache.value(Profile.self, forKey: "p")?.version == 1)
        #expect(cache.stats.memoryHits == 1)
        return cache
    }

    @Test func aSetByAnotherProcessIsRead() async throws {
        let directory = TemporaryDirectory()
        let path = directory.path()
        let cache = try remembered(at: path)
        await #expect(processExitsWith: .success) { [path = path as String] in
            let child = try Cache(path: path, options: .init(memory: nil))
            try child.set(Profile.make(1, version: 2), forKey: "p")
        }
        #expect(try await cache.value(Profile.self, forKey: "p")?.version == 2)
        #expect(try await cache.value(Profile.self, forKey: "p")?.version == 2)
        #expect(cache.stats.memoryHits == 2, "the new value is kept once read")
    }

    @Test func aRemovalByAnotherProcessIsANil() async throws {
        let directory = TemporaryDirectory()
        let path = directory.path()
        let cache = try remembered(at: path)
        await #expect(processExitsWith: .success) { [path = path as String] in
            _ = try Cache(path: path).removeValue(forKey: "p")
        }
        #expect(try await cache.value(Profile.self, forKey: "p") == nil)
    }

    @Test func aClearByAnotherProcessIsANil() async throws {
        let directory = TemporaryDirectory()
        let path = directory.path()
        let cache = try remembered(at: path)
        await #expect(processExitsWith: .success) { [path = path as String] in
            _ = try Cache(path: path).removeAll()
        }
        #expect(try await cache.value(Profile.self, forKey: "p") == nil)
    }

    /// The same key set again after a clear has another record: the object from before the clear
    /// is not it.
    @Test func aClearThenASetByAnotherProcessIsTheNewValue() async throws {
        let directory = TemporaryDirectory()
        let path = directory.path()
        let cache = try remembered(at: path)
        await #expect(processExitsWith: .success) { [path = path as String] in
            let child = try Cache(path: path, options: .init(memory: nil))
            try child.removeAll()
            try child.set(Profile.make(1, version: 3), forKey: "p")
        }
        #expect(try await cache.value(Profile.self, forKey: "p")?.version == 3)
    }

    @Test func anEvictionByAnotherProcessesPutIsANil() async throws {
        let directory = TemporaryDirectory()
        let path = directory.path()
        let cache = try remembered(at: path, capacity: .kilobytes(64))
        await #expect(processExitsWith: .success) { [path = path as String] in
            let child = try Cache(path: path)
            var puts = 0
            // Past the second chance its reads gave it, until the tail has evicted it.
            while child.contains("p") && puts < 10_000 {
                try child.set(Data(count: 1_000), forKey: "filler\(puts)")
                puts += 1
            }
            exit(child.contains("p") || child.stats.evictions == 0 ? 1 : 0)
        }
        #expect(try await cache.value(Profile.self, forKey: "p") == nil)
    }

    @Test func anExpiryAnotherProcessSetIsANil() async throws {
        let directory = TemporaryDirectory()
        let path = directory.path()
        let cache = try remembered(at: path)
        await #expect(processExitsWith: .success) { [path = path as String] in
            let child = try Cache(path: path, options: .init(memory: nil))
            try child.set(Profile.make(1, version: 4), forKey: "p", expiry: .seconds(0.05))
        }
        try await Task.sleep(for: .milliseconds(120))
        #expect(try await cache.value(Profile.self, forKey: "p") == nil)
    }

    /// A value that no longer decodes (another program's bytes) is not answered from memory, and
    /// a read-through call takes it for a miss and loads anew.
    @Test func bytesThatNoLongerDecodeAreAMiss() async throws {
        let directory = TemporaryDirectory()
        let path = directory.path()
        let cache = try remembered(at: path)
        await #expect(processExitsWith: .success) { [path = path as String] in
            try Cache(path: path).set(Data([0xFF, 0x00]), forKey: "p")
        }
        await #expect(throws: DecodingError.self) { try await cache.value(Profile.self, forKey: "p") }
        let loaded = try await cache.value(Profile.self, forKey: "p") { Profile.make(1, version: 5) }
        #expect(loaded.version == 5)
        #expect(try await cache.value(Profile.self, forKey: "p")?.version == 5)
    }

    /// A recovery by another process (after a writer died) hands out no number it handed out
    /// before: here the only record of "p" is lost, and the next record written takes the number
    /// that recovery from the records alone would give again.
    @Test func aRecoveryNeverHandsOutARememberedNumberAgain() throws {
        let directory = TemporaryDirectory()
        let path = directory.path()
        let cache = try remembered(at: path)
        let store = cache.entry.store
        let identity = try cache.liveIdentity(forKey: MemoryKey("p"))
        guard case .entry(let remembered) = identity else { Issue.record("no entry"); return }
        // A writer dies writing over the record in place (FORMAT.md 6.9: marked dead, the new
        // value half copied); the next writer repairs the file.
        try store.withWriterLock { () throws(LarderError) in
            RecordHeader.markDead(in: store.file, at: remembered.offset)
            store.file.zero(remembered.offset + RecordHeader.size + 1, 16)
            store.state.needsRepair = true
        }
        try cache.set(Profile.make(1, version: 7), forKey: "p", placement: .fileOnly)
        #expect(cache.stats.recoveries == 1)
        guard case .entry(let now) = try cache.liveIdentity(forKey: MemoryKey("p")) else { Issue.record("no entry"); return }
        #expect(now.sequence > remembered.sequence, "recovery counted on from the records it kept only")
        #expect(try cache.value(Profile.self, forKey: "p")?.version == 7)
    }
}

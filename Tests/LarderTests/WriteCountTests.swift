import Foundation
import Testing
@testable import Larder

/// The write count (FORMAT.md 3.1, 7.7.8): every hold of the writer lock moves it on, so that an
/// object in memory checked once is answered again without looking at the file only while no
/// writer of any process has changed it since.
@Suite("Write count")
struct WriteCountTests {
    @Test func everyWriteMovesTheCountOnAndLeavesItEven() throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(path: directory.path())
        let store = cache.entry.store
        #expect(store.state.countsWrites, "a file this version created is written by writers that count")
        let opened = store.state.writeCount
        #expect(opened & 1 == 0)
        try cache.set(Data("v".utf8), forKey: "k")
        let afterSet = store.state.writeCount
        #expect(afterSet != opened && afterSet & 1 == 0)
        #expect(try cache.removeValue(forKey: "k"))
        #expect(store.state.writeCount != afterSet)
        try store.withWriterLock { () throws(LarderError) in
            #expect(store.state.writeCount & 1 == 1, "odd while a writer may be changing the file")
        }
        #expect(store.state.writeCount & 1 == 0)
    }

    /// A writer that dies in the middle of a removal has marked the record dead, and no more:
    /// the count it left odd keeps the object in memory from being answered unchecked.
    @Test(.waitsOnItsOwnThreads) func aWriterThatDiesMidChangeEndsTheObjectsInMemory() async throws {
        let directory = TemporaryDirectory()
        let path = directory.path()
        let cache = try Cache(path: path)
        try cache.set(Profile.make(1, version: 1), forKey: "p")
        #expect(try await cache.value(Profile.self, forKey: "p")?.version == 1)
        #expect(try await cache.value(Profile.self, forKey: "p")?.version == 1)
        #expect(cache.stats.memoryHits == 2)
        guard case .entry(let identity) = try cache.liveIdentity(forKey: MemoryKey("p")) else {
            Issue.record("no entry")
            return
        }
        await #expect(processExitsWith: .signal(SIGKILL)) { [path = path as String, offset = identity.offset as Int] in
            let child = try Cache(path: path, options: .init(memory: nil))
            let store = child.entry.store
            try store.withWriterLock { () throws(LarderError) in
                RecordHeader.markDead(in: store.file, at: offset)
                kill(getpid(), SIGKILL)
            }
        }
        #expect(cache.entry.store.state.writeCount & 1 == 1)
        #expect(try await cache.value(Profile.self, forKey: "p") == nil)
    }

    /// A file a version-1 writer may be writing (its meta page says version 1 when a sole writer
    /// opens it) does not count writes: an object in memory is checked against the file on every
    /// read, and a change made behind the count's back is seen.
    @Test func aFileOfVersionOneIsCheckedOnEveryRead() throws {
        let directory = TemporaryDirectory()
        let path = directory.path()
        try Cache(path: path).close()
        for copy in 0..<FileLayout.metaPageCount {
            try DamagedFileTests().rewriteMeta(path, copy: copy) { $0.writeVersion = 1; $0.readVersion = 1 }
        }
        let cache = try Cache(path: path)
        let store = cache.entry.store
        #expect(!store.state.countsWrites)
        try cache.set(Profile.make(1, version: 1), forKey: "p")
        #expect(try cache.value(Profile.self, forKey: "p")?.version == 1)
        #expect(try cache.value(Profile.self, forKey: "p")?.version == 1)
        guard case .entry(let identity) = try cache.liveIdentity(forKey: MemoryKey("p")) else {
            Issue.record("no entry")
            return
        }
        // What a version-1 writer's removal leaves: the record dead, the count where it was.
        let count = store.state.writeCount
        RecordHeader.markDead(in: store.file, at: identity.offset)
        #expect(store.state.writeCount == count)
        #expect(try cache.value(Profile.self, forKey: "p") == nil)
    }
}

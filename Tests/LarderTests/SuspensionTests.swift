import Foundation
import Testing
@testable import Larder

/// `suspend()` and `resume()` within one process: what every call does in between, and a file
/// that changed while the handle held no lock on it.
@Suite("Suspend and resume")
struct SuspensionTests {
    @Test func everyCallBetweenSuspendAndResumeThrowsSuspended() throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(at: directory.path(), capacity: 1 << 20)
        try cache.set(Data("v".utf8), forKey: "k")
        try cache.suspend()
        try cache.suspend()
        expectError(.suspended) { try cache.set(Data("w".utf8), forKey: "k") }
        expectError(.suspended) { _ = try cache.data(forKey: "k") }
        expectError(.suspended) { _ = try cache.withValue(forKey: "k") { $0.count } }
        expectError(.suspended) { _ = try cache.entryDetails(forKey: "k") }
        expectError(.suspended) { _ = try cache.removeValue(forKey: "k") }
        expectError(.suspended) { try cache.removeAll() }
        expectError(.suspended) { try cache.sync() }
        expectError(.suspended) { try cache.forEachEntry { _, _ in true } }
        #expect(!cache.contains("k") && cache.count == 0 && cache.isSuspended)
        let error = try #require(#expect(throws: LarderError.self) { try cache.sync() })
        #expect(error.message.contains("resume()"))
        try cache.resume()
        try cache.resume()
        #expect(try cache.data(forKey: "k") == Data("v".utf8))
    }

    @Test func aCacheLendingBytesOnThisThreadIsNotSuspended() throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(at: directory.path(), capacity: 1 << 20)
        try cache.set(Data("v".utf8), forKey: "k")
        try cache.withValue(forKey: "k") { _ in expectError(.invalidArgument) { try cache.suspend() } }
        #expect(!cache.isSuspended)
        #expect(try cache.data(forKey: "k") == Data("v".utf8))
    }

    @Test func aClosedCacheStaysClosed() throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(at: directory.path(), capacity: 1 << 20)
        try cache.suspend()
        try cache.close()
        #expect(!cache.isSuspended)
        expectError(.closed) { try cache.resume() }
        expectError(.closed) { try cache.suspend() }
        expectError(.closed) { _ = try cache.data(forKey: "k") }
    }

    @Test func aResumedHandleTakesUpACapacityChangedMeanwhile() throws {
        let directory = TemporaryDirectory()
        let path = directory.path()
        let cache = try Cache(at: path, capacity: 1 << 20)
        try cache.set(Data("before".utf8), forKey: "a")
        try cache.suspend()
        // Alone with the file, another handle may change its capacity.
        let other = try Cache(at: path, capacity: 4 << 20)
        #expect(other.capacity == 4 << 20)
        try other.set(Data("meanwhile".utf8), forKey: "b")
        try other.close()
        try cache.resume()
        #expect(cache.capacity == 4 << 20)
        #expect(try cache.data(forKey: "a") == Data("before".utf8))
        #expect(try cache.data(forKey: "b") == Data("meanwhile".utf8))
        try cache.set(Data(count: 2 << 20), forKey: "large")
        #expect(try cache.data(forKey: "large")?.count == 2 << 20)
    }

    @Test func anotherHandleOfTheProcessKeepsTheFileOpen() throws {
        let directory = TemporaryDirectory()
        let path = directory.path()
        let first = try Cache(at: path, capacity: 1 << 20)
        let second = try Cache(at: path)
        try first.suspend()
        try second.set(Data("still open".utf8), forKey: "k")
        // The file is not this process's alone to resize while `second` has it.
        let third = try Cache(at: path, capacity: 4 << 20)
        #expect(third.capacity == 1 << 20)
        try first.resume()
        #expect(try first.data(forKey: "k") == Data("still open".utf8))
    }

    @Test func theMemoryTierIsEmptiedBySuspend() throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(path: directory.path())
        try cache.set("remembered", forKey: "s")
        #expect(cache.stats.memoryCount == 1)
        try cache.suspend()
        #expect(cache.stats.memoryCount == 0)
        try cache.resume()
        #expect(try cache.value(String.self, forKey: "s") == "remembered")
    }
}

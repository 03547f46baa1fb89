import Dispatch
import Foundation
import Testing
@testable import Larder

@Suite("Threads")
struct ConcurrencyTests {
    @Test func manyThreadsReadAndWriteOneCacheWithoutWrongValues() throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(at: directory.path(), capacity: 2 << 20)
        let threads = 8
        let wrong = LockedCounter()
        let failures = LockedCounter()
        DispatchQueue.concurrentPerform(iterations: threads) { thread in
            var generator = SplitMix(seed: UInt64(thread + 1))
            for step in 0..<4_000 {
                let key = Int(generator.next() % 300)
                switch generator.next() % 10 {
                case 0..<3:
                    do {
                        try cache.set(VersionedValue.make(key: key, version: thread * 100_000 + step), forKey: "k\(key)")
                    } catch { failures.increment() }
                case 3:
                    do { try cache.removeValue(forKey: "k\(key)") } catch { failures.increment() }
                case 4:
                    let checked = try? cache.withValue(forKey: "k\(key)") { VersionedValue.check(Array($0), key: key) != nil }
                    if checked == false { wrong.increment() }
                default:
                    do {
                        if let value = try cache.bytes(forKey: "k\(key)"), VersionedValue.check(value, key: key) == nil {
                            wrong.increment()
                        }
                    } catch { failures.increment() }
                }
                if thread == 0 && step % 1_000 == 999 {
                    _ = cache.stats
                    try? cache.sync()
                }
            }
        }
        #expect(wrong.value == 0)
        #expect(failures.value == 0)
        #expect(cache.stats.entryCount == cache.count)
        try cache.close()
        let reopened = try Cache(path: directory.path())
        #expect(!reopened.wasRecovered)
        for key in 0..<300 {
            if let value = try reopened.bytes(forKey: "k\(key)") {
                #expect(VersionedValue.check(value, key: key) != nil)
            }
        }
    }

    @Test func oneCacheIsSendableAcrossTasks() async throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(path: directory.path())
        try await withThrowingTaskGroup(of: Void.self) { group in
            for task in 0..<8 {
                group.addTask {
                    for index in 0..<200 {
                        try cache.set(pattern(task * 1000 + index, count: 64), forKey: "t\(task)-\(index)")
                    }
                }
            }
            try await group.waitForAll()
        }
        #expect(cache.count == 1_600)
        #expect(try cache.bytes(forKey: "t7-199") == pattern(7199, count: 64))
    }
}

final class LockedCounter: @unchecked Sendable {
    private let lock = NSLock()
    private var count = 0
    func increment() { lock.withLock { count += 1 } }
    var value: Int { lock.withLock { count } }
}

import Dispatch
import Foundation
import Testing
@testable import Larder

@Suite("Threads")
struct ConcurrencyTests {
    @Test(.waitsOnItsOwnThreads) func manyThreadsReadAndWriteOneCacheWithoutWrongValues() throws {
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

    /// Readers of the process take no lock: they read through the view the writer last published
    /// and check it at the end. While a writer thread doubles the index several times, migrates
    /// it and grows the file, every key it has written must be found, with its right value.
    @Test(.waitsOnItsOwnThreads) func readerThreadsFindEveryWrittenKeyWhileTheIndexAndFileGrow() throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(at: directory.path(), capacity: 256 << 20)
        let keys = 30_000
        let written = LockedCounter()
        let missing = LockedCounter()
        let wrong = LockedCounter()
        let failures = LockedCounter()
        let reads = LockedCounter()
        runOnThreads(3) { thread in
            if thread == 0 {
                // The writer keeps no further ahead of the readers than a read for every 30 keys,
                // however the machine schedules the threads (within 10 minutes).
                let limit = Date().addingTimeInterval(600)
                for version in 1...2 {
                    for key in 0..<keys {
                        do {
                            try cache.set(VersionedValue.make(key: key, version: version), forKey: "k\(key)")
                        } catch { failures.increment() }
                        guard version == 1 else { continue }
                        written.increment()
                        if key % 1_000 == 999 {
                            while reads.value <= (key + 1) / 30 && Date() < limit { usleep(100) }
                        }
                    }
                }
                written.increment()
                return
            }
            var generator = SplitMix(seed: UInt64(thread))
            while written.value <= keys {
                let known = written.value
                guard known > 0 else { continue }
                let key = Int(generator.next() % UInt64(min(known, keys)))
                do {
                    let value = thread == 1 ? try cache.bytes(forKey: "k\(key)") : try cache.data(forKey: "k\(key)").map(Array.init)
                    reads.increment()
                    guard let value else { missing.increment(); continue }
                    if VersionedValue.check(value, key: key) == nil { wrong.increment() }
                } catch { failures.increment() }
            }
        }
        #expect(reads.value > 1_000)
        #expect(missing.value == 0)
        #expect(wrong.value == 0)
        #expect(failures.value == 0)
        #expect(cache.count == keys)
    }

    /// A full ring reuses offsets at once: a reader that matched a key in one record must never
    /// hand out the record that replaced it at the same place (another key's value, or a false
    /// "damaged" error). Readers read keys close to the tail, where the writer evicts.
    @Test(.waitsOnItsOwnThreads) func readersNeverGetTheValueOfARecordThatReplacedTheirsInAFullRing() throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(at: directory.path(), capacity: 256 << 10)
        // Keys of one length, so that a record of another key can take a record's exact place.
        @Sendable func key(_ index: Int) -> String { String(format: "k%07d", index) }
        @Sendable func value(_ index: Int) -> [UInt8] {
            withUnsafeBytes(of: UInt64(index).littleEndian, Array.init) + [UInt8](repeating: UInt8(truncatingIfNeeded: index), count: 24)
        }
        let latest = AtomicWord()
        let wrong = LockedCounter()
        let failures = LockedCounter()
        let deadline = Date().addingTimeInterval(4)
        runOnThreads(3) { thread in
            if thread == 0 {
                var index = 1
                while Date() < deadline {
                    do { try cache.set(value(index), forKey: key(index)) } catch { failures.increment() }
                    latest.store(UInt64(index))
                    index += 1
                }
                latest.store(0)
                return
            }
            var generator = SplitMix(seed: UInt64(thread))
            while true {
                let newest = Int(latest.load())
                if newest == 0 { break }
                guard newest > 4_000 else { continue }
                let index = newest - 2_600 + Int(generator.next() % 2_600)
                do {
                    let got = thread == 1
                        ? try cache.withValue(forKey: key(index)) { Array($0) }
                        : try cache.bytes(forKey: key(index))
                    if let got, got != value(index) { wrong.increment() }
                } catch { failures.increment() }
            }
        }
        #expect(wrong.value == 0)
        #expect(failures.value == 0)
    }

    /// Reads take no lock, so closing does not wait for a value lent on another thread. The pin
    /// it gives back late must not disturb the reader table that a later open has reset (a pin
    /// count below zero would make every writer scan the table, and a slot freed twice could be
    /// another reader's).
    @Test(.waitsOnItsOwnThreads) func aValueLentWhileTheCacheClosesLeavesTheReaderTableConsistent() throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(path: directory.path())
        try cache.set([1, 2, 3], forKey: "k")
        let inside = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        let done = DispatchSemaphore(value: 0)
        let lent = LockedCounter()
        let reader = Thread {
            let found = try? cache.withValue(forKey: "k") { bytes -> Bool in
                inside.signal()
                release.wait()
                return Array(bytes) == [1, 2, 3]
            }
            if found == true { lent.increment() }
            done.signal()
        }
        reader.start()
        inside.wait()
        try cache.close()
        // A new open of the file, alone with it, resets the reader table.
        let reopened = try Cache(path: directory.path())
        release.signal()
        done.wait()
        #expect(lent.value == 1)
        #expect(reopened.store.readers.isEmpty)
        #expect(try reopened.withValue(forKey: "k") { Array($0) } == [1, 2, 3])
        #expect(reopened.store.readers.isEmpty)
    }

    /// The same with another process holding the file, so that no open resets the table: the
    /// late pin is given back. It was left taken for as long as any process had the file open,
    /// one slot per such close, until every withValue of every process copied for want of one.
    @Test(.failsIfItHangs) func aPinGivenBackAfterItsCacheClosedIsFreedWhileAnotherProcessHasTheFile() async throws {
        let directory = TemporaryDirectory()
        let path = directory.path()
        let cache = try Cache(path: path)
        try cache.set([1, 2, 3], forKey: "k")
        async let child = #expect(processExitsWith: .success) { [path = path as String] in
            let holder = try Cache(path: path)
            try holder.set([1], forKey: "holding")
            let deadline = Date().addingTimeInterval(100)
            while !holder.contains("done") {
                guard Date() < deadline else { exit(3) }
                try await Task.sleep(for: .milliseconds(1))
            }
        }
        // Should the child fail before it writes: 15 minutes at most.
        try await waitUntil(seconds: 900, every: .milliseconds(1)) { cache.contains("holding") }
        #expect(cache.contains("holding"))
        let inside = DispatchSemaphore(value: 0), release = DispatchSemaphore(value: 0), done = DispatchSemaphore(value: 0)
        Thread {
            _ = try? cache.withValue(forKey: "k") { _ in
                inside.signal()
                release.wait()
            }
            done.signal()
        }.start()
        try await onOwnThread { inside.wait() }
        try cache.close()
        release.signal()
        try await onOwnThread { done.wait() }
        let observer = try Cache(path: path)
        #expect(observer.store.readers.isEmpty)
        try observer.set([1], forKey: "done")
        _ = await child
    }

    @Test func closingFromInsideWithValueIsAnError() throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(path: directory.path())
        try cache.set([1], forKey: "k")
        var failure: LarderError?
        _ = try cache.withValue(forKey: "k") { _ in
            do { try cache.close() } catch { failure = error as? LarderError }
        }
        #expect(failure?.code == .invalidArgument)
        #expect(try cache.bytes(forKey: "k") == [1])
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

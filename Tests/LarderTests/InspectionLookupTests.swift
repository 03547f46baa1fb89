import CLarderSupport
import Dispatch
import Foundation
import Testing
@_spi(Inspection) @testable import Larder

/// `larder get` reads a file that other processes may be writing, without their locks.
@Suite("Inspection lookup")
struct InspectionLookupTests {
    /// While a writer keeps adding keys to a small, full ring (the oldest records are evicted
    /// and their space reused at once), the inspector's lookup of keys near the tail must never
    /// return a value that is not the key's, nor call a value damaged because a writer replaced
    /// its record while it was read.
    @Test(.waitsOnItsOwnThreads) func lookupBesideAWriterNeverReturnsAWrongOrFalselyDamagedValue() throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(at: directory.path(), capacity: 256 << 10)
        @Sendable func key(_ index: Int) -> [UInt8] { Array(String(format: "k%07d", index).utf8) }
        for index in 0..<200 { try cache.set(VersionedValue.make(key: index, version: 1), forKey: key(index)) }
        try cache.sync()
        let path = directory.path()
        let latest = AtomicWord()
        latest.store(199)
        let done = AtomicWord()
        let failures = LockedCounter()
        let wrong = LockedCounter()
        let damaged = LockedCounter()
        let found = LockedCounter()
        runOnThreads(2) { thread in
            if thread == 0 {
                var index = 200
                // Three seconds, and on until the reader has found enough, however the machine
                // schedules the two threads (within 10 minutes).
                let deadline = Date().addingTimeInterval(3), limit = Date().addingTimeInterval(600)
                while Date() < deadline || (found.value <= 100 && Date() < limit) {
                    do { try cache.set(VersionedValue.make(key: index, version: 1), forKey: key(index)) } catch { failures.increment() }
                    latest.store(UInt64(index))
                    index += 1
                }
                done.store(1)
                return
            }
            guard let inspector = try? FileInspector(path: path) else {
                failures.increment()
                return
            }
            var generator = SplitMix(seed: 7)
            while done.load() == 0 {
                // The ring holds some 170 of these values: the oldest live ones are about to go.
                let index = Int(latest.load()) - 170 + Int(generator.next() % 40)
                switch inspector.lookup(key: key(index)) {
                case .found(_, let value):
                    found.increment()
                    if VersionedValue.check(value, key: index) == nil { wrong.increment() }
                case .damaged: damaged.increment()
                case .missing, .expired: break
                }
            }
        }
        #expect(failures.value == 0)
        #expect(found.value > 100)
        #expect(wrong.value == 0)
        #expect(damaged.value == 0)
    }
}

/// `larder dump --values`, `recover` and `compact` take values from a walk of a file that other
/// processes may be writing.
@Suite("Inspection values")
struct InspectionValueTests {
    /// A record written, after the walk, in the room of one the walk described (the free list
    /// gives a new large value the room of a removed one) must not pass for the walked entry's
    /// value: its key and sequence number are another's.
    @Test func theValueOfAWalkedEntryIsNeverAnotherKeysValueWrittenInItsRoom() throws {
        let directory = TemporaryDirectory()
        let path = directory.path()
        let cache = try Cache(at: path, capacity: 16 << 20)
        for index in 0..<4 { try cache.set(pattern(index, count: 8000), forKey: "k\(index)") }
        try cache.sync()
        let inspector = try FileInspector(path: path)
        let walked = try #require(inspector.walk().entries.first { $0.key == Array("k1".utf8) })
        #expect(inspector.value(of: walked) == pattern(1, count: 8000))

        try cache.removeValue(forKey: "k1")
        try cache.set(pattern(99, count: 8000), forKey: "k9")
        let now = try #require(inspector.walk().entries.first { $0.key == Array("k9".utf8) })
        #expect(now.offset == walked.offset)
        #expect(inspector.value(of: walked) == nil)
        #expect(inspector.value(of: now) == pattern(99, count: 8000))
    }

    /// The inspector keeps the head and tail it checked: it read them once for its snapshot and
    /// again for the check, so a page another process wrote in between passed the check with
    /// values the walk then used (a tail before the ring stopped the walk on a range that runs
    /// backwards). A thread here writes the tail of a closed file through a mapping of its own,
    /// between an impossible value and the real one, for two seconds of inspections.
    @Test(.failsIfItHangs) func aStateSnapshotIsCheckedAsKept() throws {
        let directory = TemporaryDirectory()
        let path = directory.path()
        do {
            let cache = try Cache(path: path)
            for key in 0..<300 { try cache.set(VersionedValue.make(key: key, version: 1), forKey: "k\(key)") }
            try cache.close()
        }
        let descriptor = open(path, O_RDWR)
        defer { close(descriptor) }
        let pageSize = 4096
        let map = try #require(mmap(nil, 3 * pageSize, PROT_READ | PROT_WRITE, MAP_SHARED, descriptor, 0))
        defer { munmap(map, 3 * pageSize) }
        let tailAddress = UInt(bitPattern: map + 2 * pageSize + SharedState.Field.tail)
        let done = AtomicWord()
        let trusted = LockedCounter()
        let impossible = LockedCounter()
        runOnThreads(2) { thread in
            if thread == 0 {
                let tail = UnsafeMutableRawPointer(bitPattern: tailAddress)!
                let real = lrd_load_relaxed_u64(tail)
                while done.load() == 0 {
                    lrd_store_relaxed_u64(tail, 16)
                    lrd_store_relaxed_u64(tail, real)
                }
                return
            }
            // Two seconds, and on until an inspection has trusted a snapshot, however the machine
            // schedules the two threads (within 10 minutes).
            let deadline = Date().addingTimeInterval(2), limit = Date().addingTimeInterval(600)
            while Date() < deadline || (trusted.value == 0 && Date() < limit) {
                guard let inspector = try? FileInspector(path: path), let state = inspector.state,
                      state.isTrustworthy else { continue }
                trusted.increment()
                if state.tail < inspector.summary.ringStart {
                    impossible.increment()
                } else {
                    _ = inspector.walk()
                }
            }
            done.store(1)
        }
        #expect(impossible.value == 0)
        #expect(trusted.value > 0)
    }
}

import Foundation
import Testing
@testable @_spi(Inspection) import Larder

/// Several processes on one file. The other processes are children of the test run (exit tests).
@Suite("Processes")
struct MultiProcessTests {
    @Test(.waitsOnItsOwnThreads) func aWriterThatDiesHoldingTheLockIsRepairedByTheNext() async throws {
        let directory = TemporaryDirectory()
        let path = directory.path()
        let cache = try Cache(path: path, options: .init(capacity: .megabytes(2)))
        for key in 0..<300 { try cache.set(VersionedValue.make(key: key, version: 1), forKey: "k\(key)") }

        await #expect(processExitsWith: .signal(SIGKILL)) { [path = path as String] in
            let child = try Cache(path: path)
            let store = child.entry.store
            try store.withWriterLock { () throws(LarderError) in
                // Die in the middle of a change: the shared state is left inconsistent.
                store.state.head = store.ringStart + 16
                store.state.entryCount = 12_345
                store.state.spanBytes = 7
                kill(getpid(), SIGKILL)
            }
        }

        // The next write takes the lock over, rebuilds, and goes on.
        try cache.set(VersionedValue.make(key: 1000, version: 1), forKey: "k1000")
        #expect(cache.stats.recoveries == 1)
        #expect(cache.count == 301)
        for key in [0, 150, 299, 1000] {
            #expect(try cache.bytes(forKey: "k\(key)").flatMap { VersionedValue.check($0, key: key) } == 1)
        }
        for key in 0..<3000 { try cache.set(VersionedValue.make(key: key, version: 2), forKey: "k\(key)") }
        #expect(try cache.bytes(forKey: "k2999").flatMap { VersionedValue.check($0, key: 2999) } == 2)
    }

    /// A writer that joins others takes the shared state they keep only once it has found it
    /// plausible, as a sole writer's open does: a process that broke the format (here, the next
    /// sequence number put below the first valid one, so that every record written from it on
    /// would be void: stored, and never found) is repaired in place, not written on from.
    @Test(.waitsOnItsOwnThreads) func aJoiningWriterRebuildsASharedStateThatCannotBeRight() async throws {
        let directory = TemporaryDirectory()
        let path = directory.path()
        let cache = try Cache(path: path, options: .init(capacity: .megabytes(4)))
        for key in 0..<300 { try cache.set(VersionedValue.make(key: key, version: 1), forKey: "k\(key)") }
        let store = cache.entry.store
        try store.withWriterLock { () throws(LarderError) in
            store.state.nextSequence = store.meta.firstValidSequence - 1
        }

        await #expect(processExitsWith: .success) { [path = path as String] in
            let child = try Cache(path: path)
            for key in 300..<600 { try child.set(VersionedValue.make(key: key, version: 1), forKey: "k\(key)") }
            let intact = try VersionedValue.keys(0..<600, notAt: 1, in: child).isEmpty
            exit(intact && child.stats.recoveries == 1 ? 0 : 1)
        }

        #expect(cache.stats.recoveries == 1)
        #expect(cache.count == 600)
        try cache.set([7], forKey: "after")
        #expect(try cache.bytes(forKey: "after") == [7])
        let lost = try VersionedValue.keys(0..<600, notAt: 1, in: cache)
        #expect(lost.isEmpty, "k\(lost.first ?? 0) lost first")
    }

    /// A writer joining another takes no lock at open (its first write checks the shared state):
    /// a clean file stays clean, so that the open waits for no disk.
    @Test(.waitsOnItsOwnThreads) func aJoiningWriterLeavesACleanFileClean() async throws {
        let directory = TemporaryDirectory()
        let path = directory.path()
        let first = try Cache(path: path)
        try first.set([1], forKey: "k")
        try first.close()
        let cache = try Cache(path: path)
        #expect(cache.entry.store.state.isClean)

        await #expect(processExitsWith: .success) { [path = path as String] in
            let child = try Cache(path: path)
            exit(try child.bytes(forKey: "k") == [1] ? 0 : 1)
        }

        #expect(cache.entry.store.state.isClean)
        #expect(try cache.bytes(forKey: "k") == [1])
    }

    /// A writer that has the file open when another process breaks the head rebuilds the ring in
    /// place when it next makes room, instead of failing every placement until the file is
    /// reopened alone.
    @Test func aWriterRebuildsARingWhoseHeadWasPutOutsideIt() throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(path: directory.path(), options: .init(capacity: .megabytes(4)))
        for key in 0..<300 { try cache.set(VersionedValue.make(key: key, version: 1), forKey: "k\(key)") }
        let store = cache.entry.store
        try store.withWriterLockOfAnotherProcess { () throws(LarderError) in
            store.state.head = store.ringEnd + (1 << 20)
        }

        for key in 300..<600 { try cache.set(VersionedValue.make(key: key, version: 1), forKey: "k\(key)") }
        #expect(cache.stats.recoveries == 1)
        let lost = try VersionedValue.keys(0..<600, notAt: 1, in: cache)
        #expect(lost.isEmpty, "k\(lost.first ?? 0) lost first")
    }

    /// A writer skips the check of the shared state only while the write count is the one its
    /// own last hold left: a hold of another process's writer in between, which left the state
    /// broken and released the lock as usual, moves the count, and this writer rebuilds.
    @Test(.waitsOnItsOwnThreads) func aWriterChecksTheStateAfterAnotherProcessHeldTheLock() async throws {
        let directory = TemporaryDirectory()
        let path = directory.path()
        let cache = try Cache(path: path, options: .init(capacity: .megabytes(4)))
        for key in 0..<300 { try cache.set(VersionedValue.make(key: key, version: 1), forKey: "k\(key)") }

        await #expect(processExitsWith: .success) { [path = path as String] in
            let child = try Cache(path: path)
            let store = child.entry.store
            // Every record written from this next sequence on would be void: stored, never found.
            try store.withWriterLock { () throws(LarderError) in store.state.nextSequence = store.meta.firstValidSequence - 1 }
            exit(0)
        }

        for key in 300..<600 { try cache.set(VersionedValue.make(key: key, version: 1), forKey: "k\(key)") }
        #expect(cache.stats.recoveries == 1)
        let lost = try VersionedValue.keys(0..<600, notAt: 1, in: cache)
        #expect(lost.isEmpty, "k\(lost.first ?? 0) lost first")
    }

    /// What another process may leave in the shared state when it breaks the format while this
    /// one has the file open (each stands in for a write to page 2 such a process made).
    enum BrokenState: String, CaseIterable, CustomTestStringConvertible {
        case headAtTheLargestInteger, unalignedHead, tailBeforeTheRing, negativeSpanAtCapacity
        case entryCountAtTheLargestInteger, migrationCursorAtTheLargestInteger, negativeMigrationCursor
        case nextSequenceBelowTheFirstValid, nextSequenceNearTheLimit

        var testDescription: String { rawValue }

        /// The file is at its capacity (the span then decides every placement's room) or, for
        /// the migration cursor, has an index migrating.
        var capacity: ByteCount { self == .negativeSpanAtCapacity ? .kilobytes(64) : .megabytes(4) }
        var keys: Int {
            switch self {
            case .negativeSpanAtCapacity: 20
            case .migrationCursorAtTheLargestInteger, .negativeMigrationCursor: 385
            default: 300
            }
        }

        func apply(to store: CacheStore) {
            let state = store.state
            switch self {
            case .headAtTheLargestInteger: state.head = .max
            case .unalignedHead: state.head += 8
            case .tailBeforeTheRing: state.tail = 16
            case .negativeSpanAtCapacity: state.spanBytes = .min
            case .entryCountAtTheLargestInteger: state.entryCount = .max
            case .migrationCursorAtTheLargestInteger: state.migrationCursor = .max
            case .negativeMigrationCursor:
                state.migrationCursor = .min
                state.entryCount = 10_000
            case .nextSequenceBelowTheFirstValid: state.nextSequence = store.meta.firstValidSequence - 1
            // Valid, but a few billion records from numbers no reader takes.
            case .nextSequenceNearTheLimit: state.nextSequence = RecordHeader.sequenceLimit - (1 << 31)
            }
        }
    }

    /// A writer counts with head, tail, span, counts and migration cursor only once it has found
    /// them plausible under the writer lock: numbers another process broke made its next write
    /// trap on an arithmetic overflow, loop for hours, or store records never found. It rebuilds
    /// the file in place instead, and nothing stored is lost.
    @Test(.failsIfItHangs, arguments: BrokenState.allCases)
    func aWriterRebuildsAStateAnotherProcessBroke(_ broken: BrokenState) throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(path: directory.path(), options: .init(capacity: broken.capacity))
        for key in 0..<broken.keys { try cache.set(VersionedValue.make(key: key, version: 1), forKey: "k\(key)") }
        let store = cache.entry.store
        if broken == .negativeSpanAtCapacity { #expect(store.ringEnd == store.capacity) }
        if broken.keys == 385 { #expect(store.draining != nil) }
        let before = cache.count
        try store.withWriterLockOfAnotherProcess { () throws(LarderError) in broken.apply(to: store) }

        try cache.set([7], forKey: "after")
        #expect(cache.stats.recoveries == 1)
        #expect(try cache.bytes(forKey: "after") == [7])
        #expect(cache.count == before + 1)
        let lost = try VersionedValue.keys(0..<broken.keys, notAt: 1, in: cache)
        #expect(lost.count == broken.keys - before, "k\(lost.first ?? 0) lost")
    }

    /// A writer that died between writing a meta copy and moving the change counter (the two
    /// steps of `writeMeta`) left a copy the next writer's view does not know. Recovery takes
    /// it up before it cuts the file back to the ring's end: with the older copy's smaller size,
    /// it cut away the records the dead writer had written past it (and, under any process that
    /// had mapped the larger size, pages it would read).
    @Test(.waitsOnItsOwnThreads) func recoveryTakesUpAMetaCopyThatADeadWriterDidNotAnnounce() async throws {
        let directory = TemporaryDirectory()
        let path = directory.path()
        let cache = try Cache(path: path, options: .init(capacity: .megabytes(32)))
        try cache.set([1], forKey: "before")
        let fileBefore = cache.fileBytes

        await #expect(processExitsWith: .signal(SIGKILL)) { [path = path as String] in
            let child = try Cache(path: path)
            let store = child.entry.store
            let announced = store.state.changeCounter
            for key in 0..<5_000 { try child.set(VersionedValue.make(key: key, version: 3), forKey: "k\(key)") }
            try store.withWriterLock { () throws(LarderError) in
                // As if every meta copy written since had gone unannounced.
                store.state.changeCounter = announced
                kill(getpid(), SIGKILL)
            }
        }

        try cache.set([2], forKey: "after")
        #expect(cache.stats.recoveries == 1)
        #expect(cache.fileBytes > fileBefore)
        let lost = try VersionedValue.keys(0..<5_000, notAt: 3, in: cache)
        #expect(lost.count == 0, "k\(lost.first ?? 0) lost first")
        #expect(try cache.bytes(forKey: "before") == [1])
    }

    @Test(.waitsOnItsOwnThreads) func writesOfAnotherProcessAreSeenWithoutReopening() async throws {
        let directory = TemporaryDirectory()
        let path = directory.path()
        let cache = try Cache(path: path, options: .init(capacity: .megabytes(32)))
        try cache.set([1], forKey: "before")
        let fileBefore = cache.fileBytes

        // The child grows the file and the index several times over.
        await #expect(processExitsWith: .success) { [path = path as String] in
            let child = try Cache(path: path)
            for key in 0..<20_000 { try child.set(VersionedValue.make(key: key, version: 7), forKey: "k\(key)") }
            try child.close()
        }

        #expect(cache.fileBytes > fileBefore)
        #expect(cache.count == 20_001)
        for key in stride(from: 0, to: 20_000, by: 7) {
            #expect(try cache.bytes(forKey: "k\(key)").flatMap { VersionedValue.check($0, key: key) } == 7)
        }
        #expect(try cache.bytes(forKey: "before") == [1])
        try cache.set([2], forKey: "after")
        try cache.close()
        #expect(try !Cache(path: path).wasRecovered)
    }

    @Test(.waitsOnItsOwnThreads) func twoProcessesWriteAndReadAtOnce() async throws {
        let directory = TemporaryDirectory()
        let path = directory.path()
        _ = try Cache(path: path, options: .init(capacity: .megabytes(2)))
        async let first = #expect(processExitsWith: .success) { [path = path as String] in
            try Self.writeAndCheck(path: path, seed: 1)
        }
        async let second = #expect(processExitsWith: .success) { [path = path as String] in
            try Self.writeAndCheck(path: path, seed: 2)
        }
        _ = await (first, second)
        let cache = try Cache(path: path)
        #expect(!cache.wasRecovered)
        // Neither writer found the state the other left implausible (a rebuild is counted).
        #expect(cache.stats.recoveries == 0)
        for key in 0..<500 {
            if let value = try cache.bytes(forKey: "k\(key)") { #expect(VersionedValue.check(value, key: key) != nil) }
        }
    }

    @Test(.waitsOnItsOwnThreads) func twoProcessesReplaceAndRemoveLargeValuesAtOnce() async throws {
        // Far below the capacity, values of 12 KiB and more, whose room each process takes again
        // once it has replaced or removed them, among small ones, which keep the tail and the
        // head going round the ring: a process must forget the rooms it knows of once the other
        // has written (the other's tail may have passed them and its head padded over them).
        let directory = TemporaryDirectory()
        let path = directory.path()
        _ = try Cache(path: path, options: .init(capacity: .megabytes(256)))
        let keys = (VersionedValue.largeKeys - 300)..<(VersionedValue.largeKeys + 100)
        async let first = #expect(processExitsWith: .success) { [path = path as String, keys = keys as Range<Int>] in
            try Self.writeAndCheck(path: path, seed: 1, keys: keys, steps: 8_000, removing: true)
        }
        async let second = #expect(processExitsWith: .success) { [path = path as String, keys = keys as Range<Int>] in
            try Self.writeAndCheck(path: path, seed: 2, keys: keys, steps: 8_000, removing: true)
        }
        _ = await (first, second)
        let cache = try Cache(path: path)
        #expect(!cache.wasRecovered)
        #expect(cache.stats.recoveries == 0)
        #expect(cache.stats.evictions == 0)
        var found = 0
        for key in keys {
            guard let value = try cache.bytes(forKey: "k\(key)") else { continue }
            found += 1
            #expect(VersionedValue.check(value, key: key) != nil, "k\(key)")
        }
        #expect(found == cache.count)
        try cache.close()
        let report = try FileInspector(path: path).verify().report
        #expect(report.isSound, "\(report.problems.prefix(3).map(\.description))")
    }

    @Test(.waitsOnItsOwnThreads) func theRoomsAProcessKnowsOfAreForgottenOnceAnotherHasWritten() async throws {
        let directory = TemporaryDirectory()
        let path = directory.path()
        let cache = try Cache(path: path, options: .init(capacity: .megabytes(64)))
        let large = [UInt8](repeating: 7, count: 16 << 10)
        for key in 0..<3 { try cache.set(large, forKey: "k\(key)") }
        // Replacing k0 lists the room of its first value.
        try cache.set(large, forKey: "k0")
        let placed = cache.store.recordsPlacedInDeadRoom

        await #expect(processExitsWith: .success) { [path = path as String] in
            try Cache(path: path).set([1], forKey: "other")
        }

        // The other process wrote since: its tail might have passed the room and its head padded
        // over it. This put goes to the head, and lists the room of k1's value.
        try cache.set(large, forKey: "k1")
        #expect(cache.store.recordsPlacedInDeadRoom == placed)
        // With no other writer in between, the next one takes that room.
        try cache.set(large, forKey: "k2")
        #expect(cache.store.recordsPlacedInDeadRoom == placed + 1)
        #expect(try cache.bytes(forKey: "other") == [1])
        for key in 0..<3 { #expect(try cache.bytes(forKey: "k\(key)") == large) }
    }

    @Test func theRoomsAreForgottenWhenTakingTheLockFailsAfterAnotherProcessWrote() throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(path: directory.path(), options: .init(capacity: .megabytes(64)))
        let large = [UInt8](repeating: 7, count: 16 << 10)
        for key in 0..<3 { try cache.set(large, forKey: "k\(key)") }
        try cache.set(large, forKey: "k0")
        let store = cache.store
        #expect(!store.allocator.value.deadRooms.list.isEmpty)
        // As if another process wrote (a record, a meta change), and the meta pages could not be
        // read while this one took the lock: the lock is given back with an error.
        let pageSize = store.pageSize
        let metaPages = Array(store.file.bytes(at: 0, count: 2 * pageSize))
        store.state.nextSequence += 5
        store.state.changeCounter += 1
        store.file.mutableBytes(at: 0, count: 2 * pageSize).initializeMemory(as: UInt8.self, repeating: 0xEE)
        #expect(throws: LarderError.self) { try cache.set([1], forKey: "x") }
        metaPages.withUnsafeBytes { store.file.mutableBytes(at: 0, count: 2 * pageSize).copyMemory(from: $0) }
        // The other process's changes were there to see: the rooms must not outlive them.
        try cache.set([2], forKey: "y")
        #expect(store.allocator.value.deadRooms.list.isEmpty)
    }

    /// Writes and reads (and removes, if `removing`) for a while; exits with failure at the first
    /// value that does not check out.
    static func writeAndCheck(path: String, seed: UInt64, keys: Range<Int> = 0..<500, steps: Int = 20_000,
                              removing: Bool = false) throws {
        let cache = try Cache(path: path)
        var generator = SplitMix(seed: seed)
        for step in 0..<steps {
            let key = keys.lowerBound + Int(generator.next() % UInt64(keys.count))
            let choice = generator.next() % 8
            if removing && choice == 0 {
                try cache.removeValue(forKey: "k\(key)")
            } else if choice < 4 {
                try cache.set(VersionedValue.make(key: key, version: Int(seed) * 100_000 + step), forKey: "k\(key)")
            } else if let value = try cache.bytes(forKey: "k\(key)"), VersionedValue.check(value, key: key) == nil {
                exit(3)
            }
        }
        try cache.close()
    }

    @Test(.waitsOnItsOwnThreads) func killedAtRandomMomentsTheFileAlwaysReopensWithValidValues() async throws {
        let rounds = ProcessInfo.processInfo.environment["LARDER_KILL_ROUNDS"].flatMap(Int.init) ?? 40
        let directory = TemporaryDirectory()
        let path = directory.path()
        for round in 0..<rounds {
            await #expect(processExitsWith: .signal(SIGKILL)) { [path = path as String, round = round as Int] in
                let cache = try Cache(path: path, options: .init(capacity: .megabytes(1)))
                // A second thread pulls the plug at a random moment, whatever the writer is doing.
                let delay = UInt32(1_000 + (round * 7_919) % 30_000)
                Thread.detachNewThread {
                    usleep(delay)
                    kill(getpid(), SIGKILL)
                }
                var version = round * 1_000_000
                while true {
                    for key in 0..<300 {
                        version += 1
                        try cache.set(VersionedValue.make(key: key, version: version), forKey: "k\(key)")
                        if key % 37 == 0 { try cache.removeValue(forKey: "k\((key * 7) % 300)") }
                    }
                }
            }
            let cache = try Cache(path: path)
            var found = 0
            for key in 0..<300 {
                guard let value = try cache.bytes(forKey: "k\(key)") else { continue }
                found += 1
                #expect(VersionedValue.check(value, key: key) != nil, "round \(round): k\(key)")
            }
            #expect(found == cache.count, "round \(round)")
            try cache.close()
        }
    }

    /// A file copied sparse (`cp --sparse`, `rsync -S`, a backup restored) has holes where its
    /// zeros were, for which no disk space is reserved: a store through the map into one on a
    /// full disk kills the process with SIGBUS (reproduced on a full tmpfs). The first writer to
    /// open it reserves them, keeping every byte.
    @Test func aWriterOpeningAFileCopiedSparseReservesItsHoles() throws {
        let directory = TemporaryDirectory()
        let original = directory.path()
        do {
            let cache = try Cache(path: original, options: .init(capacity: .megabytes(8)))
            for key in 0..<300 { try cache.set(VersionedValue.make(key: key, version: 1), forKey: "k\(key)") }
            try cache.close()
        }
        let copy = directory.path("sparse.larder")
        guard try copySparse(original, to: copy) else { return } // a file system without holes
        // A reader may not reserve anything.
        try Cache(path: copy, options: .init(readOnly: true)).close()
        #expect(unreservedBytes(in: copy) > 0)
        let cache = try Cache(path: copy)
        #expect(unreservedBytes(in: copy) == 0)
        for key in [0, 150, 299] {
            #expect(try cache.bytes(forKey: "k\(key)").flatMap { VersionedValue.check($0, key: key) } == 1)
        }
        #expect(!cache.wasRecovered)
    }

    @Test(.waitsOnItsOwnThreads) func aFullDiskIsAnErrorFromSetAndLosesNothing() async throws {
        let directory = TemporaryDirectory()
        let path = directory.path()
        // How many puts the child saw succeed, written by the child for this process to check.
        let acknowledged = directory.path("acknowledged")
        // The child may not write files larger than 2 MiB: a small disk.
        await #expect(processExitsWith: .success) { [path = path as String, acknowledged = acknowledged as String] in
            guard limitFileSize(to: 2 << 20) else { exit(4) }
            let cache = try Cache(path: path, options: .init(capacity: .megabytes(64)))
            var stored = 0
            do {
                for key in 0..<10_000 {
                    try cache.set(VersionedValue.make(key: key, version: 1), forKey: "k\(key)")
                    stored = key + 1
                }
                exit(5)
            } catch let error as LarderError {
                guard error.code == .full else { exit(6) }
            }
            for key in 0..<stored {
                guard try cache.bytes(forKey: "k\(key)").flatMap({ VersionedValue.check($0, key: key) }) == 1 else { exit(7) }
            }
            try cache.close()
            guard FileManager.default.createFile(atPath: acknowledged, contents: Data(String(stored).utf8)) else { exit(8) }
        }
        let stored = try #require(Int(String(decoding: Data(contentsOf: URL(fileURLWithPath: acknowledged)), as: UTF8.self)))
        #expect(stored > 100)
        // Every put the child was told had succeeded is there, with its value, and nothing else.
        let cache = try Cache(path: path)
        for key in 0..<stored {
            #expect(try cache.bytes(forKey: "k\(key)").flatMap { VersionedValue.check($0, key: key) } == 1, "k\(key)")
        }
        #expect(cache.count == stored)
        var keys: [String] = []
        try cache.forEachEntry { key, _ in
            keys.append(String(decoding: key, as: UTF8.self))
            return true
        }
        #expect(keys.count == stored)
    }
}

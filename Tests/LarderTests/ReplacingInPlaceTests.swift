import Foundation
import Testing
@testable @_spi(Inspection) import Larder

/// A value replaced by one whose record fits the old record's room is written over it (FORMAT.md
/// 6.9): the ring does not move, nothing is evicted for it, and readers see the old value or the
/// new one, never a miss, a mix or a lent value changing under them.
@Suite("Replacing in place")
struct ReplacingInPlaceTests {
    /// Keys of one length, so that records of one value length have one size.
    private static func key(_ index: Int) -> String { String(format: "k%06d", index) }

    @Test("values replaced by ones that fit are written over them: the ring, the file and the counts stay as they were")
    func replacementsThatFitDoNotMoveTheRing() throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(at: directory.path(), capacity: 256 << 20)
        let keys = 1_000
        var model: [Int: [UInt8]] = [:]
        for index in 0..<keys {
            model[index] = versionedBytes(key: index, version: 0, length: 100)
            try cache.set(model[index]!, forKey: Self.key(index))
        }
        let head = cache.store.state.head, span = cache.store.state.spanBytes
        let fileBytes = cache.fileBytes, recordBytes = cache.stats.recordBytes
        var generator = SplitMix(seed: 3)
        // Of the same length, then of lengths from 36 to 100 bytes: a shorter record leaves
        // padding after it in the room, which a longer one takes again.
        for step in 1...30_000 {
            let index = Int(generator.next() % UInt64(keys))
            let length = step < 10_000 ? 100 : 36 + Int(generator.next() % 65)
            model[index] = versionedBytes(key: index, version: step, length: length)
            try cache.set(model[index]!, forKey: Self.key(index))
        }
        #expect(cache.store.state.head == head)
        #expect(cache.store.state.spanBytes == span)
        #expect(cache.fileBytes == fileBytes)
        #expect(cache.stats.recordBytes <= recordBytes)
        #expect(cache.stats.updates == 30_000)
        #expect(cache.stats.inserts == UInt64(keys))
        #expect(cache.stats.relocations == 0 && cache.stats.evictions == 0)
        #expect(cache.count == keys)
        #expect(cache.stats.liveBytes == model.values.reduce(0) { $0 + $1.count })
        for (index, value) in model { #expect(try cache.bytes(forKey: Self.key(index)) == value) }

        // A value longer than its room goes to the head, as before.
        let longer = versionedBytes(key: 0, version: 99_999, length: 200)
        try cache.set(longer, forKey: Self.key(0))
        model[0] = longer
        #expect(cache.store.state.head > head)

        // What a crash leaves recovers to the same entries, and the closed file is sound.
        let copy = directory.path("crashed.larder")
        try FileManager.default.copyItem(atPath: directory.path(), toPath: copy)
        try cache.close()
        let report = try FileInspector(path: directory.path()).verify().report
        #expect(report.isSound, "\(report.problems.prefix(3).map(\.description))")
        let recovered = try Cache(path: copy)
        #expect(recovered.wasRecovered)
        #expect(recovered.count == keys)
        for (index, value) in model { #expect(try recovered.bytes(forKey: Self.key(index)) == value) }
    }

    @Test("after a crash, recovery puts the head back after the newest record written at the head, not after one written over another")
    func recoveryFindsTheHead() throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(at: directory.path(), capacity: 256 << 20)
        for index in 0..<1_000 { try cache.set(versionedBytes(key: index, version: 0, length: 100), forKey: Self.key(index)) }
        // In the middle of the span, and the last ones written at the head.
        for step in 1...500 {
            try cache.set(versionedBytes(key: step % 1_000, version: step, length: 100), forKey: Self.key(step % 1_000))
        }
        for index in 990..<1_000 {
            try cache.set(versionedBytes(key: index, version: 1, length: 100), forKey: Self.key(index))
        }
        let head = cache.store.state.head
        let copy = directory.path("crashed.larder")
        try FileManager.default.copyItem(atPath: directory.path(), toPath: copy)
        let recovered = try Cache(path: copy)
        #expect(recovered.wasRecovered)
        #expect(recovered.store.state.head == head)
        #expect(recovered.stats.relocations == 0)
        // Numbered on from the newest of all, the ones written over others among them.
        #expect(recovered.store.state.nextSequence == cache.store.state.nextSequence)
        try recovered.set(versionedBytes(key: 5_000, version: 0, length: 100), forKey: Self.key(5_000))
        #expect(try recovered.bytes(forKey: Self.key(500)) == versionedBytes(key: 500, version: 500, length: 100))
    }

    @Test("after a crash, recovery finds the head across the ring's end when the records written there since were written over")
    func recoveryFindsTheHeadAcrossTheEnd() throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(at: directory.path(), capacity: 1 << 20)
        var next = 0
        var last = cache.store.state.head
        // Until the head has come round to the ring's start, and three more.
        while cache.store.state.head >= last {
            last = cache.store.state.head
            try cache.set(versionedBytes(key: next, version: 0, length: 200), forKey: Self.key(next))
            next += 1
        }
        for _ in 0..<3 {
            try cache.set(versionedBytes(key: next, version: 0, length: 200), forKey: Self.key(next))
            next += 1
        }
        for index in next - 4..<next {
            try cache.set(versionedBytes(key: index, version: 1, length: 200), forKey: Self.key(index))
        }
        let head = cache.store.state.head, tail = cache.store.state.tail
        let copy = directory.path("crashed.larder")
        try FileManager.default.copyItem(atPath: directory.path(), toPath: copy)
        let recovered = try Cache(path: copy)
        #expect(recovered.wasRecovered)
        #expect(recovered.store.state.head == head)
        #expect(recovered.store.state.tail == tail)
    }

    @Test("at the capacity, an entry written over counts as used: the tail keeps it and evicts the unused ones after it")
    func aRewriteIsAUse() throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(at: directory.path(), capacity: 1 << 20)
        // Written in order until the ring is full: the oldest are evicted first, none was read.
        var next = 0
        while cache.stats.evictions < 100 {
            try cache.set(versionedBytes(key: next, version: 0, length: 200), forKey: Self.key(next))
            next += 1
        }
        var oldest = 0
        while !cache.contains(Self.key(oldest)) { oldest += 1 }
        let rewritten = versionedBytes(key: oldest, version: 1, length: 200)
        try cache.set(rewritten, forKey: Self.key(oldest))
        // New keys until the ten written after the oldest are gone.
        while (oldest + 1...oldest + 10).contains(where: { cache.contains(Self.key($0)) }) {
            try cache.set(versionedBytes(key: next, version: 0, length: 200), forKey: Self.key(next))
            next += 1
        }
        #expect(try cache.bytes(forKey: Self.key(oldest)) == rewritten)
        // Kept by being moved to the head: the copy is no longer flagged as written in the span,
        // so that recovery may put the head after it.
        let found = Self.key(oldest).utf8CString.dropLast().withUnsafeBytes { key in
            cache.store.lookup(key, hash: KeyHash(key))
        }
        #expect(cache.stats.relocations > 0)
        #expect(found.map { !$0.header.wasPlacedInSpan } == true)
    }

    @Test("a value lent by withValue is not written over: the new one goes elsewhere, and the counts stay right")
    func aLentValueStaysWhileItIsLent() throws {
        let directory = TemporaryDirectory()
        let lender = try Cache(at: directory.path(), capacity: 16 << 20)
        let writer = try Cache(at: directory.path())
        let old = versionedBytes(key: 1, version: 0, length: 100), new = versionedBytes(key: 1, version: 1, length: 100)
        try writer.set(old, forKey: Self.key(1))
        try writer.set(versionedBytes(key: 2, version: 0, length: 100), forKey: Self.key(2))
        let head = writer.store.state.head
        let lentAfterTheWrite = try lender.withValue(forKey: Self.key(1)) { lent in
            try writer.set(new, forKey: Self.key(1))
            return Array(lent)
        }
        #expect(lentAfterTheWrite == old)
        #expect(writer.store.state.head > head)
        #expect(try lender.bytes(forKey: Self.key(1)) == new)
        #expect(writer.count == 2)
        #expect(writer.stats.updates == 1 && writer.stats.inserts == 2)
        #expect(writer.stats.liveBytes == 200)
        // Once the loan is over, the next value of the same size is written over the new one.
        let head2 = writer.store.state.head
        try writer.set(versionedBytes(key: 1, version: 2, length: 100), forKey: Self.key(1))
        #expect(writer.store.state.head == head2)
        try writer.close()
        try lender.close()
        let report = try FileInspector(path: directory.path()).verify().report
        #expect(report.isSound, "\(report.problems.prefix(3).map(\.description))")
    }

    @Test("a put refused for a full disk while the value it replaces is lent loses nothing", .waitsOnItsOwnThreads)
    func aFailedPutOfALentValueLosesNothing() async throws {
        let directory = TemporaryDirectory()
        let path = directory.path()
        await #expect(processExitsWith: .success) { [path = path as String] in
            guard limitFileSize(to: 2 << 20) else { exit(4) }
            let cache = try Cache(path: path, options: .init(capacity: .megabytes(64)))
            let lender = try Cache(path: path)
            let old = versionedBytes(key: 1, version: 0, length: 200)
            try cache.set(old, forKey: Self.key(1))
            // Fills the file up to what the disk takes.
            var index = 2
            do {
                while true {
                    try cache.set(versionedBytes(key: index, version: 0, length: 200), forKey: Self.key(index))
                    index += 1
                }
            } catch let error as LarderError {
                guard error.code == .full else { exit(5) }
            }
            let count = cache.count
            var refused: LarderError.Code?
            _ = try lender.withValue(forKey: Self.key(1)) { _ in
                do {
                    try cache.set(versionedBytes(key: 1, version: 1, length: 200), forKey: Self.key(1))
                } catch let error as LarderError {
                    refused = error.code
                } catch {}
            }
            guard refused == .full else { exit(6) }
            guard try cache.bytes(forKey: Self.key(1)) == old, cache.count == count else { exit(7) }
            // Once the loan is over, the value is written over the old one: no room needed.
            try cache.set(versionedBytes(key: 1, version: 2, length: 200), forKey: Self.key(1))
            guard try cache.bytes(forKey: Self.key(1)) == versionedBytes(key: 1, version: 2, length: 200) else { exit(8) }
        }
    }

    @Test("a compressible value written over a raw one is compressed into its room")
    func aCompressedRewrite() throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(path: directory.path(), options: .init(capacity: .megabytes(16), compression: .lz4))
        let raw = pattern(5, count: 1_000)
        try cache.set(raw, forKey: "k")
        #expect(cache.stats.storedBytes == 1_000)
        let head = cache.store.state.head
        let compressible = [UInt8](repeating: 7, count: 900)
        try cache.set(compressible, forKey: "k")
        #expect(cache.store.state.head == head)
        #expect(cache.stats.storedBytes < 100)
        #expect(try cache.bytes(forKey: "k") == compressible)
        try cache.close()
        let report = try FileInspector(path: directory.path()).verify().report
        #expect(report.isSound, "\(report.problems.prefix(3).map(\.description))")
    }

    /// Readers take no lock: one that looks for a key while its record is written over finds it
    /// dead or half written, and must look again (the index epoch), not report a miss, and one
    /// that read the old record must see that it changed, not return a mix.
    @Test("readers never miss a key, nor get a mixed value, while it is written over again and again", .waitsOnItsOwnThreads)
    func readersDuringRewrites() throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(at: directory.path(), capacity: 16 << 20)
        let keys = 8
        for index in 0..<keys { try cache.set(versionedBytes(key: index, version: 0, length: 300), forKey: Self.key(index)) }
        let done = AtomicWord()
        let missing = LockedCounter(), wrong = LockedCounter(), failures = LockedCounter(), reads = LockedCounter()
        runOnThreads(3) { thread in
            if thread == 0 {
                var generator = SplitMix(seed: 9)
                for step in 1...100_000 {
                    let index = Int(generator.next() % UInt64(keys))
                    do {
                        try cache.set(versionedBytes(key: index, version: step, length: 300), forKey: Self.key(index))
                    } catch { failures.increment() }
                }
                done.store(1)
                return
            }
            var generator = SplitMix(seed: UInt64(thread))
            while done.load() == 0 {
                let index = Int(generator.next() % UInt64(keys))
                do {
                    let got = thread == 1
                        ? try cache.bytes(forKey: Self.key(index))
                        : try cache.withValue(forKey: Self.key(index)) { Array($0) }
                    reads.increment()
                    guard let got else { missing.increment(); continue }
                    let version = got.withUnsafeBytes { Int($0.load(fromByteOffset: 4, as: UInt32.self)) }
                    if got != versionedBytes(key: index, version: version, length: 300) { wrong.increment() }
                } catch { failures.increment() }
            }
        }
        #expect(reads.value > 1_000)
        #expect(missing.value == 0)
        #expect(wrong.value == 0)
        #expect(failures.value == 0)
        #expect(cache.stats.updates == 100_000 && cache.count == keys)
    }

    @Test("readers and listings of another process never miss a key, nor get a mixed value, while it is written over", .waitsOnItsOwnThreads)
    func readersOfAnotherProcessDuringRewrites() async throws {
        let directory = TemporaryDirectory()
        let path = directory.path()
        let cache = try Cache(path: path, options: .init(capacity: .megabytes(16)))
        let keys = 8
        for index in 0..<keys { try cache.set(versionedBytes(key: index, version: 0, length: 300), forKey: Self.key(index)) }
        let head = cache.store.state.head
        // The child writes the keys over until this process has read enough and says stop.
        async let writer = #expect(processExitsWith: .success) { [path = path as String] in
            let cache = try Cache(path: path)
            try cache.set([1], forKey: "started")
            var step = 0
            while step < 20_000_000 && !cache.contains("stop") {
                step += 1
                try cache.set(versionedBytes(key: step % 8, version: step, length: 300), forKey: Self.key(step % 8))
            }
        }
        // The reading's deadline counts from the child's start; the wait for that start has a
        // bound of its own, far longer, should the child fail before it.
        try await waitUntil(seconds: 900, every: .milliseconds(5)) { cache.contains("started") }
        let deadline = Date().addingTimeInterval(300)
        struct Tally: Sendable { var reads = 0, missing = 0, wrong = 0, listings = 0, incompleteListings = 0; var updates: UInt64 = 0 }
        // Reads without pause, on a thread of its own: on the test runner's shared threads it
        // would have to yield to other tests now and then, and wait for them.
        let reading: Result<Tally, any Error>
        do { reading = .success(try await onOwnThread { () throws -> Tally in
            var tally = Tally()
            var generator = SplitMix(seed: 4)
            // Until both sides have done their share, however the machine schedules them.
            while (tally.reads < 20_000 || tally.updates < 5_000) && Date() < deadline {
                if tally.reads % 256 == 0 {
                    tally.updates = cache.stats.updates
                    // A listing meets records being written over too: each is read again from its slot.
                    var listed = Set<String>()
                    try cache.forEachEntry { key, _ in
                        listed.insert(String(decoding: key, as: UTF8.self))
                        return true
                    }
                    tally.listings += 1
                    if !(0..<keys).allSatisfy({ listed.contains(Self.key($0)) }) { tally.incompleteListings += 1 }
                }
                let index = Int(generator.next() % UInt64(keys))
                let got = tally.reads % 2 == 0
                    ? try cache.bytes(forKey: Self.key(index))
                    : try cache.withValue(forKey: Self.key(index)) { Array($0) }
                tally.reads += 1
                guard let got else { tally.missing += 1; continue }
                let version = got.withUnsafeBytes { Int($0.load(fromByteOffset: 4, as: UInt32.self)) }
                if got != versionedBytes(key: index, version: version, length: 300) { tally.wrong += 1 }
            }
            return tally
        }) } catch { reading = .failure(error) }
        // Whatever came of the reading, the child stops.
        try cache.set([1], forKey: "stop")
        _ = await writer
        let tally = try reading.get()
        #expect(tally.reads >= 20_000, "reads in time")
        #expect(tally.updates >= 5_000, "the other process's writes in time")
        #expect(tally.missing == 0)
        #expect(tally.wrong == 0)
        #expect(tally.incompleteListings == 0)
        // Written over, but for the few a read of this process was lending at that moment.
        #expect(cache.store.state.head - head < Int(cache.stats.updates) / 2 * 352)
    }
}

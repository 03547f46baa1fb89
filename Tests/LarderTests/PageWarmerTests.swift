import Foundation
import Testing
@testable import Larder

/// The page warmer maps fresh file pages ahead of the head in the background. What it asks to
/// warm must stay inside the file, ahead of the head and within its window, cover every fresh page
/// the head walks into, and stop once the file stops growing.
@Suite("Page warmer")
struct PageWarmerTests {
    /// A file that grows as a test says, and the ranges a warmer scheduled for it.
    final class Recorder {
        var fileSize: Int
        var ranges: [Range<Int>] = []
        init(fileSize: Int) { self.fileSize = fileSize }

        func warmer() -> PageWarmer {
            PageWarmer(fileSize: { self.fileSize }, schedule: { self.ranges.append($0) })
        }
    }

    @Test func warmsOnlyFreshPagesAheadOfTheHeadAndCoversThemAll() {
        let mib = 1 << 20
        let recorder = Recorder(fileSize: 4 * mib)
        let warmer = recorder.warmer()
        // Pages the file had when the warmer started are not fresh.
        for head in stride(from: 0, through: 4 * mib, by: 100_000) { warmer.headMoved(to: head) }
        #expect(recorder.ranges.isEmpty)

        // The file grows; the head walks through the new part in record-sized steps.
        recorder.fileSize = 100 * mib
        var head = 4 * mib
        while head < 100 * mib {
            head += 176
            warmer.headMoved(to: head)
            if let last = recorder.ranges.last {
                #expect(last.upperBound <= recorder.fileSize)
                #expect(last.upperBound - head <= PageWarmer.window)
            }
            // Never behind: the head is always inside what was warmed, once warming started.
            if !recorder.ranges.isEmpty && head < 100 * mib { #expect(head < warmer.warmedUpTo) }
        }
        let pageSize = Int(getpagesize())
        #expect(recorder.ranges.first?.lowerBound == 4 * mib)
        #expect(recorder.ranges.last?.upperBound == 100 * mib)
        for (earlier, later) in zip(recorder.ranges, recorder.ranges.dropFirst()) {
            // Contiguous, up to the page the head was in when the next one started.
            #expect(later.lowerBound <= earlier.upperBound && later.lowerBound > earlier.upperBound - pageSize)
            #expect(later.lowerBound % pageSize == 0)
        }
        // Each range is a good part of a window, not a page at a time.
        #expect(recorder.ranges.count <= 100 / 4 + 2)

        // At its full size the ring wraps: the head is back among mapped pages, nothing to do.
        let scheduled = recorder.ranges.count
        for head in stride(from: 8192, through: 50 * mib, by: 4096) { warmer.headMoved(to: head) }
        #expect(recorder.ranges.count == scheduled)
    }

    @Test func readOnlyHandlesWarmNothing() throws {
        let directory = TemporaryDirectory()
        let writer = try Cache(path: directory.path())
        try writer.set([1], forKey: "a")
        try writer.close()
        let reader = try Cache(path: directory.path(), options: .init(readOnly: true))
        #expect(reader.entry.store.pageWarmer == nil)
        #expect(try reader.bytes(forKey: "a") == [1])
    }

    /// A fill that grows the file many times, with pages warmed behind the writer's back, reads
    /// back every value, also after reopening.
    @Test func aFillThatGrowsTheFileReadsBackWhole() throws {
        let directory = TemporaryDirectory()
        let count = 20_000
        do {
            let cache = try Cache(at: directory.path(), capacity: 256 << 20)
            for index in 0..<count { try cache.set(pattern(index, count: 1_000 + index % 3_000), forKey: "k\(index)") }
            for index in stride(from: 0, to: count, by: 7) {
                #expect(try cache.bytes(forKey: "k\(index)") == pattern(index, count: 1_000 + index % 3_000))
            }
            try cache.close()
        }
        let reopened = try Cache(path: directory.path())
        #expect(!reopened.wasRecovered)
        #expect(reopened.count == count)
        for index in stride(from: 3, to: count, by: 11) {
            #expect(try reopened.bytes(forKey: "k\(index)") == pattern(index, count: 1_000 + index % 3_000))
        }
    }

    #if os(Linux)
    /// The real path: once the warming jobs are done, the writer's stores into the pages ahead of
    /// the head take almost no page faults (without warming, about one per page).
    @Test(.waitsOnItsOwnThreads) func theWriterFindsWarmedPagesMapped() throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(at: directory.path(), capacity: 256 << 20)
        guard let warmer = cache.entry.store.pageWarmer else { return } // a kernel before 5.14
        let values = (0..<6_000).map { pattern($0, count: 1_000) }
        let keys = (0..<6_000).map { Array("key-\($0)".utf8) }
        // Write until a growth leaves at least 1.5 MiB of fresh file in front of the head (growth
        // steps are half the file), then let the jobs finish.
        let file = cache.entry.store.file
        var written = 0
        while file.size - cache.entry.store.state.head < 3 << 19 {
            try cache.set(values[written], forKey: keys[written])
            written += 1
            try #require(written < 5_000)
        }
        // The jobs take milliseconds, seconds on a loaded machine; the count is the process's, so
        // other tests' jobs may keep it up a while too.
        let deadline = Date().addingTimeInterval(300)
        while PageWarmer.jobsRunning.load() != 0 && Date() < deadline { usleep(1_000) }
        let head = cache.entry.store.state.head
        let warmedAhead = warmer.warmedUpTo - head
        try #require(warmedAhead >= 3 << 19, "warmed \(warmedAhead) bytes ahead")

        // About 1.1 MB of records, all inside the warmed stretch: some 270 fresh pages.
        let before = Self.minorFaultsOfThisThread()
        for index in written..<(written + 1_000) { try cache.set(values[index], forKey: keys[index]) }
        let faults = Self.minorFaultsOfThisThread() - before
        let pages = (cache.entry.store.state.head - head) / 4096
        #expect(pages > 200)
        // Under AddressSanitizer each store into a fresh page also touches the shadow memory that
        // describes it, whose first touch is a fault of its own: about one for every 8 pages.
        if !isUnderAddressSanitizer { #expect(faults < pages / 4, "\(faults) faults for \(pages) pages") }
    }

    static func minorFaultsOfThisThread() -> Int {
        var usage = rusage()
        // RUSAGE_THREAD (1): Glibc declares it only for _GNU_SOURCE, which Swift does not set.
        getrusage(__rusage_who_t(1), &usage)
        return usage.ru_minflt
    }
    #endif
}

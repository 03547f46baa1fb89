#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import CLarderSupport

/// Takes the page faults of fresh file pages off the writer.
///
/// The ring is a log: while the file grows, every record lands in pages this process has never
/// mapped, and the first store to each page is a page fault (about a microsecond here, a quarter
/// of a 1 KiB put). The warmer has a background job map the pages a little way ahead of the head
/// ready for writing (`lrd_populate_in_background`), so that the writer finds them mapped. Only
/// pages the file gained while this process had it open are warmed, never more than `window`
/// bytes ahead of the head: pages warmed but never written are written back as zeros, at most
/// that much per process. Where the system has no such call, nothing happens.
///
/// Invariant: `warmedUpTo` only grows, and never beyond the file's length when it was set; every
/// range handed to `schedule` ends there, and starts at or after the last range's end and the
/// head, rounded down to a system page. Used by the writer, under the writer lock.
final class PageWarmer {
    /// How far ahead of the head pages are kept mapped.
    static let window = 8 << 20

    private let fileSize: () -> Int
    private let systemPageSize = SystemCall.systemPageSize
    private let schedule: (Range<Int>) -> Void
    /// Offsets below this were mapped already, warmed, or are not fresh.
    private(set) var warmedUpTo: Int
    /// Where the head makes the warmer look at the file next: half a window before `warmedUpTo`,
    /// or, once a look found no fresh pages, `lookStep` past the head then.
    private var nextLook: Int
    /// How far the head moves between looks at a file that had no fresh pages: each look calls
    /// `fileSize`. Pages another process adds are warmed at most this late.
    static let lookStep = 64 << 10

    /// A warmer that calls `schedule` with the byte ranges to warm (tests record them).
    init(fileSize: @escaping () -> Int, schedule: @escaping (Range<Int>) -> Void) {
        self.fileSize = fileSize
        self.warmedUpTo = fileSize()
        self.nextLook = warmedUpTo &- PageWarmer.window / 2 &+ 1
        self.schedule = schedule
    }

    /// A warmer for `file` whose jobs run on threads of their own, or nil where the system cannot
    /// map pages ahead.
    static func warming(_ file: MappedFile) -> PageWarmer? {
        guard file.canPopulateAhead else { return nil }
        return PageWarmer(fileSize: { file.size }, schedule: { range in WarmingJob.start(file, range) })
    }

    /// Warming jobs started and not yet finished, in this process (tests wait for them).
    static let jobsRunning = AtomicWord()

    /// The head has moved to `head`: when the head is within half a window of the warmed pages
    /// and the file has fresh pages beyond them, warms the next stretch (one compare otherwise).
    @inline(__always)
    func headMoved(to head: Int) {
        if head >= nextLook { warmAhead(of: head) }
    }

    /// The file has grown in front of the head: looks at once.
    func fileGrew(head: Int) { warmAhead(of: head) }

    private func warmAhead(of head: Int) {
        guard head &+ PageWarmer.window / 2 > warmedUpTo else {
            nextLook = warmedUpTo &- PageWarmer.window / 2 &+ 1
            return
        }
        let end = min(fileSize(), head + PageWarmer.window)
        guard end > warmedUpTo else {
            nextLook = head &+ PageWarmer.lookStep
            return
        }
        // From the page the head is in (the call takes whole pages; that one is mapped already).
        let start = max(warmedUpTo, head) & ~(systemPageSize - 1)
        warmedUpTo = end
        nextLook = end &- PageWarmer.window / 2 &+ 1
        schedule(start..<end)
    }
}

/// A job's hold on the mapping: the file object is kept alive (and so mapped) until the job's
/// thread ends, and that thread touches nothing but the kernel's page tables.
private final class WarmingJob {
    let file: MappedFile

    private init(file: MappedFile) { self.file = file }

    static func start(_ file: MappedFile, _ range: Range<Int>) {
        let job = Unmanaged.passRetained(WarmingJob(file: file))
        _ = lrd_fetch_add_u64(PageWarmer.jobsRunning.pointer, 1)
        let started = file.populateInBackground(range, done: { context in
            Unmanaged<WarmingJob>.fromOpaque(context!).release()
            _ = lrd_fetch_add_u64(PageWarmer.jobsRunning.pointer, UInt64.max)
        }, context: job.toOpaque())
        if !started {
            // No thread (resources exhausted): the writer faults the pages itself.
            job.release()
            _ = lrd_fetch_add_u64(PageWarmer.jobsRunning.pointer, UInt64.max)
        }
    }
}

import Foundation
import Testing

/// Where a test that waits runs, and how long it may run.
///
/// Swift Testing runs every test at once on Swift's shared pool: as many threads as cores, two on
/// a small machine. A test that blocks one of them (a semaphore, a sleep, a child process's output
/// that an exit test reads) takes it from every other test. And a test's turn comes late: the
/// pool runs the tests queued before it first, and again after each of its awaits.
///
/// So a test that waits runs on threads of its own (a task executor preference: its child tasks,
/// and Swift Testing's reads of an exit test's pipes, go there too). Its limit counts from when
/// its body starts, not from when Swift Testing queued it. A wait that ignores cancellation still
/// holds up the run, but the hang is reported with the test's name once the limit passes.
/// (LarderToolTests compiles this file too, through a symbolic link.)
struct WaitingTestTrait: TestTrait, SuiteTrait, TestScoping {
    /// How long the test may run, from its body's start, before it is reported as hung.
    var limit: Duration?
    /// On a suite, the trait applies to each of its tests.
    var isRecursive: Bool { true }

    /// Whether the running test was given threads of its own (for `expectOwnThreads`).
    @TaskLocal static var isOnOwnThreads = false

    func provideScope(for test: Test, testCase: Test.Case?,
                      performing function: @Sendable () async throws -> Void) async throws {
        func run() async throws { try await limited(function, at: test.sourceLocation) }
        try await Self.$isOnOwnThreads.withValue(true) {
            if #available(macOS 15.0, iOS 18.0, tvOS 18.0, watchOS 11.0, visionOS 2.0, *) {
                try await withTaskExecutorPreference(ThreadPerJobExecutor.shared, operation: run)
            } else {
                // Older systems have no task executors: the test waits on the shared pool.
                try await run()
            }
        }
    }

    /// Runs `function`, and records an issue if it is still running when the limit passes.
    private func limited(_ function: @Sendable () async throws -> Void, at sourceLocation: SourceLocation) async throws {
        guard let limit else { return try await function() }
        try await withoutActuallyEscaping(function) { function in
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await function() }
                group.addTask {
                    try? await Task.sleep(for: limit)
                    if !Task.isCancelled {
                        Issue.record("still running \(limit) after it started: it hangs", sourceLocation: sourceLocation)
                    }
                }
                // The first to end: the test (the timer is then stopped), or the timer.
                try await group.next()
                group.cancelAll()
                try await group.waitForAll()
            }
        }
    }
}

extension Trait where Self == WaitingTestTrait {
    /// For a test that waits for threads, processes or time: it runs on threads of its own, and
    /// a hang is reported 5 minutes after its body started.
    static var failsIfItHangs: Self { .init(limit: .seconds(300)) }

    /// For a test that waits (an exit test's child process, which may run for minutes): it runs
    /// on threads of its own, with no limit.
    static var waitsOnItsOwnThreads: Self { .init(limit: nil) }
}

/// Records an issue unless the running test has threads of its own: for a helper that blocks.
func expectOwnThreads(sourceLocation: SourceLocation = #_sourceLocation) {
    if !WaitingTestTrait.isOnOwnThreads {
        Issue.record("this test blocks a thread of Swift's shared pool: give it .waitsOnItsOwnThreads",
                     sourceLocation: sourceLocation)
    }
}

/// Runs each job of the tasks that prefer it on a new thread: a job that blocks holds up no
/// other job, as it would on a pool of fixed size.
@available(macOS 15.0, iOS 18.0, tvOS 18.0, watchOS 11.0, visionOS 2.0, *)
final class ThreadPerJobExecutor: TaskExecutor {
    static let shared = ThreadPerJobExecutor()

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let executor = asUnownedTaskExecutor()
        Thread { job.runSynchronously(on: executor) }.start()
    }
}

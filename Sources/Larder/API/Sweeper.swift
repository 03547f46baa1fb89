import Foundation

/// The thread of a cache's automatic sweep (`Cache.Options.sweepInterval`): once an interval, one
/// pass over the index in bounded steps (`CacheStore.sweepStep`), each under the locks of a write
/// and releasing them after, so that writers of every process wait at most one step.
///
/// Invariant: `stopping` and `running` change only under `condition`; once `stop()` has returned
/// on another thread, the thread has ended and calls `step` no more.
final class Sweeper: @unchecked Sendable {
    private let condition = NSCondition()
    private var stopping = false
    private var running = false
    private var thread: Thread?
    private let interval: TimeInterval
    /// One step from a cursor: the next cursor, or nil when the pass is over (or cannot go on).
    private let step: @Sendable (_ cursor: Int) -> Int?

    /// Starts the thread; its first pass comes one interval from now.
    init(intervalMilliseconds: UInt64, step: @escaping @Sendable (_ cursor: Int) -> Int?) {
        interval = Double(intervalMilliseconds) / 1000
        self.step = step
        let thread = Thread { [self] in run() }
        thread.name = "Larder sweep"
        self.thread = thread
        running = true
        thread.start()
    }

    private func run() {
        condition.lock()
        while !stopping {
            _ = condition.wait(until: Date(timeIntervalSinceNow: interval))
            if stopping { break }
            condition.unlock()
            var cursor: Int? = 0
            while let position = cursor, !isStopping { cursor = step(position) }
            condition.lock()
        }
        running = false
        // The thread holds this sweeper (its body calls `run`): let it go, so that neither keeps
        // the other alive once the thread ends.
        thread = nil
        condition.broadcast()
        condition.unlock()
    }

    private var isStopping: Bool { condition.withLock { stopping } }

    /// Whether the thread still runs (tests).
    var isRunning: Bool { condition.withLock { running } }

    /// Stops the thread and waits for it, which finishes the step it is in. Called on the thread
    /// itself (a step dropped the handle's last reference), it does not wait.
    func stop() {
        condition.lock()
        stopping = true
        condition.broadcast()
        if Thread.current !== thread {
            while running { condition.wait() }
        }
        condition.unlock()
    }
}

import CLarderSupport

/// Tells a table that lives for the whole process (the open stores, the process's record locks),
/// asking under its own lock, whether the process has forked since it last asked: what the table
/// then holds is the parent's.
struct ForkWatch {
    private var generation = lrd_watch_forks()

    /// Whether the process forked since the last call, or since the watch was made; true once per
    /// fork.
    mutating func forkedSinceLastAsked() -> Bool {
        let now = lrd_fork_generation()
        guard now != generation else { return false }
        generation = now
        return true
    }
}

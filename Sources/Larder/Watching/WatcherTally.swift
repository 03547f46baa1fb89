/// The watches of one `Cache` handle, counted once in its file's watcher count (FORMAT.md 3.3),
/// and counted out before the handle lets the file go (a suspension, a close).
///
/// Invariants:
/// - Touched only with the cache's `lifeCycle` lock held, as `suspend()`, `resume()` and
///   `close()` hold it: no store is swapped while a watch counts itself in or out.
/// - `countedIn` is the store whose file counts this handle, nil when the handle counts in no
///   file (no watch, a read-only handle, or suspended). It is counted in once, whatever `watches`.
final class WatcherTally: @unchecked Sendable {
    /// The handle's live watches, and one more for a C program's cursor (`standing`).
    private var watches = 0
    private var countedIn: CacheStore?
    /// Whether a cursor was taken (`changeCursor`): the handle stays counted until it closes.
    private(set) var standing = false

    /// A watch begins on `store`, the handle's store now.
    func begin(in store: CacheStore) {
        watches += 1
        countIn(store)
    }

    /// A watch ends.
    func end() {
        watches -= 1
        if watches == 0 { countOut() }
    }

    /// The handle counts as watching until it closes, as a C program that keeps a cursor does.
    func beginStanding(in store: CacheStore) {
        guard !standing else { return }
        standing = true
        begin(in: store)
    }

    /// The handle lets its file go: counted out of it, its watches kept.
    func countOut() {
        countedIn?.changes.removeWatcher()
        countedIn = nil
    }

    /// The handle takes `store` up (again): counted in while it has a watch.
    func countIn(_ store: CacheStore) {
        guard watches > 0, countedIn == nil, !store.isReadOnly else { return }
        store.changes.addWatcher()
        countedIn = store
    }
}

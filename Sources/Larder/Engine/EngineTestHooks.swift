/// What tests watch and steer in a store. The engine counts into it and calls it; it decides
/// nothing by it.
final class EngineTestHooks {
    /// Runs on the opening thread when an open is about to recover the file at the path passed.
    /// Set while opens of other tests run: read and written under a lock.
    static var recoveryAtOpen: ((String) -> Void)? {
        get { lock.withReadLock { unguardedRecoveryAtOpen } }
        set { lock.withWriteLock { unguardedRecoveryAtOpen = newValue } }
    }
    private static let lock = ReadWriteLock()
    nonisolated(unsafe) private static var unguardedRecoveryAtOpen: ((String) -> Void)?

    /// Runs in each step of a listing between its reading of the slots (passed) and its checking
    /// of the records they name, where a writer of another process may act.
    var listingStep: (([UInt64]) -> Void)?
    /// Live records passed in place, and laps of the ring given up: rare enough that a test must
    /// know it reached them.
    var recordsPassedInPlace = 0
    var lapsGivenUp = 0
    /// Records placed in the room of a dead entry.
    var recordsPlacedInDeadRoom = 0
    /// Bytes of dead entries the tail passed by the walk over runs (`passDeadEntries`), not a
    /// step per record.
    var bytesPassedInRuns = 0
    /// Off only in tests that check the head's usual room (`RingAllocator.headRoom`) against
    /// the general loop of placement, which then places every record. Read in debug builds only.
    var takesHeadRoomFirst = true
}

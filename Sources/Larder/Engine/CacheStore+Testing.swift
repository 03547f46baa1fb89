/// The names tests use for what `EngineTestHooks` holds, and for the allocator's switches.
extension CacheStore {
    static var recoveryAtOpenHook: ((String) -> Void)? {
        get { EngineTestHooks.recoveryAtOpen }
        set { EngineTestHooks.recoveryAtOpen = newValue }
    }

    var listingStepHook: (([UInt64]) -> Void)? {
        get { testHooks.listingStep }
        set { testHooks.listingStep = newValue }
    }

    var recordsPassedInPlace: Int { testHooks.recordsPassedInPlace }
    var lapsGivenUp: Int { testHooks.lapsGivenUp }
    var recordsPlacedInDeadRoom: Int { testHooks.recordsPlacedInDeadRoom }
    var bytesPassedInRuns: Int { testHooks.bytesPassedInRuns }

    /// Off only in tests of the head's usual room against the general loop (debug builds).
    var takesHeadRoomFirst: Bool {
        get { testHooks.takesHeadRoomFirst }
        set { testHooks.takesHeadRoomFirst = newValue }
    }

    /// Off only in tests of the ring's own reuse of room, which large records meet when no listed
    /// room fits them.
    var reusesDeadRoom: Bool {
        get { allocator.value.deadRooms.isEnabled }
        set { allocator.value.deadRooms.isEnabled = newValue }
    }

    /// Off only in tests of the ring's own reuse of room, which values that change size meet.
    var rewritesInPlace: Bool {
        get { allocator.value.deadRooms.rewritesInPlace }
        set { allocator.value.deadRooms.rewritesInPlace = newValue }
    }
}

extension CacheStore {
    /// Runs `body` under the writer lock as a writer of another process would hold it: this
    /// store's next hold checks the shared state, as after any other writer's release.
    func withWriterLockOfAnotherProcess(_ body: () throws(LarderError) -> Void) throws(LarderError) {
        try withWriterLock(body)
        writeCountAtRelease.value = 1
    }
}

extension Cache {
    /// Gives up this handle's share of the file: when no other handle of this process has the
    /// file open, every lock on it goes (the record locks and the writer's lock), and the file is
    /// flushed and, for the last writer, marked clean, as by ``close()``. Call it before the app
    /// is suspended: iOS terminates a suspended app that holds a lock on a file in an app group
    /// container (exception code `0xdead10cc`).
    ///
    /// Until ``resume()``, every call that reaches the file throws `.suspended`, at once: none
    /// waits. The properties that cannot throw answer as for a closed cache (``count`` 0,
    /// ``contains(_:)`` false). The objects in memory are let go, so that none can outlive a
    /// change another process makes meanwhile. Calling `suspend()` again does nothing;
    /// ``close()`` closes a suspended cache. Watches (``changes()``) carry on: they deliver
    /// nothing while suspended, and after ``resume()`` look at what they watch again.
    ///
    /// Other handles of this process on the same file (other `Cache` objects, C handles) keep it
    /// open until they are suspended or closed too; so do other processes' handles. Suspend and
    /// resume when no other thread is inside a call on this cache, as for `close()`: reads take
    /// no lock, so suspending does not wait for them.
    ///
    /// - Throws: `.invalidArgument` from inside this cache's `withValue(forKey:_:)` or
    ///   `forEachEntry` on the same thread; `.closed`; `.io` or `.full` when the file could not
    ///   be written back (the cache is suspended all the same, and the next open repairs the
    ///   file, as after a crash).
    ///
    /// The corresponding C function is `larder_suspend`.
    public func suspend() throws(LarderError) {
        try refuseInsideBorrow("suspend")
        lifeCycle.lock()
        defer { lifeCycle.unlock() }
        let wasOpen = try lock.withWriteLock { () throws(LarderError) -> Bool in
            if openGeneration.load() == Cache.suspendedGeneration { return false }
            if isClosed { throw unusableError() }
            openGeneration.store(Cache.suspendedGeneration)
            return true
        }
        guard wasOpen else { return }
        memory?.removeAll()
        // Writers stop filling the ring for this handle's watches; they carry on after resume().
        watchTally.countOut()
        try OpenFileRegistry.shared.release(entry)
    }

    /// Takes the file back after ``suspend()``: opens it again as the cache was first opened, and
    /// takes its locks. When another process replaced the file meanwhile (`larder compact`, a
    /// rebuild, a capacity change), the cache reads and writes the new file from now on; a file
    /// left unclean is repaired first, as by an open. The file keeps the capacity it has: the
    /// options' capacity is used only to create a file removed meanwhile. Calling it on a cache
    /// that is not suspended does nothing.
    ///
    /// - Throws: `.closed` for a closed cache; whatever opening the file throws (the cache then
    ///   stays suspended, and `resume()` may be called again).
    ///
    /// The corresponding C function is `larder_resume`.
    public func resume() throws(LarderError) {
        lifeCycle.lock()
        defer { lifeCycle.unlock() }
        let generation = openGeneration.load()
        guard generation == Cache.suspendedGeneration else {
            if isClosed { throw unusableError() }
            return
        }
        // The file keeps the capacity it has now (another process may have changed it); one
        // removed meanwhile is created with the options' capacity.
        var configuration = Cache.configuration(options, limits: try StandingLimits(options, path: path))
        let existed = FileIdentity(path: path) != nil
        if existed { configuration.capacity = nil }
        let reopened = try OpenFileRegistry.shared.open(path: path, configuration: configuration)
        do {
            try FileAttributes.apply(options, to: path, created: !existed)
        } catch {
            try? OpenFileRegistry.shared.release(reopened)
            throw error
        }
        previousEntry = entry
        entry = reopened
        lockReference = .passUnretained(reopened.lock)
        storeReference = .passUnretained(reopened.store)
        readViewReference = reopened.store.publishedView.readView
        // Again: a read that raced the suspension may have kept an object of the old file.
        memory?.removeAll()
        watchTally.countIn(reopened.store)
        // Last, with release ordering: a call that sees the cache open sees the new store.
        openGeneration.store(reopened.store.forkGeneration)
    }

    /// Whether the cache is suspended (``suspend()``) and not yet resumed.
    public var isSuspended: Bool { openGeneration.load() == Cache.suspendedGeneration }
}

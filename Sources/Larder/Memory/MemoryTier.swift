import CLarderSupport
import Foundation

/// Decoded objects kept in memory in front of a cache's file, within a count and a cost limit.
///
/// The keys are spread over shards by hash, each with its own lock and SIEVE queue
/// (`MemoryShard`), so that hits of several threads rarely meet on one lock. Both limits hold for
/// the whole tier, not per shard (keys seldom hash evenly): an insert that goes over one evicts
/// from its own shard first, then from the others in turn. A hit takes no lock and writes no
/// line another thread's hit writes (`MemoryReaders`); writers hold a shard's readers off.
final class MemoryTier: @unchecked Sendable {
    let limits: MemoryLimits
    private let shards: [MemoryShard]
    /// `shards` again, unretained, so that a hit retains no shard (`shards` keeps them).
    private let unretainedShards: UnsafeMutableBufferPointer<Unmanaged<MemoryShard>>
    /// Who reads each shard, and the hits.
    private let readers: MemoryReaders
    /// The cost of every object held, as a wrapping two's-complement sum.
    private let totalCost = AtomicWord()
    /// The number of objects held, kept the same way.
    private let totalCount = AtomicWord()
    /// Where the next trim starts evicting, so that trims take from every shard in turn.
    private let trimCursor = AtomicWord()
    #if canImport(Darwin)
    private var pressureWatch: MemoryPressureWatch?
    #endif

    /// A tier within `limits`, which the caller has checked (both positive).
    init(limits: MemoryLimits) {
        self.limits = limits
        // Up to 16 shards, each for at least 64 objects.
        var count = 1
        while count < 16 && limits.count / (count * 2) >= 64 { count *= 2 }
        shards = (0..<count).map { _ in MemoryShard() }
        readers = MemoryReaders(shards: count)
        unretainedShards = .allocate(capacity: count)
        _ = unretainedShards.initialize(from: shards.map(Unmanaged.passUnretained))
        #if canImport(Darwin)
        pressureWatch = MemoryPressureWatch(tier: self)
        #endif
    }

    deinit {
        unretainedShards.deallocate()
    }

    /// The shard of a key: its hash's low bits (the shard's index uses the high ones).
    @inline(__always)
    private func shard(of hash: UInt64) -> (MemoryShard, Int) {
        let index = Int(truncatingIfNeeded: hash) & (shards.count - 1)
        return (shards[index], index)
    }

    @inline(__always)
    private func shard(of key: MemoryKey) -> (MemoryShard, Int) { shard(of: key.hash) }

    /// The object of the key `bytes` (XXH64 `hash`) if a conversion of kind `kind` kept it, and
    /// where it came from. It takes no lock. On a hit the thread is still counted in as a reader
    /// of the shard, which keeps the object: the caller ends the read with `leave(_:)` or a
    /// `MemoryLease`, and meanwhile takes no lock and waits for nothing. A caller that then
    /// finds the origin is no longer the file's takes the hit back (`retractHit`).
    @inline(__always)
    func object(forKey bytes: UnsafeRawBufferPointer, hash: UInt64, kind: MemoryKind) -> MemoryHit? {
        let index = Int(truncatingIfNeeded: hash) & (unretainedShards.count - 1)
        let word = readers.word(forShard: index)
        return unretainedShards[index]._withUnsafeGuaranteedRef { shard in
            while true {
                readers.enter(word)
                if !shard.lock.isExcludingReaders {
                    let found = shard.find(bytes, hash: hash, kind: kind, readerWord: word)
                    if found == nil { readers.leave(word, hit: false) }
                    return found
                }
                readers.leave(word, hit: false)
                shard.lock.waitWhileExcludingReaders()
            }
        }
    }

    /// Ends the read of a hit (`object(forKey:hash:kind:)`), counting the hit.
    @inline(__always)
    func leave(_ hit: MemoryHit) {
        readers.leave(hit.readerWord, hit: true)
    }

    /// Runs `body` with the shard at `index` locked and its readers held off.
    @inline(__always)
    private func writing<R>(shard index: Int, _ body: (MemoryShard) throws -> R) rethrows -> R {
        let shard = shards[index]
        return try shard.lock.withLock {
            try shard.lock.excludingReaders(readers, shard: index) {
                defer { shard.publishNodes() }
                return try body(shard)
            }
        }
    }

    /// Keeps `check` for the key `bytes` (XXH64 `hash`) while its object still has `origin`.
    func noteCheck(_ check: MemoryCheck, forKey bytes: UnsafeRawBufferPointer, hash: UInt64, origin: MemoryOrigin) {
        let index = Int(truncatingIfNeeded: hash) & (unretainedShards.count - 1)
        writing(shard: index) { shard in shard.noteCheck(check, forKey: bytes, hash: hash, origin: origin) }
    }

    /// Takes back the hit `object(forKey:hash:kind:)` counted for a key of `hash`.
    func retractHit(forHash hash: UInt64) {
        readers.retractHit(readers.word(forShard: shard(of: hash).1))
    }

    func countMiss(forKey key: MemoryKey) { shard(of: key).0.lock.countMiss() }

    /// Keeps `object` for `key`, replacing what was there, and evicts to stay within the limits.
    /// An object whose cost alone is over the cost limit is not kept (and the key's older one
    /// goes).
    func insert<Value>(_ object: Value, forKey key: MemoryKey, kind: MemoryKind, origin: MemoryOrigin, cost: Int) {
        insert(MemoryObject.make(object), forKey: key, kind: kind, origin: origin, cost: cost)
    }

    private func insert(_ object: MemoryObject, forKey key: MemoryKey, kind: MemoryKind, origin: MemoryOrigin, cost: Int) {
        let index = shard(of: key).1
        guard cost <= limits.cost.bytes else {
            remove(key)
            return
        }
        let (addedCost, addedCount) = writing(shard: index) { shard -> (Int, Int) in
            let before = shard.count
            return (shard.insert(key, object: object, kind: kind, origin: origin, cost: cost), shard.count - before)
        }
        add(cost: addedCost, count: addedCount)
        if currentCost > limits.cost.bytes || currentCount > limits.count {
            trim(toCost: limits.cost.bytes, count: limits.count, startingAt: index)
        }
    }

    /// Drops the object of `key`; with `origin`, only if it still has that origin (a newer one
    /// kept meanwhile stays).
    func remove(_ key: MemoryKey, ifOrigin origin: MemoryOrigin? = nil) {
        if let removed = writing(shard: shard(of: key).1, { $0.remove(key, ifOrigin: origin) }) { add(cost: -removed, count: -1) }
    }

    /// Evicts objects, by SIEVE in each shard and the shards in turn, until their cost is at most
    /// `target`.
    func trim(toCost target: Int) {
        let first = Int(truncatingIfNeeded: lrd_fetch_add_u64(trimCursor.pointer, 1)) & (shards.count - 1)
        trim(toCost: target, count: .max, startingAt: first)
    }

    /// Evicts until the cost is at most `target` and the count at most `targetCount`.
    private func trim(toCost target: Int, count targetCount: Int, startingAt first: Int) {
        var emptyInARow = 0
        var index = first
        while (currentCost > target || currentCount > targetCount) && emptyInARow < shards.count {
            if let evicted = writing(shard: index, { $0.evictOne() }) {
                add(cost: -evicted, count: -1)
                emptyInARow = 0
            } else {
                emptyInARow += 1
            }
            index = (index + 1) & (shards.count - 1)
        }
    }

    /// Drops every object.
    func removeAll() {
        for index in shards.indices {
            let removed = writing(shard: index) { shard -> (cost: Int, count: Int) in
                defer { shard.removeAll() }
                return (shard.cost, shard.count)
            }
            add(cost: -removed.cost, count: -removed.count)
        }
    }

    /// Drops the objects whose keys `predicate` picks.
    func removeAll(where predicate: (Data) -> Bool) {
        for index in shards.indices {
            let removed = writing(shard: index) { shard -> (cost: Int, count: Int) in
                let before = shard.count
                return (shard.removeAll(where: predicate), before - shard.count)
            }
            add(cost: -removed.cost, count: -removed.count)
        }
    }

    /// What the system's memory pressure asks of the tier: half of its cost on a warning, all of
    /// it on a critical event.
    func relieve(_ pressure: MemoryPressure) {
        switch pressure {
        case .warning: trim(toCost: currentCost / 2)
        case .critical: removeAll()
        }
    }

    var currentCost: Int { Int(truncatingIfNeeded: lrd_load_relaxed_u64(totalCost.pointer)) }
    private var currentCount: Int { Int(truncatingIfNeeded: lrd_load_relaxed_u64(totalCount.pointer)) }
    var count: Int { shards.reduce(0) { sum, shard in sum + shard.lock.withLock { shard.count } } }
    var hits: UInt64 { readers.hits }
    var misses: UInt64 { shards.reduce(0) { $0 &+ $1.misses } }

    private func add(cost: Int, count: Int) {
        if cost != 0 { lrd_fetch_add_u64(totalCost.pointer, UInt64(bitPattern: Int64(cost))) }
        if count != 0 { lrd_fetch_add_u64(totalCount.pointer, UInt64(bitPattern: Int64(count))) }
    }
}

/// How hard the system asks for memory back.
enum MemoryPressure {
    /// Give back half.
    case warning
    /// Give back everything.
    case critical
}

import CLarderSupport
import Foundation

/// What a hit in a shard found: the object (unretained: the shard keeps it while the reader is
/// counted in), the record it came from, its last lasting check, and the reader's word.
struct MemoryHit {
    let object: Unmanaged<MemoryObject>
    let origin: MemoryOrigin
    let check: MemoryCheck
    /// The word this thread is counted in through (`MemoryReaders.word(forShard:)`).
    var readerWord: UnsafeMutableRawPointer
}

/// One shard of a memory tier: the objects of the keys that hash to it, in SIEVE order.
///
/// SIEVE (Zhang et al., NSDI 2024) keeps a queue from newest to oldest and a hand. A hit only
/// sets the object's visited flag. To evict, the hand walks from the oldest towards the newest:
/// a visited object is passed (its flag cleared), the first unvisited one goes. Its miss ratio is
/// at or below LRU's on web and key-value traces, and a hit moves nothing.
///
/// The index is an open-addressing table of node positions, probed by the key's XXH64 (which
/// the caller computed once): a lookup hashes nothing and allocates nothing.
///
/// Invariant: every field is written only under `lock` while readers are held off
/// (`ShardLock.excludingReaders`), and read either so or under `lock` alone, or by a reader
/// counted in `MemoryReaders` while no writer holds readers off. A reader writes one thing: a
/// node's visited flag, by an atomic store of its byte. Those rules keep accesses apart, so the
/// runtime's exclusivity checks are off for the fields a hit reads. A reader never touches the
/// array `nodes` (an access could retain or copy its buffer): it reads the nodes through
/// `readerNodes`, which every writer sets to the array's storage before it lets readers in.
final class MemoryShard: @unchecked Sendable {
    /// 120 bytes: the small fields first fill the word the key's length leaves.
    struct Node {
        var key: MemoryKey
        /// Positions towards the newest (`prev`) and the oldest (`next`); -1 at either end.
        private var prevPosition: Int32
        private var nextPosition: Int32
        var visited: Bool
        var object: MemoryObject?
        /// The conversion the object was decoded or encoded with (its type).
        var kind: MemoryKind
        var origin: MemoryOrigin
        var cost: Int
        var check = MemoryCheck.none

        init(key: MemoryKey, object: MemoryObject?, kind: MemoryKind, origin: MemoryOrigin, cost: Int, next: Int) {
            (self.key, self.object, self.kind, self.origin, self.cost) = (key, object, kind, origin, cost)
            (visited, prevPosition, nextPosition) = (false, -1, Int32(truncatingIfNeeded: next))
        }

        var prev: Int {
            get { Int(prevPosition) }
            set { prevPosition = Int32(truncatingIfNeeded: newValue) }
        }

        var next: Int {
            get { Int(nextPosition) }
            set { nextPosition = Int32(truncatingIfNeeded: newValue) }
        }
    }

    let lock = ShardLock()
    @exclusivity(unchecked) private var index = MemoryIndex()
    /// Nodes in use and free ones (listed in `freeNodes`, their object and key let go).
    @exclusivity(unchecked) private var nodes: [Node] = []
    /// The storage of `nodes`, for readers (`publishNodes`).
    @exclusivity(unchecked) private var readerNodes = UnsafeMutablePointer<Node>(bitPattern: MemoryLayout<Node>.alignment)!
    private var freeNodes: [Int] = []
    private var newest = -1
    private var oldest = -1
    private var hand = -1
    private(set) var cost = 0
    var count: Int { index.count }

    var misses: UInt64 { lock.misses }

    /// The places in a node of the visited flag and the object (stored constants: static ones
    /// cost a `swift_once` a read).
    private let visitedOffset = MemoryLayout<Node>.offset(of: \Node.visited)!
    private let objectOffset = MemoryLayout<Node>.offset(of: \Node.object)!

    /// As a reader counted in through `readerWord`: the object of the key `bytes` (whose XXH64 is
    /// `hash`) if a conversion of kind `kind` kept it, marked visited, where it came from and its
    /// last lasting check.
    @inline(__always)
    func find(_ bytes: UnsafeRawBufferPointer, hash: UInt64, kind: MemoryKind, readerWord: UnsafeMutableRawPointer) -> MemoryHit? {
        let nodes = readerNodes
        guard let position = index.find(bytes, hash: hash, in: UnsafePointer(nodes)), nodes[position].kind == kind else { return nil }
        let node = UnsafeMutableRawPointer(nodes + position)
        // The reference's bits (an optional reference is one pointer, nil being 0): a copy of
        // the reference would retain the object, a write to a line other readers share.
        guard let object = UnsafeRawPointer(bitPattern: node.load(fromByteOffset: objectOffset, as: UInt.self)) else {
            return nil
        }
        // Written only when it changes: a hit on a visited object leaves its line clean.
        // Atomic, as other readers may store the same byte.
        if lrd_load_relaxed_u8(node + visitedOffset) == 0 { lrd_store_relaxed_u8(node + visitedOffset, 1) }
        return MemoryHit(object: Unmanaged.fromOpaque(object), origin: nodes[position].origin,
                         check: nodes[position].check, readerWord: readerWord)
    }

    /// Holding readers off, before letting them in again: points `readerNodes` at the storage of
    /// `nodes` (which an insert may have moved).
    func publishNodes() {
        nodes.withUnsafeMutableBufferPointer { if let base = $0.baseAddress { readerNodes = base } }
    }

    /// Holding readers off: keeps `check` for the key `bytes`'s object while it still has `origin`.
    func noteCheck(_ check: MemoryCheck, forKey bytes: UnsafeRawBufferPointer, hash: UInt64, origin: MemoryOrigin) {
        nodes.withUnsafeMutableBufferPointer { nodes in
            guard let position = index.find(bytes, hash: hash, in: UnsafePointer(nodes.baseAddress ?? readerNodes)),
                  nodes[position].origin == origin else { return }
            nodes[position].check = check
        }
    }

    /// Under `lock`: the position of `key`'s node.
    private func position(of key: MemoryKey) -> Int? {
        key.withBytes { bytes in
            nodes.withUnsafeBufferPointer { index.find(bytes, hash: key.hash, in: $0.baseAddress ?? UnsafePointer(readerNodes)) }
        }
    }

    /// Holding readers off: `object` for `key`, newest, replacing any other; returns the cost added
    /// (negative when the object replaced cost more).
    func insert(_ key: MemoryKey, object: MemoryObject, kind: MemoryKind, origin: MemoryOrigin, cost objectCost: Int) -> Int {
        var added = objectCost
        if let position = position(of: key) {
            added -= nodes[position].cost
            drop(position)
        }
        let node = Node(key: key, object: object, kind: kind, origin: origin, cost: objectCost, next: newest)
        let position: Int
        if let reused = freeNodes.popLast() {
            position = reused
            nodes[position] = node
        } else {
            position = nodes.count
            nodes.append(node)
        }
        if newest >= 0 { nodes[newest].prev = position }
        newest = position
        if oldest < 0 { oldest = position }
        index.insert(position, in: nodes)
        cost += added
        return added
    }

    /// Holding readers off: removes `key`'s object (only when it has `origin`, if given); returns its cost.
    @discardableResult
    func remove(_ key: MemoryKey, ifOrigin origin: MemoryOrigin? = nil) -> Int? {
        guard let position = position(of: key), origin == nil || nodes[position].origin == origin else { return nil }
        let removed = nodes[position].cost
        drop(position)
        cost -= removed
        return removed
    }

    /// Holding readers off: evicts one object by SIEVE; returns its cost, nil when the shard is empty.
    func evictOne() -> Int? {
        guard oldest >= 0 else { return nil }
        var position = hand >= 0 ? hand : oldest
        while nodes[position].visited {
            nodes[position].visited = false
            position = nodes[position].prev >= 0 ? nodes[position].prev : oldest
        }
        hand = position
        return remove(nodes[position].key)
    }

    /// Holding readers off: drops the objects whose keys `predicate` picks; returns their cost.
    func removeAll(where predicate: (Data) -> Bool) -> Int {
        let picked = nodes.filter { $0.object != nil && predicate($0.key.bytes) }.map(\.key)
        return picked.reduce(0) { sum, key in sum + (remove(key) ?? 0) }
    }

    /// Holding readers off: drops every object.
    func removeAll() {
        index = MemoryIndex()
        nodes.removeAll()
        freeNodes.removeAll()
        (newest, oldest, hand, cost) = (-1, -1, -1, 0)
    }

    /// Takes the node at `position` out of the queue and the index, and lists it free.
    private func drop(_ position: Int) {
        leaveQueue(position)
        index.remove(position, in: nodes)
        nodes[position].object = nil
        nodes[position].key = MemoryKey.none
        freeNodes.append(position)
    }

    /// Takes the node at `position` out of the queue; the hand moves on to the next newer one.
    private func leaveQueue(_ position: Int) {
        let node = nodes[position]
        if hand == position { hand = node.prev }
        if node.prev >= 0 { nodes[node.prev].next = node.next } else { newest = node.next }
        if node.next >= 0 { nodes[node.next].prev = node.prev } else { oldest = node.prev }
    }
}

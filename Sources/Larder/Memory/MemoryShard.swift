import CLarderSupport
import Foundation

/// One shard of a memory tier: the objects of the keys that hash to it, in SIEVE order.
///
/// SIEVE (Zhang et al., NSDI 2024) keeps a queue from newest to oldest and a hand. A hit only
/// sets the object's visited flag. To evict, the hand walks from the oldest towards the newest:
/// a visited object is passed (its flag cleared), the first unvisited one goes. Its miss ratio is
/// at or below LRU's on web and key-value traces, and a hit moves nothing.
///
/// Invariant: every field but the counters is read and written under `lock`; the counters are
/// atomic words, so that a read counts its outcome without a second trip through the lock.
final class MemoryShard: @unchecked Sendable {
    struct Node {
        var key: MemoryKey
        var object: Any
        /// The conversion the object was decoded or encoded with (its type).
        var kind: MemoryKind
        var origin: MemoryOrigin
        var cost: Int
        var visited: Bool
        /// Towards the newest (`prev`) and the oldest (`next`); -1 at either end.
        var prev: Int
        var next: Int
    }

    let lock = ShardLock()
    private var index: [MemoryKey: Int] = [:]
    /// Nodes in use and free ones (listed in `freeNodes`, their object and key let go).
    private var nodes: [Node] = []
    private var freeNodes: [Int] = []
    private var newest = -1
    private var oldest = -1
    private var hand = -1
    private(set) var cost = 0
    var count: Int { index.count }

    /// Hits, then misses: atomic, written without the lock.
    private let counters: UnsafeMutablePointer<UInt64>

    init() {
        counters = .allocate(capacity: 2)
        counters.initialize(repeating: 0, count: 2)
    }

    deinit {
        counters.deallocate()
    }

    func countHit() { lrd_fetch_add_u64(counters, 1) }
    func countMiss() { lrd_fetch_add_u64(counters + 1, 1) }
    var hits: UInt64 { lrd_load_relaxed_u64(counters) }
    var misses: UInt64 { lrd_load_relaxed_u64(counters + 1) }

    /// Under `lock`: the object of `key`, marked visited.
    func find(_ key: MemoryKey) -> (object: Any, kind: MemoryKind, origin: MemoryOrigin)? {
        guard let position = index[key] else { return nil }
        // Field by field: a copy of the whole node would retain its key and object both.
        nodes[position].visited = true
        return (nodes[position].object, nodes[position].kind, nodes[position].origin)
    }

    /// Under `lock`: `object` for `key`, newest, replacing any other; returns the cost added
    /// (negative when the object replaced cost more).
    func insert(_ key: MemoryKey, object: Any, kind: MemoryKind, origin: MemoryOrigin, cost objectCost: Int) -> Int {
        var added = objectCost
        if let position = index[key] {
            added -= nodes[position].cost
            unlink(position)
            free(position)
            index[key] = nil
        }
        let node = Node(key: key, object: object, kind: kind, origin: origin, cost: objectCost, visited: false,
                        prev: -1, next: newest)
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
        index[key] = position
        cost += added
        return added
    }

    /// Under `lock`: removes `key`'s object (only when it has `origin`, if given); returns its cost.
    @discardableResult
    func remove(_ key: MemoryKey, ifOrigin origin: MemoryOrigin? = nil) -> Int? {
        guard let position = index[key], origin == nil || nodes[position].origin == origin else { return nil }
        let removed = nodes[position].cost
        unlink(position)
        free(position)
        index[key] = nil
        cost -= removed
        return removed
    }

    /// Under `lock`: evicts one object by SIEVE; returns its cost, nil when the shard is empty.
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

    /// Under `lock`: drops the objects whose keys `predicate` picks; returns their cost.
    func removeAll(where predicate: (Data) -> Bool) -> Int {
        index.keys.filter { predicate($0.bytes) }.reduce(0) { sum, key in sum + (remove(key) ?? 0) }
    }

    /// Under `lock`: drops every object.
    func removeAll() {
        index.removeAll()
        nodes.removeAll()
        freeNodes.removeAll()
        (newest, oldest, hand, cost) = (-1, -1, -1, 0)
    }

    /// Takes the node at `position` out of the queue; the hand moves on to the next newer one.
    private func unlink(_ position: Int) {
        let node = nodes[position]
        if hand == position { hand = node.prev }
        if node.prev >= 0 { nodes[node.prev].next = node.next } else { newest = node.next }
        if node.next >= 0 { nodes[node.next].prev = node.prev } else { oldest = node.prev }
    }

    private func free(_ position: Int) {
        nodes[position].object = ()
        nodes[position].key = MemoryKey.none
        freeNodes.append(position)
    }
}

import Foundation

/// The index of one memory shard: an open-addressing table (linear probing) of node positions,
/// placed by the high half of each key's XXH64.
///
/// A lookup takes the key's bytes and hash as the caller has them: it hashes nothing, allocates
/// nothing, and compares bytes only where the hashes are equal. Removal shifts the entries after
/// the hole back (no tombstones), so the table stays at most half full.
///
/// Invariant: every position in `slots` is that of a node in use, found from its home slot by
/// probing without crossing an empty slot.
struct MemoryIndex {
    private static let empty: Int32 = -1
    private var slots = [Int32](repeating: MemoryIndex.empty, count: 16)
    private(set) var count = 0

    private var mask: Int { slots.count - 1 }

    @inline(__always)
    private func home(_ hash: UInt64) -> Int { Int(truncatingIfNeeded: hash >> 32) & mask }

    /// The position of the node whose key is `bytes` (XXH64 `hash`).
    @inline(__always)
    func find(_ bytes: UnsafeRawBufferPointer, hash: UInt64, in nodes: UnsafePointer<MemoryShard.Node>) -> Int? {
        slots.withUnsafeBufferPointer { slots in
            let mask = slots.count - 1
            var slot = home(hash)
            while true {
                let position = Int(slots[slot])
                if position < 0 { return nil }
                // Borrowed in place: a copy of the key would retain its storage.
                let node = nodes + position
                if node.pointee.key.hash == hash && node.pointee.key.matches(bytes) { return position }
                slot = (slot + 1) & mask
            }
        }
    }

    /// Adds `position`, whose node holds its key already.
    mutating func insert(_ position: Int, in nodes: [MemoryShard.Node]) {
        if (count + 1) * 2 > slots.count { grow(in: nodes) }
        place(position, hash: nodes[position].key.hash)
        count += 1
    }

    /// Takes out `position`, whose node still holds its key.
    mutating func remove(_ position: Int, in nodes: [MemoryShard.Node]) {
        var hole = home(nodes[position].key.hash)
        while Int(slots[hole]) != position { hole = (hole + 1) & mask }
        slots[hole] = MemoryIndex.empty
        count -= 1
        // Shift back each following entry whose home is not between the hole and its slot.
        var slot = (hole + 1) & mask
        while slots[slot] != MemoryIndex.empty {
            let wanted = home(nodes[Int(slots[slot])].key.hash)
            let distanceFromHome = (slot - wanted) & mask
            let distanceFromHole = (slot - hole) & mask
            if distanceFromHome >= distanceFromHole {
                slots[hole] = slots[slot]
                slots[slot] = MemoryIndex.empty
                hole = slot
            }
            slot = (slot + 1) & mask
        }
    }

    private mutating func place(_ position: Int, hash: UInt64) {
        var slot = home(hash)
        while slots[slot] != MemoryIndex.empty { slot = (slot + 1) & mask }
        slots[slot] = Int32(truncatingIfNeeded: position)
    }

    private mutating func grow(in nodes: [MemoryShard.Node]) {
        let old = slots
        slots = [Int32](repeating: MemoryIndex.empty, count: old.count * 2)
        for position in old where position != MemoryIndex.empty {
            place(Int(position), hash: nodes[Int(position)].key.hash)
        }
    }
}

/// The free list: the room of large dead entries inside the span, which a put below the capacity
/// takes instead of writing at the head (FORMAT.md 6.8).
///
/// The ring reuses room when the tail passes it, a lap later. A cache whose large values are
/// replaced all the time would therefore first grow its file until a lap of garbage fits, in fresh
/// pages, and then copy live records to the head to free room at the tail. A put that can take
/// back the room of a value replaced before it skips both, as a heap allocator or LMDB's free
/// pages would.
///
/// What the list holds is this process's knowledge, not the file's: a room is listed when this
/// process marks a large entry dead while it is in the span, and stops counting once this
/// process's tail has passed it (the list measures how far the tail has travelled since, against
/// how far ahead of the tail the room lay). Everything is forgotten when the span empties, when
/// this process rebuilds or clears the file, and when another process has written since this one
/// last released the writer lock (its tail may have passed a room, its head padded over it).
/// Every room the list hands out is therefore a dead record that the ring still walks through;
/// `RingAllocator.takeDeadRoom` checks each before use all the same.
struct FreeList {
    /// One dead entry record: where it is, its sequence number (which tells it from a later
    /// record at the same place), and how far the tail will have travelled when it stands at the
    /// room. Three words, since a cache that removes many entries lists each. The size is the
    /// record's, read back from its header when the room is taken.
    struct Room {
        let offset: Int
        let sequence: UInt64
        fileprivate let reachedAtTravel: Int

        fileprivate func isAheadOfTail(travel: Int) -> Bool { travel <= reachedAtTravel }
    }

    /// Records smaller than this are neither listed nor placed from the list: for them a write at
    /// the head, whose lines the hardware streams in, costs less than one into a cold hole.
    static let minimumRecordSize = 4096
    /// A bound on the memory of the list: 64 Ki rooms of at least 4 KiB each.
    static let maximumCount = 1 << 16
    /// Rooms too small for a record looked at per size class before the next class is tried.
    private static let probesPerClass = 8
    /// Sixteen classes per power of two, from the minimum record size to 2^63.
    private static let smallestLog2 = Int.bitWidth - 1 - minimumRecordSize.leadingZeroBitCount
    private static let classCount = (Int.bitWidth - 1 - smallestLog2) * 16

    /// Rooms by size class, the most recently listed last. Rooms the tail has passed are only
    /// dropped when met.
    private var stacks: [[Room]] = []
    private var count = 0
    /// Bytes this process's tail has passed since the list was last emptied.
    private var tailTravel = 0
    private var refusedSinceSweep = 0

    var isEmpty: Bool { count == 0 }

    /// The rooms of one class differ by at most 1/16 of their size, and every room of the next
    /// class up is larger than any of this one.
    private static func sizeClass(_ size: Int) -> Int {
        let log2 = Int.bitWidth - 1 - size.leadingZeroBitCount
        return (log2 - smallestLog2) << 4 | (size >> (log2 - 4)) & 15
    }

    /// Lists the room of `size` bytes at `offset`, `tailDistance` bytes ahead of the tail in ring
    /// order.
    mutating func add(offset: Int, size: Int, sequence: UInt64, tailDistance: Int) {
        guard size >= Self.minimumRecordSize else { return }
        if count >= Self.maximumCount {
            // A full list refuses rooms, and looks for ones the tail has passed only after a
            // quarter of its size was refused: a sweep reads every room.
            refusedSinceSweep += 1
            guard refusedSinceSweep >= Self.maximumCount / 4 else { return }
            sweep()
            guard count < Self.maximumCount else { return }
        }
        if stacks.isEmpty { stacks = Array(repeating: [], count: Self.classCount) }
        stacks[Self.sizeClass(size)].append(Room(offset: offset, sequence: sequence,
                                                 reachedAtTravel: tailTravel + tailDistance))
        count += 1
    }

    /// The tail moved on by `bytes`: rooms it reached no longer count.
    mutating func tailPassed(_ bytes: Int) {
        if count > 0 { tailTravel &+= bytes }
    }

    /// Takes a room of at least `size` bytes that the tail has not reached out of the list: the
    /// most recently listed of the record's own size class that is large enough, or else of the
    /// next class up (at most an eighth larger than needed). `sizeOf` reads a room's size (from
    /// its header; nil when it is not a dead entry any more, and it is dropped).
    mutating func take(atLeast size: Int, sizeOf: (Room) -> Int?) -> (room: Room, size: Int)? {
        guard count > 0, size >= Self.minimumRecordSize else { return nil }
        let own = Self.sizeClass(size)
        for sizeClass in own...min(own + 1, Self.classCount - 1) {
            var probes = 0
            var index = stacks[sizeClass].count - 1
            while index >= 0 && probes < Self.probesPerClass {
                let room = stacks[sizeClass][index]
                let roomSize = room.isAheadOfTail(travel: tailTravel) ? sizeOf(room) : nil
                if let roomSize, roomSize < size {
                    probes += 1
                } else {
                    stacks[sizeClass].remove(at: index)
                    count -= 1
                    if let roomSize { return (room, roomSize) }
                }
                index -= 1
            }
        }
        return nil
    }

    mutating func removeAll() {
        guard count > 0 || tailTravel != 0 else { return }
        for sizeClass in stacks.indices { stacks[sizeClass].removeAll(keepingCapacity: true) }
        count = 0
        tailTravel = 0
        refusedSinceSweep = 0
    }

    /// Drops the rooms the tail has passed, from every class.
    private mutating func sweep() {
        refusedSinceSweep = 0
        count = 0
        let travel = tailTravel
        for sizeClass in stacks.indices {
            stacks[sizeClass].removeAll { !$0.isAheadOfTail(travel: travel) }
            count += stacks[sizeClass].count
        }
    }
}

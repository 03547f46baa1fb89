import Testing
@testable import Larder

/// The free list on its own: which room a put gets, and which it must not.
@Suite("Free list")
struct FreeListTests {
    /// Lists a room of `size` bytes at `offset` (its sequence number is the offset).
    private func add(_ list: inout FreeList, _ offset: Int, size: Int, tailDistance: Int = 1 << 40) {
        list.add(offset: offset, size: size, sequence: UInt64(offset), tailDistance: tailDistance)
    }

    /// Takes a room for `size` bytes; the sizes of the rooms come from `sizes` (by offset).
    private func take(_ list: inout FreeList, _ size: Int, sizes: [Int: Int]) -> Int? {
        list.take(atLeast: size, sizeOf: { sizes[$0.offset] })?.room.offset
    }

    @Test func aPutGetsTheNewestRoomThatFitsItsClassOrAnyOfTheNextClassUp() {
        var list = FreeList()
        let sizes = [1: 16_448, 2: 16_640, 3: 16_400, 4: 18_000, 5: 40_000]
        for offset in sizes.keys.sorted() { add(&list, offset, size: sizes[offset]!) }
        // 16,500 bytes: room 3 is newer but too small; room 2 fits in the same class.
        #expect(take(&list, 16_500, sizes: sizes) == 2)
        // Nothing more fits in that class: the next class up (from 17,408 bytes) has room 4.
        #expect(take(&list, 16_500, sizes: sizes) == 4)
        // Room 5 is more than an eighth larger: never handed out for 16,500 bytes.
        #expect(take(&list, 16_500, sizes: sizes) == nil)
        #expect(take(&list, 16_400, sizes: sizes) == 3)
        #expect(take(&list, 16_448, sizes: sizes) == 1)
        // Below the minimum record size the list is not asked.
        #expect(take(&list, 100, sizes: [7: 4096]) == nil)
    }

    @Test func aRoomTheTailHasPassedIsNotHandedOut() {
        var list = FreeList()
        add(&list, 1, size: 8192, tailDistance: 100)
        add(&list, 2, size: 8192, tailDistance: 200)
        // The tail stands at room 1's start: it has not passed it.
        list.tailPassed(100)
        #expect(take(&list, 8192, sizes: [1: 8192, 2: 8192]) == 2)
        add(&list, 2, size: 8192, tailDistance: 100)
        list.tailPassed(1)
        #expect(take(&list, 8192, sizes: [1: 8192, 2: 8192]) == 2)
        #expect(take(&list, 8192, sizes: [1: 8192, 2: 8192]) == nil)
    }

    @Test func aRoomWhoseRecordChangedIsDroppedAndTheNextTried() {
        var list = FreeList()
        add(&list, 1, size: 8192)
        add(&list, 2, size: 8192)
        // Room 2's record is no longer a dead entry (sizeOf says nil): room 1 is handed out.
        #expect(take(&list, 8192, sizes: [1: 8192]) == 1)
        #expect(list.isEmpty)
    }

    @Test func aFullListTakesRoomsAgainOnceTheTailHasPassedOldOnes() {
        var list = FreeList()
        let size = 4096
        func take() -> Int? { list.take(atLeast: size, sizeOf: { _ in size })?.room.offset }
        for offset in 0..<FreeList.maximumCount { add(&list, offset, size: size, tailDistance: 10) }
        // Full: a new room is refused.
        add(&list, FreeList.maximumCount, size: size)
        #expect(take() == FreeList.maximumCount - 1)
        // The tail passes all of them; rooms listed from then on are kept once a sweep has
        // dropped the passed ones (after a quarter of the list's size was refused).
        list.tailPassed(11)
        let fresh = 1_000_000..<(1_000_000 + FreeList.maximumCount / 4 + 10)
        for offset in fresh { add(&list, offset, size: size) }
        #expect(take() == fresh.upperBound - 1)
        #expect(take() == fresh.upperBound - 2)
    }
}

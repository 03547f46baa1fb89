#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import CLarderSupport

/// The reader slots of the shared-state page: how a zero-copy read in any process keeps the
/// bytes it lends from being overwritten.
///
/// A reader claims a free slot (owner = its pid), writes the record's range into it, and only
/// then checks that the record is still live. A writer, before it writes into the gap, reads the
/// slots and steps over every pinned range as it steps over index segments. Both sides put a
/// sequentially consistent fence between their store and their load, so either the reader sees
/// the record already dead (and does not lend it) or the writer sees the pin.
/// A slot whose owner process no longer exists is freed by the next writer that meets it.
struct ReaderTable {
    let file: MappedFile
    let slotsOffset: Int
    let countOffset: Int
    let slotCount: Int

    init(state: SharedState, pageSize: Int) {
        file = state.file
        slotsOffset = state.base + SharedState.Field.readerTable
        countOffset = state.base + SharedState.Field.pinCount
        slotCount = (pageSize - SharedState.Field.readerTable) / SharedState.readerSlotSize
    }

    private static let processID = UInt64(getpid())

    private func slotOffset(_ slot: Int) -> Int { slotsOffset + slot * SharedState.readerSlotSize }

    /// Pins `[start, end)`; nil when every slot is taken (the caller then copies instead).
    func pin(start: Int, end: Int) -> Int? {
        for slot in 0..<slotCount {
            let at = slotOffset(slot)
            guard file.loadAcquire64(at: at) == 0,
                  file.compareExchange64(at: at, expected: 0, desired: ReaderTable.processID) else { continue }
            file.storeRelease64(UInt64(start), at: at + 8)
            file.storeRelease64(UInt64(end), at: at + 16)
            _ = lrd_fetch_add_u64(file.base + countOffset, 1)
            lrd_fence_seq_cst()
            return slot
        }
        return nil
    }

    func unpin(_ slot: Int) {
        let at = slotOffset(slot)
        file.storeRelease64(0, at: at + 8)
        file.storeRelease64(0, at: at + 16)
        _ = lrd_fetch_add_u64(file.base + countOffset, UInt64.max)
        file.storeRelease64(0, at: at)
    }

    /// Writer: the ranges pinned now, in any process. Frees the slots of processes that died.
    func pinnedRanges() -> [(start: Int, end: Int)] {
        lrd_fence_seq_cst()
        guard file.loadAcquire64(at: countOffset) != 0 else { return [] }
        var ranges: [(start: Int, end: Int)] = []
        for slot in 0..<slotCount {
            let at = slotOffset(slot)
            let owner = file.loadAcquire64(at: at)
            guard owner != 0 else { continue }
            if owner != ReaderTable.processID && lrd_process_exists(Int64(truncatingIfNeeded: owner)) == 0 {
                if file.compareExchange64(at: at + 8, expected: file.loadAcquire64(at: at + 8), desired: 0) {
                    file.storeRelease64(0, at: at + 16)
                    _ = lrd_fetch_add_u64(file.base + countOffset, UInt64.max)
                    file.storeRelease64(0, at: at)
                }
                continue
            }
            let start = Int(truncatingIfNeeded: file.loadAcquire64(at: at + 8))
            let end = Int(truncatingIfNeeded: file.loadAcquire64(at: at + 16))
            if end > start { ranges.append((start, end)) }
        }
        return ranges
    }

    /// Empties the table: only when no other process has the file open.
    func clear() {
        file.zero(slotsOffset, slotCount * SharedState.readerSlotSize)
        file.storeRelease64(0, at: countOffset)
    }
}

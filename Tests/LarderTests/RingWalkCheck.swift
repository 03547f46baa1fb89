@testable import Larder

/// What `checkRingWalk` found wrong.
struct RingWalkProblem: Error, CustomStringConvertible {
    let description: String
}

/// Walks the span of an open store record by record, from the tail to the head, trusting padding
/// as the writer does, and checks it against the shared state and the index: the walk must end
/// exactly at the head after `span` bytes, its live entries must be the entry count and the live
/// record bytes, every index slot must name a live entry the walk met, and every named index
/// segment must be walked or lie in the gap. A record written where the walk cannot reach it
/// (inside padding, say) would be overwritten by the head while the index still names it.
func checkRingWalk(_ store: CacheStore) throws {
    let state = store.state
    let ringStart = store.ringStart, ringEnd = store.ringEnd
    let head = state.head, tail = state.tail, span = state.spanBytes
    func problem(_ text: String) -> RingWalkProblem {
        RingWalkProblem(description: "\(text) [head \(head), tail \(tail), span \(span), ring \(ringStart)..<\(ringEnd)]")
    }
    guard span >= 0, span <= ringEnd - ringStart, (ringStart...ringEnd).contains(head),
          (ringStart...ringEnd).contains(tail) else { throw problem("head, tail or span out of the ring") }
    var position = tail == ringEnd ? ringStart : tail
    var walked = 0, liveCount = 0, liveBytes = 0
    var liveOffsets = Set<Int>(), walkedSegments = Set<Int>()
    while walked < span {
        if position == ringEnd { position = ringStart }
        if let length = RecordHeader.paddingLength(in: store.file, at: position, limit: ringEnd) {
            position += length
            walked += length
            continue
        }
        guard let header = RecordHeader.read(from: store.file, at: position, limit: ringEnd, seed: store.seed) else {
            throw problem("no record or padding at \(position), \(walked) bytes from the tail")
        }
        if header.kind == .indexSegment { walkedSegments.insert(position) }
        if header.kind == .entry && header.isLive && header.sequence >= store.meta.firstValidSequence {
            liveCount += 1
            liveBytes += header.totalSize
            liveOffsets.insert(position)
        }
        position += header.totalSize
        walked += header.totalSize
    }
    guard walked == span else { throw problem("the walk passes the head: \(walked) bytes") }
    guard span == 0 || position == head || (position == ringEnd && head == ringStart) else {
        throw problem("the walk ends at \(position), not at the head")
    }
    guard liveCount == state.entryCount, liveBytes == state.liveRecordBytes else {
        throw problem("the walk met \(liveCount) live entries of \(liveBytes) bytes; the state counts \(state.entryCount) of \(state.liveRecordBytes)")
    }
    for table in [store.active] + (store.draining.map { [$0] } ?? []) {
        for index in 0..<table.slotCount where HashTable.isEntry(table[index]) {
            let offset = HashTable.offset(of: table[index])
            guard liveOffsets.contains(offset) else { throw problem("an index slot names \(offset), which the walk did not meet") }
        }
    }
    for segment in [store.meta.activeIndex, store.meta.drainingIndex] where segment.exists && !walkedSegments.contains(segment.offset) {
        let start = segment.offset
        let inGap = span == 0 || (tail > head ? start >= head && start < tail : start >= head || start < tail)
        guard inGap else { throw problem("the index segment at \(start) is neither walked nor in the gap") }
    }
}

/// How the pages of a file are used and how much of it is free, from one walk over the ring.
///
/// Every page gets one type: the header pages are `meta` and `state`; a ring page is `index`
/// when a named index segment covers any of it, else `data` when a current entry lies in it,
/// else `dead` when records that are no longer current, padding or stale bytes are in it
/// (the room eviction gives back as the tail passes), else `free`.
@_spi(Inspection) public struct PageMap: Sendable {
    public enum PageType: String, CaseIterable, Sendable {
        case meta, state, index, data, dead, free
    }

    /// Pages of each type, in `PageType.allCases` order; they add up to file size / page size.
    public let pageCounts: [(type: PageType, count: Int)]
    /// Bytes of current entry records (headers, keys, values, alignment).
    public let liveRecordBytes: Int
    /// Bytes of the named index segments.
    public let indexBytes: Int
    /// Bytes a new record can take without evicting anything: the gap between head and tail
    /// (without index segments parked in it), plus what the file may still grow by.
    public let freeBytes: Int
    /// Bytes between tail and head taken by neither current entries nor index segments: dead
    /// records and padding that only the tail's passing gives back.
    public let fragmentedBytes: Int

    init(walk: RingWalk, summary: FileSummary) {
        let pageSize = summary.pageSize
        var counts: [PageType: Int] = [.meta: FileLayout.metaPageCount, .state: 1]
        var liveRecords = 0, index = 0, free = summary.capacity - summary.fileSize, fragmented = 0
        // Pages are typed by a sweep over the regions in file order, one page pending at a time.
        var pendingPage = FileLayout.headerPageCount
        var pendingType: PageType?
        func settle(_ type: PageType, from start: Int, to end: Int) {
            let first = start / pageSize, last = (end - 1) / pageSize
            if first > pendingPage, let type = pendingType {
                counts[type, default: 0] += 1
                pendingType = nil
            }
            if first != pendingPage || pendingType == nil { pendingPage = first }
            pendingType = PageMap.stronger(pendingType ?? type, type)
            guard last > first else { return }
            counts[pendingType!, default: 0] += 1
            counts[type, default: 0] += last - first - 1
            pendingPage = last
            pendingType = type
        }
        for region in walk.regions {
            let type: PageType
            switch region.kind {
            case .entry(let entry) where entry.isCurrent:
                type = .data
                liveRecords += region.size
            case .indexSegment(let segment) where segment.role != .unnamed:
                type = .index
                index += region.size
            case .unused:
                type = .free
            default:
                type = .dead
            }
            if !walk.isStructured {
                // Without a trustworthy tail and head, all that is not in use counts as dead,
                // except bytes never written.
                if type == .free { free += region.size } else if type == .dead { fragmented += region.size }
            } else if region.inSpan {
                if type == .dead || type == .free { fragmented += region.size }
            } else if type != .index {
                free += region.size
            }
            let effective: PageType = walk.isStructured && !region.inSpan && type == .dead ? .free : type
            settle(effective, from: region.offset, to: region.offset + region.size)
        }
        if let type = pendingType { counts[type, default: 0] += 1 }
        // Any ring page no region reached (a truncated file) counts as free.
        let ringPages = summary.fileSize / pageSize - FileLayout.headerPageCount
        let typed = counts.filter { $0.key != .meta && $0.key != .state }.values.reduce(0, +)
        if typed < ringPages { counts[.free, default: 0] += ringPages - typed }
        pageCounts = PageType.allCases.map { ($0, counts[$0] ?? 0) }
        liveRecordBytes = liveRecords
        indexBytes = index
        freeBytes = free
        fragmentedBytes = fragmented
    }

    /// Order of precedence when regions of several types share a page: index > data > dead > free.
    private static func stronger(_ a: PageType, _ b: PageType) -> PageType {
        let order = PageType.allCases
        return order.firstIndex(of: a)! <= order.firstIndex(of: b)! ? a : b
    }
}

extension RingWalk {
    /// How the file's pages are used (see `PageMap`).
    public func pageMap(_ summary: FileSummary) -> PageMap { PageMap(walk: self, summary: summary) }
}

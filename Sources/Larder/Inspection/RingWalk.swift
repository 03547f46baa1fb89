/// One stretch of the data area, as a walk over the ring found it.
@_spi(Inspection) public struct RingRegion: Sendable {
    public enum Kind: Sendable {
        /// An entry record whose header checks out (docs/FORMAT.md 4.4).
        case entry(EntryRecord)
        /// An index segment record whose header checks out.
        case indexSegment(SegmentRecord)
        /// A padding record (only trusted between tail and head; see `RingWalk.isStructured`).
        case padding
        /// Bytes that are all zero: never written.
        case unused
        /// Bytes outside the live part of the ring that are no record: remains of old ones.
        case stale
        /// Bytes between tail and head that should be records and are not: damage.
        case damaged(probableKey: [UInt8]?)
    }

    /// File offset.
    public let offset: Int
    public let size: Int
    public let kind: Kind
    /// Whether it lies between tail and head, where only records, padding and index segments may
    /// be. False everywhere when the shared state cannot be trusted (see `RingWalk.isStructured`).
    public let inSpan: Bool
}

/// An entry record as found in the ring.
@_spi(Inspection) public struct EntryRecord: Sendable {
    /// File offset of its header.
    public let offset: Int
    /// Bytes it takes in the ring, header and alignment included.
    public let recordSize: Int
    public let key: [UInt8]
    /// Bytes of the value as callers see it.
    public let rawLength: Int
    /// Bytes of the value as stored (after LZ4, when compressed).
    public let storedLength: Int
    public let isCompressed: Bool
    public let sequence: UInt64
    /// Milliseconds since the Unix epoch; 0 = never. Pushed back by reads for a sliding entry.
    public let expiresAt: UInt64
    /// Reads push its expiry back (FORMAT.md 4.8).
    public let isSliding: Bool
    /// Milliseconds since the Unix epoch.
    public let storedAt: UInt64
    /// Its state byte says live.
    public let isLive: Bool
    /// Live and not of a cleared generation: lookups may return it.
    public let isCurrent: Bool
    /// Its access bit is set: read since the tail last passed it (CLOCK's second chance).
    public let wasRead: Bool
    /// Why its value cannot be trusted (checksum, or a compressed block that does not decode),
    /// or nil when it checks out.
    public internal(set) var damage: String?
    /// 1 for the newest entry a lookup can reach, 2 for the next, ...; nil for the others.
    public internal(set) var rank: Int?
    /// Whether a slot of the index points at it.
    public internal(set) var isIndexed = false

    public var isIntact: Bool { damage == nil }

    /// Whether it is expired at `now`, by its expiry or by the file's maximum age (0: none).
    public func isExpired(now: UInt64, maximumAge: UInt64 = 0) -> Bool {
        (expiresAt != 0 && expiresAt <= now) || (maximumAge != 0 && storedAt <= now && now - storedAt >= maximumAge)
    }
}

/// An index segment record as found in the ring.
@_spi(Inspection) public struct SegmentRecord: Sendable {
    public enum Role: String, Sendable {
        /// The meta page names it as the active table.
        case active
        /// The meta page names it as the table being drained into the active one.
        case draining
        /// Not named by the meta page: a dead or stale segment, ordinary space.
        case unnamed
    }
    public let slotCount: Int
    public let sequence: UInt64
    public let isLive: Bool
    public let role: Role
    /// Occupied slots, for a named segment.
    public let usedSlots: Int?
}

/// A slot of a named index table that does not point at a current entry of its key.
@_spi(Inspection) public struct IndexFinding: Sendable {
    public let table: SegmentRecord.Role
    public let slot: Int
    /// Where the slot points.
    public let offset: Int
    public let problem: Problem

    public enum Problem: String, Sendable {
        case noEntry = "no entry record that checks out is there"
        case deadEntry = "the entry there is dead"
        case clearedEntry = "the entry there belongs to a cleared generation"
        case tagMismatch = "the slot's tag does not match the key's hash"
        case duplicate = "a second slot points at the same entry"
    }
}

/// Everything a walk over the ring found, in file order.
@_spi(Inspection) public struct RingWalk: Sendable {
    /// The data area from its start to the ring's end, without gaps or overlaps.
    public let regions: [RingRegion]
    /// The entries a lookup can reach, newest first (`rank` 1, 2, ...), expired ones included.
    public let entries: [EntryRecord]
    /// Index slots that point nowhere useful.
    public let indexFindings: [IndexFinding]
    /// Whether the part between tail and head was walked record by record (the state is
    /// trustworthy); otherwise the whole ring was scanned the way recovery does it.
    public let isStructured: Bool
}

extension FileInspector {
    /// Walks the whole data area. Between tail and head (when the state can be trusted) it goes
    /// record by record, trusting padding, and anything unreadable there is damage; elsewhere it
    /// scans in 16-byte steps for headers (and, of entries, data) that check out, as recovery does
    /// (docs/FORMAT.md 7.4), because old padding there may cover newer records.
    ///
    /// - Parameters:
    ///   - decodeValues: Also decompress every current compressed value to check that it decodes.
    ///   - progress: Called now and then with bytes walked and bytes in all.
    public func walk(decodeValues: Bool = false, progress: ((Int, Int) -> Void)? = nil) -> RingWalk {
        var scanner = RingScanner(inspector: self, decodeValues: decodeValues, progress: progress)
        let structured = state?.isTrustworthy ?? false
        for (range, inSpan) in ringStretches(structured: structured) {
            scanner.scan(range, inSpan: inSpan)
        }
        var regions = scanner.regions.sorted { $0.offset < $1.offset }
        let (findings, indexed) = checkIndex(regions)
        for position in regions.indices {
            guard case .entry(var entry) = regions[position].kind else { continue }
            entry.isIndexed = indexed.contains(entry.offset)
            regions[position] = RingRegion(offset: regions[position].offset, size: regions[position].size,
                                           kind: .entry(entry), inSpan: regions[position].inSpan)
        }
        return RingWalk(regions: regions, entries: rankedEntries(regions, indexUsable: findings.usable),
                        indexFindings: findings.list, isStructured: structured)
    }

    /// The data area cut where tail and head are: `[tail, head)` in ring order is the span.
    private func ringStretches(structured: Bool) -> [(Range<Int>, inSpan: Bool)] {
        guard structured, let state, state.spanBytes > 0 else { return [(ringStart..<ringEnd, false)] }
        let head = state.head, tail = state.tail
        if tail < head {
            return [(ringStart..<tail, false), (tail..<head, true), (head..<ringEnd, false)].filter { !$0.0.isEmpty }
        }
        return [(ringStart..<head, true), (head..<tail, false), (tail..<ringEnd, true)].filter { !$0.0.isEmpty }
    }

    /// The named index segments (those whose header checks out) as tables.
    func namedTables() -> [(role: SegmentRecord.Role, location: IndexLocation, table: HashTable?)] {
        [(SegmentRecord.Role.active, meta.activeIndex), (.draining, meta.drainingIndex)]
            .filter { $0.1.exists }
            .map { role, location in
                (role, location, IndexSegment.table(in: file, at: location, pageSize: meta.pageSize, seed: seed))
            }
    }

    /// Follows every occupied slot of the named tables to the entry it names.
    private func checkIndex(_ regions: [RingRegion]) -> (findings: (list: [IndexFinding], usable: Bool), indexed: Set<Int>) {
        var entriesByOffset: [Int: EntryRecord] = [:]
        for region in regions { if case .entry(let entry) = region.kind { entriesByOffset[entry.offset] = entry } }
        var findings: [IndexFinding] = []
        var indexed = Set<Int>()
        var usable = true
        for (role, _, table) in namedTables() {
            guard let table else {
                usable = false
                continue
            }
            for slotIndex in 0..<table.slotCount {
                let slot = table[slotIndex]
                guard HashTable.isEntry(slot) else { continue }
                let offset = HashTable.offset(of: slot)
                func finding(_ problem: IndexFinding.Problem) {
                    findings.append(IndexFinding(table: role, slot: slotIndex, offset: offset, problem: problem))
                }
                guard let entry = entriesByOffset[offset] else {
                    finding(.noEntry)
                    continue
                }
                guard entry.isCurrent else {
                    finding(entry.isLive ? .clearedEntry : .deadEntry)
                    continue
                }
                let tag = entry.key.withUnsafeBytes { KeyHash($0).tag }
                guard tag == HashTable.tag(of: slot) else {
                    finding(.tagMismatch)
                    continue
                }
                if !indexed.insert(offset).inserted { finding(.duplicate) }
            }
        }
        return ((findings, usable), indexed)
    }

    /// Current entries as lookups see them: those the index reaches (all current ones, newest
    /// version per key, when no index is usable), newest first.
    private func rankedEntries(_ regions: [RingRegion], indexUsable: Bool) -> [EntryRecord] {
        var newestByKey: [[UInt8]: EntryRecord] = [:]
        for region in regions {
            guard case .entry(let entry) = region.kind, entry.isCurrent else { continue }
            if indexUsable {
                guard entry.isIndexed else { continue }
            } else if let other = newestByKey[entry.key], other.sequence > entry.sequence {
                continue
            }
            newestByKey[entry.key] = entry
        }
        var ranked = newestByKey.values.sorted { $0.sequence > $1.sequence }
        for index in ranked.indices { ranked[index].rank = index + 1 }
        return ranked
    }

    /// The description of the entry whose valid header `header` is at `offset`.
    func entryRecord(_ header: RecordHeader, at offset: Int, damage: String?) -> EntryRecord {
        EntryRecord(
            offset: offset, recordSize: header.totalSize,
            key: Array(file.bytes(at: offset + RecordHeader.size, count: header.keyLength)),
            rawLength: header.rawLength, storedLength: header.storedLength, isCompressed: header.isCompressed,
            sequence: header.sequence, expiresAt: header.effectiveExpiry, isSliding: header.isSliding, storedAt: header.storedAt,
            isLive: header.isLive, isCurrent: header.isLive && header.sequence >= meta.firstValidSequence,
            wasRead: RecordHeader.wasVisited(in: file, at: offset), damage: damage)
    }

    /// The value of `entry` as callers see it (decompressed), or nil when it does not check out.
    /// The file may be in use: the record must still be the one the walk described (its
    /// sequence number), and its key and the bytes copied must match its data checksum, so that
    /// a record written there since never lends its value to the walk's key.
    public func value(of entry: EntryRecord) -> [UInt8]? {
        guard let header = RecordHeader.read(from: file, at: entry.offset, limit: ringEnd, seed: seed),
              header.kind == .entry, header.sequence == entry.sequence, header.keyLength == entry.key.count,
              case .intact(let stored) = copyStored(at: entry.offset, header: header, key: entry.key) else { return nil }
        return stored.withUnsafeBytes { decodedValue(header: header, stored: $0) }
    }

    /// Whether the compressed value of the entry at `offset` decodes to its raw length; nil when
    /// there is no memory to decode it into (a damaged header can claim 2 GiB for a few MiB
    /// stored), and the walk then cannot tell.
    func compressedValueDecodes(at offset: Int, header: RecordHeader) -> Bool? {
        guard let buffer = ValueMemory.allocate(header.rawLength) else { return nil }
        defer { ValueMemory.release(buffer) }
        let stored = file.bytes(at: offset + RecordHeader.size + header.keyLength, count: header.storedLength)
        return LZ4Codec.decompress(stored, into: UnsafeMutableRawBufferPointer(rebasing: buffer[..<header.rawLength]))
    }

    /// The value `header` describes, from its `stored` bytes.
    func decodedValue(header: RecordHeader, stored: UnsafeRawBufferPointer) -> [UInt8]? {
        guard header.isCompressed else { return Array(stored) }
        var decoded = true
        let bytes = [UInt8](unsafeUninitializedCapacity: header.rawLength) { buffer, count in
            decoded = LZ4Codec.decompress(stored, into: UnsafeMutableRawBufferPointer(buffer))
            count = decoded ? buffer.count : 0
        }
        return decoded ? bytes : nil
    }
}

/// The loop behind `FileInspector.walk`: turns stretches of the ring into regions.
private struct RingScanner {
    let inspector: FileInspector
    let decodeValues: Bool
    let progress: ((Int, Int) -> Void)?
    var regions: [RingRegion] = []
    private var walked = 0
    private var reported = 0
    private var dataChecks: DataCheckBudget
    private let named: [Int: (SegmentRecord.Role, HashTable?)]

    init(inspector: FileInspector, decodeValues: Bool, progress: ((Int, Int) -> Void)?) {
        self.inspector = inspector
        self.decodeValues = decodeValues
        self.progress = progress
        var named: [Int: (SegmentRecord.Role, HashTable?)] = [:]
        for (role, location, table) in inspector.namedTables() { named[location.offset] = (role, table) }

        self.named = named
        dataChecks = DataCheckBudget(ringBytes: inspector.ringEnd - inspector.ringStart)
    }

    private var file: MappedFile { inspector.file }

    mutating func scan(_ range: Range<Int>, inSpan: Bool) {
        var position = range.lowerBound
        var unknownStart: Int?
        while position < range.upperBound {
            report(position - range.lowerBound)
            var found: (size: Int, kind: RingRegion.Kind)?
            if range.upperBound - position >= RecordHeader.paddingSize {
                if inSpan, let length = RecordHeader.paddingLength(in: file, at: position, limit: range.upperBound) {
                    found = (length, .padding)
                } else if let header = RecordHeader.read(from: file, at: position, limit: range.upperBound, seed: inspector.seed) {
                    // Outside the span an entry counts only when its data checks out too, as in
                    // recovery (and within the same budget): padding may cover an old header whose
                    // record newer ones have since written over, beginning inside it. Within the
                    // span the walk steps over every record, so each byte is checked once.
                    let intact = header.kind != .entry
                        || (inSpan ? header.dataIsIntact(in: file, at: position, seed: inspector.seed)
                                   : dataChecks.dataIsIntact(header, in: file, at: position, seed: inspector.seed))
                    let wellFormed = header.kind != .indexSegment
                        || IndexSegment.isWellFormed(header, at: position, pageSize: inspector.meta.pageSize)
                    if (inSpan || intact) && wellFormed {
                        found = (header.totalSize, record(header, at: position, dataIsIntact: intact))
                    }
                }
            }
            guard let (size, kind) = found else {
                if unknownStart == nil { unknownStart = position }
                position += min(FileLayout.recordAlignment, range.upperBound - position)
                continue
            }
            closeUnknown(from: unknownStart, to: position, inSpan: inSpan)
            unknownStart = nil
            regions.append(RingRegion(offset: position, size: size, kind: kind, inSpan: inSpan))
            position += size
        }
        closeUnknown(from: unknownStart, to: range.upperBound, inSpan: inSpan)
        walked += range.count
        report(0)
    }

    /// Ends a run of bytes that are no record: damage between tail and head, else old or unused.
    private mutating func closeUnknown(from start: Int?, to end: Int, inSpan: Bool) {
        guard let start, end > start else { return }
        let kind: RingRegion.Kind
        if inSpan {
            kind = .damaged(probableKey: probableKey(at: start))
        } else {
            kind = isZero(start, end - start) ? .unused : .stale
        }
        regions.append(RingRegion(offset: start, size: end - start, kind: kind, inSpan: inSpan))
    }

    private mutating func report(_ inStretch: Int) {
        guard let progress else { return }
        let done = walked + inStretch
        if done - reported >= 1 << 20 || inStretch == 0 {
            reported = done
            progress(done, inspector.ringEnd - inspector.ringStart)
        }
    }

    private func record(_ header: RecordHeader, at offset: Int, dataIsIntact: Bool) -> RingRegion.Kind {
        if header.kind == .indexSegment {
            let namedHere = named[offset]
            let role = namedHere?.0 ?? .unnamed
            let used = namedHere?.1.map { table in (0..<table.slotCount).reduce(0) { HashTable.isEntry(table[$1]) ? $0 + 1 : $0 } }
            return .indexSegment(SegmentRecord(slotCount: header.rawLength, sequence: header.sequence, isLive: header.isLive,
                                               role: role, usedSlots: used))
        }
        let current = header.isLive && header.sequence >= inspector.meta.firstValidSequence
        var damage: String?
        if !dataIsIntact {
            damage = "data checksum mismatch"
        } else if header.isCompressed && decodeValues && current
                    && inspector.compressedValueDecodes(at: offset, header: header) == false {
            damage = "compressed value does not decode to \(header.rawLength) bytes"
        }
        return .entry(inspector.entryRecord(header, at: offset, damage: damage))
    }

    /// The key of an entry whose header no longer checks out, when magic, kind and key length
    /// still look right: a hint for a person, not a verified key.
    private func probableKey(at offset: Int) -> [UInt8]? {
        guard file.contains(offset, RecordHeader.size), offset + RecordHeader.size <= inspector.ringEnd,
              file.load(UInt16.self, at: offset + RecordHeader.Field.magic) == RecordHeader.magic,
              file.load(UInt8.self, at: offset + RecordHeader.Field.kind) == RecordKind.entry.rawValue else { return nil }
        let length = Int(file.load(UInt16.self, at: offset + RecordHeader.Field.keyLength))
        guard length > 0, length <= CacheStore.maximumKeyLength,
              offset + RecordHeader.size + length <= inspector.ringEnd else { return nil }
        return Array(file.bytes(at: offset + RecordHeader.size, count: length))
    }

    /// Whether `count` bytes at `offset` are all zero, eight at a time.
    private func isZero(_ offset: Int, _ count: Int) -> Bool {
        let bytes = file.bytes(at: offset, count: count)
        var index = 0
        while index + 8 <= count {
            if bytes.loadUnaligned(fromByteOffset: index, as: UInt64.self) != 0 { return false }
            index += 8
        }
        return bytes[index...].allSatisfy { $0 == 0 }
    }
}

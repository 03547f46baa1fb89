/// What `FileInspector.verify` found: every piece of damage, with where it is and, when it can
/// be told, which key it costs.
@_spi(Inspection) public struct VerificationReport: Sendable {
    public struct Problem: Sendable {
        /// File offset of the damage, when it has one.
        public let offset: Int?
        /// The page that offset lies in.
        public let page: Int?
        public let description: String
        /// The key concerned, when known.
        public let key: [UInt8]?
        /// The key was read from a header that no longer checks out: likely, not certain.
        public let keyIsProbable: Bool
    }

    /// Damage, in file order. Empty for a sound file.
    public let problems: [Problem]
    /// Facts worth knowing that are not damage (an unclean file, say).
    public let notes: [String]
    /// Records whose checksums were checked.
    public let recordsChecked: Int
    /// Entries a lookup can reach.
    public let entriesReachable: Int
    /// Bytes of the data area walked.
    public let bytesWalked: Int

    public var isSound: Bool { problems.isEmpty }
}

extension FileInspector {
    /// Checks everything that can be checked without changing a byte: both meta copies, the
    /// file's length, the shared state, every record header and data checksum, every compressed
    /// value's decoding, and that every index slot points at a current entry of its key.
    public func verify(progress: ((Int, Int) -> Void)? = nil) -> (report: VerificationReport, walk: RingWalk) {
        let walk = walk(decodeValues: true, progress: progress)
        var problems: [VerificationReport.Problem] = []
        var notes: [String] = []
        func problem(_ offset: Int?, _ text: String, key: [UInt8]? = nil, probable: Bool = false) {
            problems.append(.init(offset: offset, page: offset.map { $0 / meta.pageSize }, description: text,
                                  key: key, keyIsProbable: probable))
        }

        for copy in metaCopies {
            switch copy.status {
            case .damaged: problem(copy.offset, "meta copy \(copy.copy): checksum mismatch")
            case .blank: problem(copy.offset, "meta copy \(copy.copy): all zeros")
            case .unfinishedCreation: problem(copy.offset, "meta copy \(copy.copy): never written (a creation cut short)")
            case .missing: problem(copy.offset, "meta copy \(copy.copy): not a meta page")
            case .valid:
                if let reason = copy.problem { problem(copy.offset, "meta copy \(copy.copy): \(reason)") }
            }
        }
        if summary.isTruncated {
            problem(diskSize, "the file is truncated: \(diskSize) bytes on disk, the meta page says \(summary.fileSize)")
        }
        let statePage = FileLayout.statePage * meta.pageSize
        if let state {
            if !state.isFormatted {
                problem(statePage, "the shared-state page is not formatted")
            } else if !state.isClean {
                notes.append("not closed cleanly: a process that has it open changed it, or one crashed; the next read-write open recovers it")
            } else if !state.isPlausible && !summary.isTruncated {
                problem(statePage, "the shared state is impossible (head \(state.head), tail \(state.tail), span \(state.spanBytes), next sequence \(state.nextSequence), first valid \(summary.firstValidSequence))")
            }
            if walk.isStructured {
                let span = walk.regions.filter(\.inSpan).reduce(0) { $0 + $1.size }
                if span != state.spanBytes {
                    problem(statePage, "the shared state says the span is \(state.spanBytes) bytes; tail to head is \(span)")
                }
                if state.entryCount != walk.entries.count {
                    problem(statePage, "the shared state counts \(state.entryCount) entries; the index reaches \(walk.entries.count)")
                }
            }
        } else {
            problem(statePage, "the shared-state page is missing")
        }
        for (role, location, table) in namedTables() where table == nil {
            problem(location.offset, "\(role) index segment (\(location.slotCount) slots): header damaged or wrong size")
        }

        var records = 0
        var damagedRegions = Set<Int>()
        for region in walk.regions {
            switch region.kind {
            case .damaged(let probableKey):
                damagedRegions.insert(region.offset)
                problem(region.offset, "unreadable record (\(region.size) bytes between tail and head)",
                        key: probableKey, probable: probableKey != nil)
            case .entry(let entry):
                records += 1
                if let damage = entry.damage, entry.isCurrent || region.inSpan {
                    problem(entry.offset, damage + (entry.isCurrent ? "" : " (dead record)"), key: entry.key)
                }
                if walk.isStructured, region.inSpan, entry.isCurrent, entry.isIntact, !entry.isIndexed {
                    problem(entry.offset, "live entry not in the index", key: entry.key)
                }
            case .indexSegment:
                records += 1
            default:
                break
            }
        }
        for finding in walk.indexFindings where !damagedRegions.contains(finding.offset) {
            problem(finding.offset, "\(finding.table) index slot \(finding.slot) points here: \(finding.problem.rawValue)")
        }
        problems.sort { ($0.offset ?? -1) < ($1.offset ?? -1) }
        let report = VerificationReport(problems: problems, notes: notes, recordsChecked: records,
                                        entriesReachable: walk.entries.count, bytesWalked: ringEnd - ringStart)
        return (report, walk)
    }
}

@_spi(Inspection) import Larder

/// `larder dump --pages`: the file region by region, in file order, as docs/FORMAT.md section 9
/// walks through it: the two meta copies, the shared state, then every record of the ring.
struct PageMapText {
    let inspector: FileInspector
    let walk: RingWalk

    /// One line of the map.
    struct Row {
        let offset: Int
        let size: Int
        let type: String
        let detail: String
        var key: [UInt8]? = nil
    }

    func write(limit: Int?, json: Bool) {
        let shown = rows().prefix(limit ?? Int.max)
        let pageSize = inspector.summary.pageSize
        if json {
            for row in shown {
                var line = JSONLine()
                line.add("offset", row.offset)
                line.add("page", row.offset / pageSize)
                line.add("size", row.size)
                line.add("type", row.type)
                line.add("detail", row.detail)
                line.add("key", row.key.flatMap(KeyText.utf8))
                line.add("key_hex", row.key.map(ByteFormat.hex))
                Output.print(line.text)
            }
            return
        }
        var table = Table(header: ["OFFSET", "HEX", "PAGE", "BYTES", "TYPE", "DETAIL"],
                          alignments: [.right, .right, .right, .right, .left, .left])
        for row in shown {
            table.add(["\(row.offset)", "0x" + String(row.offset, radix: 16), "\(row.offset / pageSize)", "\(row.size)",
                       row.type, row.detail])
        }
        Output.write(Array(table.render().utf8))
    }

    func rows() -> [Row] {
        let summary = inspector.summary
        let pageSize = summary.pageSize
        var rows = inspector.metaCopies.map { copy in
            Row(offset: copy.offset, size: pageSize, type: "meta", detail: metaDetail(copy))
        }
        rows.append(Row(offset: 2 * pageSize, size: pageSize, type: "state", detail: stateDetail()))
        let head = inspector.state.map(\.head), tail = inspector.state.map(\.tail)
        var headShown = false
        for region in walk.regions {
            var row = regionRow(region)
            var marks: [String] = []
            if walk.isStructured && region.offset == tail { marks.append("tail") }
            if walk.isStructured && region.offset == head {
                marks.append("head")
                headShown = true
            }
            if !marks.isEmpty {
                row = Row(offset: row.offset, size: row.size, type: row.type,
                          detail: row.detail + (row.detail.isEmpty ? "" : "; ") + marks.joined(separator: ", "), key: row.key)
            }
            rows.append(row)
        }
        if walk.isStructured, !headShown, let head, head == summary.fileSize {
            rows.append(Row(offset: head, size: 0, type: "end", detail: "head"))
        }
        return rows
    }

    private func metaDetail(_ copy: FileInspector.MetaCopy) -> String {
        switch copy.status {
        case .valid(let sequence):
            var text = "copy \(copy.copy), sequence \(sequence)"
            if copy.inUse { text += ", in use" }
            if let problem = copy.problem { text += ", unusable: \(problem)" }
            return text
        case .damaged: return "copy \(copy.copy), DAMAGED (checksum mismatch)"
        case .blank: return "copy \(copy.copy), blank"
        case .unfinishedCreation: return "copy \(copy.copy), unfinished creation"
        case .missing: return "copy \(copy.copy), not a meta page"
        }
    }

    private func stateDetail() -> String {
        guard let state = inspector.state, state.isFormatted else { return "not formatted" }
        let cleanliness = state.isClean ? "clean" : "not closed cleanly"
        return "\(cleanliness), head \(state.head), tail \(state.tail), span \(state.spanBytes), next sequence \(state.nextSequence)"
    }

    private func regionRow(_ region: RingRegion) -> Row {
        switch region.kind {
        case .entry(let entry):
            var facts = ["\(entry.rawLength) B", "sequence \(entry.sequence)"]
            if entry.isCompressed { facts.insert("\(entry.storedLength) B stored (lz4)", at: 1) }
            facts.append(entry.isCurrent ? "live" : entry.isLive ? "cleared" : "dead")
            if entry.wasRead { facts.append("read") }
            if let damage = entry.damage { facts.append("DAMAGED: \(damage)") }
            return Row(offset: region.offset, size: region.size, type: "entry",
                       detail: KeyText.display(entry.key) + ": " + facts.joined(separator: ", "), key: entry.key)
        case .indexSegment(let segment):
            var facts = [segment.role == .unnamed ? (segment.isLive ? "unnamed" : "dead") : segment.role.rawValue,
                         "\(segment.slotCount) slots"]
            if let used = segment.usedSlots { facts[1] += " (\(used) used)" }
            facts.append("sequence \(segment.sequence)")
            return Row(offset: region.offset, size: region.size, type: "index", detail: facts.joined(separator: ", "))
        case .padding:
            return Row(offset: region.offset, size: region.size, type: "padding", detail: "")
        case .unused:
            return Row(offset: region.offset, size: region.size, type: "free", detail: "never written")
        case .stale:
            return Row(offset: region.offset, size: region.size, type: "free", detail: "old records")
        case .damaged(let key):
            let hint = key.map { "probably key " + KeyText.display($0) } ?? "no record header"
            return Row(offset: region.offset, size: region.size, type: "DAMAGED", detail: hint, key: key)
        }
    }
}

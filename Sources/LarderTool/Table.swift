/// A table of text, its columns padded to line up, two spaces apart, no trailing blanks.
///
/// Columns holding numbers are right-aligned, the rest left-aligned; the header row (in
/// capitals, as `ps` and `mdb_stat` print) follows the same alignment.
struct Table {
    enum Alignment { case left, right }

    let header: [String]?
    let alignments: [Alignment]
    private(set) var rows: [[String]] = []

    init(header: [String]? = nil, alignments: [Alignment]) {
        self.header = header
        self.alignments = alignments
    }

    mutating func add(_ row: [String]) {
        rows.append(row)
    }

    /// The table as lines, each ending in a newline.
    func render() -> String {
        let all = (header.map { [$0] } ?? []) + rows
        guard !all.isEmpty else { return "" }
        var widths = [Int](repeating: 0, count: alignments.count)
        for row in all {
            for (column, cell) in row.enumerated() where column < widths.count {
                widths[column] = max(widths[column], cell.count)
            }
        }
        var text = ""
        for row in all {
            var line = ""
            for (column, cell) in row.enumerated() {
                let padding = String(repeating: " ", count: max(0, widths[column] - cell.count))
                let last = column == row.count - 1
                if column > 0 { line += "  " }
                line += alignments[column] == .right ? padding + cell : cell + (last ? "" : padding)
            }
            while line.hasSuffix(" ") { line.removeLast() }
            text += line + "\n"
        }
        return text
    }
}

@_spi(Inspection) import Larder

/// What `recover` and `compact` print: what was kept, what was dropped and why.
enum SalvageText {
    static func render(_ report: SalvageReport, verb: String) -> String {
        let kept = report.kept.count
        var text = "\(verb) \(CountText.entries(kept)) into \(report.outputPath) "
            + "(\(ByteFormat.size(report.sourceBytes)) before, \(ByteFormat.size(report.outputBytes)) now)\n"
        if report.expired > 0 { text += "left out \(CountText.entries(report.expired, "expired"))\n" }
        if report.evicted > 0 {
            text += "left out \(CountText.entries(report.evicted, "older")) the new capacity cannot hold\n"
        }
        if report.dropped.isEmpty {
            text += "dropped nothing\n"
        } else {
            let count = report.dropped.count
            text += "dropped \(count) damaged \(count == 1 ? "record" : "records"):\n"
            var table = Table(header: ["OFFSET", "KEY", "REASON"], alignments: [.right, .left, .left])
            for dropped in report.dropped {
                let key = dropped.key.map { KeyText.display($0) + (dropped.keyIsProbable ? " (probably)" : "") } ?? "-"
                table.add([dropped.offset.map { "\($0)" } ?? "-", key, dropped.reason])
            }
            text += table.render()
        }
        return text
    }
}

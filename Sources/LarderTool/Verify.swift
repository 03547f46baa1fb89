import ArgumentParser
@_spi(Inspection) import Larder

extension LarderCommand {
    /// `larder verify FILE`: checks every checksum; exit 0 when sound, 1 when damaged.
    struct Verify: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Check every page, record and checksum; list the damage.",
            discussion: """
                Checks both meta copies, the file's length, the shared state, every record header \
                and data checksum, that every compressed value decodes, and that every index slot \
                points at a live entry of its key. Exits with 0 when the file is sound and 1 when \
                it is damaged, listing each damaged place, its page and the key it costs. Changes \
                nothing and takes no lock. On a terminal, large files get a progress bar on stderr.
                """)

        @OptionGroup var cacheFile: CacheFileArgument

        func run() throws {
            let path = cacheFile.file
            var damaged = false
            try reportingErrors {
                let inspector: FileInspector
                do {
                    inspector = try inspectExisting(path)
                } catch let error as LarderError where error.code == .corrupt {
                    // Without a usable meta page nothing else can be located: that is the damage.
                    Output.print("\(path): damaged")
                    Output.print(error.message)
                    damaged = true
                    return
                }
                let bar = ProgressBar("verifying", totalBytes: inspector.summary.fileSize)
                let (report, _) = inspector.verify(progress: bar.update)
                bar.finish()
                Output.write(Array(Verify.render(report, path: path).utf8))
                damaged = !report.isSound
            }
            if damaged { throw ExitStatus.notFoundOrDamaged }
        }

        static func render(_ report: VerificationReport, path: String) -> String {
            var text = ""
            if report.isSound {
                text += "\(path): no damage found\n"
            } else {
                let count = report.problems.count
                text += "\(path): damaged, \(count) \(count == 1 ? "problem" : "problems")\n"
                var table = Table(header: ["OFFSET", "PAGE", "KEY", "PROBLEM"], alignments: [.right, .right, .left, .left])
                for problem in report.problems {
                    let key = problem.key.map { KeyText.display($0) + (problem.keyIsProbable ? " (probably)" : "") } ?? "-"
                    table.add([problem.offset.map { "\($0)" } ?? "-", problem.page.map { "\($0)" } ?? "-", key,
                               problem.description])
                }
                text += table.render()
            }
            for note in report.notes { text += "note: \(note)\n" }
            text += "\(report.recordsChecked) records checked, \(CountText.entries(report.entriesReachable)) reachable, "
                + "\(ByteFormat.size(report.bytesWalked)) walked\n"
            return text
        }
    }
}

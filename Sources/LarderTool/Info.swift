import ArgumentParser
@_spi(Inspection) import Larder

extension LarderCommand {
    /// `larder info FILE`: what the file is, what it holds and how its space is used.
    struct Info: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Show a cache file's format, size, contents, space and counters.",
            discussion: "Reads the file without locking it or changing it, so it works while another process has it open.")

        @OptionGroup var cacheFile: CacheFileArgument

        func run() throws {
            try reportingErrors {
                let inspector = try inspectExisting(cacheFile.file)
                let walk = inspector.walk()
                Output.write(Array(Info.render(inspector, walk).utf8))
            }
        }

        static func render(_ inspector: FileInspector, _ walk: RingWalk) -> String {
            let summary = inspector.summary
            let pages = walk.pageMap(summary)
            let raw = walk.entries.reduce(0) { $0 + $1.rawLength }
            let stored = walk.entries.reduce(0) { $0 + $1.storedLength }
            let ratio = stored == 0 ? 1 : Double(raw) / Double(stored)
            var table = Table(alignments: [.left, .left])
            table.add(["file", inspector.path])
            table.add(["format", "version \(summary.writeVersion) (readers need version \(summary.readVersion))"])
            table.add(["page size", ByteFormat.size(summary.pageSize)])
            table.add(["capacity", ByteFormat.size(summary.capacity)])
            table.add(["count limit", summary.countLimit == 0 ? "none" : "\(summary.countLimit) entries"])
            table.add(["maximum age", summary.maximumAge == 0 ? "none"
                       : "\(TimeFormat.duration(summary.maximumAge)) (\(summary.maximumAge) ms)"])
            var fileSize = "\(ByteFormat.size(summary.fileSize)) (\(summary.fileSize) bytes)"
            if summary.isTruncated { fileSize += ", truncated to \(summary.diskSize) bytes on disk" }
            table.add(["file size", fileSize])
            table.add(["created", TimeFormat.date(summary.createdAt)])
            table.add(["state", stateText(inspector.state, truncated: summary.isTruncated)])
            table.add(["entries", "\(walk.entries.count)"])
            table.add(["live bytes", ByteFormat.size(raw)])
            table.add(["stored bytes", "\(ByteFormat.size(stored)) (compression ratio \(String(format: "%.2f", ratio)))"])
            table.add(["record bytes", ByteFormat.size(pages.liveRecordBytes)])
            table.add(["index", indexText(summary, walk)])
            table.add(["free", ByteFormat.size(pages.freeBytes)])
            table.add(["fragmented", ByteFormat.size(pages.fragmentedBytes)])

            var pageTable = Table(header: ["PAGES", "COUNT", "BYTES"], alignments: [.left, .right, .right])
            for (type, count) in pages.pageCounts {
                pageTable.add([type.rawValue, "\(count)", ByteFormat.size(count * summary.pageSize)])
            }
            var counters = Table(header: ["COUNTER", "VALUE"], alignments: [.left, .right])
            for (name, value) in inspector.state?.counters ?? [] { counters.add([name, "\(value)"]) }
            return table.render() + "\n" + pageTable.render() + "\n" + counters.render()
        }

        private static func stateText(_ state: StateSnapshot?, truncated: Bool) -> String {
            if truncated { return "truncated (needs recovery)" }
            guard let state, state.isFormatted else { return "not formatted (needs recovery)" }
            if !state.isClean { return "not closed cleanly (changed by a process that has it open, or left by a crash)" }
            return state.isPlausible ? "clean" : "clean, but head and tail are impossible"
        }

        private static func indexText(_ summary: FileSummary, _ walk: RingWalk) -> String {
            var parts = ["\(summary.activeIndexSlots) slots at offset \(summary.activeIndexOffset)"]
            if summary.drainingIndexOffset != 0 {
                parts.append("growing from \(summary.drainingIndexSlots) slots at offset \(summary.drainingIndexOffset)")
            }
            return parts.joined(separator: ", ")
        }
    }
}

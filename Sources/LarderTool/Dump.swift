import ArgumentParser
@_spi(Inspection) import Larder

extension LarderCommand {
    /// `larder dump FILE`: every entry, newest first, or with `--pages` the map of the file.
    struct Dump: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List every entry (newest first), or with --pages every page and record.",
            discussion: """
                An entry's RANK is its place in the ring counted back from the head: 1 is the \
                newest. READ says whether it was read since the tail last passed it; eviction, \
                which works from the highest rank down, gives such entries a second chance. \
                With --json each entry (or page map row) is one JSON object on its own line; \
                docs/CLI.md documents the schema.
                """)

        @OptionGroup var cacheFile: CacheFileArgument

        @Flag(help: "Show each value: as text, escaped where it is not printable.")
        var values = false

        @Flag(help: "Show values as hexadecimal (implies --values).")
        var hex = false

        @Option(name: .customLong("value-bytes"),
                help: "In the table, show at most this many bytes of each value; 0 shows them all (JSON always does).")
        var valueBytes = 64

        @Flag(help: "Show the page map instead: every meta, state, index and record region, in file order.")
        var pages = false

        @Option(help: "Show at most this many entries (or page map rows).")
        var limit: Int?

        @Option(help: "Show only entries whose key starts with this (UTF-8, or hexadecimal with --hex-key).")
        var prefix: String?

        @Flag(name: .customLong("hex-key"), help: "Read --prefix as hexadecimal bytes.")
        var hexKey = false

        @Flag(help: "Write one JSON object per line instead of a table.")
        var json = false

        func validate() throws {
            if let limit, limit < 0 { throw ValidationError("--limit must not be negative") }
            if valueBytes < 0 { throw ValidationError("--value-bytes must not be negative") }
            if hexKey && prefix == nil { throw ValidationError("--hex-key applies to --prefix, which is missing") }
            if pages, let ignored = [(prefix != nil, "--prefix"), (values, "--values"), (hex, "--hex")].first(where: \.0) {
                throw ValidationError("\(ignored.1) does not apply to --pages, which shows every region")
            }
            if let prefix, KeyText.parse(prefix, hex: hexKey) == nil {
                throw ValidationError("--prefix '\(prefix)' is not hexadecimal")
            }
        }

        func run() throws {
            try reportingErrors {
                let inspector = try inspectExisting(cacheFile.file)
                let walk = inspector.walk()
                if pages {
                    PageMapText(inspector: inspector, walk: walk).write(limit: limit, json: json)
                    return
                }
                let wanted = prefix.flatMap { KeyText.parse($0, hex: hexKey) } ?? []
                let matching = walk.entries.filter { $0.key.starts(with: wanted) }
                let shown = Array(matching.prefix(limit ?? Int.max))
                if json {
                    for entry in shown { Output.print(jsonLine(entry, inspector)) }
                } else {
                    if !shown.isEmpty { Output.write(Array(table(shown, inspector).utf8)) }
                    Output.print(footer(shown: shown.count, matching: matching))
                }
            }
        }

        private var showsValues: Bool { values || hex }

        private func table(_ entries: [EntryRecord], _ inspector: FileInspector) -> String {
            var header = ["RANK", "KEY", "SIZE", "STORED", "LZ4", "EXPIRES", "READ"]
            var alignments: [Table.Alignment] = [.right, .left, .right, .right, .left, .left, .left]
            if showsValues {
                header.append("VALUE")
                alignments.append(.left)
            }
            var table = Table(header: header, alignments: alignments)
            let now = TimeFormat.nowMilliseconds()
            for entry in entries {
                var row = ["\(entry.rank ?? 0)", KeyText.display(entry.key), ByteFormat.size(entry.rawLength),
                           ByteFormat.size(entry.storedLength), entry.isCompressed ? "yes" : "no",
                           TimeFormat.expiry(entry.expiresAt, now: now), entry.wasRead ? "yes" : "no"]
                if showsValues {
                    if let value = inspector.value(of: entry) {
                        let shown = valueBytes == 0 ? value : Array(value.prefix(valueBytes))
                        var text = hex ? ByteFormat.hex(shown) : KeyText.display(shown)
                        if shown.count < value.count { text += " ... (\(ByteFormat.size(value.count - shown.count)) more)" }
                        row.append(text)
                    } else {
                        row.append(entry.damage.map { "(damaged: \($0))" } ?? "(changed while being read)")
                    }
                }
                table.add(row)
            }
            return table.render()
        }

        private func footer(shown: Int, matching: [EntryRecord]) -> String {
            let raw = matching.reduce(0) { $0 + $1.rawLength }
            let stored = matching.reduce(0) { $0 + $1.storedLength }
            let showing = shown < matching.count ? "showing \(shown) of " : ""
            return "\(showing)\(CountText.entries(matching.count)), \(ByteFormat.size(raw)) (\(ByteFormat.size(stored)) stored)"
        }

        /// The documented schema (docs/CLI.md); members are only ever added at the end.
        private func jsonLine(_ entry: EntryRecord, _ inspector: FileInspector) -> String {
            var line = JSONLine.entry(entry, maximumAge: inspector.summary.maximumAge)
            if showsValues {
                let value = inspector.value(of: entry)
                line.add("value", value.flatMap(KeyText.utf8))
                line.add("value_hex", value.map(ByteFormat.hex))
            }
            return line.text
        }
    }
}

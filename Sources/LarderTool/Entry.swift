import ArgumentParser
@_spi(Inspection) import Larder

extension LarderCommand {
    /// `larder entry FILE KEY`: one entry's details, as `dump` lists them.
    struct Entry: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Show one entry's size, stored size, compression, times and read bit.",
            discussion: """
                Shows what `dump` shows for the key's entry, expired or not; with --json the same \
                JSON object as `dump --json`. Exits with 1 when the key has no entry. Takes no \
                lock: works while another process has the file open.
                """)

        @OptionGroup var cacheFile: CacheFileArgument
        @OptionGroup var key: KeyArgument

        @Flag(help: "Write one JSON object instead of a table.")
        var json = false

        func run() throws {
            let keyBytes = try key.bytes()
            try reportingErrors {
                let inspector = try inspectExisting(cacheFile.file)
                guard let entry = inspector.walk().entries.first(where: { $0.key == keyBytes }) else {
                    Output.error("no entry for key \(KeyText.display(keyBytes))")
                    throw ExitStatus.notFoundOrDamaged
                }
                if json {
                    Output.print(JSONLine.entry(entry, maximumAge: inspector.summary.maximumAge).text)
                } else {
                    Output.write(Array(Entry.render(entry).utf8))
                }
            }
        }

        static func render(_ entry: EntryRecord) -> String {
            var table = Table(alignments: [.left, .left])
            table.add(["key", KeyText.display(entry.key)])
            table.add(["rank", "\(entry.rank ?? 0)"])
            table.add(["size", ByteFormat.size(entry.rawLength)])
            table.add(["stored size", ByteFormat.size(entry.storedLength)])
            table.add(["record size", ByteFormat.size(entry.recordSize)])
            table.add(["compressed", entry.isCompressed ? "yes" : "no"])
            table.add(["stored at", TimeFormat.date(entry.storedAt)])
            table.add(["expires", TimeFormat.expiry(entry.expiresAt, now: TimeFormat.nowMilliseconds())])
            table.add(["sliding", entry.isSliding ? "yes" : "no"])
            table.add(["read", entry.wasRead ? "yes" : "no"])
            table.add(["intact", entry.isIntact ? "yes" : "no"])
            return table.render()
        }
    }
}

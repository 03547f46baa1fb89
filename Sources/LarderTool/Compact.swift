import ArgumentParser
@_spi(Inspection) import Larder

extension LarderCommand {
    /// `larder compact FILE`: rebuilds the file in place, atomically.
    struct Compact: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Rebuild a cache file in place, keeping every entry that checks out.",
            discussion: """
                Writes a fresh file beside FILE as `recover` does and renames it over FILE, so \
                FILE is always either the old file or the whole new one. Dead records, padding \
                and expired entries are gone afterwards. Refuses with "busy" (exit 2) while any \
                process has the file open, and holds the file's locks until done. With \
                --capacity the new file gets another capacity; a smaller one keeps the newest \
                entries that fit.
                """)

        @OptionGroup var cacheFile: CacheFileArgument

        @Option(help: ArgumentHelp("Capacity of the rebuilt file: bytes, or with K, M, G (binary units).", valueName: "size"))
        var capacity: String?

        func validate() throws {
            try validateCapacity(capacity)
        }

        func run() throws {
            try reportingErrors {
                try requireExisting(cacheFile.file)
                let report = try FileInspector.compact(path: cacheFile.file, capacity: capacity.flatMap { ByteFormat.parseSize($0) })
                Output.write(Array(SalvageText.render(report, verb: "compacted").utf8))
            }
        }
    }
}

import ArgumentParser
import Larder

extension LarderCommand {
    /// `larder trim FILE --expired --older-than S --prefix P --max-entries N --max-bytes SIZE`:
    /// the limits of `Cache+Maintenance.swift` and removal by prefix, through the `Cache` API.
    struct Trim: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Remove expired, old or prefixed entries, or evict down to a count or size.",
            discussion: """
                Applies the limits given, in this order: --expired, --older-than, --prefix, \
                --max-entries, --max-bytes, and prints one line for each. Eviction takes the \
                least recently used entries first, as the cache's own does. The file keeps its \
                size (`compact` shrinks it); later writes reuse the room. Other processes may \
                have the file open meanwhile; the tool takes its turn with them.
                """)

        @OptionGroup var cacheFile: CacheFileArgument

        @Flag(help: "Remove every expired entry.")
        var expired = false

        @Option(name: .customLong("older-than"),
                help: ArgumentHelp("Remove the entries stored more than this many seconds ago.", valueName: "seconds"))
        var olderThan: Double?

        @Option(help: ArgumentHelp("Remove the entries whose key begins with these bytes.", valueName: "prefix"))
        var prefix: String?

        @Flag(name: .customLong("hex-key"), help: "Read --prefix as hexadecimal bytes.")
        var hexKey = false

        @Option(name: .customLong("max-entries"), help: ArgumentHelp("Evict until at most this many entries are left.", valueName: "count"))
        var maxEntries: Int?

        @Option(name: .customLong("max-bytes"),
                help: ArgumentHelp("Evict until the values left add up to at most this size: bytes, or with K, M, G (binary units).",
                                   valueName: "size"))
        var maxBytes: String?

        func validate() throws {
            guard expired || olderThan != nil || prefix != nil || maxEntries != nil || maxBytes != nil else {
                throw ValidationError("give at least one of --expired, --older-than, --prefix, --max-entries, --max-bytes")
            }
            if let olderThan, !(olderThan >= 0 && olderThan.isFinite) {
                throw ValidationError("--older-than must be zero or more seconds")
            }
            if hexKey && prefix == nil { throw ValidationError("--hex-key applies to --prefix, which is missing") }
            if let prefix {
                guard let bytes = KeyText.parse(prefix, hex: hexKey) else {
                    throw ValidationError("--prefix '\(prefix)' is not hexadecimal")
                }
                // An empty prefix would remove every entry: `clear` says so plainly.
                guard !bytes.isEmpty else { throw ValidationError("--prefix is empty (to remove every entry, use clear)") }
            }
            if let maxEntries, maxEntries < 0 { throw ValidationError("--max-entries must be zero or more") }
            try validateSize(maxBytes, option: "--max-bytes", allowingZero: true)
        }

        func run() throws {
            try reportingErrors {
                let cache = try openExisting(cacheFile.file)
                if expired {
                    Output.print("removed \(CountText.entries(try cache.removeExpired())) that had expired")
                }
                if let olderThan {
                    let seconds = olderThan == olderThan.rounded() && olderThan < 1e15 ? "\(Int(olderThan))" : "\(olderThan)"
                    Output.print("removed \(CountText.entries(try cache.removeOlder(than: olderThan))) stored more than \(seconds) s ago")
                }
                if let prefix, let bytes = KeyText.parse(prefix, hex: hexKey) {
                    Output.print("removed \(CountText.entries(try cache.removeAll(withPrefix: bytes))) whose keys begin with \(KeyText.display(bytes))")
                }
                if let maxEntries {
                    Output.print("evicted \(CountText.entries(try cache.trim(toCount: maxEntries))) to keep at most \(maxEntries)")
                }
                if let maxBytes, let bytes = ByteFormat.parseSize(maxBytes, allowingZero: true) {
                    Output.print("evicted \(CountText.entries(try cache.trim(toBytes: bytes))) to keep at most \(ByteFormat.size(bytes)) of values")
                }
                try cache.close()
            }
        }
    }
}

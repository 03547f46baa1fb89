import ArgumentParser
import Foundation
import Larder

extension LarderCommand {
    /// `larder put FILE KEY [PATH|-]`: stores a value through the `Cache` API.
    struct Put: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Store a value for a key, read from a file or from stdin.",
            discussion: """
                Creates the cache file when it does not exist (64 MiB, or --capacity). Other \
                processes may have the file open meanwhile; the tool takes its turn with them.
                """)

        @OptionGroup var cacheFile: CacheFileArgument
        @OptionGroup var key: KeyArgument

        @Argument(help: ArgumentHelp("Where to read the value: a file, or - (the default) for stdin.", valueName: "path"))
        var source: String = "-"

        @Option(help: ArgumentHelp("Expire the value this many seconds from now.", valueName: "seconds"))
        var ttl: Double?
        /// A hundred years: longer is a mistake (`inf`, `1e300`), not an expiry.
        static let longestTTL: Double = 100 * 365.25 * 86_400

        @Flag(help: "Make --ttl a sliding window: each read pushes the expiry back.")
        var sliding = false

        @Flag(help: "Store the value LZ4-compressed (when that saves space).")
        var lz4 = false

        @Option(help: ArgumentHelp("Capacity of a new file (ignored for an existing one; see `compact --capacity`): bytes, or with K, M, G (binary units).", valueName: "size"))
        var capacity: String?

        @Option(name: .customLong("count-limit"), help: ArgumentHelp("The most entries the file holds, for every process (taken when no other process writes the file).", valueName: "n"))
        var countLimit: Int?

        @Option(name: .customLong("max-age"), help: ArgumentHelp("Seconds after which every entry counts as expired, for every process (taken as --count-limit is).", valueName: "seconds"))
        var maximumAge: Double?

        func validate() throws {
            if let countLimit, countLimit <= 0 { throw ValidationError("--count-limit must be at least 1") }
            if let maximumAge, !(maximumAge > 0) { throw ValidationError("--max-age must be a positive number of seconds") }
            if let ttl, !(ttl > 0 && ttl <= Self.longestTTL) {
                throw ValidationError("--ttl must be a positive number of seconds, at most \(Int(Self.longestTTL)) (100 years)")
            }
            if sliding && ttl == nil { throw ValidationError("--sliding needs --ttl, the window in seconds") }
            try validateCapacity(capacity)
        }

        func run() throws {
            let keyBytes = try key.bytes()
            let value: Data
            do {
                value = source == "-" ? try Self.readStandardInput() : try Data(contentsOf: URL(fileURLWithPath: source))
            } catch {
                Output.error("\(source): cannot read the value (\(error.localizedDescription))")
                throw ExitStatus.failed
            }
            try reportingErrors {
                // Only for a new file: a smaller capacity would have an existing one rewritten.
                let isNew = !FileManager.default.fileExists(atPath: cacheFile.file)
                let options = Cache.Options(capacity: isNew ? capacity.flatMap { ByteFormat.parseSize($0) }.map { .bytes($0) } : nil,
                                            compressionThreshold: 0, countLimit: countLimit, maximumAge: maximumAge)
                let cache = try Cache(path: cacheFile.file, options: options)
                if (countLimit.map { $0 != cache.countLimit } ?? false) || (maximumAge.map { $0 != cache.maximumAge } ?? false) {
                    Output.error("\(cacheFile.file) is open for writing in another process and keeps its limits")
                }
                if !isNew, let requested = capacity.flatMap({ ByteFormat.parseSize($0) }), requested != cache.capacity {
                    Output.error("\(cacheFile.file) exists and keeps its capacity of \(ByteFormat.size(cache.capacity)); `larder compact --capacity` changes it")
                }
                try cache.set(value, forKey: keyBytes, expiry: ttl.map { sliding ? .sliding($0) : .seconds($0) }, compression: lz4 ? .lz4 : Compression.none)
                try cache.close()
            }
        }

        /// All of standard input, or the reason it could not be read (a directory, a closed
        /// descriptor), in the system's words.
        private static func readStandardInput() throws -> Data {
            var value = Data()
            var chunk = [UInt8](repeating: 0, count: 1 << 16)
            while true {
                let count = chunk.withUnsafeMutableBytes { Foundation.read(STDIN_FILENO, $0.baseAddress, $0.count) }
                if count == 0 { return value }
                if count < 0 {
                    if errno == EINTR { continue }
                    throw CocoaError(.fileReadUnknown, userInfo: [NSLocalizedDescriptionKey: String(cString: strerror(errno))])
                }
                value.append(contentsOf: chunk[..<count])
            }
        }
    }
}

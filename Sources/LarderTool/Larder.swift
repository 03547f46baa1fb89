import ArgumentParser
import Foundation
@_spi(Inspection) import Larder

/// `larder`: look into, query and repair Larder cache files, the way `sqlite3` and
/// `mdb_stat`/`mdb_dump` do for their databases.
///
/// Reading commands (`info`, `dump`, `get`, `verify`) use Larder's inspection view: they take no
/// lock and change nothing, so they work on a file another process has open, and on a damaged
/// one. Writing commands (`put`, `delete`, `clear`, `trim`) go through the public `Cache` API, as one
/// more process using the file, with its locks.
/// `recover` and `compact` read through the inspection view and write a fresh file through `Cache`.
@main
struct LarderCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "larder",
        abstract: "Inspect, query and repair Larder cache files.",
        discussion: """
            Exit status: 0 on success; 1 when a key is not there (get, delete) or verify \
            found damage; 2 when the file cannot be used (missing, not a cache, busy, I/O); \
            64 for a usage error. See docs/CLI.md.
            """,
        version: "\(Cache.versionString)",
        subcommands: [Info.self, Dump.self, Entry.self, Get.self, Put.self, Delete.self, Clear.self, Trim.self,
                      Verify.self, Recover.self, Compact.self, Watch.self]
    )

    /// Checks what the parser cannot see before it runs: an argument that is not UTF-8 would
    /// reach a command with its bad bytes replaced (another key, another file name), and a
    /// closed standard output would be the number the cache file is opened under.
    static func main() {
        Output.claimStandardOutput()
        for position in stride(from: 1, to: Int(CommandLine.argc), by: 1) {
            guard let argument = CommandLine.unsafeArgv[position], String(validatingCString: argument) == nil else { continue }
            Output.error("argument \(position) is not UTF-8 text (a binary key can be given with --hex-key)")
            Foundation.exit(ExitCode.validationFailure.rawValue)
        }
        main(nil)
    }
}

/// The cache file every command takes first.
struct CacheFileArgument: ParsableArguments {
    @Argument(help: ArgumentHelp("The cache file.", valueName: "file"))
    var file: String
}

/// How a key is spelled on the command line.
struct KeyArgument: ParsableArguments {
    @Argument(help: ArgumentHelp("The key: its UTF-8 bytes, or hexadecimal with --hex-key.", valueName: "key"))
    var key: String

    @Flag(name: .customLong("hex-key"), help: "Read KEY as hexadecimal bytes (for binary keys).")
    var hexKey = false

    /// Refused before the command runs, so that the usage shown is the command's.
    func validate() throws {
        _ = try bytes()
    }

    /// The key's bytes; a usage error when they are not a possible key.
    func bytes() throws -> [UInt8] {
        guard let bytes = KeyText.parse(key, hex: hexKey) else {
            throw ValidationError("'\(key)' is not hexadecimal (two digits a byte)")
        }
        guard !bytes.isEmpty, bytes.count <= Cache.maximumKeyLength else {
            throw ValidationError("a key has 1 to \(Cache.maximumKeyLength) bytes, not \(bytes.count)")
        }
        return bytes
    }
}

/// Refuses the value of a size option that `ByteFormat.parseSize` cannot read.
func validateSize(_ text: String?, option: String, allowingZero: Bool = false) throws {
    if let text, ByteFormat.parseSize(text, allowingZero: allowingZero) == nil {
        throw ValidationError("\(option) '\(text)' is not a size (e.g. 262144, 256K, 64M)")
    }
}

/// Refuses a `--capacity` no cache may have, before any work starts.
func validateCapacity(_ text: String?) throws {
    try validateSize(text, option: "--capacity")
    if let text, let bytes = ByteFormat.parseSize(text), !Cache.capacities.contains(bytes) {
        throw ValidationError("--capacity must be from \(ByteFormat.size(Cache.capacities.lowerBound)) to \(ByteFormat.size(Cache.capacities.upperBound)), not \(ByteFormat.size(bytes))")
    }
}

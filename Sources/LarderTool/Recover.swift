import ArgumentParser
import Foundation
@_spi(Inspection) import Larder

extension LarderCommand {
    /// `larder recover FILE [OUT]`: copies what checks out into a fresh file; FILE is untouched.
    struct Recover: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Copy every entry that checks out into a new file, and report what was dropped.",
            discussion: """
                FILE is only read (it may even be open elsewhere). OUT (default: FILE.recovered) \
                gets the same capacity and page size, every current, intact, unexpired entry with \
                its expiry and compression, oldest first; it appears complete or not at all.
                """)

        @OptionGroup var cacheFile: CacheFileArgument

        @Argument(help: ArgumentHelp("The new file (default: FILE.recovered).", valueName: "out"))
        var output: String?

        @Flag(help: "Replace OUT when it exists.")
        var force = false

        func run() throws {
            let out = output ?? cacheFile.file + ".recovered"
            try reportingErrors {
                if out == cacheFile.file {
                    throw LarderError(.invalidArgument, "OUT is FILE; use `larder compact` to rebuild a file in place", path: out)
                }
                if let type = try? FileManager.default.attributesOfItem(atPath: out)[.type] as? FileAttributeType {
                    // Renaming the new file over a device or a pipe would replace it (as root,
                    // /dev/null with a regular file); a link is replaced, not what it names.
                    guard type == .typeRegular || type == .typeSymbolicLink else {
                        throw LarderError(.invalidArgument, "not a regular file; OUT is replaced by the new file", path: out)
                    }
                    if !force { throw LarderError(.invalidArgument, "the file exists; pass --force to replace it", path: out) }
                }
                let inspector = try inspectExisting(cacheFile.file)
                let bar = ProgressBar("reading", totalBytes: inspector.summary.fileSize)
                let report = try inspector.salvage(into: out, progress: bar.update)
                bar.finish()
                Output.write(Array(SalvageText.render(report, verb: "recovered").utf8))
            }
        }
    }
}

import ArgumentParser
import Larder

extension LarderCommand {
    /// `larder clear FILE`: removes every entry through the `Cache` API.
    struct Clear: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Remove every entry.",
            discussion: "Takes time independent of the number of entries. Other processes may have the file open meanwhile; the tool takes its turn with them.")

        @OptionGroup var cacheFile: CacheFileArgument

        func run() throws {
            try reportingErrors {
                let cache = try openExisting(cacheFile.file)
                let count = try cache.removeAll()
                try cache.close()
                Output.print("removed \(CountText.entries(count))")
            }
        }
    }
}

import ArgumentParser
import Larder

extension LarderCommand {
    /// `larder delete FILE KEY`: removes one entry through the `Cache` API.
    struct Delete: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Remove the value for a key.",
            discussion: "Exits with 1 when there was no value for the key. Other processes may have the file open meanwhile; the tool takes its turn with them.")

        @OptionGroup var cacheFile: CacheFileArgument
        @OptionGroup var key: KeyArgument

        func run() throws {
            let keyBytes = try key.bytes()
            try reportingErrors {
                let cache = try openExisting(cacheFile.file)
                let removed = try cache.removeValue(forKey: keyBytes)
                try cache.close()
                if !removed {
                    Output.error("no value for key \(KeyText.display(keyBytes))")
                    throw ExitStatus.notFoundOrDamaged
                }
            }
        }
    }
}

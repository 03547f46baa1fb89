import ArgumentParser
@_spi(Inspection) import Larder

extension LarderCommand {
    /// `larder get FILE KEY`: the value, byte for byte, on stdout.
    struct Get: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Write the value for a key to stdout, exactly as stored (decompressed).",
            discussion: """
                Exits with 1 and a message on stderr when the key is missing or expired, with 2 \
                when its value is damaged. Takes no lock: works while another process has the file open.
                """)

        @OptionGroup var cacheFile: CacheFileArgument
        @OptionGroup var key: KeyArgument

        func run() throws {
            let keyBytes = try key.bytes()
            try reportingErrors {
                let inspector = try inspectExisting(cacheFile.file)
                switch inspector.lookup(key: keyBytes) {
                case .found(_, let value):
                    Output.write(value)
                case .missing:
                    Output.error("no value for key \(KeyText.display(keyBytes))")
                    throw ExitStatus.notFoundOrDamaged
                case .expired:
                    Output.error("the value for key \(KeyText.display(keyBytes)) has expired")
                    throw ExitStatus.notFoundOrDamaged
                case .damaged(let entry):
                    throw LarderError(.corrupt, "the value for key \(KeyText.display(keyBytes)) is damaged: \(entry.damage ?? "") at offset \(entry.offset)", path: cacheFile.file)
                }
            }
        }
    }
}

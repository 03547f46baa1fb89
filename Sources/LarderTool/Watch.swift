import ArgumentParser
import Foundation
import Larder

extension LarderCommand {
    /// `larder watch FILE [--prefix P] [--json]`: prints changes as other processes make them,
    /// as `tail -f` prints lines.
    struct Watch: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Print changes to the cache as they happen, until interrupted.",
            discussion: "Opens the file read-only: it changes nothing, and sees the changes of every process.")

        @OptionGroup var cacheFile: CacheFileArgument
        @Option(help: "Only keys that start with this text.") var prefix: String = ""
        @Flag(help: "One JSON object per line: {\"kind\":...,\"key\":...,\"key_hex\":...}.") var json = false

        func run() throws {
            try reportingErrors {
                try requireExisting(cacheFile.file)
                let cache = try Cache(path: cacheFile.file, options: .init(readOnly: true))
                let changes = try prefix.isEmpty ? cache.changes() : cache.changes(forKeysWithPrefix: prefix)
                let json = json
                let ended = DispatchSemaphore(value: 0)
                Task {
                    for await change in changes {
                        Output.print(json ? Watch.jsonLine(change) : Watch.line(change))
                        Output.flush()
                    }
                    ended.signal()
                }
                // The main thread is no thread of Swift's shared pool: it may wait.
                ended.wait()
            }
        }

        static func name(_ kind: CacheChange.Kind) -> String {
            switch kind {
            case .stored: "stored"
            case .removed: "removed"
            case .evicted: "evicted"
            case .expired: "expired"
            case .cleared: "cleared"
            case .resynced: "resynced"
            }
        }

        static func line(_ change: CacheChange) -> String {
            guard let key = change.key else { return name(change.kind) }
            return name(change.kind) + " " + KeyText.display([UInt8](key))
        }

        static func jsonLine(_ change: CacheChange) -> String {
            var line = JSONLine()
            line.add("kind", name(change.kind))
            line.add("key", change.key.map { KeyText.display([UInt8]($0)) })
            line.add("key_hex", change.key.map { ByteFormat.hex([UInt8]($0)) })
            return line.text
        }
    }
}

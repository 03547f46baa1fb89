import ArgumentParser
import Foundation
import Larder

extension LarderCommand {
    /// `larder watch FILE [--prefix P] [--json]`: prints changes as other processes make them,
    /// as `tail -f` prints lines.
    struct Watch: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Print changes to the cache as they happen, until interrupted.",
            discussion: """
                Opens the file for writing when it may, so that writers record which keys change \
                (it writes no entry); with --read-only, or a file it may not write, it reads the \
                changes as a read-only handle can. Ctrl-C closes the file and ends it.
                """)

        @OptionGroup var cacheFile: CacheFileArgument
        @Option(help: "Only keys that start with this text.") var prefix: String = ""
        @Flag(help: "One JSON object per line: {\"kind\":...,\"key\":...,\"key_hex\":...}.") var json = false
        @Flag(name: .customLong("read-only"), help: "Open the file read-only even when it may be written.")
        var readOnly = false

        func run() throws {
            try reportingErrors {
                try requireExisting(cacheFile.file)
                let readOnly = readOnly || !FileManager.default.isWritableFile(atPath: cacheFile.file)
                let cache = try Cache(path: cacheFile.file, options: .init(readOnly: readOnly))
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
                // Interrupted, the tool closes the file: a read-write handle that died would leave
                // the file to be checked by the next process that opens it alone.
                // A parent may have left them blocked: this thread takes them.
                var unblocked = sigset_t()
                sigemptyset(&unblocked)
                for number in [SIGINT, SIGTERM, SIGHUP] { sigaddset(&unblocked, number) }
                pthread_sigmask(SIG_UNBLOCK, &unblocked, nil)
                let interruptions = [SIGINT, SIGTERM, SIGHUP].map { number in
                    signal(number, SIG_IGN)
                    let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
                    source.setEventHandler { ended.signal() }
                    source.resume()
                    return source
                }
                // The main thread is no thread of Swift's shared pool: it may wait.
                ended.wait()
                interruptions.forEach { $0.cancel() }
                try cache.close()
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

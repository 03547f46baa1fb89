import ArgumentParser
import Foundation
@_spi(Inspection) import Larder

/// Where the tool writes: stdout for results, stderr for errors and progress.
///
/// Text and raw bytes both go through one C stream, so that a value written by `get` and
/// any text around it come out in the order they were written.
enum Output {
    /// A buffered stream of its own on descriptor 1 (C's `stdout` is a global Swift 6 will not
    /// share across isolation domains); `exit` flushes it like any other stream.
    nonisolated(unsafe) private static let stream = fdopen(STDOUT_FILENO, "w")


    static func print(_ text: String) {
        write(Array((text + "\n").utf8))
    }

    static func write(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { _ = fwrite($0.baseAddress, 1, $0.count, stream) }
    }

    /// An error line on stderr: `larder: message`.
    static func error(_ message: String) {
        flush()
        FileHandle.standardError.write(Data("larder: \(message)\n".utf8))
    }

    static func flush() {
        fflush(stream)
    }

    /// Whether stderr is a terminal (progress bars are drawn only there).
    static var stderrIsTerminal: Bool { isatty(STDERR_FILENO) == 1 }
}

/// The exit codes every command shares (docs/CLI.md).
enum ExitStatus {
    /// The key is not there (`get`, `delete`), or `verify` found damage.
    static let notFoundOrDamaged = ExitCode(1)
    /// The file could not be opened, read or written (missing, not a cache, busy, I/O, ...).
    static let failed = ExitCode(2)
}

/// Runs a command's body, turning a `LarderError` into a line on stderr and exit status 2.
func reportingErrors(_ body: () throws -> Void) throws {
    do {
        try body()
        Output.flush()
    } catch let error as LarderError {
        Output.error(describe(error))
        throw ExitStatus.failed
    }
}

/// `PATH: message (code)`, the way the tool shows a library error. The library's message says
/// which of its reasons it was: a `busy` is not always another process holding the file.
func describe(_ error: LarderError) -> String {
    let place = error.path.map { "\($0): " } ?? ""
    return "\(place)\(error.message) (\(error.code))"
}

import ArgumentParser
import Foundation
@_spi(Inspection) import Larder

/// Where the tool writes: stdout for results, stderr for errors and progress.
///
/// Text and raw bytes both go through one C stream, so that a value written by `get` and
/// any text around it come out in the order they were written.
enum Output {
    /// A buffered stream of its own on descriptor 1 (C's `stdout` is a global Swift 6 will not
    /// share across isolation domains); `exit` flushes it like any other stream. Nil when the
    /// tool was started with its standard output closed.
    nonisolated(unsafe) private static var stream: UnsafeMutablePointer<FILE>?
    /// Why a write first failed (`errno`), for `finish`.
    nonisolated(unsafe) private static var writeError: Int32 = 0

    /// Takes descriptor 1 as it was when the tool started. Called first thing: were it closed,
    /// the first file the tool opens would get its number, and what the tool prints would be
    /// written into that file (the library then fills the numbers 0 to 2 with /dev/null).
    static func claimStandardOutput() {
        if fcntl(STDOUT_FILENO, F_GETFD) != -1 { stream = fdopen(STDOUT_FILENO, "w") }
    }

    static func print(_ text: String) {
        write(Array((text + "\n").utf8))
    }

    static func write(_ bytes: [UInt8]) {
        guard let stream else {
            if writeError == 0 { writeError = EBADF }
            return
        }
        let written = bytes.withUnsafeBytes { fwrite($0.baseAddress, 1, $0.count, stream) }
        if written < bytes.count && writeError == 0 { writeError = errno }
    }

    /// An error line on stderr: `larder: message`.
    static func error(_ message: String) {
        flush()
        toStandardError("larder: \(message)\n")
    }

    /// Writes `text` to stderr. One that cannot be written (closed, a full disk) loses the text,
    /// and the command goes on: Foundation's non-throwing `write` stops the program instead.
    static func toStandardError(_ text: String) {
        try? FileHandle.standardError.write(contentsOf: Data(text.utf8))
    }

    static func flush() {
        if let stream { fflush(stream) }
    }

    /// Writes out what is buffered; throws when any of the output was not written (a full disk,
    /// a closed standard output): a command whose output is lost has not succeeded.
    static func finish() throws(LarderError) {
        if let stream, fflush(stream) != 0 && writeError == 0 { writeError = errno }
        if writeError != 0 {
            throw LarderError(.io, "cannot write the output: \(String(cString: strerror(writeError)))")
        }
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
        do {
            try body()
        } catch let status as ExitCode {
            // A command that ends with status 1 (a key not there, damage found) has printed what
            // it found: output lost on the way is the failure to report.
            try Output.finish()
            throw status
        }
        try Output.finish()
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

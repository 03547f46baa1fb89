import Foundation
import Testing

/// Runs the built `larder` binary, as swift-argument-parser's example tests run theirs.
///
/// The binary sits in the build products directory, beside the test runner, whatever scratch
/// path the build used (`.build/debug`, `.build-cli/debug`, ...); `LARDER_TOOL` overrides it.
enum Larder {
    struct Run {
        let status: Int32
        let stdoutData: Data
        let stderr: String
        var stdout: String { String(decoding: stdoutData, as: UTF8.self) }
    }

    static let executable: URL = {
        if let path = ProcessInfo.processInfo.environment["LARDER_TOOL"] { return URL(fileURLWithPath: path) }
        return builtProgram("larder") ?? URL(fileURLWithPath: "larder-not-found")
    }()

    /// The program `name` built with this test runner (the tool, an example), or nil.
    static func builtProgram(_ name: String) -> URL? {
        var candidates: [URL] = []
        #if os(Linux)
        candidates.append(URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath())
        #endif
        if let url = Bundle.main.executableURL { candidates.append(url.resolvingSymlinksInPath()) }
        candidates.append(URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath())
        for candidate in candidates {
            // Up from the runner (macOS: out of PackageTests.xctest/Contents/MacOS).
            var directory = candidate.deletingLastPathComponent()
            for _ in 0..<4 {
                let program = directory.appendingPathComponent(name)
                if FileManager.default.isExecutableFile(atPath: program.path) { return program }
                directory = directory.deletingLastPathComponent()
            }
        }
        return nil
    }

    /// Runs `larder arguments...` with `input` on stdin; stdout and stderr go to files, so that
    /// neither can fill a pipe and stall the tool. It waits for the tool's exit: the suites that
    /// call it run on threads of their own (`waitsOnItsOwnThreads`).
    static func run(_ arguments: [String], input: Data = Data()) throws -> Run {
        expectOwnThreads()
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("larder-run-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: scratch) }
        let paths = ["in", "out", "err"].map { scratch.appendingPathComponent($0).path }
        for (path, contents) in zip(paths, [input, nil, nil]) where !FileManager.default.createFile(atPath: path, contents: contents) {
            throw CocoaError(.fileWriteUnknown, userInfo: [NSFilePathErrorKey: path])
        }
        let process = Process()
        process.executableURL = executable
        process.arguments = arguments
        process.standardInput = FileHandle(forReadingAtPath: paths[0])
        process.standardOutput = FileHandle(forWritingAtPath: paths[1])
        process.standardError = FileHandle(forWritingAtPath: paths[2])
        try process.run()
        process.waitUntilExit()
        return Run(status: process.terminationStatus,
                   stdoutData: try Data(contentsOf: URL(fileURLWithPath: paths[1])),
                   stderr: String(decoding: try Data(contentsOf: URL(fileURLWithPath: paths[2])), as: UTF8.self))
    }

    /// Runs `script` with /bin/sh, `$0` being the tool: for what `run` cannot arrange (a
    /// closed or full standard output, an argument that is not UTF-8).
    static func shell(_ script: String, _ arguments: [String] = []) throws -> Run {
        expectOwnThreads()
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("larder-shell-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: scratch) }
        let errors = scratch.appendingPathComponent("err")
        guard FileManager.default.createFile(atPath: errors.path, contents: nil) else {
            throw CocoaError(.fileWriteUnknown, userInfo: [NSFilePathErrorKey: errors.path])
        }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        process.arguments = ["-c", script, executable.path] + arguments
        process.standardError = FileHandle(forWritingAtPath: errors.path)
        try process.run()
        process.waitUntilExit()
        return Run(status: process.terminationStatus, stdoutData: Data(),
                   stderr: String(decoding: try Data(contentsOf: errors), as: UTF8.self))
    }

    /// Runs the tool and checks its exit status and, when given, its whole stdout.
    @discardableResult
    static func expect(_ arguments: [String], input: Data = Data(), status: Int32 = 0, stdout: String? = nil,
                       sourceLocation: SourceLocation = #_sourceLocation) throws -> Run {
        let run = try run(arguments, input: input)
        #expect(run.status == status, "larder \(arguments.joined(separator: " ")): stderr: \(run.stderr)",
                sourceLocation: sourceLocation)
        if let stdout {
            #expect(run.stdout == stdout, sourceLocation: sourceLocation)
        }
        return run
    }
}

/// A fresh directory per test, removed afterwards.
final class TemporaryDirectory {
    let url: URL

    init() {
        url = FileManager.default.temporaryDirectory
            .appendingPathComponent("larder-tool-tests-\(UUID().uuidString)", isDirectory: true)
        try! FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    deinit {
        try? FileManager.default.removeItem(at: url)
    }

    func path(_ name: String = "cache.larder") -> String {
        url.appendingPathComponent(name).path
    }
}

/// Changes bytes of a file in place.
func patch(_ path: String, _ change: (inout [UInt8]) -> Void) throws {
    var bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: path)))
    change(&bytes)
    try Data(bytes).write(to: URL(fileURLWithPath: path))
}

/// Replaces what differs from run to run (times) with a fixed placeholder.
func masked(_ text: String) -> String {
    text.replacing(/"stored_at":\d+/, with: "\"stored_at\":T")
        .replacing(/created       \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC/, with: "created       T")
}

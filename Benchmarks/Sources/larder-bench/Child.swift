import Foundation

/// This benchmark run again as a child process: to measure one store alone (its own memory
/// peak, no leftovers of the previous store), and to read from several processes at once.
final class Child {
    private let process = Process()
    private let input = Pipe()
    private let output = Pipe()

    static let executable: URL = {
        let resolved = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        return URL(fileURLWithPath: resolved)
    }()

    init(_ arguments: [String]) throws {
        process.executableURL = Self.executable
        process.arguments = arguments
        process.standardInput = input
        process.standardOutput = output
        process.standardError = FileHandle.standardError
        try process.run()
    }

    var pid: Int32 { process.processIdentifier }

    /// Waits for the child's first line ("ready").
    func waitForLine() throws -> String {
        var line = Data()
        while true {
            guard let byte = try output.fileHandleForReading.read(upToCount: 1), !byte.isEmpty else {
                throw BenchFailure("child \(process.arguments ?? []) ended early")
            }
            if byte[0] == UInt8(ascii: "\n") { return String(decoding: line, as: UTF8.self) }
            line.append(byte)
        }
    }

    /// Tells a waiting child to start.
    func go() {
        input.fileHandleForWriting.write(Data("go\n".utf8))
    }

    /// The rest of the child's output, once it has exited with status 0.
    func finish() throws -> String {
        let rest = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationReason == .exit, process.terminationStatus == 0 else {
            throw BenchFailure("child \(process.arguments ?? []) failed (status \(process.terminationStatus))")
        }
        return String(decoding: rest, as: UTF8.self)
    }

    func kill() {
        Foundation.kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }

    /// Runs a child to its end and decodes the JSON of its last line.
    static func result<T: Decodable>(_ arguments: [String], as type: T.Type) throws -> T {
        let text = try Child(arguments).finish()
        guard let last = text.split(separator: "\n").last else { throw BenchFailure("child \(arguments) printed nothing") }
        return try JSONDecoder().decode(T.self, from: Data(last.utf8))
    }

    /// In a child: waits for the parent's "go".
    static func awaitGo() {
        FileHandle.standardOutput.write(Data("ready\n".utf8))
        _ = readLine()
    }

    /// In a child: prints the result for the parent.
    static func reply<T: Encodable>(_ value: T) throws {
        FileHandle.standardOutput.write(try JSONEncoder().encode(value) + Data("\n".utf8))
    }
}

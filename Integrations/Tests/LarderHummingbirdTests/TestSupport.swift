import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import Testing

/// Runs `body` on a thread of its own and waits for it without holding a thread of Swift's
/// shared pool: for the blocking waits on a child process.
func onOwnThread<Result: Sendable>(_ body: @escaping @Sendable () throws -> Result) async throws -> Result {
    try await withCheckedThrowingContinuation { continuation in
        Thread { continuation.resume(with: Swift.Result { try body() }) }.start()
    }
}

/// The example server (`larder-server`, built with the tests) running as a process of its own.
final class ServerProcess: Sendable {
    let process: Process
    /// The port it listens on.
    let port: Int

    /// Starts the server on `cachePath`, on `port` (0: the system picks one), and waits until it
    /// listens.
    init(cachePath: String, port: Int = 0, driver: String = "larder") async throws {
        let binary = try #require(Self.binary, "larder-server is not next to the test bundle")
        let process = Process()
        process.executableURL = binary
        process.arguments = ["--cache", cachePath, "--port", "\(port)", "--driver", driver, "--work-ms", "1"]
        let output = Pipe()
        process.standardOutput = output
        // Not the test's own: a server left running by a crashed test would keep `swift test`
        // waiting for the end of its output.
        process.standardError = FileHandle.nullDevice
        try process.run()
        self.process = process
        // Its first line: "listening on 127.0.0.1:PORT (...)".
        let line = try await onOwnThread { () -> String in
            var bytes = Data()
            while let byte = try output.fileHandleForReading.read(upToCount: 1), !byte.isEmpty, byte != Data("\n".utf8) {
                bytes.append(byte)
            }
            return String(decoding: bytes, as: UTF8.self)
        }
        guard let portText = line.split(separator: ":").dropFirst().first?.split(separator: " ").first,
              let listening = Int(portText) else {
            process.terminate()
            throw ServerError(description: "larder-server did not start: \(line)")
        }
        self.port = listening
    }

    /// A server the test did not stop (it failed on the way) is stopped here.
    deinit {
        if process.isRunning { process.terminate() }
    }

    /// Stops it (SIGTERM: a graceful shutdown) and waits for it to exit.
    func stop() async throws {
        process.terminate()
        let process = self.process
        try await onOwnThread { process.waitUntilExit() }
    }

    /// `larder-server` in the directory of the test bundle.
    static var binary: URL? {
        let candidates = [Bundle.main.bundleURL, URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()]
        return candidates.lazy.flatMap { directory in
            [directory, directory.deletingLastPathComponent()].map { $0.appendingPathComponent("larder-server") }
        }.first { FileManager.default.isExecutableFile(atPath: $0.path) }
    }
}

struct ServerError: Error, CustomStringConvertible {
    let description: String
}

/// A response of a server process: status, the headers the tests look at, and body.
struct ProcessResponse {
    let status: Int
    let setCookie: String?
    /// `X-Cache` and `X-Process` of a report.
    let cache: String?
    let process: String?
    let body: String
}

/// Sends a request to the server process on `port`, on a connection of its own (so that each
/// request may go to another of the processes sharing a port).
func request(_ method: HTTPMethod = .GET, port: Int, _ path: String, headers: [(String, String)] = [],
             body: String? = nil) async throws -> ProcessResponse {
    var request = HTTPClientRequest(url: "http://127.0.0.1:\(port)\(path)")
    request.method = method
    request.headers.add(name: "Connection", value: "close")
    for (name, value) in headers { request.headers.add(name: name, value: value) }
    if let body { request.body = .bytes(ByteBuffer(string: body)) }
    let response = try await HTTPClient.shared.execute(request, timeout: .seconds(30))
    let bytes = try await response.body.collect(upTo: 1 << 20)
    return ProcessResponse(status: Int(response.status.code), setCookie: response.headers.first(name: "Set-Cookie"),
                           cache: response.headers.first(name: "X-Cache"), process: response.headers.first(name: "X-Process"),
                           body: String(buffer: bytes))
}

import Foundation

/// How the example server runs, from its command line:
/// `larder-server [--host H] [--port P] [--cache FILE] [--driver larder|memory] [--work-ms N]`.
struct ServerOptions: Sendable {
    enum Driver: String, Sendable {
        /// `LarderPersistDriver` over `cachePath`: kept across restarts, shared by the processes.
        case larder
        /// Hummingbird's `MemoryPersistDriver`: each process has its own, lost on exit.
        case memory
    }

    var host = "127.0.0.1"
    /// 0 lets the system pick; the port taken is printed as `listening on HOST:PORT`.
    var port = 8080
    var cachePath = "server.larder"
    var driver = Driver.larder
    /// How long a report takes to make when it is not cached: the "expensive" work.
    var workMilliseconds = 20

    /// The options in `arguments` (without the program's name).
    init(arguments: [String]) throws {
        var rest = arguments[...]
        while let flag = rest.popFirst() {
            guard let value = rest.popFirst() else { throw UsageError("\(flag) needs a value") }
            switch flag {
            case "--host": host = value
            case "--port": port = try Self.number(value, for: flag)
            case "--cache": cachePath = value
            case "--driver":
                guard let driver = Driver(rawValue: value) else { throw UsageError("--driver is larder or memory") }
                self.driver = driver
            case "--work-ms": workMilliseconds = try Self.number(value, for: flag)
            default: throw UsageError("unknown option \(flag)")
            }
        }
    }

    private static func number(_ text: String, for flag: String) throws -> Int {
        guard let number = Int(text), number >= 0 else { throw UsageError("\(flag) takes a number") }
        return number
    }
}

struct UsageError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

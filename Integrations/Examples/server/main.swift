import Foundation
import Hummingbird
import LarderHummingbird
import Logging
import ServiceLifecycle

// The example server: reports cached, sessions kept, in one Larder file that every process
// started on the same port and file shares. See /docs/SERVER.md.
let options: ServerOptions
do {
    options = try ServerOptions(arguments: Array(CommandLine.arguments.dropFirst()))
} catch {
    FileHandle.standardError.write(Data("larder-server: \(error)\n".utf8))
    exit(2)
}
var logger = Logger(label: "larder-server")
logger.logLevel = .warning

let persist: any PersistDriver = switch options.driver {
case .larder: try LarderPersistDriver(path: options.cachePath)
case .memory: MemoryPersistDriver()
}
let router = buildRouter(persist: persist, work: .milliseconds(options.workMilliseconds))
let server = ReusePortServer(responder: router.buildResponder(), host: options.host, port: options.port,
                             logger: logger) { port in
    let line = "listening on \(options.host):\(port) (process \(ProcessInfo.processInfo.processIdentifier), \(options.driver) driver)\n"
    FileHandle.standardOutput.write(Data(line.utf8))
}
let services = ServiceGroup(configuration: .init(services: [server, persist], gracefulShutdownSignals: [.sigterm, .sigint],
                                                 logger: logger))
try await services.run()

#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#endif
import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
import NIOPosix
import ServiceLifecycle

/// Serves `responder` over HTTP/1 on a socket bound with `SO_REUSEPORT`, so that several
/// processes listen on one port and the kernel spreads connections among them.
///
/// Hummingbird 2.28's `ServerConfiguration` sets `SO_REUSEADDR` only, and its server builds its
/// own bootstrap. So this builds the listening channel itself, with NIO's `ServerBootstrap`,
/// and hands each connection to Hummingbird's `HTTP1Channel`, as `Application.run()` does.
struct ReusePortServer<Responder: HTTPResponder>: Service
where Responder.Context: InitializableFromSource<ApplicationRequestContextSource> {
    let responder: Responder
    let host: String
    let port: Int
    let logger: Logger
    /// Called with the port bound (the one asked for, or the system's pick for port 0).
    let onListening: @Sendable (Int) -> Void

    func run() async throws {
        let responder = self.responder
        let logger = self.logger
        let http = HTTP1Channel(responder: { request, writer, channel in
            let context = Responder.Context(source: .init(channel: channel, logger: logger))
            let response: Response
            do {
                response = try await responder.respond(to: request, context: context)
            } catch {
                logger.debug("Unhandled error", metadata: ["error": "\(error)"])
                response = Response(status: .internalServerError)
            }
            try await writer.write(response: response.head, body: response.body)
        })
        let server = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(ChannelOptions.backlog, value: 256)
            .serverChannelOption(ChannelOptions.socketOption(.so_reuseaddr), value: 1)
            .serverChannelOption(ChannelOptions.socketOption(.reusePort), value: 1)
            .childChannelOption(ChannelOptions.allowRemoteHalfClosure, value: true)
            .bind(host: host, port: port, serverBackPressureStrategy: nil) { channel in
                http.setup(channel: channel, logger: logger)
            }
        onListening(server.channel.localAddress?.port ?? port)
        try await withGracefulShutdownHandler {
            try await server.executeThenClose { connections in
                try await withThrowingDiscardingTaskGroup { group in
                    for try await connection in connections {
                        group.addTask { await http.handle(value: connection, logger: logger) }
                    }
                }
            }
        } onGracefulShutdown: {
            server.channel.close(promise: nil)
        }
    }
}

extension NIOBSDSocket.Option {
    /// `SO_REUSEPORT`, which NIO names no constant for.
    static let reusePort = NIOBSDSocket.Option(rawValue: SO_REUSEPORT)
}

import Foundation
import Hummingbird
import HTTPTypes
import HummingbirdAuth

/// What a session remembers: how many pages it has seen.
struct Visits: Codable, Sendable {
    var count: Int
}

typealias ServerContext = BasicSessionRequestContext<Visits, String>

/// The example's routes, over `persist` (Larder's driver or the memory one):
/// - `GET /report/{id}`: the report, cached for 10 minutes; `X-Cache: hit` or `miss` says which,
///   `X-Process` which process answered.
/// - `GET /visits`: this session's page count, kept in a session (cookie `SESSION_ID`).
/// - `PUT /values/{key}` and `GET /values/{key}`: a value stored and read as it is; a `PUT` with
///   `If-None-Match: *` stores only a key that has no value (201, else 412).
/// - `GET /pid`: the process that answered.
func buildRouter(persist: any PersistDriver, work: Duration) -> Router<ServerContext> {
    let router = Router(context: ServerContext.self)
    let processID = ProcessInfo.processInfo.processIdentifier

    router.get("report/{id}") { _, context -> Response in
        let id = try context.parameters.require("id")
        let key = "report/\(id)"
        var headers = HTTPFields()
        headers[.contentType] = "application/json"
        headers[.xProcess] = "\(processID)"
        if let cached = try await persist.get(key: key, as: String.self) {
            headers[.xCache] = "hit"
            return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(string: cached)))
        }
        let report = try await Report.make(id: id, work: work)
        try await persist.set(key: key, value: report, expires: .seconds(600))
        headers[.xCache] = "miss"
        return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(string: report)))
    }

    router.group()
        .add(middleware: SessionMiddleware(storage: persist))
        .get("visits") { _, context -> String in
            let count = (context.sessions.session?.count ?? 0) + 1
            if context.sessions.session == nil {
                context.sessions.createSession(Visits(count: count))
            } else {
                _ = context.sessions.updateSession(Visits(count: count))
            }
            return "\(count)\n"
        }

    router.put("values/{key}") { request, context -> HTTPResponse.Status in
        let key = "values/\(try context.parameters.require("key"))"
        let value = String(buffer: try await request.body.collect(upTo: 1 << 20))
        // `If-None-Match: *` stores only a new key (HTTP's "create, do not replace").
        guard request.headers[.ifNoneMatch] == "*" else {
            try await persist.set(key: key, value: value, expires: nil)
            return .noContent
        }
        do {
            try await persist.create(key: key, value: value, expires: nil)
            return .created
        } catch let error as PersistError where error == .duplicate {
            return .preconditionFailed
        }
    }

    router.get("values/{key}") { _, context -> String? in
        try await persist.get(key: "values/\(try context.parameters.require("key"))", as: String.self)
    }

    router.get("pid") { _, _ -> String in "\(processID)\n" }
    return router
}

extension HTTPField.Name {
    /// Whether a report came from the cache.
    static let xCache = HTTPField.Name("X-Cache")!
    /// The process that answered.
    static let xProcess = HTTPField.Name("X-Process")!
}

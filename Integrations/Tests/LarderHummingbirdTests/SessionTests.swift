import Foundation
import Hummingbird
import HummingbirdAuth
import HummingbirdTesting
import IntegrationTestSupport
@testable import larder_server
import LarderHummingbird
import Testing

/// Sessions (hummingbird-auth's `SessionMiddleware`) kept by Larder's driver, through the
/// example's routes and Hummingbird's test client.
@Suite("Sessions")
struct SessionTests {
    /// The example's application over Larder's driver on `path`.
    static func application(path: String) throws -> (some ApplicationProtocol, LarderPersistDriver) {
        let persist = try LarderPersistDriver(path: path)
        let router = buildRouter(persist: persist, work: .milliseconds(1))
        return (Application(router: router, services: [persist]), persist)
    }

    /// One request to `/visits`: the count, and the session cookie (`SESSION_ID=...`) when one
    /// was set.
    static func visit(_ client: some TestClientProtocol, cookie: String?) async throws -> (count: String, cookie: String?) {
        var headers = HTTPFields()
        if let cookie { headers[.cookie] = cookie }
        return try await client.execute(uri: "/visits", method: .get, headers: headers) { response in
            #expect(response.status == .ok)
            let setCookie = response.headers[.setCookie].flatMap { $0.split(separator: ";").first.map(String.init) }
            return (String(buffer: response.body).trimmingCharacters(in: .whitespacesAndNewlines), setCookie)
        }
    }

    @Test func aSessionSurvivesARestartOfTheApplication() async throws {
        let file = try TemporaryFile()
        let (app, persist) = try Self.application(path: file.path)
        let cookie = try await app.test(.router) { client in
            let first = try await Self.visit(client, cookie: nil)
            #expect(first.count == "1")
            let cookie = try #require(first.cookie)
            #expect(try await Self.visit(client, cookie: cookie).count == "2")
            return cookie
        }
        try await persist.shutdown()

        // The same file, a new application: the session goes on.
        let (restarted, _) = try Self.application(path: file.path)
        try await restarted.test(.router) { client async throws in
            #expect(try await Self.visit(client, cookie: cookie).count == "3")
            // A client without the cookie starts a session of its own.
            #expect(try await Self.visit(client, cookie: nil).count == "1")
        }
    }

    @Test func aSessionEndsAtItsDeadline() async throws {
        let file = try TemporaryFile()
        let persist = try LarderPersistDriver(path: file.path)
        let router = Router(context: ServerContext.self)
        router.add(middleware: SessionMiddleware(storage: persist, defaultSessionExpiration: .milliseconds(300)))
        router.get("visits") { _, context -> String in
            let count = (context.sessions.session?.count ?? 0) + 1
            context.sessions.createSession(Visits(count: count))
            return "\(count)"
        }
        try await Application(router: router).test(.router) { client in
            let stopwatch = Stopwatch()
            let first = try await Self.visit(client, cookie: nil)
            let cookie = try #require(first.cookie)
            let second = try await Self.visit(client, cookie: cookie)
            if stopwatch.isWithin(.milliseconds(300)) { #expect(second.count == "2") }
            try await Task.sleep(for: .milliseconds(400))
            #expect(try await Self.visit(client, cookie: cookie).count == "1")
        }
    }
}

import Foundation
import Hummingbird
import HummingbirdTesting
import IntegrationTestSupport
@testable import larder_server
import LarderHummingbird
import Testing

/// Application processes on one Larder file: this test's application and example servers
/// (`larder-server`) started as processes of their own.
@Suite("Processes sharing a file", .serialized)
struct TwoProcessTests {
    @Test func twoApplicationProcessesSeeEachOthersWrites() async throws {
        let file = try TemporaryFile()
        let other = try await ServerProcess(cachePath: file.path)
        let persist = try LarderPersistDriver(path: file.path)
        let app = Application(router: buildRouter(persist: persist, work: .milliseconds(1)))
        try await app.test(.router) { client in
            // This process writes, the other reads; then the other way round.
            try await client.execute(uri: "/values/greeting", method: .put, body: ByteBuffer(string: "from the test")) {
                #expect($0.status == .noContent)
            }
            #expect(try await request(port: other.port, "/values/greeting").body == "from the test")
            #expect(try await request(.PUT, port: other.port, "/values/reply", body: "from the server").status == 204)
            try await client.execute(uri: "/values/reply", method: .get) {
                #expect(String(buffer: $0.body) == "from the server")
            }
            // Read again, the value comes from this process's memory tier...
            let hits = persist.cache.stats.memoryHits
            try await client.execute(uri: "/values/reply", method: .get) {
                #expect(String(buffer: $0.body) == "from the server")
            }
            #expect(persist.cache.stats.memoryHits == hits + 1)
            // ...until the other process replaces it.
            #expect(try await request(.PUT, port: other.port, "/values/reply", body: "changed there").status == 204)
            try await client.execute(uri: "/values/reply", method: .get) {
                #expect(String(buffer: $0.body) == "changed there")
            }
            // A session begun here goes on there, and here again.
            let cookie = try await client.execute(uri: "/visits", method: .get) { response in
                try #require(response.headers[.setCookie]?.split(separator: ";").first.map(String.init))
            }
            #expect(try await request(port: other.port, "/visits", headers: [("Cookie", cookie)]).body == "2\n")
            try await client.execute(uri: "/visits", method: .get, headers: [.cookie: cookie]) {
                #expect(String(buffer: $0.body) == "3\n")
            }
        }
        try await other.stop()
    }

    @Test func ofTwoProcessesCreatingAKeyExactlyOneSucceeds() async throws {
        let file = try TemporaryFile()
        let first = try await ServerProcess(cachePath: file.path)
        let second = try await ServerProcess(cachePath: file.path)
        let keys = 0..<40
        let statuses = try await withThrowingTaskGroup(of: (Int, Int).self) { group in
            for key in keys {
                for (index, server) in [first, second].enumerated() {
                    group.addTask {
                        let response = try await request(.PUT, port: server.port, "/values/claim-\(key)",
                                                         headers: [("If-None-Match", "*")], body: "process \(index)")
                        return (key, response.status)
                    }
                }
            }
            return try await group.reduce(into: [Int: [Int]]()) { $0[$1.0, default: []].append($1.1) }
        }
        for key in keys {
            #expect(statuses[key]?.sorted() == [201, 412], "key \(key)")
        }
        try await first.stop()
        try await second.stop()
    }

    @Test func twoExampleProcessesServeOnePortAndShareTheCache() async throws {
        let file = try TemporaryFile()
        let first = try await ServerProcess(cachePath: file.path)
        // The same port: SO_REUSEPORT on both sockets.
        let second = try await ServerProcess(cachePath: file.path, port: first.port)
        #expect(second.port == first.port)
        // The kernel spreads connections over both processes; one of them makes the report,
        // and from then on both find it cached.
        let made = try await request(port: first.port, "/report/7")
        #expect(made.cache == "miss")
        var hitsByProcess = [String: Int]()
        for _ in 0..<24 {
            let response = try await request(port: first.port, "/report/7")
            #expect(response.cache == "hit")
            #expect(response.body == made.body)
            hitsByProcess[response.process ?? "", default: 0] += 1
        }
        #expect(hitsByProcess.count == 2, "\(hitsByProcess)")
        try await first.stop()
        try await second.stop()
    }
}

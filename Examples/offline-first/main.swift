import Foundation
import Larder

// Offline-first: a screen of headlines that appears at once from the cache, refreshes when the
// network answers, and, when the network is down, shows the copy from earlier and says so.
//
//     swift run offline-first [cache-file]

/// What the screen shows; the server sends it as JSON.
struct Headlines: Codable, Sendable {
    var edition: Int
    var items: [String]
}

/// The network, in-process: a small source of JSON responses that can be switched off, the way
/// a phone loses its signal in a tunnel. It counts requests, to show what the cache saves.
actor NewsServer {
    private(set) var requests = 0
    private var edition = 0
    private var isReachable = true

    func setReachable(_ reachable: Bool) { isReachable = reachable }

    /// GET /headlines: the response body.
    func headlines() async throws -> Data {
        requests += 1
        try await Task.sleep(for: .milliseconds(20))
        guard isReachable else { throw Unreachable() }
        edition += 1
        let items = ["Larder \(edition).0 released", "Caches: now with fewer surprises", "Weather: mapped, memory sunny"]
        return try JSONEncoder().encode(Headlines(edition: edition, items: items))
    }
}

struct Unreachable: Error, CustomStringConvertible {
    var description: String { "the server cannot be reached" }
}

/// The app: one screen of headlines.
enum OfflineFirstExample {
    static let server = NewsServer()
    static let url = "https://news.example/headlines"
    static let freshFor = 2.0

    /// The loader: one request, decoded.
    @Sendable static func fetchHeadlines() async throws -> Headlines {
        try JSONDecoder().decode(Headlines.self, from: await server.headlines())
    }

    static func describe(_ result: LoadResult<Headlines>) -> String {
        switch result.source {
        case .cache: "edition \(result.value.edition) from the cache"
        case .loader: "edition \(result.value.edition) from the server"
        case .stale: "edition \(result.value.edition), stale: \(result.loadError.map { "\($0)" } ?? "")"
        }
    }

    static func step(_ text: String) async {
        print("\(text) [requests so far: \(await server.requests)]")
    }

    /// One screen load, the way the app does it.
    static func headlines(from cache: Cache, policy: LoadPolicy = .offlineFirst) async throws -> LoadResult<Headlines> {
        try await cache.load(Headlines.self, forKey: url, expiry: .seconds(freshFor), policy: policy, using: fetchHeadlines)
    }

    static func run(path: String) async throws {
        // Sorted keys, so the stored JSON reads the same every time.
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        let options = Cache.Options(capacity: .megabytes(1), coder: JSONCacheCoder(encoder: encoder))
        let cache = try Cache(path: path, options: options)
        try cache.removeAll()
        print("offline-first on \(path), responses fresh for \(freshFor) s")

        await step("1. first launch: \(describe(try await headlines(from: cache)))")
        await step("2. screen opened again: \(describe(try await headlines(from: cache)))")

        // Twenty views ask at once for the expired headlines: one request serves them all.
        try await Task.sleep(for: .seconds(freshFor + 0.1))
        let editions = try await withThrowingTaskGroup(of: Int.self) { group in
            for _ in 0..<20 {
                group.addTask { try await headlines(from: cache).value.edition }
            }
            var editions = Set<Int>()
            for try await edition in group { editions.insert(edition) }
            return editions
        }
        await step("3. expired; 20 views ask at once: edition \(editions.sorted().map(String.init).joined(separator: ", ")) for all of them")

        // The network goes away. The copy from earlier stands in, marked stale.
        await server.setReachable(false)
        try await Task.sleep(for: .seconds(freshFor + 0.1))
        let offline = try await headlines(from: cache)
        await step("4. offline, expired: \(describe(offline))")
        if offline.isStale { print("   the screen shows it under a banner: \"Offline: showing headlines from earlier\"") }

        // The network is back: pull to refresh loads even though a copy is there.
        await server.setReachable(true)
        await step("5. back online, pull to refresh: \(describe(try await headlines(from: cache, policy: .refresh)))")

        // The app restarts, offline again: the file still has the headlines.
        await server.setReachable(false)
        try cache.close()
        let reopened = try Cache(path: path, options: options)
        await step("6. restarted, offline: \(describe(try await headlines(from: reopened)))")
        print("   stored as JSON: \(String(decoding: try await reopened.data(forKey: url) ?? Data(), as: UTF8.self))")

        // Without a stale copy to fall back on, the error reaches the caller.
        do {
            _ = try await reopened.load(Headlines.self, forKey: "https://news.example/sports", using: fetchHeadlines)
        } catch {
            await step("7. offline, never loaded: \(error)")
        }
        try reopened.close()
    }
}

let path = CommandLine.arguments.dropFirst().first ?? FileManager.default.temporaryDirectory
    .appendingPathComponent("larder-offline-first.larder").path
do {
    try await OfflineFirstExample.run(path: path)
} catch {
    print("offline-first failed: \(error)")
    exit(1)
}

import Foundation
import Testing
@testable import Larder

/// `entryDetails(forKey:)`: what a caller may rely on besides the numbers (which the tool tests
/// check against `larder dump --json`).
@Suite("Entry details")
struct EntryDetailsTests {
    @Test func missingAndExpiredKeysHaveNone() throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(at: directory.path(), capacity: 1 << 20)
        #expect(try cache.entryDetails(forKey: "absent") == nil)
        try cache.set(Data("old".utf8), forKey: "gone", expiry: .date(Date(timeIntervalSinceNow: -1)))
        #expect(try cache.entryDetails(forKey: "gone") == nil)
        try cache.set(Data("new".utf8), forKey: "here")
        let details = try #require(try cache.entryDetails(forKey: "here"))
        #expect(details.size == 3 && details.expiresAt == nil && !details.read)
        #expect(abs(details.storedAt.timeIntervalSinceNow) < 600)
    }

    @Test func lookingDoesNotCountAsReading() throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(at: directory.path(), capacity: 1 << 20)
        try cache.set(Data("v".utf8), forKey: "k")
        _ = try cache.entryDetails(forKey: "k")
        #expect(try cache.entryDetails(forKey: "k")?.read == false)
        #expect(cache.stats.hits == 0 && cache.stats.misses == 0)
        _ = try cache.data(forKey: "k")
        #expect(try cache.entryDetails(forKey: "k")?.read == true)
    }

    @Test func badKeysAndClosedCachesAreRefused() throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(at: directory.path(), capacity: 1 << 20)
        expectError(.invalidArgument) { _ = try cache.entryDetails(forKey: "") }
        expectError(.tooLarge) { _ = try cache.entryDetails(forKey: String(repeating: "k", count: 4097)) }
        try cache.close()
        expectError(.closed) { _ = try cache.entryDetails(forKey: "k") }
    }
}

/// Expects `body` to throw a `LarderError` of `code`.
func expectError(_ code: LarderError.Code, sourceLocation: SourceLocation = #_sourceLocation,
                 _ body: () throws -> Void) {
    let error = #expect(throws: LarderError.self, sourceLocation: sourceLocation) { try body() }
    #expect(error?.code == code, "\(String(describing: error))", sourceLocation: sourceLocation)
}

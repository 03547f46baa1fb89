import Foundation
import Testing
@testable import Larder

/// A value with the shapes coders trip over: nesting, optionals, dates, URLs, collections.
struct Article: Codable, Equatable, Sendable {
    struct Author: Codable, Equatable, Sendable {
        var name: String
        var homepage: URL?
    }
    var id: Int
    var title: String
    var published: Date
    var tags: [String]
    var author: Author
    var rating: Double?

    static func sample(_ id: Int) -> Article {
        Article(id: id, title: "Article \(id): caches, é and 🥫", published: Date(timeIntervalSince1970: 1_700_000_000 + Double(id)),
                tags: ["swift", "cache", "\(id)"], author: Author(name: "Ada", homepage: URL(string: "https://example.com/ada")),
                rating: id % 2 == 0 ? nil : 4.5)
    }
}

/// A coder of the caller's own: JSON behind a version byte, so a test can see it was used.
struct VersionedCoder: CacheCoder {
    var version: UInt8 = 7

    func encode<Value: Encodable>(_ value: Value) throws -> Data {
        Data([version]) + (try JSONEncoder().encode(value))
    }

    func decode<Value: Decodable>(_ type: Value.Type, from data: Data) throws -> Value {
        guard data.first == version else {
            throw DecodingError.dataCorrupted(.init(codingPath: [], debugDescription: "version \(data.first ?? 0), not \(version)"))
        }
        return try JSONDecoder().decode(type, from: data.dropFirst())
    }
}

/// Stores through the `Encodable` overload whatever the value is, as generic code does.
func setEncodable<Value: Encodable>(_ value: Value, forKey key: String, in cache: Cache) throws {
    try cache.set(value, forKey: key)
}

@Suite("Codable")
struct CodableTests {
    @Test(arguments: [("json", JSONCacheCoder() as any CacheCoder), ("plist", PropertyListCacheCoder()),
                      ("xml plist", PropertyListCacheCoder(format: .xml)), ("custom", VersionedCoder())])
    func valuesRoundTripThroughEveryCoder(name: String, coder: any CacheCoder) throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(path: directory.path(), options: .init(coder: coder))
        for id in 0..<20 { try cache.set(Article.sample(id), forKey: "article/\(id)") }
        try cache.set(["a": 1, "b": 2], forKey: "dictionary")
        for id in 0..<20 {
            #expect(try cache.value(Article.self, forKey: "article/\(id)") == Article.sample(id), "\(name)")
        }
        #expect(try cache.value([String: Int].self, forKey: "dictionary") == ["a": 1, "b": 2])
        #expect(try cache.value(Article.self, forKey: "missing") == nil)
        // The bytes stored are the coder's.
        let stored = try #require(try cache.data(forKey: "article/3"))
        #expect(try coder.decode(Article.self, from: stored) == Article.sample(3))
    }

    @Test func theCoderOfACallOverridesTheCachesAndMustMatchOnReading() throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(path: directory.path())
        try cache.set(Article.sample(1), forKey: "json")
        try cache.set(Article.sample(2), forKey: "custom", coder: VersionedCoder())
        try cache.set(Article.sample(3), forKey: "plist", coder: .propertyList)
        #expect(try cache.data(forKey: "json")?.first == UInt8(ascii: "{"))
        #expect(try cache.data(forKey: "custom")?.first == 7)
        #expect(try cache.data(forKey: "plist")?.starts(with: Data("bplist".utf8)) == true)
        #expect(try cache.value(Article.self, forKey: "custom", coder: VersionedCoder()) == Article.sample(2))
        #expect(try cache.value(Article.self, forKey: "plist", coder: .propertyList) == Article.sample(3))
        #expect(throws: DecodingError.self) { try cache.value(Article.self, forKey: "custom") }
        // Objects in memory are told apart by the coder's type only: a coder of the same type,
        // configured otherwise, finds the object that VersionedCoder() kept; the file's bytes
        // are decoded anew (placement .fileOnly) with it.
        #expect(throws: DecodingError.self) {
            try cache.value(Article.self, forKey: "json", coder: VersionedCoder(version: 8), placement: .fileOnly)
        }
        #expect(throws: DecodingError.self) { try cache.value(Int.self, forKey: "json") }
    }

    @Test func scalarsAndStringsAreJSONFragments() throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(path: directory.path())
        try cache.set("hello", forKey: "string")
        try cache.set(42, forKey: "int")
        try cache.set(Optional<Int>.none, forKey: "nil")
        #expect(try cache.data(forKey: "string") == Data("\"hello\"".utf8))
        #expect(try cache.value(String.self, forKey: "string") == "hello")
        #expect(try cache.value(Int.self, forKey: "int") == 42)
        #expect(try cache.value(Int?.self, forKey: "nil") == .some(nil))
        // A property list needs a container at the top: the coder's error comes through.
        #expect(throws: EncodingError.self) { try cache.set(42, forKey: "plist-int", coder: .propertyList) }
        #expect(!cache.contains("plist-int"))
    }

    @Test func rawBytesAreStoredAsTheyAreWhicheverOverloadIsChosen() throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(path: directory.path())
        let bytes = pattern(1, count: 300)
        // Literals and byte arrays keep meaning bytes, as before Codable support.
        try cache.set([1, 2, 3], forKey: "literal")
        #expect(try cache.bytes(forKey: "literal") == [1, 2, 3])
        try cache.set(bytes, forKey: "array")
        try cache.set(Data(bytes), forKey: "data")
        // Generic code reaches the Encodable overload; raw bytes are not encoded there either.
        try setEncodable(Data(bytes), forKey: "generic-data", in: cache)
        try setEncodable(bytes, forKey: "generic-array", in: cache)
        try cache.set(Data(bytes), forKey: "with-coder", coder: VersionedCoder())
        for key in ["array", "data", "generic-data", "generic-array", "with-coder"] {
            #expect(try cache.bytes(forKey: key) == bytes, "\(key)")
            #expect(try cache.value(Data.self, forKey: key) == Data(bytes), "\(key)")
            #expect(try cache.value([UInt8].self, forKey: key) == bytes, "\(key)")
            #expect(try cache.value(Data.self, forKey: key, coder: VersionedCoder()) == Data(bytes), "\(key)")
        }
    }

    @Test(.waitsOnItsOwnThreads) func codableWritesTakeExpiryAndCompression() throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(path: directory.path())
        let long = Array(repeating: Article.sample(1), count: 50)
        try cache.set(long, forKey: "compressed", compression: .lz4)
        try cache.set(Article.sample(2), forKey: "short", expiry: .seconds(0.05))
        #expect(cache.stats.storedBytes < cache.stats.liveBytes / 4)
        #expect(try cache.value([Article].self, forKey: "compressed") == long)
        Thread.sleep(forTimeInterval: 0.1)
        #expect(try cache.value(Article.self, forKey: "short") == nil)
    }

    @Test func codableValuesSurviveReopening() throws {
        let directory = TemporaryDirectory()
        do {
            let cache = try Cache(path: directory.path(), options: .init(coder: .propertyList))
            try cache.set(Article.sample(9), forKey: "kept")
            try cache.close()
        }
        let cache = try Cache(path: directory.path())
        #expect(try cache.value(Article.self, forKey: "kept", coder: .propertyList) == Article.sample(9))
    }

    @Test func asyncReadsDecodeOffTheCallersActor() async throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(path: directory.path())
        try cache.set(Article.sample(5), forKey: "article")
        let big = Data(pattern(2, count: 3 << 20))
        try await cache.set(big, forKey: "big", compression: .lz4)
        #expect(try await cache.value(Article.self, forKey: "article") == Article.sample(5))
        #expect(try await cache.value(Article.self, forKey: "missing") == nil)
        #expect(try await cache.data(forKey: "big") == big)
        #expect(try await cache.value(Data.self, forKey: "big") == big)
    }
}

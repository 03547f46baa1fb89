import Foundation
import Testing
@testable import Larder

/// An ID of the tests' own, keyed by its raw value.
struct ProfileID: RawRepresentable, Hashable, Sendable, CacheKeyConvertible {
    var rawValue: Int
}

@Suite("Typed cache")
struct TypedCacheTests {
    @Test func keysOfTheCallersTypesMapToPrefixedKeyBytes() throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(path: directory.path())
        let byURL = TypedCache<URL, Profile>(cache, prefix: "url/")
        let byID = TypedCache<ProfileID, Profile>(cache, prefix: "id/")
        let byInt = TypedCache<Int, Profile>(cache)
        let url = URL(string: "https://example.com/u/1")!
        try byURL.set(Profile.make(1), forKey: url)
        try byID.set(Profile.make(2), forKey: ProfileID(rawValue: 2))
        try byInt.set(Profile.make(3), forKey: 3)
        #expect(try cache.value(Profile.self, forKey: "url/https://example.com/u/1") == Profile.make(1))
        #expect(try cache.value(Profile.self, forKey: "id/2") == Profile.make(2))
        #expect(try cache.value(Profile.self, forKey: "3") == Profile.make(3))
        #expect(try byURL.value(forKey: url) == Profile.make(1))
        #expect(try byID.value(forKey: ProfileID(rawValue: 2)) == Profile.make(2))
        #expect(try byID.value(forKey: ProfileID(rawValue: 3)) == nil, "another prefix is another key")
        #expect(byInt.contains(3))
        #expect(try byID.removeValue(forKey: ProfileID(rawValue: 2)))
        #expect(try byID.value(forKey: ProfileID(rawValue: 2)) == nil)
        #expect(try byURL.removeAll() == 1)
        #expect(try byURL.value(forKey: url) == nil)
        #expect(throws: LarderError.self) { try byInt.removeAll() }
        #expect(try byInt.value(forKey: 3) == Profile.make(3))
    }

    @Test func aViewWithAConversionAndAClosureForKeys() throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(path: directory.path())
        let bitmaps = TypedCache<[Int], Bitmap>(cache, prefix: "tile/", key: { $0.map(String.init).joined(separator: ",") },
                                                conversion: BitmapConversion())
        try bitmaps.set(Bitmap(pixels: [4, 5]), forKey: [1, 2])
        #expect(try cache.data(forKey: "tile/1,2") == Data("BMP".utf8) + Data([4, 5]))
        let first = try #require(try bitmaps.value(forKey: [1, 2]))
        #expect(try bitmaps.value(forKey: [1, 2]) === first)
        #expect(throws: LarderError.self) { try bitmaps.set(Bitmap(pixels: []), forKey: [3]) }
        #expect(try bitmaps.value(forKey: [3]) == nil)
    }

    @Test func loadsGoThroughTheViewsCoder() async throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(path: directory.path())
        let profiles = TypedCache<Int, Profile>(cache, prefix: "p/", coder: .propertyList)
        let loaded = try await profiles.value(forKey: 7) { Profile.make(7) }
        #expect(loaded == Profile.make(7))
        #expect(try await cache.data(forKey: "p/7")?.starts(with: Data("bplist".utf8)) == true)
        let again = try await profiles.value(forKey: 7) { Issue.record("loaded twice"); return Profile.make(0) }
        #expect(again == Profile.make(7))
        let bitmaps = TypedCache<String, Bitmap>(cache, prefix: "b/", conversion: BitmapConversion())
        let bitmap = try await bitmaps.value(forKey: "x") { Bitmap(pixels: [1]) }
        #expect(bitmap.pixels == [1])
        #expect(try bitmaps.value(forKey: "x")?.pixels == [1])
    }
}

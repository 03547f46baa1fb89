import Foundation
import Testing
@testable import Larder

@Suite("Enumeration")
struct EnumerationTests {
    func strings(_ keys: [Data]) -> Set<String> { Set(keys.map { String(decoding: $0, as: UTF8.self) }) }

    @Test func keysSurviveReopeningAndLeaveOutTheExpired() throws {
        let directory = TemporaryDirectory()
        let expected = Set((0..<500).map { "user/\($0 % 7)/item-\($0)" })
        do {
            let cache = try Cache(path: directory.path())
            for key in expected { try cache.set(Data(key.utf8), forKey: key) }
            try cache.set([1], forKey: "expired", expiry: .date(Date(timeIntervalSinceNow: -1)))
            try cache.set([1], forKey: "removed")
            try cache.removeValue(forKey: "removed")
            #expect(strings(try cache.keys) == expected)
            try cache.close()
        }
        let cache = try Cache(path: directory.path())
        let keys = try cache.keys
        #expect(keys.count == 500)
        #expect(strings(keys) == expected)
        #expect(strings(try cache.keys(withPrefix: "user/3/")) == expected.filter { $0.hasPrefix("user/3/") })
        #expect(try cache.keys(withPrefix: "nobody/").isEmpty)
        #expect(try cache.keys(withPrefix: "").count == 500)
        #expect(try cache.keys(withPrefix: Data("user/".utf8)).count == 500)
    }

    @Test func bytesKeysComeBackAsTheyWere() throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(path: directory.path())
        let keys: [[UInt8]] = [[0], [0, 0], [255, 0, 1], Array(repeating: 7, count: 4096), pattern(5, count: 33)]
        for key in keys { try cache.set([1], forKey: key) }
        #expect(Set(try cache.keys) == Set(keys.map { Data($0) }))
        #expect(try cache.keys(withPrefix: [0]).count == 2)
    }

    @Test func forEachDecodesEachValueAndSkipsWhatDoesNotDecode() throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(path: directory.path())
        for id in 0..<10 { try cache.set(Article.sample(id), forKey: "article/\(id)") }
        try cache.set("not an article", forKey: "article/broken")
        try cache.set([1, 2, 3], forKey: "raw")
        var seen: [String: Article] = [:]
        try cache.forEach(Article.self, withPrefix: "article/") { key, article in
            seen[String(decoding: key, as: UTF8.self)] = article
        }
        #expect(seen.count == 10)
        for id in 0..<10 { #expect(seen["article/\(id)"] == Article.sample(id)) }

        var raw: [Data: Data] = [:]
        try cache.forEach(Data.self) { key, value in raw[key] = value }
        #expect(raw.count == 12)
        #expect(raw[Data("raw".utf8)] == Data([1, 2, 3]))

        // The body may change the cache, and may stop the walk by throwing.
        try cache.forEach(Data.self, withPrefix: "article/") { key, _ in try cache.removeValue(forKey: key) }
        #expect(try cache.keys == [Data("raw".utf8)])
        struct Stop: Error {}
        try cache.set([4], forKey: "raw2")
        var visits = 0
        #expect(throws: Stop.self) {
            try cache.forEach(Data.self) { _, _ in
                visits += 1
                throw Stop()
            }
        }
        #expect(visits == 1)
    }

    @Test func removeAllWithPrefixRemovesExactlyThoseAndPersists() throws {
        let directory = TemporaryDirectory()
        do {
            let cache = try Cache(path: directory.path())
            for user in 0..<5 {
                for item in 0..<40 { try cache.set(pattern(user * 100 + item, count: 64), forKey: "user/\(user)/\(item)") }
            }
            try cache.set([1], forKey: "user/1")
            try cache.set([1], forKey: "user/1/expired", expiry: .date(Date(timeIntervalSinceNow: -1)))
            #expect(try cache.removeAll(withPrefix: "user/1/") == 40)
            #expect(try cache.removeAll(withPrefix: "user/1/") == 0)
            // Longer than any key: nothing starts with it.
            #expect(try cache.removeAll(withPrefix: "user/2/" + String(repeating: "x", count: Cache.maximumKeyLength)) == 0)
            #expect(cache.count == 161)
            #expect(cache.stats.removals == 40)
            #expect(try cache.bytes(forKey: "user/1") == [1])
            #expect(try cache.bytes(forKey: "user/2/5") == pattern(205, count: 64))
            try cache.close()
        }
        let cache = try Cache(path: directory.path())
        #expect(try cache.keys(withPrefix: "user/1/").isEmpty)
        #expect(cache.count == 161)
        #expect(try cache.removeAll(withPrefix: "") == 161)
        #expect(cache.count == 0)
        #expect(try cache.keys.isEmpty)
    }

    @Test(.waitsOnItsOwnThreads) func keysOfAnotherProcessesWritesAreSeen() async throws {
        let directory = TemporaryDirectory()
        let path = directory.path()
        let cache = try Cache(path: path)
        try cache.set([1], forKey: "mine")
        await #expect(processExitsWith: .success) { [path = path as String] in
            let child = try Cache(path: path)
            for index in 0..<3000 { try child.set([UInt8(truncatingIfNeeded: index)], forKey: "theirs-\(index)") }
            _ = try child.removeAll(withPrefix: "theirs-1")
            try child.close()
        }
        let keys = try await cache.keys(withPrefix: "theirs-")
        #expect(keys.count == 3000 - 1111)
        #expect(cache.contains("mine"))
    }
}

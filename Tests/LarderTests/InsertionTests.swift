import Foundation
import Synchronization
import Testing
@testable import Larder

@Suite("Insertion")
struct InsertionTests {
    @Test func insertStoresOnlyWhenTheKeyHasNoLiveValue() throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(path: directory.path())
        #expect(try cache.insert(Data("first".utf8), forKey: "k"))
        #expect(try cache.insert(Data("second".utf8), forKey: "k") == false)
        #expect(try cache.data(forKey: "k") == Data("first".utf8))
        // A removed key is free again.
        try cache.removeValue(forKey: "k")
        #expect(try cache.insert(Data("third".utf8), forKey: "k"))
        #expect(try cache.data(forKey: "k") == Data("third".utf8))
    }

    @Test func anExpiredEntryCountsAsAbsent() throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(path: directory.path())
        try cache.set(Data("old".utf8), forKey: "k", expiry: .date(Date(timeIntervalSinceNow: -1)))
        #expect(try cache.insert(Data("new".utf8), forKey: "k", expiry: .seconds(60)))
        #expect(try cache.data(forKey: "k") == Data("new".utf8))
    }

    @Test func codableValuesAreEncodedAsSetEncodesThem() throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(path: directory.path())
        #expect(try cache.insert(Article.sample(1), forKey: "article"))
        #expect(try cache.insert(Article.sample(2), forKey: "article") == false)
        #expect(try cache.value(Article.self, forKey: "article") == Article.sample(1))
    }

    @Test func badInputIsRefusedAndLosesNothing() throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(path: directory.path())
        try cache.set(Data("kept".utf8), forKey: "k")
        #expect(throws: LarderError.self) { try cache.insert(Data("x".utf8), forKey: "") }
        #expect(throws: LarderError.self) { try cache.insert(Data("x".utf8), forKey: "n", expiry: .seconds(.nan)) }
        #expect(try cache.data(forKey: "k") == Data("kept".utf8))
        #expect(cache.contains("n") == false)
    }

    @Test(.failsIfItHangs) func ofThreadsRacingForAKeyExactlyOneStoresIt() throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(path: directory.path())
        for round in 0..<20 {
            let key = "race/\(round)"
            let winners = Mutex(0)
            runOnThreads(4) { worker in
                if (try? cache.insert(Data([UInt8(worker)]), forKey: key)) == true {
                    winners.withLock { $0 += 1 }
                }
            }
            #expect(winners.withLock { $0 } == 1)
            #expect(try cache.data(forKey: key)?.count == 1)
        }
    }
}

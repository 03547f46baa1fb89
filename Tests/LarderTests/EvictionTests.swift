import Foundation
import Testing
@testable import Larder

@Suite("Eviction")
struct EvictionTests {
    @Test("the file never exceeds its capacity, and the newest entry is always there")
    func capacityIsHard() throws {
        let directory = TemporaryDirectory()
        let capacity = 512 * 1024
        let cache = try Cache(at: directory.path(), capacity: capacity)
        for index in 0..<2_000 {
            let value = pattern(index, count: 100 + (index * 37) % 3000)
            try cache.set(value, forKey: "key-\(index)")
            #expect(try cache.bytes(forKey: "key-\(index)") == value)
            #expect(cache.fileBytes <= capacity)
        }
        let size = try FileManager.default.attributesOfItem(atPath: directory.path())[.size] as! Int
        #expect(size <= capacity)
        #expect(cache.stats.evictions > 0)
    }

    @Test("a key read all the time survives any amount of writing")
    func hotKeySurvives() throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(at: directory.path(), capacity: 1 << 20)
        try cache.set(pattern(-1, count: 64), forKey: "hot")
        for index in 0..<3_000 {
            try cache.set(pattern(index, count: 10_000), forKey: "blob-\(index)")
            if index % 20 == 0 {
                #expect(try cache.bytes(forKey: "hot") == pattern(-1, count: 64), "lost at \(index)")
            }
        }
    }
}

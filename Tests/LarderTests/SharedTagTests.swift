import Foundation
import Testing
@testable import Larder

/// Keys whose hashes share a slot tag (`KeyHash.tag`, 28 bits): the usual get in C stops at the
/// first slot of the key's tag, and a record there of another key must send the read on to the
/// rest of the probe, never to a wrong value or a wrong miss.
@Suite("Keys sharing a tag")
struct SharedTagTests {
    /// Keys found by search whose tags are equal: `count` keys, all with one tag (two take some
    /// 20,000 hashes).
    private static func keysSharingATag(count: Int) -> [[UInt8]] {
        var byTag: [UInt32: [[UInt8]]] = [:]
        var index = 0
        while true {
            let key = Array("shared-tag-\(index)".utf8)
            index += 1
            let tag = key.withUnsafeBytes { KeyHash($0).tag }
            byTag[tag, default: []].append(key)
            if let keys = byTag[tag], keys.count == count { return keys }
        }
    }

    private let keys = SharedTagTests.keysSharingATag(count: 2)

    @Test func eachKeyReadsItsOwnValue() throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(path: directory.path())
        // Whichever record comes first in the probe, the read of the other key passes it.
        try cache.set(pattern(1, count: 100), forKey: keys[0])
        try cache.set(pattern(2, count: 100), forKey: keys[1])
        var buffer = [UInt8](repeating: 0, count: 128)
        for (key, seed) in [(keys[0], 1), (keys[1], 2)] {
            let length = try buffer.withUnsafeMutableBytes { try cache.copyValue(forKey: key, into: $0) }
            #expect(length == 100)
            #expect(Array(buffer[0..<100]) == pattern(seed, count: 100))
            #expect(try cache.bytes(forKey: key) == pattern(seed, count: 100))
        }
        #expect(cache.stats.hits == 4)
    }

    @Test func aKeyAbsentBehindAnotherOfItsTagMisses() throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(path: directory.path())
        try cache.set(pattern(1, count: 100), forKey: keys[0])
        var buffer = [UInt8](repeating: 0, count: 128)
        #expect(try buffer.withUnsafeMutableBytes { try cache.copyValue(forKey: keys[1], into: $0) } == nil)
        #expect(buffer.allSatisfy { $0 == 0 })
        #expect(try buffer.withUnsafeMutableBytes { try cache.copyValue(forKey: keys[0], into: $0) } == 100)
        let stats = cache.stats
        #expect(stats.hits == 1 && stats.misses == 1)
    }

    @Test func aRemovedKeyMissesAndTheOtherStillReads() throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(path: directory.path())
        try cache.set(pattern(1, count: 100), forKey: keys[0])
        try cache.set(pattern(2, count: 100), forKey: keys[1])
        try cache.removeValue(forKey: keys[0])
        var buffer = [UInt8](repeating: 0, count: 128)
        #expect(try buffer.withUnsafeMutableBytes { try cache.copyValue(forKey: keys[0], into: $0) } == nil)
        #expect(try buffer.withUnsafeMutableBytes { try cache.copyValue(forKey: keys[1], into: $0) } == 100)
        #expect(Array(buffer[0..<100]) == pattern(2, count: 100))
    }

    /// A write finds the record of its key behind another of its tag: a put replaces that one
    /// and a removal takes it alone, whichever comes first in the probe.
    @Test func writesOfAKeyBehindAnotherOfItsTagTouchItAlone() throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(path: directory.path())
        try cache.set(pattern(1, count: 100), forKey: keys[0])
        try cache.set(pattern(2, count: 100), forKey: keys[1])
        try cache.set(pattern(3, count: 100), forKey: keys[1])
        #expect(cache.count == 2)
        #expect(try cache.bytes(forKey: keys[0]) == pattern(1, count: 100))
        #expect(try cache.bytes(forKey: keys[1]) == pattern(3, count: 100))
        #expect(try cache.removeValue(forKey: keys[1]))
        #expect(try !cache.removeValue(forKey: keys[1]))
        #expect(cache.count == 1)
        #expect(try cache.bytes(forKey: keys[0]) == pattern(1, count: 100))
        #expect(try cache.bytes(forKey: keys[1]) == nil)
    }
}

import Foundation
import Testing
@testable import Larder

/// Random operations checked against a dictionary: the cache must behave like one, except that
/// under memory pressure it may forget (evict), never misremember.
@Suite("Against a model")
struct ModelTests {
    enum Operation: CaseIterable { case set, remove, get, reopen, removeAll, sync }

    private static func pick(_ generator: inout SplitMix) -> Operation {
        switch generator.next() % 100 {
        case 0..<45: .set
        case 45..<60: .remove
        case 60..<97: .get
        case 97: .reopen
        case 98: .sync
        default: .removeAll
        }
    }

    @Test(arguments: [(seed: UInt64(1), evicting: false), (seed: 2, evicting: false), (seed: 3, evicting: true), (seed: 4, evicting: true)])
    func randomOperationsMatchADictionary(seed: UInt64, evicting: Bool) throws {
        let directory = TemporaryDirectory()
        let capacity = evicting ? 512 << 10 : 32 << 20
        var generator = SplitMix(seed: seed)
        var model: [Int: [UInt8]] = [:]
        var cache = try Cache(at: directory.path(), capacity: capacity)
        for step in 0..<6_000 {
            let key = Int(generator.next() % 500)
            switch Self.pick(&generator) {
            case .set:
                let length = Int(generator.next() % (evicting ? 6_000 : 2_000))
                let value = pattern(Int(generator.next() % 1_000_000), count: length)
                try cache.set(value, forKey: "k\(key)")
                model[key] = value
            case .remove:
                let removed = try cache.removeValue(forKey: "k\(key)")
                if !evicting { #expect(removed == (model[key] != nil), "step \(step)") }
                model[key] = nil
            case .get:
                let value = try cache.bytes(forKey: "k\(key)")
                if evicting {
                    #expect(value == nil || value == model[key], "step \(step): k\(key) misremembered")
                } else {
                    #expect(value == model[key], "step \(step): k\(key)")
                }
            case .reopen:
                try cache.close()
                cache = try Cache(path: directory.path())
            case .removeAll:
                try cache.removeAll()
                model.removeAll()
            case .sync:
                try cache.sync()
            }
            #expect(cache.fileBytes <= capacity)
        }
        if !evicting {
            #expect(cache.count == model.count)
            #expect(cache.totalBytes == model.values.reduce(0) { $0 + $1.count })
        }
        var retrievable = 0
        var retrievableBytes = 0
        for (key, value) in model {
            let stored = try cache.bytes(forKey: "k\(key)")
            #expect(stored == value || (evicting && stored == nil))
            if let stored {
                retrievable += 1
                retrievableBytes += stored.count
            }
        }
        // The counts describe exactly what can be read, evictions or not.
        #expect(cache.count == retrievable)
        #expect(cache.totalBytes == retrievableBytes)
    }
}

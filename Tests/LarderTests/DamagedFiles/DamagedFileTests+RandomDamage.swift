import Foundation
import Testing
@_spi(Inspection) @testable import Larder

/// Damage at random places, and a data area of random bytes.
extension DamagedFileTests {
    @Test func randomDamageAnywhereNeverCrashesOrLies() throws {
        // Deterministic: flip bytes at many places, open, read everything, write a little.
        var generator = SplitMix(seed: 0xDA3A6E)
        let directory = TemporaryDirectory()
        let original = directory.path("original.larder")
        try makeCache(original)
        let size = try FileManager.default.attributesOfItem(atPath: original)[.size] as! Int
        for round in 0..<40 {
            let path = directory.path("damaged\(round).larder")
            try FileManager.default.copyItem(atPath: original, toPath: path)
            try rewrite(path) { bytes in
                for _ in 0..<(1 + round % 8) {
                    let start = Int(generator.next() % UInt64(size))
                    for index in start..<min(size, start + 1 + Int(generator.next() % 64)) {
                        bytes[index] = round % 3 == 0 ? 0 : UInt8(truncatingIfNeeded: generator.next())
                    }
                }
            }
            guard let cache = try? Cache(path: path) else { continue }
            try expectOnlyValidValues(cache)
            for key in 0..<50 { try? cache.set(VersionedValue.make(key: key, version: 2), forKey: "k\(key)") }
            try expectOnlyValidValues(cache)
            try? cache.close()
        }
    }

    @Test func garbageDataAreaWithAValidMetaOpensEmpty() throws {
        var generator = SplitMix(seed: 7)
        let directory = TemporaryDirectory()
        try makeCache(directory.path())
        try rewrite(directory.path()) { bytes in
            for index in (2 * 4096)..<bytes.count { bytes[index] = UInt8(truncatingIfNeeded: generator.next()) }
        }
        let cache = try Cache(path: directory.path())
        #expect(cache.count == 0)
        try expectOnlyValidValues(cache)
        try cache.set([1], forKey: "fresh")
        #expect(try cache.bytes(forKey: "fresh") == [1])
    }
}

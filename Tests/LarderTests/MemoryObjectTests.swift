import Foundation
import Testing
@testable import Larder

/// The memory tier's objects: a value in the object's own allocation, read back as its type only,
/// and destroyed with the object.
@Suite("Memory objects")
struct MemoryObjectTests {
    final class Tracked: Sendable {}

    @Test func aValueIsReadBackAsItsOwnTypeOnly() {
        let object = MemoryObject.make("a value")
        #expect(object.value(as: String.self) == "a value")
        #expect(object.value(as: Int.self) == nil)
        #expect(MemoryObject.make(UInt8(7)).value(as: UInt8.self) == 7)
        #expect(MemoryObject.make(()).value(as: Void.self) != nil)
    }

    @Test func valuesOfEveryAlignmentSitWhereTheirTypeNeeds() {
        let vector = SIMD8<Double>(1, 2, 3, 4, 5, 6, 7, 8)
        let object = MemoryObject.make(vector)
        #expect(object.value(as: SIMD8<Double>.self) == vector)
        let address = object.withUnsafeMutablePointerToElements { MemoryObject.address(of: SIMD8<Double>.self, in: $0) }
        #expect(Int(bitPattern: address) % MemoryLayout<SIMD8<Double>>.alignment == 0)
    }

    @Test func theValueIsDestroyedWithTheObject() {
        weak var watched: Tracked?
        do {
            let tracked = Tracked()
            watched = tracked
            let tier = MemoryTier(limits: MemoryLimits(cost: .megabytes(1), count: 10))
            let key = Array("key".utf8).withUnsafeBytes { MemoryKey($0) }
            tier.insert([tracked], forKey: key, kind: MemoryKind([Tracked].self), origin: .memoryOnly, cost: 1)
            #expect(watched != nil)
            tier.removeAll()
        }
        #expect(watched == nil)
    }
}

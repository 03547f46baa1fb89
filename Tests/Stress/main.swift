import Foundation
import Larder

// One participant of the multi-process stress test (Tests/C/stress.sh), the Swift counterpart of
// Tests/C/stress.c: both write and check the same self-describing values.
//
//   larder-stress writer FILE SECONDS SEED   puts and deletes keys k0..k999
//   larder-stress reader FILE SECONDS SEED   reads them and checks every value it gets
//   larder-stress verify FILE                checks every key once
//
// A value is: key (u32 LE), version (u32 LE), then (key*31 + version*17) % 3000 bytes of
// xorshift64 output seeded with key*7919 + version. Exit status 0 when nothing was wrong.

func value(key: Int, version: Int) -> [UInt8] {
    var bytes = withUnsafeBytes(of: UInt32(key).littleEndian, Array.init)
    bytes += withUnsafeBytes(of: UInt32(truncatingIfNeeded: version).littleEndian, Array.init)
    var state = UInt64(truncatingIfNeeded: key &* 7919 &+ version) &* 0x9E37_79B9_7F4A_7C15 | 1
    for _ in 0..<((key &* 31 &+ version &* 17) % 3000) {
        state ^= state << 13
        state ^= state >> 7
        state ^= state << 17
        bytes.append(UInt8(truncatingIfNeeded: state))
    }
    return bytes
}

func isValid(_ bytes: [UInt8], key: Int) -> Bool {
    guard bytes.count >= 8 else { return false }
    let storedKey = bytes[0..<4].withUnsafeBytes { Int(UInt32(littleEndian: $0.loadUnaligned(as: UInt32.self))) }
    let version = bytes[4..<8].withUnsafeBytes { Int(UInt32(littleEndian: $0.loadUnaligned(as: UInt32.self))) }
    return storedKey == key && bytes == value(key: key, version: version)
}

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("larder-stress: \(message)\n".utf8))
    exit(1)
}

let arguments = CommandLine.arguments
guard arguments.count >= 3 else { fail("usage: larder-stress writer|reader|verify FILE [SECONDS SEED]") }
let role = arguments[1]
let seconds = arguments.count > 3 ? Double(arguments[3]) ?? 2 : 2
/// The same linear congruential generator as stress.c, so a seed means the same keys in both.
struct Generator {
    var seed: UInt64
    mutating func next() -> Int {
        seed = seed &* 6364136223846793005 &+ 1442695040888963407
        return Int(truncatingIfNeeded: seed >> 33)
    }
}
var random = Generator(seed: UInt64(arguments.count > 4 ? Int(arguments[4]) ?? 1 : 1))

do {
    let cache = try Cache(path: arguments[2], options: .init(capacity: .megabytes(4)))
    let deadline = Date(timeIntervalSinceNow: seconds)
    var operations = 0
    var wrong = 0
    switch role {
    case "writer":
        var version = Int(random.seed % 1000) * 1_000_000
        while Date() < deadline {
            let key = random.next() % 1000
            version += 1
            if random.next() % 10 == 0 {
                try cache.removeValue(forKey: "k\(key)")
            } else {
                try cache.set(value(key: key, version: version), forKey: "k\(key)")
            }
            operations += 1
        }
    case "reader":
        while Date() < deadline {
            let key = random.next() % 1000
            if random.next() % 4 == 0 {
                let ok = try cache.withValue(forKey: "k\(key)") { isValid(Array($0), key: key) }
                if ok == false { wrong += 1 }
            } else if let bytes = try cache.bytes(forKey: "k\(key)"), !isValid(bytes, key: key) {
                wrong += 1
            }
            operations += 1
        }
    case "verify":
        for key in 0..<1000 {
            if let bytes = try cache.bytes(forKey: "k\(key)"), !isValid(bytes, key: key) { wrong += 1 }
        }
        operations = 1000
    default:
        fail("unknown role \(role)")
    }
    try cache.close()
    print("larder-stress \(role) (Swift): \(operations) operations, \(wrong) wrong values")
    exit(wrong == 0 ? 0 : 1)
} catch {
    fail("\(error)")
}

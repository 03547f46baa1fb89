import Foundation
import Larder

// The other half of the Swift <-> C interoperability test (Tests/C/interop.c):
// `larder-interop write FILE` stores swift-0..swift-99, `verify FILE` checks c-0..c-99.
func value(_ side: String, _ index: Int) -> [UInt8] {
    let digits = String(index)
    let width = index % 50 + 1
    return Array("\(side) value \(index): \(String(repeating: "0", count: max(0, width - digits.count)))\(digits)".utf8)
}

let arguments = CommandLine.arguments
guard arguments.count == 3, ["write", "verify"].contains(arguments[1]) else {
    FileHandle.standardError.write(Data("usage: larder-interop write|verify FILE\n".utf8))
    exit(2)
}
var failures = 0
do {
    let cache = try Cache(path: arguments[2])
    for index in 0..<100 {
        if arguments[1] == "write" {
            try cache.set(value("swift", index), forKey: "swift-\(index)")
        } else if try cache.bytes(forKey: "c-\(index)") != value("c", index) {
            FileHandle.standardError.write(Data("c-\(index) differs\n".utf8))
            failures += 1
        }
    }
    try cache.close()
} catch {
    FileHandle.standardError.write(Data("\(error)\n".utf8))
    exit(1)
}
print("interop \(arguments[1]) (Swift): \(100 - failures) passed, \(failures) failed")
exit(failures == 0 ? 0 : 1)

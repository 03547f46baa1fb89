import Foundation
import Larder

/// Cache files the tests run the tool on, written through the public `Cache` API (C writes the
/// same format; see Tests/C/interop.c).
enum Fixture {
    /// docs/FORMAT.md section 9: capacity 256 KiB, 4 KiB pages, `greeting` = `hello`, closed.
    static func workedExample(_ path: String) throws {
        let cache = try Cache(path: path, options: .init(capacity: .kilobytes(256), pageSize: 4096))
        try cache.set(Data("hello".utf8), forKey: "greeting")
        try cache.close()
    }

    /// `k0` ... `k<count-1>`, each `value <n>` padded to 40 bytes, in a 2 MiB cache.
    static func numbered(_ path: String, count: Int = 5) throws {
        let cache = try Cache(path: path, options: .init(capacity: .megabytes(2)))
        for index in 0..<count { try cache.set(value(index), forKey: "k\(index)") }
        try cache.close()
    }

    static func value(_ index: Int) -> Data {
        Data("value \(index)".padding(toLength: 40, withPad: ".", startingAt: 0).utf8)
    }

    /// The file offset of `key`'s record, as `larder dump --json` reports it.
    static func offset(of key: String, in path: String) throws -> Int {
        let run = try Larder.run(["dump", "--json", path])
        for line in run.stdout.split(separator: "\n") {
            let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as! [String: Any]
            if object["key"] as? String == key { return object["offset"] as! Int }
        }
        throw CocoaError(.fileReadUnknown)
    }
}

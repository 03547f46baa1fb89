import Foundation
import Testing
@testable import Larder

/// A fresh directory per test, removed afterwards.
final class TemporaryDirectory {
    let url: URL

    init() {
        url = FileManager.default.temporaryDirectory
            .appendingPathComponent("larder-tests-\(UUID().uuidString)", isDirectory: true)
        try! FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    deinit {
        try? FileManager.default.removeItem(at: url)
    }

    func path(_ name: String = "cache.larder") -> String {
        url.appendingPathComponent(name).path
    }
}

/// Deterministic bytes for a key and a length, so a test can check any value it reads back.
func pattern(_ seed: Int, count: Int) -> [UInt8] {
    var state = UInt64(truncatingIfNeeded: seed) &* 0x9E37_79B9_7F4A_7C15 | 1
    return (0..<count).map { _ in
        state ^= state << 13
        state ^= state >> 7
        state ^= state << 17
        return UInt8(truncatingIfNeeded: state)
    }
}

extension Cache {
    /// Opens with a capacity in bytes and an optional page size: the common case in tests.
    convenience init(at path: String, capacity: Int? = nil, pageSize: Int = 4096,
                     expiry: Expiry = .never, readOnly: Bool = false) throws {
        try self.init(path: path, options: .init(capacity: capacity.map { .bytes($0) }, pageSize: pageSize,
                                                defaultExpiry: expiry, readOnly: readOnly))
    }
}

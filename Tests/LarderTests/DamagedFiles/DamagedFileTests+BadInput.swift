import Foundation
import Testing
@_spi(Inspection) @testable import Larder

/// Bad input: keys, options, the error codes, files of another kind.
extension DamagedFileTests {
    /// A program that mixes the two APIs (or passes a Swift error's code on to C code) relies on
    /// each `LarderError.Code` being the status of include/larder.h that has its name, for every
    /// error status the header defines. The tests cannot import the header (only LarderC does),
    /// so they read its definitions.
    @Test func everyErrorCodeIsTheCStatusOfItsName() throws {
        let header = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("../../../include/larder.h").standardized
        var defined: [String: Int32] = [:]
        for line in try String(contentsOf: header, encoding: .utf8).split(separator: "\n") {
            guard let match = line.wholeMatch(of: /#define (LARDER_[A-Z_]+) \(?(-?[0-9]+)\)?/),
                  let value = Int32(match.2) else { continue }
            defined[String(match.1)] = value
        }
        let codes: [String: LarderError.Code] = [
            "LARDER_INVALID_ARGUMENT": .invalidArgument, "LARDER_TOO_LARGE": .tooLarge, "LARDER_IO": .io,
            "LARDER_CORRUPT": .corrupt, "LARDER_INCOMPATIBLE": .incompatible, "LARDER_READ_ONLY": .readOnly,
            "LARDER_NO_MEMORY": .noMemory, "LARDER_FULL": .full, "LARDER_CLOSED": .closed, "LARDER_BUSY": .busy,
            "LARDER_SUSPENDED": .suspended,
        ]
        // The error statuses are the negative ones; OK, NOT_FOUND and BUFFER_TOO_SMALL are answers.
        #expect(Set(defined.filter { $0.value < 0 }.keys) == Set(codes.keys))
        for (name, code) in codes {
            #expect(defined[name] == code.rawValue, "\(name) is \(defined[name].map(String.init) ?? "not defined"), .\(code) is \(code.rawValue)")
        }
        #expect(Set(codes.values.map(\.description)).count == codes.count)
    }

    @Test func badKeysAreRejectedAndLoseNothing() throws {
        let directory = TemporaryDirectory()
        let cache = try Cache(path: directory.path())
        try cache.set([1], forKey: "keep")
        for (key, code) in [([UInt8](), LarderError.Code.invalidArgument), ([UInt8](repeating: 1, count: 4097), .tooLarge)] {
            #expect(throws: LarderError.self) { try cache.set([2], forKey: key) }
            #expect(errorCode { _ = try cache.data(forKey: key) } == code)
            #expect(errorCode { _ = try cache.removeValue(forKey: key) } == code)
            #expect(!cache.contains(key))
        }
        #expect(try cache.bytes(forKey: "keep") == [1])
    }

    @Test func badOptionsAreRejected() throws {
        let directory = TemporaryDirectory()
        for pageSize in [0, 1000, 2048, 4095, 131072] {
            #expect(throws: LarderError.self) { try Cache(at: directory.path(), pageSize: pageSize) }
        }
        for capacity in [-1, 0, 4096, 60_000] {
            #expect(throws: LarderError.self) { try Cache(at: directory.path(), capacity: capacity) }
        }
        #expect(throws: LarderError.self) { try Cache(path: "") }
        #expect(throws: LarderError.self) { try Cache(path: directory.url.path) }
        #expect(throws: LarderError.self) { try Cache(path: directory.path("no/such/dir.larder")) }
    }

    @Test func aForeignFileIsRefusedAndLeftAlone() throws {
        let directory = TemporaryDirectory()
        let text = Data(String(repeating: "not a cache\n", count: 1000).utf8)
        try text.write(to: URL(fileURLWithPath: directory.path()))
        expectError(.incompatible, opening: directory.path())
        #expect(try Data(contentsOf: URL(fileURLWithPath: directory.path())) == text)
    }
}

import Foundation
import Larder
import Testing

/// `suspend()` gives up every lock on the file, so that another process may compact it; after
/// `resume()` the handle reads and writes the compacted file, and its memory tier returns nothing
/// the new file does not hold.
@Suite("Suspend and resume around a compaction", .waitsOnItsOwnThreads)
struct SuspensionToolTests {
    struct Note: Codable, Equatable {
        var text: String
    }

    @Test func aHandleResumedAfterACompactionByTheToolReadsAndWritesTheNewFile() throws {
        let directory = TemporaryDirectory()
        let path = directory.path()
        let cache = try Cache(path: path, options: .init(capacity: .megabytes(2)))
        for index in 0..<200 { try cache.set(Data("value \(index)".utf8), forKey: "k\(index)") }
        for index in stride(from: 0, to: 200, by: 2) { try cache.removeValue(forKey: "k\(index)") }
        try cache.set(Note(text: "first"), forKey: "n")
        #expect(try cache.value(Note.self, forKey: "n")?.text == "first")
        let before = try inode(path)

        // Open, the handle keeps the tool out.
        try Larder.expect(["compact", path], status: 2)
        try cache.suspend()
        #expect(cache.isSuspended)
        try Larder.expect(["compact", path], stdout: nil)
        try Larder.expect(["put", path, "n", "-"], input: JSONEncoder().encode(Note(text: "after compaction")))
        #expect(try inode(path) != before)
        expectSuspended { _ = try cache.data(forKey: "k1") }

        try cache.resume()
        #expect(!cache.isSuspended)
        #expect(try cache.value(Note.self, forKey: "n")?.text == "after compaction")
        for index in 0..<200 {
            let expected = index % 2 == 0 ? nil : Data("value \(index)".utf8)
            #expect(try cache.data(forKey: "k\(index)") == expected, "k\(index)")
        }
        try cache.set(Data("written after resume".utf8), forKey: "late")
        try cache.close()
        try Larder.expect(["get", path, "late"], stdout: "written after resume")
        try Larder.expect(["verify", path], stdout: nil)
    }

    private func inode(_ path: String) throws -> Int {
        try #require(try FileManager.default.attributesOfItem(atPath: path)[.systemFileNumber] as? Int)
    }

    private func expectSuspended(sourceLocation: SourceLocation = #_sourceLocation, _ body: () throws -> Void) {
        let error = #expect(throws: LarderError.self, sourceLocation: sourceLocation) { try body() }
        #expect(error?.code == .suspended, sourceLocation: sourceLocation)
    }
}

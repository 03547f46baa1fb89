import Foundation
import Larder
import Testing

/// A value kept in a parent's memory tier, changed by the `larder` tool or by a C program: the
/// parent's next typed read returns what the file now holds.
@Suite("Memory tier and other writers", .waitsOnItsOwnThreads)
struct MemoryCoherenceToolTests {
    struct Note: Codable, Equatable {
        var text: String
    }

    private static func json(_ text: String) throws -> Data {
        try JSONEncoder().encode(Note(text: text))
    }

    /// A cache whose key "n" is kept in memory, read once from there.
    private func remembered(at path: String) throws -> Cache {
        let cache = try Cache(path: path)
        try cache.set(Note(text: "first"), forKey: "n")
        #expect(try cache.value(Note.self, forKey: "n")?.text == "first")
        #expect(cache.stats.memoryHits == 1)
        return cache
    }

    @Test func aPutDeleteAndClearByTheToolAreRead() throws {
        let directory = TemporaryDirectory()
        let path = directory.url.appendingPathComponent("c.larder").path
        let cache = try remembered(at: path)
        try Larder.expect(["put", path, "n", "-"], input: Self.json("from the tool"))
        #expect(try cache.value(Note.self, forKey: "n")?.text == "from the tool")
        try Larder.expect(["delete", path, "n"])
        #expect(try cache.value(Note.self, forKey: "n") == nil)
        try cache.set(Note(text: "again"), forKey: "n")
        try Larder.expect(["clear", path], stdout: nil)
        #expect(try cache.value(Note.self, forKey: "n") == nil)
    }

    /// Compaction replaces the file, so the tool refuses while a handle has it open; a handle
    /// opened after it reads the compacted file, its memory empty.
    @Test func compactionByTheToolWaitsForTheHandleAndANewHandleReadsTheNewFile() throws {
        let directory = TemporaryDirectory()
        let path = directory.url.appendingPathComponent("c.larder").path
        let cache = try remembered(at: path)
        try Larder.expect(["compact", path], status: 2)
        #expect(try cache.value(Note.self, forKey: "n")?.text == "first")
        try cache.close()
        try Larder.expect(["put", path, "n", "-"], input: Self.json("before compaction"))
        try Larder.expect(["compact", path], stdout: nil)
        let reopened = try Cache(path: path)
        #expect(try reopened.value(Note.self, forKey: "n")?.text == "before compaction")
        #expect(reopened.stats.memoryHits == 0)
        #expect(try reopened.value(Note.self, forKey: "n")?.text == "before compaction")
        #expect(reopened.stats.memoryHits == 1)
    }

    /// The built C library, beside the test runner.
    static let cLibrary: String? = {
        #if canImport(Darwin)
        let name = "libLarderC.dylib"
        #else
        let name = "libLarderC.so"
        #endif
        return Larder.builtProgram(name).map(\.path)
            ?? Larder.builtProgram("larder").map { $0.deletingLastPathComponent().appendingPathComponent(name).path }
                .flatMap { FileManager.default.fileExists(atPath: $0) ? $0 : nil }
    }()

    /// A child process writes through the C ABI (`larder_open`, `larder_put`, `larder_delete`,
    /// `larder_close`), loaded from the built library.
    @Test(.enabled(if: cLibrary != nil, "needs the built LarderC library"))
    func aWriterUsingTheCLibraryIsRead() async throws {
        let directory = TemporaryDirectory()
        let path = directory.url.appendingPathComponent("c.larder").path
        let library = try #require(Self.cLibrary)
        let cache = try remembered(at: path)
        let value = try Self.json("from C")
        await #expect(processExitsWith: .success) { [path = path as String, library = library as String, value = value as Data] in
            exit(CWriter(library: library)?.put(path: path, key: "n", value: value) == 0 ? 0 : 1)
        }
        #expect(try await cache.value(Note.self, forKey: "n")?.text == "from C")
        await #expect(processExitsWith: .success) { [path = path as String, library = library as String] in
            exit(CWriter(library: library)?.delete(path: path, key: "n") == 0 ? 0 : 1)
        }
        #expect(try await cache.value(Note.self, forKey: "n") == nil)
    }
}

/// The few calls of the C ABI a writer needs, looked up in the library with `dlsym`.
struct CWriter {
    typealias Open = @convention(c) (UnsafePointer<CChar>, UnsafeRawPointer?, UnsafeMutablePointer<OpaquePointer?>) -> Int32
    typealias Put = @convention(c) (OpaquePointer, UnsafeRawPointer, Int, UnsafeRawPointer, Int, UInt64) -> Int32
    typealias Delete = @convention(c) (OpaquePointer, UnsafeRawPointer, Int) -> Int32
    typealias Close = @convention(c) (OpaquePointer) -> Int32
    let open: Open, put: Put, delete: Delete, close: Close

    init?(library: String) {
        guard let handle = dlopen(library, RTLD_NOW | RTLD_LOCAL),
              let open = dlsym(handle, "larder_open"), let put = dlsym(handle, "larder_put"),
              let delete = dlsym(handle, "larder_delete"), let close = dlsym(handle, "larder_close") else { return nil }
        self.open = unsafeBitCast(open, to: Open.self)
        self.put = unsafeBitCast(put, to: Put.self)
        self.delete = unsafeBitCast(delete, to: Delete.self)
        self.close = unsafeBitCast(close, to: Close.self)
    }

    /// Opens `path`, runs `body` with the handle, closes it; the first status not 0, or 0.
    private func with(_ path: String, _ body: (OpaquePointer) -> Int32) -> Int32 {
        var db: OpaquePointer?
        let opened = open(path, nil, &db)
        guard opened == 0, let db else { return opened == 0 ? -1 : opened }
        let status = body(db)
        let closed = close(db)
        return status != 0 ? status : closed
    }

    func put(path: String, key: String, value: Data) -> Int32 {
        with(path) { db in
            Array(key.utf8).withUnsafeBytes { keyBytes in
                value.withUnsafeBytes { valueBytes in
                    put(db, keyBytes.baseAddress!, keyBytes.count, valueBytes.baseAddress!, valueBytes.count, 0)
                }
            }
        }
    }

    func delete(path: String, key: String) -> Int32 {
        with(path) { db in
            Array(key.utf8).withUnsafeBytes { delete(db, $0.baseAddress!, $0.count) }
        }
    }
}

import Foundation

/// A Larder file path in a directory of its own, removed with it.
public final class TemporaryFile: Sendable {
    public let directory: URL
    public let path: String

    public init() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("larder-integrations-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        path = directory.appendingPathComponent("cache.larder").path
    }

    deinit { try? FileManager.default.removeItem(at: directory) }
}

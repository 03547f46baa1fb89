import Foundation
@_spi(Inspection) import Larder

/// Every command but `put` works on a file that exists, and says so in the same words when it
/// does not (rather than in the words of whichever call first failed to open it).
func requireExisting(_ path: String) throws {
    guard FileManager.default.fileExists(atPath: path) else {
        throw LarderError(.invalidArgument, "no such file", path: path)
    }
}

/// Opens an existing cache read-write: unlike `Cache(path:)`, never creates a file.
func openExisting(_ path: String) throws -> Cache {
    try requireExisting(path)
    return try Cache(path: path)
}

/// The inspection view of an existing file.
func inspectExisting(_ path: String) throws -> FileInspector {
    try requireExisting(path)
    return try FileInspector(path: path)
}

import Foundation
import Testing
@testable import Larder

/// The Apple file options: kept in the options, taken by every open and resume, and applied on
/// Apple platforms (accepted with no effect elsewhere).
@Suite("File protection and backup options")
struct FileOptionsTests {
    @Test(arguments: FileProtection.allCases)
    func everyProtectionClassOpensAndIsKept(_ protection: FileProtection) throws {
        let directory = TemporaryDirectory()
        let path = directory.path()
        let cache = try Cache(path: path, options: .init(capacity: .megabytes(1), fileProtection: protection,
                                                         excludedFromBackup: true))
        #expect(cache.options.fileProtection == protection && cache.options.excludedFromBackup)
        try cache.set(Data("v".utf8), forKey: "k")
        try cache.suspend()
        try cache.resume()
        #expect(try cache.data(forKey: "k") == Data("v".utf8))
        #if canImport(Darwin)
        let values = try URL(fileURLWithPath: path).resourceValues(forKeys: [.isExcludedFromBackupKey])
        #expect(values.isExcludedFromBackup == true)
        #endif
    }

    @Test func theDefaultsSetNothing() {
        let options = Cache.Options()
        #expect(options.fileProtection == .systemDefault && !options.excludedFromBackup)
        // The C constants are the raw values (larder_options.file_protection).
        #expect(FileProtection.allCases.map(\.rawValue) == [0, 1, 2, 3, 4])
    }

    @Test func aReadOnlyOpenTakesTheOptionsAndChangesNothing() throws {
        let directory = TemporaryDirectory()
        let path = directory.path()
        try Cache(path: path, options: .init(capacity: .megabytes(1))).close()
        let reader = try Cache(path: path, options: .init(readOnly: true, fileProtection: .none, excludedFromBackup: true))
        #expect(reader.count == 0)
    }
}

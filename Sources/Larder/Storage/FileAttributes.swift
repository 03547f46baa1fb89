import Foundation

/// The attributes an app asks a cache file to have on Apple platforms: a data protection class
/// (set on a file the open created) and the exclusion from backups (set on every open, as a
/// compaction's new file does not inherit it). Elsewhere nothing is set.
enum FileAttributes {
    /// Applies what `options` ask for to the file at `path`, which the open just `created` or
    /// found. Read-only handles change nothing.
    static func apply(_ options: Cache.Options, to path: String, created: Bool) throws(LarderError) {
        #if canImport(Darwin)
        guard !options.readOnly else { return }
        if created, let type = protectionType(options.fileProtection) {
            do {
                try FileManager.default.setAttributes([.protectionKey: type], ofItemAtPath: path)
            } catch {
                throw LarderError(.io, "could not set the file's protection class: \(error.localizedDescription)", path: path)
            }
        }
        if options.excludedFromBackup {
            var url = URL(fileURLWithPath: path)
            var values = URLResourceValues()
            values.isExcludedFromBackup = true
            do {
                try url.setResourceValues(values)
            } catch {
                throw LarderError(.io, "could not exclude the file from backups: \(error.localizedDescription)", path: path)
            }
        }
        #endif
    }

    #if canImport(Darwin)
    private static func protectionType(_ protection: FileProtection) -> FileProtectionType? {
        switch protection {
        case .systemDefault: nil
        case .complete: .complete
        case .completeUnlessOpen: .completeUnlessOpen
        case .completeUntilFirstUserAuthentication: .completeUntilFirstUserAuthentication
        case .none: FileProtectionType.none
        }
    }
    #endif
}

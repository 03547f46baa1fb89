#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Which file a path or a descriptor names: its device and inode.
///
/// Two paths, or a path and a descriptor, name one file exactly when their identities are equal.
/// A file renamed over a path gives that path a new identity.
struct FileIdentity: Hashable {
    let device: UInt64
    let inode: UInt64

    init(_ info: stat) {
        device = UInt64(truncatingIfNeeded: info.st_dev)
        inode = UInt64(truncatingIfNeeded: info.st_ino)
    }

    /// The file `path` names now (symbolic links followed); nil when there is none.
    init?(path: String) {
        guard let info = try? SystemCall.status(path) else { return nil }
        self.init(info)
    }

    /// The file `descriptor` has open; nil when the descriptor is not open.
    init?(descriptor: Int32) {
        guard let info = try? SystemCall.status(descriptor: descriptor) else { return nil }
        self.init(info)
    }
}

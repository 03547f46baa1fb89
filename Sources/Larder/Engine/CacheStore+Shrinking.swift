/// Lowering the capacity of a file that has already grown past it.
///
/// The ring cannot simply be cut short: records and index segments lie anywhere in it. So an
/// open that is alone with the file writes the newest entries that fit into a new file of the
/// smaller capacity and renames it over the old one while it holds the old file's locks: what
/// `larder compact --capacity` does (FORMAT.md 6.7). Opens of other processes that waited for
/// those locks find that the path names a new file, and open that one.
extension CacheStore {
    /// The capacity `configuration` asks for, when it is below the file's and the file has grown
    /// past it; nil when the file can take the capacity asked for as it is, or keeps its own.
    static func smallerCapacity(_ meta: Meta, _ configuration: Configuration) -> Int? {
        guard let asked = requestedCapacity(meta, configuration), asked < meta.fileSize,
              meta.writeVersion <= FileLayout.formatVersion else { return nil }
        return asked
    }

    /// The capacity `configuration` asks of the file `meta` describes, rounded up to its page
    /// size; nil when it asks for none, or for less than the file's page size allows (the
    /// options' page size is a new file's, not this one's).
    static func requestedCapacity(_ meta: Meta, _ configuration: Configuration) -> Int? {
        guard let asked = configuration.capacity.map({ FileLayout.alignUp($0, meta.pageSize) }),
              asked >= FileLayout.minimumCapacity(pageSize: meta.pageSize) else { return nil }
        return asked
    }

    /// Replaces the file at `path` (open as `descriptor`, its locks held) with one of `capacity`
    /// bytes that holds its newest entries that check out, with their expiry and compression,
    /// its owner and its permission bits. Returns false, the file untouched, when that cannot be
    /// done (no room on the disk for the copy, a directory this process may not write in, other
    /// hard links to the file): the file then keeps its capacity.
    static func rewrite(_ path: String, _ descriptor: FileDescriptor, capacity: Int) -> Bool {
        (try? FileInspector.compact(path: path, lockedAs: descriptor, capacity: capacity)) != nil
    }
}

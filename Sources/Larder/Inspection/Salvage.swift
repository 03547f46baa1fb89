import Foundation

/// What a salvage kept and what it left behind.
@_spi(Inspection) public struct SalvageReport: Sendable {
    public struct Dropped: Sendable {
        /// Where the record was, when that is known.
        public let offset: Int?
        public let key: [UInt8]?
        /// The key was read from a header that no longer checks out.
        public let keyIsProbable: Bool
        public let reason: String
    }

    /// The file written.
    public let outputPath: String
    /// Entries written to it, oldest first.
    public let kept: [EntryRecord]
    /// Damaged entries, unreadable records and entries that could not be written.
    public let dropped: [Dropped]
    /// Entries left out because their time was up.
    public let expired: Int
    /// Entries that checked out but did not fit a smaller capacity (the oldest ones).
    public let evicted: Int
    /// Bytes of the source file and of the file written.
    public let sourceBytes: Int
    public let outputBytes: Int
}

extension FileInspector {
    /// Copies every entry that checks out into a new cache file at `outputPath`, through the
    /// public `Cache` API, and reports what it could not copy.
    ///
    /// An entry is kept when its header and data checksums hold, a compressed value decodes, it
    /// is current (live, not cleared) and not expired, and no newer version of its key that
    /// checks out exists; the choice is the one recovery makes (docs/FORMAT.md 7.4), but it
    /// changes nothing in this file. Entries go in oldest first, so the new file's recency
    /// order is the old one's; each keeps its expiry time and its compression. Access bits and
    /// statistics counters start afresh.
    ///
    /// The new file has this file's page size, and its capacity unless `capacity` names
    /// another. A smaller capacity keeps the newest entries it can hold: older ones are left out
    /// (`SalvageReport.evicted`), as eviction would have taken them first. The new file is
    /// written under a temporary name beside `outputPath` and renamed to it when complete, so
    /// `outputPath` is either the old file or the whole new one, never half of it. An entry the
    /// new file refuses as too large is left out; any other failure to write (a full disk)
    /// leaves `outputPath` as it was and throws.
    ///
    /// - Throws: `.invalidArgument` when `outputPath` names the file being read, under any
    ///   spelling (a relative path, a symbolic or hard link): renaming a new file over it would
    ///   take it from under the processes that have it open, with their locks (`compact(path:capacity:progress:)` is
    ///   the rebuild in place, which waits for them).
    public func salvage(into outputPath: String, capacity: Int? = nil, permissions: UInt16 = 0o600,
                        progress: ((Int, Int) -> Void)? = nil) throws(LarderError) -> SalvageReport {
        if try file.descriptor.isStillLinked(at: outputPath) {
            throw LarderError(.invalidArgument, "the output is the file being read; compacting rebuilds a file in place",
                              path: outputPath)
        }
        return try salvage(into: outputPath, capacity: capacity, attributes: .init(permissions: permissions),
                    temporary: outputPath + ".larder-tmp-\(SystemCall.processID())", progress: progress)
    }

    /// Who owns the file a salvage writes, and its permission bits (set exactly, whatever the
    /// umask).
    struct FileAttributes {
        var permissions: UInt16
        var owner: (user: UInt32, group: UInt32)?
    }

    private func salvage(into outputPath: String, capacity: Int?, attributes: FileAttributes, temporary: String,
                         progress: ((Int, Int) -> Void)?) throws(LarderError) -> SalvageReport {
        let walk = walk(decodeValues: true, progress: progress)
        var newest: [[UInt8]: EntryRecord] = [:]
        var dropped: [SalvageReport.Dropped] = []
        var damagedRegions = Set<Int>()
        for region in walk.regions {
            switch region.kind {
            case .entry(let entry) where entry.isCurrent:
                if let damage = entry.damage {
                    dropped.append(.init(offset: entry.offset, key: entry.key, keyIsProbable: false, reason: damage))
                } else if newest[entry.key].map({ $0.sequence < entry.sequence }) ?? true {
                    newest[entry.key] = entry
                }
            case .damaged(let probableKey):
                damagedRegions.insert(region.offset)
                dropped.append(.init(offset: region.offset, key: probableKey, keyIsProbable: probableKey != nil,
                                     reason: "unreadable record (\(region.size) bytes)"))
            default:
                break
            }
        }
        // The index still names entries whose records are gone (a truncated file, a header that
        // no longer checks out outside the walked span): lost, key unknown.
        for finding in walk.indexFindings where finding.problem == .noEntry && !damagedRegions.contains(finding.offset) {
            dropped.append(.init(offset: finding.offset, key: nil, keyIsProbable: false,
                                 reason: "named by the \(finding.table) index, but no entry that checks out is there"))
        }

        let capacity = capacity ?? meta.capacity
        let now = SystemCall.nowMilliseconds()
        var expired = 0
        var current: [EntryRecord] = []
        for entry in newest.values {
            if entry.isExpired(now: now, maximumAge: meta.maximumAge) { expired += 1 } else { current.append(entry) }
        }
        // Newest first, as many as the new capacity could hold; writing the older ones too would
        // only have them evicted again. One that no file of this capacity could ever hold (beside
        // its header pages and smallest index) is passed over, not a reason to stop.
        current.sort { $0.sequence > $1.sequence }
        var fitting: [EntryRecord] = []
        let overhead = FileLayout.dataStart(pageSize: meta.pageSize)
            + IndexSegment.byteCount(slotCount: HashTable.minimumSlotCount, pageSize: meta.pageSize)
        var bytes = overhead
        for entry in current where overhead + entry.recordSize <= capacity {
            guard bytes + entry.recordSize <= capacity else { break }
            bytes += entry.recordSize
            fitting.append(entry)
        }
        var evicted = current.count - fitting.count

        SystemCall.remove(temporary)
        var written: [EntryRecord] = []
        var kept: [EntryRecord] = []
        do throws(LarderError) {
            let cache = try Cache(path: temporary, options: .init(
                capacity: .bytes(capacity), pageSize: meta.pageSize, permissions: attributes.permissions,
                compressionThreshold: 0,
                countLimit: meta.countLimit == 0 ? nil : Int(clamping: meta.countLimit),
                maximumAge: meta.maximumAge == 0 ? nil : Double(meta.maximumAge) / 1000))
            for entry in fitting.reversed() {
                guard let value = value(of: entry) else {
                    dropped.append(.init(offset: entry.offset, key: entry.key, keyIsProbable: false,
                                         reason: "changed while being read"))
                    continue
                }
                do throws(LarderError) {
                    try cache.set(value, forKey: entry.key, expiry: FileInspector.expiry(entry.expiresAt),
                                  compression: entry.isCompressed ? .lz4 : Compression.none)
                    written.append(entry)
                } catch where error.code == .tooLarge || error.code == .invalidArgument {
                    dropped.append(.init(offset: entry.offset, key: entry.key, keyIsProbable: false,
                                         reason: "not written: \(error.message)"))
                }
            }
            // The index and the ring's own room count too: the oldest of what was written may
            // have made way for the newest.
            for entry in written {
                if try cache.containsValue(forKey: entry.key) { kept.append(entry) } else { evicted += 1 }
            }
            try cache.close()
            try Self.apply(attributes, to: temporary)
            try SystemCall.rename(temporary, to: outputPath)
        } catch {
            SystemCall.remove(temporary)
            // The temporary name means nothing to the caller, who named only the output.
            throw error.path == temporary ? LarderError(error.code, "writing the copy: \(error.message)", path: outputPath) : error
        }
        let outputBytes = (try? FileManager.default.attributesOfItem(atPath: outputPath)[.size] as? Int) ?? 0
        dropped.sort { ($0.offset ?? 0) < ($1.offset ?? 0) }
        return SalvageReport(outputPath: outputPath, kept: kept, dropped: dropped, expired: expired,
                             evicted: evicted, sourceBytes: diskSize, outputBytes: outputBytes)
    }

    /// The same instant as `milliseconds` (since the epoch) as an `Expiry`. `Expiry.date`
    /// rounds up to whole milliseconds, so half a millisecond less lands exactly on it.
    static func expiry(_ milliseconds: UInt64) -> Expiry {
        milliseconds == 0 ? .never : .date(Date(timeIntervalSince1970: (Double(milliseconds) - 0.5) / 1000))
    }

    /// Rebuilds the cache at `path` in place: salvages it into a new file beside it and renames
    /// that over it. Takes the cache's locks first (docs/FORMAT.md 7.1), so it refuses with
    /// `.busy` while any process has the file open, and no process can open it until it is done.
    ///
    /// A process that opened the old file just before the rename and waits for the locks finds,
    /// once it has them, that the path names another file, and opens that one instead.
    /// `capacity` gives the new file another capacity; a smaller one keeps the newest entries
    /// that fit.
    public static func compact(path: String, capacity: Int? = nil,
                               progress: ((Int, Int) -> Void)? = nil) throws(LarderError) -> SalvageReport {
        let descriptor = try FileDescriptor.open(path, create: false, readOnly: false, permissions: 0)
        defer { descriptor.close() }
        try descriptor.lock(byte: CacheStore.LockByte.transition, .exclusive, wait: true)
        // Byte 1 is held by every read-write handle, byte 3 by every handle at all.
        guard try descriptor.lock(byte: CacheStore.LockByte.writers, .exclusive, wait: false),
              try descriptor.lock(byte: CacheStore.LockByte.users, .exclusive, wait: false) else {
            throw LarderError(.busy, "the cache is open in another process", path: path)
        }
        defer {
            _ = try? descriptor.lock(byte: CacheStore.LockByte.users, .unlock, wait: false)
            _ = try? descriptor.lock(byte: CacheStore.LockByte.writers, .unlock, wait: false)
            _ = try? descriptor.lock(byte: CacheStore.LockByte.transition, .unlock, wait: false)
        }
        return try compact(path: path, lockedAs: descriptor, capacity: capacity, progress: progress)
    }

    /// `compact` for a caller that holds every lock of the file at `path`, open as `descriptor`
    /// (a compaction, or an open that lowers the capacity). The new file takes the old one's
    /// owner and permission bits, and replaces the file a symbolic link at `path` names, not the
    /// link. A file with other hard links is refused: the others would keep the old file.
    static func compact(path: String, lockedAs descriptor: FileDescriptor, capacity: Int?,
                        progress: ((Int, Int) -> Void)? = nil) throws(LarderError) -> SalvageReport {
        let info: stat
        do throws(LarderError) {
            info = try SystemCall.status(descriptor: descriptor.rawValue)
        } catch {
            throw error.at(path)
        }
        guard info.st_nlink <= 1 else {
            throw LarderError(.busy, "the file has \(info.st_nlink) hard links; the others would keep the old file", path: path)
        }
        let target: String
        do throws(LarderError) {
            target = try SystemCall.resolve(path)
        } catch {
            throw error.at(path)
        }
        guard try descriptor.isStillLinked(at: target) else {
            throw LarderError(.busy, "the path was pointed at another file meanwhile", path: path)
        }
        let attributes = FileAttributes(permissions: UInt16(truncatingIfNeeded: info.st_mode & 0o7777),
                                        owner: (UInt32(info.st_uid), UInt32(info.st_gid)))
        // The inspector's descriptor stays open until the rename is done, as the locks are held
        // on `descriptor` (where locks belong to the process, `ProcessLockTable` would park it).
        let inspector = try FileInspector(path: target)
        return try withExtendedLifetime(inspector) { () throws(LarderError) in
            // A fixed name: the locks keep others out, and a copy a crash left is replaced.
            try inspector.salvage(into: target, capacity: capacity, attributes: attributes,
                                  temporary: target + ".larder-tmp", progress: progress)
        }
    }

    /// Gives the file at `path` this owner, when it has another, and exactly these permission
    /// bits (after the owner: changing it clears the set-id bits). A file that changed hands
    /// would lock its owner out of their own cache; one whose group cannot be given back (an
    /// owner who is not in it) stays with its owner, in the group the owner's files get.
    private static func apply(_ attributes: FileAttributes, to path: String) throws(LarderError) {
        do throws(LarderError) {
            if let owner = attributes.owner {
                let info = try SystemCall.status(path)
                if (UInt32(info.st_uid), UInt32(info.st_gid)) != owner {
                    do throws(LarderError) {
                        try SystemCall.changeOwner(path, user: owner.user, group: owner.group)
                    } catch where UInt32(info.st_uid) == owner.user {
                        // The owner is right; only the group could not be given back.
                    }
                }
            }
            try SystemCall.changeMode(path, to: mode_t(attributes.permissions))
        } catch {
            throw error.at(path)
        }
    }
}

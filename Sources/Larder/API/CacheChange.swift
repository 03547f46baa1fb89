import Foundation

/// A change to a cache, made by this process or another: what a watch started with
/// ``Cache/changes(forKey:)``, ``Cache/changes(forKeysWithPrefix:)`` or ``Cache/changes()``
/// delivers.
///
/// A watch may coalesce changes: after the last write it delivers, its last change describes
/// that write.
public struct CacheChange: Sendable, Hashable {
    /// What happened.
    public enum Kind: Sendable, Hashable {
        /// A value was stored for the key.
        case stored
        /// The key's entry was removed by a caller: a remove, a removal by prefix or by age.
        case removed
        /// The key's entry was dropped to make room.
        case evicted
        /// The key's entry was dropped because its time was up. An entry expires when its time
        /// is up, but is reported only when a writer drops it.
        case expired
        /// Every entry was removed (``Cache/removeAll()``).
        case cleared
        /// The watch lost track: more changes came than the file keeps, or the file was
        /// rebuilt. Look at the keys you watch again. A watch of one key never reports this: it
        /// looks itself, and reports `stored` or `removed`.
        case resynced
    }

    /// What happened.
    public let kind: Kind
    /// The key it happened to; nil for `cleared` and `resynced` on a watch of a prefix or of
    /// everything.
    public let key: Data?

    /// A change of `kind` to `key`.
    public init(_ kind: Kind, key: Data?) {
        self.kind = kind
        self.key = key
    }
}

extension CacheChange.Kind {
    init(_ kind: ChangeRing.Kind) {
        switch kind {
        case .stored: self = .stored
        case .removed: self = .removed
        case .evicted: self = .evicted
        case .expired: self = .expired
        case .cleared: self = .cleared
        case .rebuilt: self = .resynced
        }
    }
}

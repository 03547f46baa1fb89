extension Cache {
    /// What the cache holds for `key`: the value's lengths, its compression, when it was stored,
    /// when it expires and whether it was read. Nil when the key is missing or expired.
    ///
    /// It reads the entry's header only, as a get does: no lock, no value byte, no checksum of
    /// the value. It counts no hit or miss and does not mark the entry read.
    ///
    /// - Throws: `.invalidArgument` for an empty key, `.tooLarge` for one over 4096 bytes,
    ///   `.closed`, `.suspended`.
    ///
    /// The corresponding C function is `larder_entry_info`.
    public func entryDetails(forKey key: some CacheKey) throws(LarderError) -> EntryDetails? {
        try key.withCacheKeyBytes { keyBytes in
            Result { () throws(LarderError) in
                try read(keyBytes) { (loan, view) throws(LarderError) in
                    try loan.lend { (store) throws(LarderError) in
                        try store.liveHeader(forKey: keyBytes, in: view).map { EntryDetails(header: $0.header, wasRead: $0.wasRead) }
                    }
                }
            }
        }.get()
    }
}

/// The last check of a remembered object against the file that can stand in for the next ones:
/// while the file's write count is still the one seen then, no writer has changed the file
/// (FORMAT.md 7.7.8, checking by the write count), and only the clock can end the entry.
struct MemoryCheck: Equatable, Sendable {
    /// The store checked against (`CacheStore.serial`); 0 for no check.
    let store: UInt64
    /// The file's write count through the check (even).
    let writeCount: UInt64
    /// The first millisecond at which the entry is expired; `.max` for never.
    let deadline: UInt64

    /// No check yet: the next read checks the file.
    static let none = MemoryCheck(store: 0, writeCount: 1, deadline: 0)
}

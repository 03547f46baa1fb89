/// An error from a Larder cache: what went wrong, in words, and the file it concerns.
///
/// Every failure of the library surfaces as a `LarderError`; no call traps on bad input or on a
/// damaged file. The ``Code`` values correspond one-to-one to the negative status codes of the
/// C API (`LARDER_INVALID_ARGUMENT`, `LARDER_TOO_LARGE`, ...).
public struct LarderError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The kind of failure. Stable across releases: match on it, not on the message.
    public struct Code: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        /// The C API's status code: negative, `LARDER_INVALID_ARGUMENT` (-1) and on.
        public let rawValue: Int32
        /// The code for the C API's status `rawValue`; unknown values are kept as they are.
        public init(rawValue: Int32) { self.rawValue = rawValue }

        /// A key, value, option or argument is not acceptable (empty key, bad page size, ...).
        public static let invalidArgument = Code(rawValue: -1)
        /// A key or value is larger than the cache can ever hold.
        public static let tooLarge = Code(rawValue: -2)
        /// The operating system refused a file operation (see the message for errno's text).
        public static let io = Code(rawValue: -3)
        /// The file (or the value asked for) is damaged: a value that fails its checksum, or a
        /// file that no open can use as it is.
        public static let corrupt = Code(rawValue: -4)
        /// The file is not a Larder cache, or needs a newer version of Larder.
        public static let incompatible = Code(rawValue: -5)
        /// A write was attempted on a cache opened read-only.
        public static let readOnly = Code(rawValue: -6)
        /// Memory could not be allocated.
        public static let noMemory = Code(rawValue: -7)
        /// The disk or the file system refused to give the cache more room.
        public static let full = Code(rawValue: -8)
        /// The cache was closed; or it was opened by the parent of this process, before it forked
        /// (a child process opens the file again to use it).
        public static let closed = Code(rawValue: -9)
        /// Another process has the file open in a way that excludes this open; or other writers
        /// kept changing what a read looked at for over 5 s; or `withValue` calls lend out records
        /// all round the cache, so a write found no room (it may succeed once they return).
        public static let busy = Code(rawValue: -10)
        /// The cache is suspended (``Cache/suspend()``): it holds no lock on its file until
        /// ``Cache/resume()``.
        public static let suspended = Code(rawValue: -11)

        /// The code in a few words: "invalid argument", "disk full", ...
        ///
        /// The corresponding C function is `larder_strerror`.
        public var description: String {
            switch self {
            case .invalidArgument: "invalid argument"
            case .tooLarge: "too large"
            case .io: "I/O error"
            case .corrupt: "corrupt file"
            case .incompatible: "incompatible file"
            case .readOnly: "read-only"
            case .noMemory: "out of memory"
            case .full: "disk full"
            case .closed: "closed"
            case .busy: "busy"
            case .suspended: "suspended"
            default: "error \(rawValue)"
            }
        }
    }

    /// The kind of failure.
    public let code: Code
    /// What happened, for a person reading a log.
    ///
    /// The corresponding C function is `larder_last_error_message`.
    public let message: String
    /// The cache file concerned, when there is one.
    public let path: String?

    /// An error of kind `code`, described by `message`, concerning the file at `path`.
    public init(_ code: Code, _ message: String, path: String? = nil) {
        self.code = code
        self.message = message
        self.path = path
    }

    /// The code, the file and the message, for a log: `Larder corrupt file (app.larder): ...`.
    public var description: String {
        if let path { return "Larder \(code) (\(path)): \(message)" }
        return "Larder \(code): \(message)"
    }

    /// Internal: a reader's view of the file is out of date; the caller refreshes it and reads
    /// again. Never surfaces from the public API.
    static let staleView = LarderError(Code(rawValue: -100), "the view of the file is out of date")

    /// Internal: an open that was not to wait found another process opening, closing, repairing
    /// or compacting the file; the caller waits elsewhere and opens again. Never surfaces from the
    /// public API.
    static let otherProcessInTransition = LarderError(Code(rawValue: -101), "another process is in transition on the file")

    /// The same error, naming `path` when it did not name a file yet.
    func at(_ path: String) -> LarderError {
        self.path == nil ? LarderError(code, message, path: path) : self
    }
}

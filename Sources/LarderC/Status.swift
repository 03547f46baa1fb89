import CLarderABI
import Larder

/// A status code carried as a Swift error while arguments are converted.
struct StatusError: Error {
    let status: Int32

    /// `LARDER_INVALID_ARGUMENT`, with `message` as this thread's last error.
    static func invalid(_ message: String) -> StatusError {
        StatusError(status: Status.invalid(message))
    }
}

/// Status codes of the C API, and the conversions from Swift's errors.
enum Status {
    static let ok: Int32 = LARDER_OK
    static let notFound: Int32 = LARDER_NOT_FOUND
    static let bufferTooSmall: Int32 = LARDER_BUFFER_TOO_SMALL

    /// The status for `error`, after recording its message as this thread's last error.
    static func of(_ error: any Error) -> Int32 {
        if let error = error as? StatusError { return error.status }
        guard let error = error as? LarderError else {
            LastError.set(LarderError(.io, "\(error)").description)
            return LARDER_IO
        }
        LastError.set(error.description)
        return error.code.rawValue
    }

    /// `LARDER_INVALID_ARGUMENT`, with `message` as this thread's last error.
    static func invalid(_ message: String) -> Int32 {
        LastError.set(LarderError(.invalidArgument, message).description)
        return LARDER_INVALID_ARGUMENT
    }

    static func describe(_ status: Int32) -> StaticString {
        switch status {
        case LARDER_OK: "ok"
        case LARDER_NOT_FOUND: "not found"
        case LARDER_BUFFER_TOO_SMALL: "buffer too small"
        case LARDER_INVALID_ARGUMENT: "invalid argument"
        case LARDER_TOO_LARGE: "too large"
        case LARDER_IO: "I/O error"
        case LARDER_CORRUPT: "corrupt file"
        case LARDER_INCOMPATIBLE: "incompatible file"
        case LARDER_READ_ONLY: "read-only"
        case LARDER_NO_MEMORY: "out of memory"
        case LARDER_FULL: "disk full"
        case LARDER_CLOSED: "closed"
        case LARDER_BUSY: "busy"
        case LARDER_SUSPENDED: "suspended"
        default: "unknown status"
        }
    }
}

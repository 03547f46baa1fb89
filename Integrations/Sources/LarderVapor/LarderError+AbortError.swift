import Larder
import Vapor

/// A failure of the cache file answers a request as a server error: 503 with `Retry-After` when
/// the file is busy (writers of other processes held it past a read's patience), 500 otherwise.
/// The message stays in the log: `reason` is the code alone.
extension LarderError: @retroactive AbortError {
    public var status: HTTPResponseStatus {
        code == .busy ? .serviceUnavailable : .internalServerError
    }

    public var reason: String { "cache \(code)" }

    public var headers: HTTPHeaders {
        code == .busy ? ["Retry-After": "1"] : [:]
    }
}

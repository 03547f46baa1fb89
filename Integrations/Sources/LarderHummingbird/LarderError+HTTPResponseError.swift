import Hummingbird
import Larder

/// A failure of the cache file answers a request as a server error: 503 with `Retry-After` when
/// the file is busy (writers of other processes held it past a read's patience), 500 otherwise.
/// The message stays in the log, not in the response.
extension LarderError: @retroactive HTTPResponseError {
    public var status: HTTPResponse.Status {
        code == .busy ? .serviceUnavailable : .internalServerError
    }

    public func response(from request: Request, context: some RequestContext) throws -> Response {
        var headers = HTTPFields()
        if code == .busy { headers[.retryAfter] = "1" }
        return Response(status: status, headers: headers)
    }
}

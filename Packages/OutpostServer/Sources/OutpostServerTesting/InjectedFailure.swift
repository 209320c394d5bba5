import OutpostWire

/// A failure `InProcessServer` plays instead of (or after) serving a request, to test how the
/// engine copes with a bad network or an unhappy server.
public enum InjectedFailure: Sendable, Hashable {
    /// The request never arrives: nothing is applied, the caller sees no connection.
    case dropRequest
    /// The request is served (a push is applied) but the answer is lost: the caller sees a timeout.
    case dropResponse
    /// The server answers with this HTTP status, error code and optional `Retry-After`.
    case httpError(status: Int, code: ServerErrorCode, retryAfter: Duration?)

    /// HTTP 500 (or another 5xx), maybe with `Retry-After` (as 503s carry).
    public static func serverError(status: Int = 500, retryAfter: Duration? = nil) -> Self {
        .httpError(status: status, code: status == 503 ? .unavailable : .internal, retryAfter: retryAfter)
    }

    /// HTTP 429 with `Retry-After`.
    public static func rateLimited(retryAfter: Duration) -> Self {
        .httpError(status: 429, code: .rateLimited, retryAfter: retryAfter)
    }

    /// HTTP 401: the token expired.
    public static let unauthorized = Self.httpError(status: 401, code: .unauthorized, retryAfter: nil)
}

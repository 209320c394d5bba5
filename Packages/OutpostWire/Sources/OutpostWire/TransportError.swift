/// Why a request did not get a usable answer, classified so the retry policy and the engine know
/// whether to retry, fail the mutation or pause the queue; with the request, status and the
/// server's own code and message.
///
/// A struct with a code rather than an enum, so new kinds of failure never break a client's `switch`.
public struct TransportError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The kind of failure; compare with the static members.
    public struct Code: Sendable, Hashable, CustomStringConvertible {
        private enum Wrapped: String, Sendable, Hashable {
            case noConnection, timedOut, serverFailure, rateLimited, rejected, unauthorized, forbidden
            case unsupportedVersion, invalidResponse, cancelled
        }
        private let wrapped: Wrapped
        private init(_ wrapped: Wrapped) { self.wrapped = wrapped }

        /// Transient: no route to the server (offline, DNS failure, refused or lost connection).
        public static let noConnection = Code(.noConnection)
        /// Transient: no answer in time (including HTTP 408).
        public static let timedOut = Code(.timedOut)
        /// Transient: the server failed or is unavailable (5xx), maybe with `retryAfter`.
        public static let serverFailure = Code(.serverFailure)
        /// Transient: HTTP 429; `retryAfter` says when to come back.
        public static let rateLimited = Code(.rateLimited)
        /// Permanent: the server refused the request (4xx validation and the like); see `serverCode`.
        public static let rejected = Code(.rejected)
        /// HTTP 401: the credentials are missing or expired; pause until they are renewed.
        public static let unauthorized = Code(.unauthorized)
        /// HTTP 403: the caller may not see the project.
        public static let forbidden = Code(.forbidden)
        /// The server does not accept this client's protocol or schema version; the app needs an update.
        public static let unsupportedVersion = Code(.unsupportedVersion)
        /// Transient: the answer could not be read (not the protocol's JSON, such as a captive portal's page).
        public static let invalidResponse = Code(.invalidResponse)
        /// The request was cancelled by the caller.
        public static let cancelled = Code(.cancelled)

        /// Whether the same request may succeed later without anyone doing anything.
        public var isTransient: Bool {
            switch wrapped {
            case .noConnection, .timedOut, .serverFailure, .rateLimited, .invalidResponse, .cancelled: true
            case .rejected, .unauthorized, .forbidden, .unsupportedVersion: false
            }
        }

        public var description: String { wrapped.rawValue }
    }

    /// The kind of failure.
    public var code: Code
    /// The request, as `METHOD /path`.
    public var request: String
    /// The HTTP status, when the server answered.
    public var status: Int?
    /// The server's stable error code, when it sent the error body.
    public var serverCode: ServerErrorCode?
    /// The server's message, or what went wrong locally.
    public var message: String
    /// How long the server asked the client to wait (`Retry-After`).
    public var retryAfter: Duration?
    /// The error that caused this one, when another library or package raised it first (URL
    /// loading's `URLError`, a decoder's error, the file system); kept as a value so a caller can
    /// inspect it, beside its text in `message`.
    public var underlying: (any Error & Sendable)?

    /// Creates an error; `underlying` is the error that caused it, if any.
    public init(
        _ code: Code, request: String, status: Int? = nil, serverCode: ServerErrorCode? = nil, message: String,
        retryAfter: Duration? = nil, underlying: (any Error & Sendable)? = nil
    ) {
        self.code = code
        self.request = request
        self.status = status
        self.serverCode = serverCode
        self.message = ReportedMessage.bounded(message)
        self.retryAfter = retryAfter
        self.underlying = underlying
    }

    // Written by hand to leave `underlying` out: a cause is often not Equatable (`any Error` never is),
    // and two errors with the same code, message and place are the same failure to a caller.
    public static func == (lhs: TransportError, rhs: TransportError) -> Bool {
        lhs.code == rhs.code && lhs.request == rhs.request && lhs.status == rhs.status
            && lhs.serverCode == rhs.serverCode && lhs.message == rhs.message && lhs.retryAfter == rhs.retryAfter
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(code)
        hasher.combine(request)
        hasher.combine(status)
        hasher.combine(serverCode)
        hasher.combine(message)
        hasher.combine(retryAfter)
    }

    /// Classifies an HTTP error response by its status and the server's code (`body`, when it sent one).
    public init(request: String, status: Int, body: ErrorBody?, retryAfter: Duration?) {
        let code: Code =
            switch (status, body?.code) {
            case (_, .unsupportedProtocolVersion?), (_, .unsupportedSchemaVersion?): .unsupportedVersion
            case (401, _): .unauthorized
            case (403, _): .forbidden
            case (408, _): .timedOut
            case (429, _): .rateLimited
            case (500..., _): .serverFailure
            default: .rejected
            }
        self.init(
            code, request: request, status: status, serverCode: body?.code,
            message: body?.message ?? "HTTP \(status) without an error body", retryAfter: retryAfter)
    }

    /// Whether the same request may succeed later without anyone doing anything.
    public var isTransient: Bool { code.isTransient }

    public var description: String {
        var text = "\(request): \(message) [\(code)"
        if let status { text += ", HTTP \(status)" }
        if let serverCode { text += ", \(serverCode)" }
        return text + "]"
    }
}

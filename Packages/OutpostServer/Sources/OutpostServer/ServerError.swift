import Foundation
import OutpostWire

/// Why the server could not start, seed or serve: a code to branch on, a message, and the file
/// concerned. A request the server refuses carries the protocol's wire code and HTTP status too.
///
/// A struct with a code rather than an enum, so new kinds of failure never break a caller's `switch`.
public struct ServerError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The kind of failure; compare with the static members.
    public struct Code: Sendable, Hashable, CustomStringConvertible {
        private enum Wrapped: String, Sendable, Hashable {
            case invalidConfiguration, invalidSeed, databaseFailure, migrationFailed, mediaFailure, requestRefused
        }
        private let wrapped: Wrapped
        private init(_ wrapped: Wrapped) { self.wrapped = wrapped }

        /// A setting is out of range (a port, a limit, a folder that cannot be created).
        public static let invalidConfiguration = Code(.invalidConfiguration)
        /// The seed file is unreadable or names something inconsistent.
        public static let invalidSeed = Code(.invalidSeed)
        /// The SQLite file could not be opened, read or written.
        public static let databaseFailure = Code(.databaseFailure)
        /// The server's schema could not be created or migrated (a newer file, a changed step).
        public static let migrationFailed = Code(.migrationFailed)
        /// A media file could not be written or read next to the database.
        public static let mediaFailure = Code(.mediaFailure)
        /// A request was refused; `wireCode` and `httpStatus` say how it was answered.
        public static let requestRefused = Code(.requestRefused)

        public var description: String { wrapped.rawValue }
    }

    /// The kind of failure.
    public var code: Code
    /// What went wrong, for people and logs.
    public var message: String
    /// The file concerned (database, seed, media), when there is one.
    public var path: String?
    /// The protocol's error code a refused request is answered with.
    public var wireCode: ServerErrorCode?
    /// The HTTP status a refused request is answered with.
    public var httpStatus: Int?
    /// Seconds a client should wait before retrying (`Retry-After`), for 429 and 503.
    package var retryAfterSeconds: Int?
    /// The error that caused this one, when another library or package raised it first (SQLite,
    /// PostgreSQL, the file system, a decoder); kept as a value so a caller can inspect it, beside its
    /// text in `message`. Only logs see it: a client's error body carries `message` alone.
    public var underlying: (any Error & Sendable)?

    /// Creates an error; `underlying` is the error that caused it, if any.
    public init(_ code: Code, message: String, path: String? = nil, underlying: (any Error & Sendable)? = nil) {
        self.code = code
        self.message = message
        self.path = path
        self.underlying = underlying
    }

    /// A refused request, answered with `status` and the error body `wireCode`, `message`.
    init(
        status: Int, _ wireCode: ServerErrorCode, _ message: String, retryAfterSeconds: Int? = nil,
        underlying: (any Error & Sendable)? = nil
    ) {
        self.init(.requestRefused, message: message, underlying: underlying)
        self.wireCode = wireCode
        self.httpStatus = status
        self.retryAfterSeconds = retryAfterSeconds
    }

    // Written by hand to leave `underlying` out: a cause is often not Equatable (`any Error` never is),
    // and two errors with the same code, message and place are the same failure to a caller.
    public static func == (lhs: ServerError, rhs: ServerError) -> Bool {
        lhs.code == rhs.code && lhs.message == rhs.message && lhs.path == rhs.path && lhs.wireCode == rhs.wireCode
            && lhs.httpStatus == rhs.httpStatus && lhs.retryAfterSeconds == rhs.retryAfterSeconds
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(code)
        hasher.combine(message)
        hasher.combine(path)
        hasher.combine(wireCode)
        hasher.combine(httpStatus)
        hasher.combine(retryAfterSeconds)
    }

    /// The body a client receives for this error; anything but a refused request is `internal`.
    package var errorBody: ErrorBody {
        guard let wireCode else { return ErrorBody(code: .internal, message: "the server failed; see its log") }
        return ErrorBody(code: wireCode, message: message)
    }

    public var description: String {
        var text = "\(code): \(message)"
        if let path { text += " (\(path))" }
        if let wireCode, let httpStatus { text += " [\(wireCode), HTTP \(httpStatus)]" }
        return text
    }

    package static func badRequest(_ message: String, underlying: (any Error & Sendable)? = nil) -> ServerError {
        ServerError(status: 400, .invalidRequest, message, underlying: underlying)
    }
    static func unauthorized(_ message: String) -> ServerError { ServerError(status: 401, .unauthorized, message) }
    /// A request let in by a token that was revoked or expired (or names another user) by the time its
    /// work began: nothing of it is read or written.
    static let tokenGoneWhileWaiting = unauthorized(
        "the bearer token was revoked or expired while this request waited its turn: nothing of it was read or written")
    static func forbidden(_ message: String) -> ServerError { ServerError(status: 403, .forbidden, message) }
    static func notFound(_ message: String) -> ServerError { ServerError(status: 404, .notFound, message) }
    /// A change (a push's mutation, a file's upload) to a project an operator archived, told to members only.
    static func projectArchived(_ project: UUID) -> ServerError {
        ServerError(
            status: 409, .projectArchived,
            "project \(project.storageText) is archived: it takes no more changes; the office can bring it back")
    }
}

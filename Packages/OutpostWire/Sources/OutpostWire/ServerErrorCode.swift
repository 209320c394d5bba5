/// The stable error codes of the sync protocol. A string wrapper rather than an enum, so a newer
/// server's codes still decode and never break a client's `switch`.
public struct ServerErrorCode: RawRepresentable, Sendable, Hashable, Codable, CustomStringConvertible {
    /// The code as sent, such as `unsupported_schema_version`.
    public let rawValue: String

    /// Wraps a code as received.
    public init(rawValue: String) {
        self.rawValue = rawValue
    }

    /// 400: the `Outpost-Protocol-Version` header is missing or names a version the server does not speak.
    public static let unsupportedProtocolVersion = Self(rawValue: "unsupported_protocol_version")
    /// 400: the `Outpost-Schema-Version` header is missing or outside the versions the server accepts.
    public static let unsupportedSchemaVersion = Self(rawValue: "unsupported_schema_version")
    /// 401: no bearer token, or an expired or unknown one.
    public static let unauthorized = Self(rawValue: "unauthorized")
    /// 403: the caller may not see the project (per mutation: the record's project).
    public static let forbidden = Self(rawValue: "forbidden")
    /// 404: no such route, project or media attachment.
    public static let notFound = Self(rawValue: "not_found")
    /// 405: the route has no such method; `Allow` lists the ones it has.
    public static let methodNotAllowed = Self(rawValue: "method_not_allowed")
    /// 400 (or per mutation): the body or a record breaks the schema or a validation rule.
    public static let invalidRequest = Self(rawValue: "invalid_request")
    /// Per mutation: a clock of the mutation runs more than 5 minutes ahead of the server's time. The
    /// device stamps the change again with its clock once that is right (`LocalStore.restampRefusedClocks`)
    /// and sends it again: it is never failed for this.
    public static let clockAhead = Self(rawValue: "clock_ahead")
    /// 409: a media chunk does not start at the offset the server has received.
    public static let rangeMismatch = Self(rawValue: "range_mismatch")
    /// Per mutation: the record's project was archived by the office; it takes no more changes until it
    /// is brought back. The device keeps the change, shown as refused with this reason.
    public static let projectArchived = Self(rawValue: "project_archived")
    /// 409 from the admin API: what it would create exists already (a project with that id); nothing changed.
    public static let alreadyExists = Self(rawValue: "already_exists")
    /// 409: the request's `checkpoint` is not in this server's history: the server was restored from a
    /// backup taken before it. Nothing was applied; the device pulls everything again from the start
    /// and sends again its own writes the server lost (`SyncEngine`).
    public static let historyChanged = Self(rawValue: "history_changed")
    /// 400: the pull's `cursor` is not text this server writes (a device's stored cursor damaged on
    /// disk). Nothing was read; the device cannot tell what it has pulled, so it pulls everything again
    /// from the start, as after `historyChanged` (`SyncEngine`). A code of its own because an
    /// `invalidRequest` would be sent again unchanged, and refused, on every run.
    public static let unknownCursor = Self(rawValue: "unknown_cursor")
    /// 400: the request's `checkpoint` is not text this server writes (damaged on the device). Nothing
    /// was applied; the device starts over as after `historyChanged`.
    public static let unknownCheckpoint = Self(rawValue: "unknown_checkpoint")
    /// 413: the body is larger than the server accepts; a media upload past a media quota. Per mutation:
    /// the change would take its project's records, or those its caller wrote last, past their quota (kept on the
    /// device, shown as refused).
    public static let payloadTooLarge = Self(rawValue: "payload_too_large")
    /// 413: a push carries more mutations than `maximumBatchSize`.
    public static let batchTooLarge = Self(rawValue: "batch_too_large")
    /// 415: the request's `Content-Encoding` is not one the server accepts.
    public static let unsupportedEncoding = Self(rawValue: "unsupported_encoding")
    /// 422: a completed media upload does not have the announced SHA-256; the server drops the bytes.
    public static let checksumMismatch = Self(rawValue: "checksum_mismatch")
    /// 429: too many requests; `Retry-After` says when to come back.
    public static let rateLimited = Self(rawValue: "rate_limited")
    /// 500: the server failed.
    public static let `internal` = Self(rawValue: "internal")
    /// 503: the server is up but not serving sync now (maintenance, overload); may carry `Retry-After`.
    public static let unavailable = Self(rawValue: "unavailable")
    /// 507: a media upload would take disk space the server keeps for its database; `Retry-After` says
    /// when to try again. Records still sync.
    public static let insufficientStorage = Self(rawValue: "insufficient_storage")

    /// Every code this client knows, as listed in `schemas/sync-api.yaml`.
    public static let all: [ServerErrorCode] = [
        .unsupportedProtocolVersion, .unsupportedSchemaVersion, .unauthorized, .forbidden, .notFound,
        .methodNotAllowed, .invalidRequest, .clockAhead, .rangeMismatch, .projectArchived, .alreadyExists, .historyChanged, .unknownCursor,
        .unknownCheckpoint, .payloadTooLarge, .batchTooLarge, .unsupportedEncoding,
        .checksumMismatch, .rateLimited, .internal, .unavailable, .insufficientStorage,
    ]

    public init(from decoder: any Decoder) throws {
        rawValue = try decoder.singleValueContainer().decode(String.self)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }

    public var description: String { rawValue }
}

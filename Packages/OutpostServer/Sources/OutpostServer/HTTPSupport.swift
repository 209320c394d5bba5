import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import OutpostSchema
import OutpostWire

/// Every route the server answers and the methods it has (`addRoutes` registers them; a test holds both to
/// `schemas/sync-api.yaml`): what a 405's `Allow` lists. A `{name}` segment stands for any one segment.
enum Routes {
    /// One route: its path as the API document writes it, and its methods.
    struct Route {
        let path: String
        let segments: [Substring]
        let methods: [HTTPRequest.Method]
    }

    static let all: [Route] = [
        ("/health", [.get]), ("/livez", [.get]), ("/readyz", [.get]), ("/push", [.post]), ("/push/answers", [.post]), ("/pull", [.post]),
        ("/media/{attachmentID}/upload", [.get, .put]), ("/media/{attachmentID}", [.get]), ("/projects/{projectID}/bundle", [.get]), ("/metrics", [.get]),
        ("/admin/log", [.get]), ("/admin/projects", [.post]), ("/admin/projects/{projectID}/archive", [.post]),
        ("/admin/projects/{projectID}/members", [.get]), ("/admin/projects/{projectID}/members/{userID}", [.put, .delete]),
        ("/admin/tokens", [.get, .post]), ("/admin/tokens/revoke", [.post]),
    ].map { Route(path: $0, segments: $0.split(separator: "/"), methods: $1) }

    /// The route `path` reaches; nil for a path no route has. Empty segments are dropped, as Hummingbird's
    /// router drops them: `//push` and `/pull/` reach the push and pull routes, so they must meet the same
    /// method and version checks (matching them as written let `POST /pull/` skip the version check).
    static func route(forPath path: String) -> Route? {
        let segments = path.split(separator: "/")
        return all.first { route in
            route.segments.count == segments.count
                && zip(route.segments, segments).allSatisfy { pattern, segment in pattern.hasPrefix("{") || pattern == segment }
        }
    }
}

/// Who a request turned out to come from and what it concerned, filled in by the route as it learns them
/// (`SyncServer.authenticate`, the media and bundle routes) for the request's log line: the user's id,
/// never the token.
final class RequestAttribution: @unchecked Sendable {
    // @unchecked: every field is read and written under `lock`.
    private let lock = NSLock()
    private var fields: [String: String] = [:]

    /// The request the current task serves, when the middleware is running it.
    @TaskLocal static var current: RequestAttribution?

    /// Names `value` under `key` (`user`, `project`, `attachment`) for the log line.
    static func note(_ key: String, _ value: UUID) {
        guard let current else { return }
        current.lock.lock()
        current.fields[key] = value.uuidString.lowercased()
        current.lock.unlock()
    }

    var metadata: Logger.Metadata {
        lock.lock()
        defer { lock.unlock() }
        return fields.mapValues { .string($0) }
    }
}

/// Header names of the protocol, as Hummingbird's field names.
enum Header {
    static let protocolVersion = HTTPField.Name(SyncProtocol.protocolVersionHeader)!
    static let schemaVersion = HTTPField.Name(SyncProtocol.schemaVersionHeader)!
    static let mediaDigest = HTTPField.Name(SyncProtocol.mediaDigestHeader)!
    static let accepts = HTTPField.Name(SyncProtocol.acceptsHeader)!
    static let conflictPolicy = HTTPField.Name(SyncProtocol.conflictPolicyHeader)!
    static let requestID = HTTPField.Name("Outpost-Request-ID")!
    static let retryAfter = HTTPField.Name("Retry-After")!
}

/// A request's context: Hummingbird's, and the connection it came on, so a long answer can keep pace
/// with what the connection's socket has taken (`WriteProgress`).
struct ServerRequestContext: RequestContext {
    var coreContext: CoreRequestContextStorage
    let channel: any Channel

    init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        channel = source.channel
    }
}

/// Checks versions, turns every error into the protocol's `ErrorBody` (never a stack trace), stamps
/// each response with the protocol version, the optional forms it reads and the request id, logs it,
/// and counts it.
struct ProtocolMiddleware<Context: RequestContext>: RouterMiddleware {
    let schemaVersions: ClosedRange<Int>
    let metrics: ServerMetrics
    /// The server's conflict policy as `SyncProtocol.conflictPolicyText` writes it.
    let conflictPolicy: String

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response)
        async throws -> Response
    {
        let started = ContinuousClock.now
        let attribution = RequestAttribution()
        var response: Response
        do {
            // A known route asked with a method it does not have: 405 naming the ones it has, before
            // anything else is checked (a probe's TRACE carries no protocol headers).
            // A path no route has is the router's 404, whatever the headers.
            if let route = Routes.route(forPath: request.uri.path) {
                guard route.methods.contains(request.method) else {
                    throw ServerError(
                        status: 405, .methodNotAllowed,
                        "\(route.path) answers \(route.methods.map(\.rawValue).joined(separator: ", ")), not \(request.method.rawValue)")
                }
                // Metrics, probes and the admin API are read by tools that speak no sync protocol.
                if !Self.isUnversioned(route.path) { try checkVersions(request) }
            }
            response = try await RequestAttribution.$current.withValue(attribution) { try await next(request, context) }
        } catch {
            response = Self.errorResponse(error, logger: context.logger)
            if response.status.code == 405, let route = Routes.route(forPath: request.uri.path) {
                response.headers[.allow] = route.methods.map(\.rawValue).joined(separator: ", ")
            }
        }
        response.headers[Header.protocolVersion] = String(SyncProtocol.version)
        // The push reader (`PushRequest(json:)`) takes a mutation's one shared clock.
        response.headers[Header.accepts] = SyncProtocol.sharedClockForm
        response.headers[Header.conflictPolicy] = conflictPolicy
        let requestID = Self.randomRequestID()
        response.headers[Header.requestID] = requestID
        let route = Self.routeLabel(request)
        let elapsed = ContinuousClock.now - started
        context.logger.info(
            "request",
            metadata: [
                "request_id": .string(requestID),
                "method": .string(request.method.rawValue), "path": .string(Self.loggedPath(request.uri.path)),
                "status": .stringConvertible(response.status.code),
                "ms": .stringConvertible(Int(elapsed.components.seconds * 1000 + elapsed.components.attoseconds / 1_000_000_000_000_000)),
            ].merging(attribution.metadata) { first, _ in first })
        let labels = [("route", route), ("status", String(response.status.code))]
        metrics.count("outpost_requests_total", labels)
        metrics.time("outpost_request_duration_seconds", labels, elapsed)
        if let length = request.headers[.contentLength].flatMap(Int.init) { metrics.add("outpost_received_bytes_total", length, [("route", route)]) }
        if let length = response.body.contentLength { metrics.add("outpost_sent_bytes_total", length, [("route", route)]) }
        return response
    }

    /// A request's id as its answer and its log line name it: 128 random bits in hex. Hummingbird's own
    /// (`context.id`, which the handlers' log lines carry as `hb.request.id`, beside this one on the
    /// request's line) counts up per instance, and any caller, with no token, counted every request an
    /// instance took between two of their own, pushes to projects they may not see included (attack 111, F3).
    static func randomRequestID() -> String {
        var generator = SystemRandomNumberGenerator()
        return withUnsafeBytes(of: (generator.next() as UInt64, generator.next() as UInt64)) { $0.hexText }
    }

    /// A path as a log line carries it: a client picks the path, so its length is bounded here (an
    /// 80 KB path made an 80 KB line per request); every real route's path fits.
    static func loggedPath(_ path: String) -> String {
        path.utf8.count <= 256 ? path : String(decoding: path.utf8.prefix(256), as: UTF8.self) + "…"
    }

    /// Whether a route is answered without the protocol headers: metrics, the probes, the admin API.
    static func isUnversioned(_ path: String) -> Bool {
        ["/metrics", "/livez", "/readyz"].contains(path) || path.hasPrefix("/admin/")
    }

    private func checkVersions(_ request: Request) throws(ServerError) {
        guard let text = request.headers[Header.protocolVersion], Int(text) == SyncProtocol.version else {
            throw ServerError(
                status: 400, .unsupportedProtocolVersion,
                "this server speaks protocol version \(SyncProtocol.version) (\(SyncProtocol.protocolVersionHeader))")
        }
        guard let text = request.headers[Header.schemaVersion], let version = Int(text), schemaVersions.contains(version)
        else {
            throw ServerError(
                status: 400, .unsupportedSchemaVersion,
                "this server accepts schema versions \(schemaVersions.lowerBound)…\(schemaVersions.upperBound) "
                    + "(\(SyncProtocol.schemaVersionHeader))")
        }
    }

    /// `GET /media/{id}/upload` as `GET /media`: bounded labels, no ids in metrics. A method outside
    /// HTTP's standard ones is `OTHER`: a client may send any token as a method, and each new label
    /// would otherwise grow every scrape and the registry for good.
    /// The metrics label of a request: its route's first segment and its method, or `OTHER` for a method
    /// the route does not have, so the label set stays bounded (routes × their methods) whatever methods
    /// and paths clients make up.
    private static func routeLabel(_ request: Request) -> String {
        guard let route = Routes.route(forPath: request.uri.path) else { return "OTHER /other" }
        let method = route.methods.contains(request.method) ? request.method.rawValue : "OTHER"
        return "\(method) /\(route.segments.first ?? "")"
    }

    static func errorResponse(_ error: any Error, logger: Logger) -> Response {
        let failure: ServerError
        switch error {
        case let error as ServerError where error.wireCode != nil:
            failure = error
        case let error as HTTPError:
            let status = Int(error.status.code)
            let code: ServerErrorCode =
                switch status {
                case 404: .notFound
                case 405: .methodNotAllowed
                case 413: .payloadTooLarge
                case 400..<500: .invalidRequest
                default: .internal
                }
            failure = ServerError(status: status, code, status == 404 ? "no such route" : "request refused (HTTP \(status))")
        default:
            logger.error("request failed", metadata: ["error": .string("\(error)")])
            failure = ServerError(status: 500, .internal, "the server failed; see its log")
        }
        var headers: HTTPFields = [.contentType: "application/json"]
        if let seconds = failure.retryAfterSeconds { headers[Header.retryAfter] = String(seconds) }
        let data = (try? WireCoding.encoder().encode(failure.errorBody)) ?? Data()
        return Response(
            status: HTTPResponse.Status(code: failure.httpStatus ?? 500), headers: headers,
            body: ResponseBody(byteBuffer: ByteBuffer(bytes: data)))
    }
}

extension Request {
    /// Whether the client takes gzip (`Accept-Encoding`, without `q=0`).
    var acceptsGzip: Bool {
        guard let header = headers[.acceptEncoding] else { return false }
        return header.split(separator: ",").contains { part in
            let pieces = part.split(separator: ";").map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
            return pieces.first == "gzip" && !pieces.dropFirst().contains { $0.replacingOccurrences(of: " ", with: "") == "q=0" }
        }
    }

    /// The body, at most `limit` bytes, inflated when sent as gzip (415 for any other encoding).
    mutating func data(limit: Int, allowingGzip: Bool = true) async throws(ServerError) -> Data {
        let buffer: ByteBuffer
        do {
            buffer = try await collectBody(upTo: limit)
        } catch {
            throw ServerError(status: 413, .payloadTooLarge, "the body is larger than \(limit) bytes", underlying: error)
        }
        let data = Data(buffer.readableBytesView)
        switch headers[.contentEncoding]?.lowercased() {
        case nil, "identity":
            return data
        case "gzip" where allowingGzip:
            return try Self.inflate(data, limit: limit)
        case let encoding?:
            throw ServerError(status: 415, .unsupportedEncoding, "Content-Encoding '\(encoding)' is not accepted here")
        }
    }

    /// A gzip body: 400 when it is not gzip (a zlib stream included), corrupt or truncated, 413 when it
    /// would inflate past `limit`.
    static func inflate(_ data: Data, limit: Int) throws(ServerError) -> Data {
        guard Gzip.isCompressed(data) else { throw ServerError.badRequest("the gzip body is corrupt or truncated") }
        switch Gzip.inflate(data, limit: limit) {
        case .complete(let plain): return plain
        case .exceedsLimit: throw ServerError(status: 413, .payloadTooLarge, "the body inflates past \(limit) bytes")
        case .corrupt: throw ServerError.badRequest("the gzip body is corrupt or truncated")
        }
    }

    /// The body decoded as the wire's JSON; 400 with the decoder's reason otherwise.
    mutating func decode<T: Decodable>(_ type: T.Type, limit: Int) async throws(ServerError) -> T {
        let data = try await data(limit: limit)
        do {
            return try WireCoding.decoder().decode(type, from: data)
        } catch {
            throw ServerError.badRequest("the body is not a valid \(T.self): \(Self.reason(error))", underlying: error)
        }
    }

    private static func reason(_ error: any Error) -> String {
        switch error {
        case DecodingError.dataCorrupted(let context), DecodingError.keyNotFound(_, let context),
            DecodingError.typeMismatch(_, let context), DecodingError.valueNotFound(_, let context):
            let path = context.codingPath.map(\.stringValue).joined(separator: ".")
            return path.isEmpty ? context.debugDescription : "\(path): \(context.debugDescription)"
        default:
            return "unreadable JSON"
        }
    }
}

/// A JSON response, gzip-compressed above the protocol's threshold for clients that accept it.
func jsonResponse(_ value: some Encodable, for request: Request) throws -> Response {
    jsonResponse(bytes: Array(try WireCoding.encoder().encode(value)), for: request)
}

/// Answers JSON already written (gzip for clients that accept it, over the threshold).
func jsonResponse(bytes: [UInt8], for request: Request) -> Response {
    jsonResponse(JSONBody(bytes, gzip: request.acceptsGzip))
}

/// Answers JSON already encoded as it goes out (a pull page may be encoded before it is asked for).
/// `Vary: Accept-Encoding` on every such answer, compressed or not: a cache in between must not hand a
/// gzip body to a client that did not ask for one (attack 128, F2), nor a plain one to one that did.
func jsonResponse(_ body: JSONBody) -> Response {
    var headers: HTTPFields = [.contentType: "application/json", .vary: "Accept-Encoding"]
    if body.isGzipped { headers[.contentEncoding] = "gzip" }
    return Response(status: .ok, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(bytes: body.data)))
}

/// A JSON answer's bytes as they go out: gzip-compressed above the protocol's threshold when the
/// client takes gzip. Apart from `Response` so a pull page read ahead can be held ready to send.
package struct JSONBody: Sendable {
    package let data: Data
    package let isGzipped: Bool

    init(_ bytes: [UInt8], gzip: Bool) {
        if bytes.count > SyncProtocol.compressionThreshold, gzip {
            (data, isGzipped) = (PageCompression.gzip(bytes), true)
        } else {
            (data, isGzipped) = (Data(bytes), false)
        }
    }
}

import Foundation
import OutpostWire

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The transport apps use: the protocol of `schemas/sync-api.yaml` over HTTP with `URLSession`.
/// An actor, so the token can be renewed and the traffic counted while requests are in flight.
public actor HTTPTransport: SyncTransport {
    /// Where the server is and how long to wait for it.
    public struct Configuration: Sendable {
        /// The server's sync root; routes such as `push` are resolved against it.
        public var baseURL: URL
        /// The client's local schema version, sent on every request.
        public var schemaVersion: Int
        /// How long a structured request (health, push, pull) may take.
        public var requestTimeout: Duration
        /// How long a media chunk or a bundle download may take.
        public var transferTimeout: Duration
        /// Whether bodies over 10 KB are sent gzip-compressed (turned off for good by a server's 415).
        public var compressesRequests: Bool
        /// Whether a push sends a mutation's one clock once instead of per field, once the server has
        /// said it reads that form (turned off for the transport's life when the server refuses it).
        public var sharesClocks: Bool
        /// The most bytes an answer (health, push, pull, an upload's status) may take once inflated; a
        /// larger one is refused before it is decoded. A pull page is about 4 MiB of records; 64 MiB
        /// leaves room to spare. URL loading still holds the whole answer first (see `send`).
        public var maximumResponseBytes: Int = 64 << 20
        /// Whether plain `http://` may reach a server other than this device (loopback is always
        /// allowed). Off: a token and a crew's records crossing a network unencrypted are refused with
        /// `rejected` before anything is sent; an app turns it on only for a network it trusts.
        public var allowsPlainHTTP: Bool = false

        /// Creates a configuration.
        public init(
            baseURL: URL, schemaVersion: Int, requestTimeout: Duration = .seconds(30),
            transferTimeout: Duration = .seconds(300), compressesRequests: Bool = true, sharesClocks: Bool = true
        ) {
            self.baseURL = baseURL
            self.schemaVersion = schemaVersion
            self.requestTimeout = requestTimeout
            self.transferTimeout = transferTimeout
            self.compressesRequests = compressesRequests
            self.sharesClocks = sharesClocks
        }
    }

    /// The configuration in use.
    public let configuration: Configuration
    /// Two sessions, because URL loading on Linux applies the session's timeout rather than the request's.
    private let session: URLSession
    private let transferSession: URLSession
    private var token: String?
    private var counts = TransferCounts()
    /// Cleared when a server answers a compressed body with 415, so it is asked only once.
    private var compressesRequests: Bool
    /// Set by a response naming `SyncProtocol.sharedClockForm` in `SyncProtocol.acceptsHeader`.
    private var serverReadsSharedClock = false
    /// The policy the server's last response named, as sent (`SyncProtocol.conflictPolicyHeader`).
    public private(set) var serverConflictPolicyText: String?
    /// Set when a push in that form got a 400 all the same (say, from an instance of a fleet that is
    /// mid-upgrade) and its copy with a clock per field did not: this transport does not send the form
    /// again, whatever later responses say.
    private var sharedClockRefused = false

    /// Creates a transport; `token` is sent as `Authorization: Bearer`.
    public init(configuration: Configuration, token: String?) {
        self.configuration = configuration
        self.token = token
        self.compressesRequests = configuration.compressesRequests
        session = Self.makeSession(timeout: configuration.requestTimeout)
        transferSession = Self.makeSession(timeout: configuration.transferTimeout)
    }

    deinit {
        session.invalidateAndCancel()
        transferSession.invalidateAndCancel()
    }

    private static func makeSession(timeout: Duration) -> URLSession {
        let sessionConfiguration = URLSessionConfiguration.ephemeral
        sessionConfiguration.requestCachePolicy = .reloadIgnoringLocalCacheData
        sessionConfiguration.timeoutIntervalForRequest = timeoutInterval(timeout)
        return URLSession(configuration: sessionConfiguration, delegate: SameOriginRedirects(), delegateQueue: nil)
    }

    /// Replaces the bearer token (after a 401, say); counters and learned server traits are kept.
    public func renewToken(_ token: String?) {
        self.token = token
    }

    /// Traffic so far (body bytes as on the wire). A bundle counts as the file URL loading wrote: when
    /// it came compressed, its inflated size, since a streamed body has no `Content-Length` to count by.
    public var transferred: TransferCounts { counts }

    public func health() async throws(TransportError) -> HealthResponse {
        try await exchange("GET", "health", body: nil as PushRequest?)
    }

    public func push(_ request: PushRequest) async throws(TransportError) -> PushResponse {
        let name = "POST /push"
        let sharing = configuration.sharesClocks && serverReadsSharedClock && !sharedClockRefused
            && request.mutations.contains { $0.sharedClock != nil }
        var (data, response) = try await post(request, sharingClocks: sharing, name: name)
        // A server that cannot read the form refuses the whole batch as unreadable before applying any
        // of it (the form has no `clocks`, which it requires), so sending it again per field is safe.
        // Only when that copy is read was the form the trouble; then it is not sent again.
        if sharing, Self.refusesAsUnreadable(data, response) {
            (data, response) = try await post(request, sharingClocks: false, name: name)
            if !Self.refusesAsUnreadable(data, response) { sharedClockRefused = true }
        }
        return try decode(data, response, name: name)
    }

    private static func refusesAsUnreadable(_ data: Data, _ response: HTTPURLResponse) -> Bool {
        response.statusCode == 400 && (try? WireCoding.decoder().decode(ErrorBody.self, from: data))?.code == .invalidRequest
    }

    private func post(_ request: PushRequest, sharingClocks: Bool, name: String)
        async throws(TransportError) -> (Data, HTTPURLResponse)
    {
        let payload: Data
        do {
            payload = try request.json(sharingClocks: sharingClocks)
        } catch {
            throw TransportError(
                .rejected, request: name, message: "could not encode the request: \(error)", underlying: error)
        }
        return try await send("POST", "push", json: payload, name: name)
    }

    public func pull(_ request: PullRequest) async throws(TransportError) -> PullResponse {
        try await exchange("POST", "pull", body: request)
    }

    public func mediaUploadStatus(for attachmentID: UUID) async throws(TransportError) -> MediaUploadStatus {
        try await exchange("GET", Self.mediaPath(attachmentID), body: nil as PushRequest?)
    }

    public func uploadMedia(_ chunk: MediaChunk) async throws(TransportError) -> MediaUploadStatus {
        let name = "PUT /\(Self.mediaPath(chunk.attachmentID))"
        var request = makeRequest("PUT", Self.mediaPath(chunk.attachmentID), timeout: configuration.transferTimeout)
        request.setValue("application/octet-stream", forHTTPHeaderField: "Content-Type")
        request.setValue(chunk.contentRange, forHTTPHeaderField: "Content-Range")
        request.setValue(chunk.sha256, forHTTPHeaderField: SyncProtocol.mediaDigestHeader)
        // Media is already compressed (JPEG, AAC): sent as is.
        let (data, response) = try await send(request, body: chunk.data, name: name, session: transferSession)
        return try decode(data, response, name: name)
    }

    public func downloadBundle(project: UUID, format: BundleFormat, to destination: URL)
        async throws(TransportError) -> Int64
    {
        let path = "projects/\(project.uuidString.lowercased())/bundle"
        let name = "GET /\(path)?format=\(format.rawValue)"
        let request = makeRequest(
            "GET", path, query: [URLQueryItem(name: "format", value: format.rawValue)],
            timeout: configuration.transferTimeout)
        let downloaded: URL
        let response: URLResponse
        try checkScheme(name: name)
        do {
            (downloaded, response) = try await transferSession.download(for: request)
        } catch {
            counts.requests += 1
            throw Self.classify(error, name: name)
        }
        counts.requests += 1
        defer { try? FileManager.default.removeItem(at: downloaded) }
        let size = (try? FileManager.default.attributesOfItem(atPath: downloaded.path)[.size] as? Int64) ?? 0
        counts.bytesReceived += size
        guard let http = response as? HTTPURLResponse else {
            throw TransportError(.invalidResponse, request: name, message: "not an HTTP response")
        }
        guard (200..<300).contains(http.statusCode) else {
            throw Self.failure(name: name, response: http, body: (try? Data(contentsOf: downloaded)) ?? Data())
        }
        // A bundle comes gzip-compressed (`Accept-Encoding: gzip`), and URL loading inflates it into the
        // file on Apple platforms and Linux alike; a bundle never starts with gzip's magic bytes otherwise.
        if let handle = try? FileHandle(forReadingFrom: downloaded) {
            let start = (try? handle.read(upToCount: 2)) ?? nil
            try? handle.close()
            if let start, Gzip.isCompressed(start) {
                throw TransportError(
                    .invalidResponse, request: name, status: http.statusCode,
                    message: "the bundle arrived gzip-compressed and URL loading did not inflate it")
            }
        }
        do {
            try? FileManager.default.removeItem(at: destination)
            try FileManager.default.moveItem(at: downloaded, to: destination)
        } catch {
            throw TransportError(
                .invalidResponse, request: name, status: http.statusCode,
                message: "could not move the bundle to \(destination.path): \(error)", underlying: error)
        }
        return size
    }

    // MARK: - Plumbing

    static func mediaPath(_ attachmentID: UUID) -> String {
        "media/\(attachmentID.uuidString.lowercased())/upload"
    }

    /// Sends `body` as JSON (if any) and decodes the answer as `Response`.
    private func exchange<Body: Encodable, Response: Decodable>(
        _ method: String, _ path: String, body: Body?
    ) async throws(TransportError) -> Response {
        let name = "\(method) /\(path)"
        var payload: Data?
        if let body {
            do {
                payload = try WireCoding.encoder().encode(body)
            } catch {
                throw TransportError(
                    .rejected, request: name, message: "could not encode the request: \(error)", underlying: error)
            }
        }
        let (data, response) = try await send(method, path, json: payload, name: name)
        return try decode(data, response, name: name)
    }

    /// Sends `payload` (if any) as a JSON body, compressed when large.
    private func send(_ method: String, _ path: String, json payload: Data?, name: String)
        async throws(TransportError) -> (Data, HTTPURLResponse)
    {
        var request = makeRequest(method, path, timeout: configuration.requestTimeout)
        if payload != nil { request.setValue("application/json", forHTTPHeaderField: "Content-Type") }
        return try await sendCompressing(request, body: payload, name: name)
    }

    /// Sends the request, gzip-compressing a large body unless the server has refused that before;
    /// a 415 to a compressed body switches compression off and sends the body once more, plain.
    private func sendCompressing(_ request: URLRequest, body: Data?, name: String)
        async throws(TransportError) -> (Data, HTTPURLResponse)
    {
        guard let body, compressesRequests, body.count > SyncProtocol.compressionThreshold else {
            return try await send(request, body: body, name: name)
        }
        var compressed = request
        compressed.setValue("gzip", forHTTPHeaderField: "Content-Encoding")
        let (data, response) = try await send(compressed, body: Gzip.compress(body), name: name)
        guard response.statusCode == 415 else { return (data, response) }
        compressesRequests = false
        return try await send(request, body: body, name: name)
    }

    private func send(_ request: URLRequest, body: Data?, name: String, session: URLSession? = nil)
        async throws(TransportError) -> (Data, HTTPURLResponse)
    {
        try checkScheme(name: name)
        let session = session ?? self.session
        let data: Data
        let response: URLResponse
        counts.requests += 1
        // URL loading inflates a gzip answer before handing it over, whole: a hostile server's 2.3 MB
        // answer inflating to 512 MB still takes that much memory here (see `maximumResponseBytes`).
        // Bounding it as it arrives was tried three ways on Linux's URL loading: a data delegate and
        // a completion handler both crashed outpost-demo with a corrupted heap, and a download to a
        // file filled the disk with an endless answer (a task's byte count stays 0 there) and left a
        // temporary file behind for every failed request. An answer past the limit is at least
        // refused before it is decoded, which would take several times its size again.
        if let body { counts.bytesSent += Int64(body.count) }
        // URL loading's timeout is for a silence between bytes: a server dripping a byte every few
        // seconds held a sync for good. A whole exchange may take four times that, and at least the
        // transfer timeout: a full 4 MiB pull page must still arrive over a 15 KB/s field connection
        // (at 120 s, one over 30 KB/s timed out on every try).
        let deadline = max(Duration.seconds(request.timeoutInterval * 4), configuration.transferTimeout)
        do {
            (data, response) = try await Self.within(deadline) {
                if let body { return try await session.upload(for: request, from: body) }
                return try await session.data(for: request)
            }
        } catch {
            throw Self.classify(error, name: name)
        }
        guard let http = response as? HTTPURLResponse else {
            throw TransportError(.invalidResponse, request: name, message: "not an HTTP response")
        }
        guard data.count <= configuration.maximumResponseBytes else {
            throw TransportError(
                .invalidResponse, request: name, status: http.statusCode,
                message: "the answer is larger than \(configuration.maximumResponseBytes) bytes (\(data.count)); it was not read")
        }
        if let accepted = http.value(forHTTPHeaderField: SyncProtocol.acceptsHeader),
            accepted.split(separator: ",").contains(where: { $0.trimmingCharacters(in: .whitespaces) == SyncProtocol.sharedClockForm })
        {
            serverReadsSharedClock = true
        }
        if let text = http.value(forHTTPHeaderField: SyncProtocol.conflictPolicyHeader) {
            serverConflictPolicyText = text
        }
        // Count the body as it crossed the wire: its Content-Length when URL loading decompressed it.
        let wireLength = http.value(forHTTPHeaderField: "Content-Length").flatMap { Int64($0) }
        counts.bytesReceived += wireLength ?? Int64(data.count)
        // URL loading decodes gzip on its own on Apple platforms and Linux; this catches one that did not.
        if http.value(forHTTPHeaderField: "Content-Encoding")?.lowercased() == "gzip", Gzip.isCompressed(data) {
            guard case .complete(let plain) = Gzip.inflate(data, limit: configuration.maximumResponseBytes) else {
                throw TransportError(
                    .invalidResponse, request: name, status: http.statusCode, message: "corrupt gzip body")
            }
            return (plain, http)
        }
        return (data, http)
    }

    /// `exchange`'s result, or `URLError(.timedOut)` once `deadline` passes. The exchange is cancelled
    /// then, and the caller gets its answer whether or not URL loading lets go of it at once: under
    /// load, Linux's URL loading finished a cancelled exchange's dripping answer 90 s later. A
    /// dispatch timer, not a sleeping task, so a busy cooperative pool cannot make it late.
    private static func within(
        _ deadline: Duration, _ exchange: @escaping @Sendable () async throws -> (Data, URLResponse)
    ) async throws -> (Data, URLResponse) {
        let answer = Task { try await exchange() }
        let race = ExchangeRace()
        let timer = DispatchWorkItem {
            answer.cancel()
            race.finish(.failure(URLError(.timedOut)))
        }
        DispatchQueue.global().asyncAfter(deadline: .now() + deadline.seconds, execute: timer)
        defer { timer.cancel() }
        let waiter = Task { race.finish(await answer.result) }
        defer { waiter.cancel() }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { race.wait($0) }
        } onCancel: {
            answer.cancel()
            race.finish(.failure(CancellationError()))
        }
    }

    private func decode<Response: Decodable>(_ data: Data, _ response: HTTPURLResponse, name: String)
        throws(TransportError) -> Response
    {
        guard (200..<300).contains(response.statusCode) else {
            throw Self.failure(name: name, response: response, body: data)
        }
        do {
            if let readable = Response.self as? any WireReadable.Type {
                return try readable.init(wire: data) as! Response
            }
            return try WireCoding.decoder().decode(Response.self, from: data)
        } catch {
            throw TransportError(
                .invalidResponse, request: name, status: response.statusCode,
                message: "the answer is not a valid \(Response.self): \(error)", underlying: error)
        }
    }

    /// Refuses plain HTTP to anything but loopback unless the app allowed it (`allowsPlainHTTP`).
    private func checkScheme(name: String) throws(TransportError) {
        let url = configuration.baseURL
        guard url.scheme?.lowercased() == "http", !configuration.allowsPlainHTTP else { return }
        let host = (url.host ?? "").lowercased().trimmingCharacters(in: CharacterSet(charactersIn: "[]"))
        // 127.0.0.0/8 as an address, never a name that merely starts with "127." (127.example.com).
        let octets = host.split(separator: ".", omittingEmptySubsequences: false).map { UInt8($0) }
        let loopback = host == "localhost" || host == "::1" || (octets.count == 4 && octets.allSatisfy { $0 != nil } && octets[0] == 127)
        guard !loopback else { return }
        throw TransportError(
            .rejected, request: name,
            message: "plain HTTP to \(host) is refused: the token and records would cross the network unencrypted; use https, or set allowsPlainHTTP for a network you trust")
    }

    private func makeRequest(_ method: String, _ path: String, query: [URLQueryItem] = [], timeout: Duration)
        -> URLRequest
    {
        var url = configuration.baseURL.appendingPathComponent(path)
        if !query.isEmpty, var components = URLComponents(url: url, resolvingAgainstBaseURL: false) {
            components.queryItems = query
            url = components.url ?? url
        }
        var request = URLRequest(url: url)
        request.timeoutInterval = Self.timeoutInterval(timeout)
        request.httpMethod = method
        request.setValue(String(SyncProtocol.version), forHTTPHeaderField: SyncProtocol.protocolVersionHeader)
        request.setValue(String(configuration.schemaVersion), forHTTPHeaderField: SyncProtocol.schemaVersionHeader)
        request.setValue("application/json", forHTTPHeaderField: "Accept")
        request.setValue("gzip", forHTTPHeaderField: "Accept-Encoding")
        if let token { request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization") }
        return request
    }

    /// `timeout` as URL loading takes it. On Linux it only honours whole seconds (and ignores zero),
    /// so round up there rather than lose the timeout.
    static func timeoutInterval(_ timeout: Duration) -> TimeInterval {
        #if canImport(FoundationNetworking)
        return max(1, timeout.seconds.rounded(.up))
        #else
        return timeout.seconds
        #endif
    }

    /// An error response as a `TransportError`, reading the error body and `Retry-After` (delta-seconds).
    static func failure(name: String, response: HTTPURLResponse, body: Data) -> TransportError {
        let errorBody = try? WireCoding.decoder().decode(ErrorBody.self, from: body)
        let retryAfter = response.value(forHTTPHeaderField: "Retry-After")
            .flatMap { Int($0.trimmingCharacters(in: .whitespaces)) }
            .map { Duration.seconds(max(0, $0)) }
        return TransportError(request: name, status: response.statusCode, body: errorBody, retryAfter: retryAfter)
    }

    /// A URL loading failure as a `TransportError`.
    static func classify(_ error: any Error, name: String) -> TransportError {
        guard let urlError = error as? URLError else {
            if error is CancellationError {
                return TransportError(.cancelled, request: name, message: "cancelled", underlying: error)
            }
            return TransportError(.noConnection, request: name, message: "\(error)", underlying: error)
        }
        let code: TransportError.Code =
            switch urlError.code {
            case .timedOut: .timedOut
            case .cancelled: .cancelled
            case .badServerResponse, .cannotDecodeContentData, .cannotDecodeRawData, .cannotParseResponse:
                .invalidResponse
            default: .noConnection
            }
        return TransportError(code, request: name, message: urlError.localizedDescription, underlying: urlError)
    }
}

/// Follows a redirect only within the origin (scheme, host and port) of the request it answers. URL
/// loading carries every header of the request along, the bearer token included, so a redirect to
/// another host (a hostile or misconfigured server, a captive portal) would hand it the crew member's
/// credentials. Refused, the redirect itself is the answer, which the transport reports as an error.
final class SameOriginRedirects: NSObject, URLSessionTaskDelegate, Sendable {
    func urlSession(
        _ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
        newRequest request: URLRequest, completionHandler: @escaping @Sendable (URLRequest?) -> Void
    ) {
        let from = task.originalRequest?.url
        let to = request.url
        let sameOrigin = from != nil && to != nil && from?.scheme?.lowercased() == to?.scheme?.lowercased()
            && from?.host?.lowercased() == to?.host?.lowercased() && Self.port(of: from) == Self.port(of: to)
        completionHandler(sameOrigin ? request : nil)
    }

    private static func port(of url: URL?) -> Int? {
        url?.port ?? (url?.scheme?.lowercased() == "https" ? 443 : 80)
    }
}

/// The first of an exchange's answer, its deadline and its caller's cancellation, delivered once.
private final class ExchangeRace: @unchecked Sendable {
    /// Every access holds `lock`, hence `@unchecked Sendable`.
    private let lock = NSLock()
    private var continuation: CheckedContinuation<(Data, URLResponse), any Error>?
    private var outcome: Result<(Data, URLResponse), any Error>?

    /// Delivers the outcome when it is known, now or later.
    func wait(_ continuation: CheckedContinuation<(Data, URLResponse), any Error>) {
        let known = lock.withLock { () -> Result<(Data, URLResponse), any Error>? in
            if outcome == nil { self.continuation = continuation }
            return outcome
        }
        if let known { continuation.resume(with: known) }
    }

    /// Settles the race with `result` unless it is settled already.
    func finish(_ result: Result<(Data, URLResponse), any Error>) {
        let waiting = lock.withLock { () -> CheckedContinuation<(Data, URLResponse), any Error>? in
            guard outcome == nil else { return nil }
            outcome = result
            defer { continuation = nil }
            return continuation
        }
        waiting?.resume(with: result)
    }
}

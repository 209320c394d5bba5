import AsyncHTTPClient
import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOHTTPCompression
import OutpostSchema
import OutpostWire

/// The transport apps use: the protocol of `schemas/sync-api.yaml` over HTTP with AsyncHTTPClient,
/// which streams every answer and inflates gzip while bytes arrive, so a hostile server's answer is
/// refused at its limit rather than held whole first (Linux's URL loading buffered and inflated whole
/// bodies, and crashed the process when a request was cancelled at the wrong moment). An actor, so the
/// token can be renewed and the traffic counted while requests are in flight.
public actor HTTPTransport: SyncTransport {
    /// Where the server is and how long to wait for it.
    public struct Configuration: Sendable {
        /// The server's sync root; routes such as `push` are resolved against it.
        public var baseURL: URL
        /// The client's local schema version, sent on every request.
        public var schemaVersion: Int
        /// How long a structured request (health, push, pull) may stay silent, and a quarter of how
        /// long it may take in all; also how long a download (a bundle, an original) waits for its
        /// answer to begin. Past its head, a structured answer has this again plus the time its bytes
        /// earn (`minimumTransferBytesPerSecond`).
        public var requestTimeout: Duration
        /// How long a media chunk may take to upload, and how long a download (a bundle, an original)
        /// may take beyond the time its bytes earn (`minimumTransferBytesPerSecond`).
        public var transferTimeout: Duration
        /// The slowest rate a download (a bundle, an original) keeps its connection at: every this many
        /// bytes that cross the wire give it a second more than `transferTimeout`. A link at this rate
        /// or faster is never cut for taking long, while a server dripping bytes is cut near the
        /// timeout. Counted before inflation, so a slow trickle of gzip that inflates a thousandfold
        /// earns what it sent, not what it inflated to (attack 80). Cut at the timeout whatever it had
        /// brought, a pre-sync over a slow link (25 MB at 80 KB/s) started again from its first byte on
        /// every try and never finished. 4 KiB/s: a weak 2G connection.
        public var minimumTransferBytesPerSecond: Int = 4096
        /// Whether bodies over 10 KB are sent gzip-compressed (turned off for good by a server's 415).
        public var compressesRequests: Bool
        /// Whether a push sends a mutation's one clock once instead of per field, once the server has
        /// said it reads that form (turned off for the transport's life when the server refuses it).
        public var sharesClocks: Bool
        /// The most bytes an answer (health, push, pull, an upload's status) may take once inflated. It
        /// is counted while the answer arrives, so a larger one is cut off there: memory stays within
        /// it whatever the server sends. 20 MiB: the reference server ends a pull page at 4 MiB of
        /// records plus the record that passes it (at most 8 MiB, a push body's limit), and a cursor is
        /// refused past 6 MiB. Decoded, a page takes about four and a half times its bytes: at 64 MiB a
        /// server's valid pages held a device near 280 MB (attack 81); at 20 MiB under 100 MB. A server
        /// whose operator raised its body limit needs its devices to raise this with it.
        public var maximumResponseBytes: Int = 20 << 20
        /// The most bytes a downloaded bundle may take once inflated, counted as it is written to disk.
        public var maximumBundleBytes: Int64 = 8 << 30
        /// How many times its bytes on the wire a gzip download (a bundle, an original) may inflate to,
        /// past its first MiB, counted as it arrives. A bundle's JSON shrinks about 18 times and XML about
        /// as much; a gzip bomb's shrinks a thousand times, and 1.5 MB of one had a pre-sync write 1.5 GB
        /// into the store's volume (attack 92). 200, as `BundleLimits.maximumCompressionRatio` for a
        /// zipped bundle's entries. `Int64.max` turns the check off; below 1 counts as 1.
        public var maximumInflationRatio: Int64 = 200
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
    /// Three clients, because the inflation limit and the silence allowed are a client's settings:
    /// structured answers, uploads, and downloads (which inflate their own gzip, see `stream`) need
    /// different ones.
    private let client: HTTPClient
    private let transferClient: HTTPClient
    private let downloadClient: HTTPClient
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
        client = Self.makeClient(silence: configuration.requestTimeout, inflatedLimit: configuration.maximumResponseBytes)
        transferClient = Self.makeClient(
            silence: configuration.transferTimeout, inflatedLimit: Int(clamping: configuration.maximumBundleBytes))
        downloadClient = Self.makeClient(silence: configuration.transferTimeout, inflatedLimit: nil)
    }

    deinit {
        // Not awaited: a transport goes away with its last reference, and the clients close their
        // idle connections in the background.
        client.shutdown { _ in }
        transferClient.shutdown { _ in }
        downloadClient.shutdown { _ in }
    }

    /// A client that follows no redirect (a redirect's answer is reported as an error: following one
    /// to another host would take that host's answer for the server's), waits `silence` between bytes
    /// (and for a connection, at most 30 s) and inflates gzip answers only up to `inflatedLimit`, or
    /// leaves them compressed when it is nil.
    private static func makeClient(silence: Duration, inflatedLimit: Int?) -> HTTPClient {
        var configuration = HTTPClient.Configuration(
            redirectConfiguration: .disallow,
            timeout: .init(connect: timeAmount(min(silence, .seconds(30))), read: timeAmount(silence)),
            decompression: inflatedLimit.map { .enabled(limit: .size($0)) } ?? .disabled)
        // A refused or failed connection is reported at once, as a `noConnection` the sync engine's
        // retry policy backs off from; the client's own retries would hold every request to a server
        // that is down for the whole connect timeout (a bundle download to a refused port: 300 s).
        configuration.connectionPool.retryConnectionEstablishment = false
        return HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
    }

    static func timeAmount(_ duration: Duration) -> TimeAmount {
        let (seconds, attoseconds) = duration.components
        return .nanoseconds(seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
    }

    /// Replaces the bearer token (after a 401, say); counters and learned server traits are kept.
    public func renewToken(_ token: String?) {
        self.token = token
    }

    /// Traffic so far: body bytes as on the wire (compressed), by `Content-Length` where the server sent
    /// one and as counted while it arrived for a download (a bundle, an original).
    public var transferred: TransferCounts { counts }

    public func health() async throws(TransportError) -> HealthResponse {
        try await exchange(.GET, "health", body: nil as PushRequest?)
    }

    public func push(_ request: PushRequest) async throws(TransportError) -> PushResponse {
        let name = "POST /push"
        let sharing = configuration.sharesClocks && serverReadsSharedClock && !sharedClockRefused
            && request.mutations.contains { $0.sharedClock != nil }
        var answer = try await post(request, sharingClocks: sharing, name: name)
        // A server that cannot read the form refuses the whole batch as unreadable before applying any
        // of it (the form has no `clocks`, which it requires), so sending it again per field is safe.
        // Only when that copy is read was the form the trouble; then it is not sent again.
        if sharing, answer.refusedAsUnreadable {
            answer = try await post(request, sharingClocks: false, name: name)
            if !answer.refusedAsUnreadable { sharedClockRefused = true }
        }
        // One result per mutation sent, refused at the first past them (`PushResponse(wire:answering:)`).
        return try decode(answer, name: name) { bytes throws(JSONReaderError) in
            try PushResponse(wire: bytes, answering: request.mutations.count)
        }
    }

    private func post(_ request: PushRequest, sharingClocks: Bool, name: String) async throws(TransportError) -> Answer {
        let payload: Data
        do {
            payload = try request.json(sharingClocks: sharingClocks)
        } catch {
            throw TransportError(
                .rejected, request: name, message: "could not encode the request: \(error)", underlying: error)
        }
        return try await sendCompressing(.POST, "push", json: payload, name: name)
    }

    public func pushAnswers(_ request: PushAnswersRequest) async throws(TransportError) -> PushResponse {
        // At most one result per key asked, refused at the first past them, as a push's answer is.
        try await exchange(.POST, "push/answers", body: request) { bytes throws(JSONReaderError) in
            try PushResponse(wire: bytes, answering: request.idempotencyKeys.count)
        }
    }

    public func pull(_ request: PullRequest) async throws(TransportError) -> PullResponse {
        // Read within the count asked for, refused at the first change past it (`PullResponse(wire:atMost:)`).
        try await exchange(.POST, "pull", body: request) { bytes throws(JSONReaderError) in
            try PullResponse(wire: bytes, atMost: request.limit)
        }
    }

    public func mediaUploadStatus(for attachmentID: UUID) async throws(TransportError) -> MediaUploadStatus {
        try await exchange(.GET, Self.mediaPath(attachmentID), body: nil as PushRequest?)
    }

    public func uploadMedia(_ chunk: MediaChunk) async throws(TransportError) -> MediaUploadStatus {
        let path = Self.mediaPath(chunk.attachmentID)
        let name = "PUT /\(path)"
        var request = try makeRequest(.PUT, path, name: name)
        request.headers.replaceOrAdd(name: "Content-Type", value: "application/octet-stream")
        request.headers.replaceOrAdd(name: "Content-Range", value: chunk.contentRange)
        request.headers.replaceOrAdd(name: SyncProtocol.mediaDigestHeader, value: chunk.sha256)
        // Media is already compressed (JPEG, AAC): sent as is.
        let answer = try await send(request, body: chunk.data, name: name, on: transferClient, silence: configuration.transferTimeout)
        return try decode(answer, name: name)
    }

    public func downloadBundle(project: UUID, format: BundleFormat, to destination: URL)
        async throws(TransportError) -> Int64
    {
        let path = "projects/\(project.uuidString.lowercased())/bundle"
        let name = "GET /\(path)?format=\(format.rawValue)"
        let request = try makeRequest(.GET, path, query: "format=\(format.rawValue)", name: name)
        counts.requests += 1
        // Written beside the destination and moved over it once whole, so a cut-off download never
        // leaves half a bundle where an import would find it.
        let partial = destination.deletingLastPathComponent()
            .appendingPathComponent(".\(destination.lastPathComponent).\(UUID().uuidString).partial")
        defer { try? FileManager.default.removeItem(at: partial) }
        let limit = configuration.maximumBundleBytes
        let outcome = try await stream(request, name: name, into: partial, written: nil) { _, _ in (0, limit) }
        do {
            try? FileManager.default.removeItem(at: destination)
            try FileManager.default.moveItem(at: partial, to: destination)
        } catch {
            throw TransportError(
                .invalidResponse, request: name, status: outcome.status,
                message: "could not move the bundle to \(destination.path): \(error)", underlying: error)
        }
        return outcome.written
    }

    /// The bundle written straight into `destination`, each write reported as it lands.
    public func downloadBundle(
        project: UUID, format: BundleFormat, into destination: URL, written: @escaping @Sendable (Int64) -> Void
    ) async throws(TransportError) -> Int64 {
        let path = "projects/\(project.uuidString.lowercased())/bundle"
        let name = "GET /\(path)?format=\(format.rawValue)"
        let request = try makeRequest(.GET, path, query: "format=\(format.rawValue)", name: name)
        counts.requests += 1
        let limit = configuration.maximumBundleBytes
        return try await stream(request, name: name, into: destination, written: written) { _, _ in (0, limit) }.written
    }

    public func downloadOriginal(of attachmentID: UUID, byteCount: Int64, appendingTo partial: URL)
        async throws(TransportError) -> OriginalDownload
    {
        let path = "media/\(attachmentID.uuidString.lowercased())"
        let name = "GET /\(path)"
        var request = try makeRequest(.GET, path, name: name)
        let held = ((try? FileManager.default.attributesOfItem(atPath: partial.path))?[.size] as? NSNumber)?.int64Value ?? 0
        guard held < byteCount || byteCount == 0 else {
            throw TransportError(
                .rejected, request: name,
                message: "the partial file holds \(held) bytes of an original of \(byteCount): nothing is left to download")
        }
        if held > 0 { request.headers.replaceOrAdd(name: "Range", value: "bytes=\(held)-") }
        // Media is already compressed (JPEG, AAC): asked for as is, so a range counts the file's own bytes.
        request.headers.replaceOrAdd(name: "Accept-Encoding", value: "identity")
        counts.requests += 1
        let outcome = try await stream(request, name: name, into: partial, written: nil) { status, headers in
            // A 206 must resume where the file stops, and end where the record says it does; a 200 (a proxy
            // that ignores Range) is the whole file again, written from 0 and bounded by the whole size.
            if status == 206 {
                let expected = "bytes \(held)-\(byteCount - 1)/\(byteCount)"
                guard let range = headers.first(name: "Content-Range"), range == expected else {
                    throw ResumeError(message: "asked for \(expected), answered \(headers.first(name: "Content-Range") ?? "no Content-Range")")
                }
                return (UInt64(held), byteCount - held)
            }
            return (0, byteCount)
        }
        guard let digest = outcome.headers.first(name: SyncProtocol.mediaDigestHeader), digest.utf8.count == 64 else {
            throw TransportError(
                .invalidResponse, request: name, status: outcome.status,
                message: "the answer names no \(SyncProtocol.mediaDigestHeader) of the whole file")
        }
        let start = outcome.status == 206 ? held : 0
        return OriginalDownload(
            totalBytes: byteCount, heldBytes: start + outcome.written, receivedBytes: outcome.written, sha256: digest)
    }

    /// A ranged answer that does not start where the download asked.
    private struct ResumeError: Error, CustomStringConvertible {
        var message: String
        var description: String { message }
    }

    /// Streams `request`'s answer into `file` (created if missing), from the byte `start` returns once
    /// the head has arrived (the file is cut there first: 0 replaces it), refusing an answer past `limit`
    /// bytes (inflated) while it arrives. A gzip answer is inflated here (`GunzipStream`), so the bytes
    /// on the wire are counted: they earn the download its time past the transfer timeout
    /// (`minimumTransferBytesPerSecond`) and are the traffic reported. An error status is thrown as the
    /// server's error, its body read within 1 MiB. Both downloads (a bundle, an
    /// original) go through here. `written` hears the bytes written so far (of this answer) after each write.
    private func stream(
        _ request: HTTPClientRequest, name: String, into file: URL, written: (@Sendable (Int64) -> Void)?,
        start: @escaping @Sendable (Int, HTTPHeaders) throws -> (offset: UInt64, limit: Int64)
    ) async throws(TransportError) -> (status: Int, headers: HTTPHeaders, written: Int64) {
        // An error's body is a short JSON document (`ErrorBody`): one past a MiB is not one.
        let errorLimit = min(configuration.maximumResponseBytes, 1 << 20)
        let outcome: (status: Int, headers: HTTPHeaders, size: Int64, errorBody: Data)
        let limitSeen = NIOLockedValueBox<Int64>(0)
        // The bytes of this answer on the wire so far: the time they earn, and the traffic counted.
        let arrived = NIOLockedValueBox<Int64>(0)
        let rate = Double(max(configuration.minimumTransferBytesPerSecond, 1))
        let ratio = max(configuration.maximumInflationRatio, 1)
        let earned: @Sendable () -> Duration = { .seconds(Double(arrived.withLockedValue { $0 }) / rate) }
        var request = request
        if !request.headers.contains(name: "Accept-Encoding") {
            request.headers.replaceOrAdd(name: "Accept-Encoding", value: "gzip")
        }
        do {
            outcome = try await Self.within(configuration.transferTimeout, extendedBy: earned) {
                [downloadClient, request, headTimeout = configuration.requestTimeout] in
                // The client's deadline covers the answer's head only: it must begin within the request
                // timeout, as a structured answer must. Given the transfer timeout, a server that took the
                // connection and never answered held a pre-sync for five minutes (attack 93, finding 1);
                // the body then has the transfer timeout and the time its bytes earn.
                let response = try await downloadClient.execute(request, timeout: Self.timeAmount(headTimeout))
                let status = Int(response.status.code)
                let encoding = response.headers.first(name: "Content-Encoding")?
                    .trimmingCharacters(in: .whitespaces).lowercased() ?? "identity"
                guard encoding == "gzip" || encoding == "identity" else {
                    throw UnreadableEncoding(encoding: encoding)
                }
                guard (200..<300).contains(status) else {
                    // Read as it arrives, inflated there, within the error limit. A body past it, or
                    // one that does not inflate, is no error body: the answer is still the server's
                    // status (a 503 is retried as one), told without a body. Refused as too large, a
                    // 404 read as a broken answer of unknown status (attack 82).
                    let inflater = encoding == "gzip" ? GunzipStream(limit: Int64(errorLimit)) : nil
                    var body = Data()
                    do {
                        for try await part in response.body {
                            arrived.withLockedValue { $0 += Int64(part.readableBytes) }
                            if let inflater {
                                try part.withUnsafeReadableBytes { bytes in try inflater.inflate(bytes) { body.append(contentsOf: $0) } }
                            } else {
                                guard body.count + part.readableBytes <= errorLimit else { throw NIOTooManyBytesError(maxBytes: errorLimit) }
                                body.append(contentsOf: part.readableBytesView)
                            }
                        }
                        try inflater?.finish()
                    } catch is GunzipStream.Failure {
                        body = Data()
                    } catch is NIOTooManyBytesError {
                        body = Data()
                    }
                    return (status, response.headers, 0, body)
                }
                let (offset, limit) = try start(status, response.headers)
                limitSeen.withLockedValue { $0 = limit }
                if !FileManager.default.fileExists(atPath: file.path) {
                    guard FileManager.default.createFile(atPath: file.path, contents: nil) else {
                        throw BundleFileError(path: file.path)
                    }
                }
                let handle = try FileHandle(forWritingTo: file)
                defer { try? handle.close() }
                try handle.truncate(atOffset: offset)
                try handle.seekToEnd()
                let inflater = encoding == "gzip" ? GunzipStream(limit: limit) : nil
                var size: Int64 = 0
                for try await part in response.body {
                    let wire = arrived.withLockedValue { $0 += Int64(part.readableBytes); return $0 }
                    if let inflater {
                        // Judged against the wire bytes so far, every 64 KiB inflated, before they are written.
                        let product = wire.multipliedReportingOverflow(by: ratio)
                        let allowed = max(1 << 20, product.overflow ? .max : product.partialValue)
                        try part.withUnsafeReadableBytes { bytes in
                            try inflater.inflate(bytes) { inflated in
                                guard inflater.inflatedCount <= allowed else {
                                    throw InflatedTooFar(wireBytes: wire, allowedBytes: allowed, ratio: ratio)
                                }
                                try handle.write(contentsOf: inflated)
                            }
                        }
                        size = inflater.inflatedCount
                    } else {
                        size += Int64(part.readableBytes)
                        guard size <= limit else { throw NIOTooManyBytesError(maxBytes: Int(clamping: limit)) }
                        try handle.write(contentsOf: Data(part.readableBytesView))
                    }
                    written?(size)
                }
                try inflater?.finish()
                return (status, response.headers, size, Data())
            }
        } catch let error as ResumeError {
            counts.bytesReceived += arrived.withLockedValue { $0 }
            throw TransportError(.invalidResponse, request: name, message: error.message, underlying: error)
        } catch {
            counts.bytesReceived += arrived.withLockedValue { $0 }
            throw classify(error, name: name, limit: Int(clamping: limitSeen.withLockedValue { $0 }))
        }
        counts.bytesReceived += arrived.withLockedValue { $0 }
        guard (200..<300).contains(outcome.status) else {
            throw Self.failure(name: name, status: outcome.status, headers: outcome.headers, body: outcome.errorBody)
        }
        return (outcome.status, outcome.headers, outcome.size)
    }

    // MARK: - Plumbing

    static func mediaPath(_ attachmentID: UUID) -> String {
        "media/\(attachmentID.uuidString.lowercased())/upload"
    }

    /// An answer read whole, within `maximumResponseBytes`.
    private struct Answer: Sendable {
        var status: Int
        var headers: HTTPHeaders
        /// As collected, read in place by `decode`: a page of up to 20 MiB was held three times over
        /// (the client's buffer, a `Data` of it, the reader's bytes) while it was read (attack 82).
        var body: [UInt8]

        /// A 400 `invalid_request`: the server could not read the request at all.
        var refusedAsUnreadable: Bool {
            status == 400 && (try? WireCoding.decoder().decode(ErrorBody.self, from: Data(body)))?.code == .invalidRequest
        }
    }

    /// Sends `body` as JSON (if any) and decodes the answer as `Response`.
    private func exchange<Body: Encodable, Response: Decodable>(
        _ method: HTTPMethod, _ path: String, body: Body?,
        reading read: ((_ bytes: [UInt8]) throws(JSONReaderError) -> Response)? = nil
    ) async throws(TransportError) -> Response {
        let name = "\(method.rawValue) /\(path)"
        var payload: Data?
        if let body {
            do {
                payload = try WireCoding.encoder().encode(body)
            } catch {
                throw TransportError(
                    .rejected, request: name, message: "could not encode the request: \(error)", underlying: error)
            }
        }
        let answer = try await sendCompressing(method, path, json: payload, name: name)
        return try decode(answer, name: name, reading: read)
    }

    /// Sends `payload` (if any) as a JSON body, gzip-compressing a large one unless the server has
    /// refused that before; a 415 to a compressed body switches compression off and sends it once
    /// more, plain.
    private func sendCompressing(_ method: HTTPMethod, _ path: String, json payload: Data?, name: String)
        async throws(TransportError) -> Answer
    {
        var request = try makeRequest(method, path, name: name)
        if payload != nil { request.headers.replaceOrAdd(name: "Content-Type", value: "application/json") }
        guard let payload, compressesRequests, payload.count > SyncProtocol.compressionThreshold else {
            return try await send(request, body: payload, name: name)
        }
        var compressed = request
        compressed.headers.replaceOrAdd(name: "Content-Encoding", value: "gzip")
        let answer = try await send(compressed, body: Gzip.compress(payload), name: name)
        guard answer.status == 415 else { return answer }
        compressesRequests = false
        return try await send(request, body: payload, name: name)
    }

    private func send(
        _ request: HTTPClientRequest, body: Data?, name: String, on client: HTTPClient? = nil, silence: Duration? = nil
    ) async throws(TransportError) -> Answer {
        let client = client ?? self.client
        let silence = silence ?? configuration.requestTimeout
        var request = request
        counts.requests += 1
        if let body {
            request.body = .bytes(ByteBuffer(bytes: body))
            counts.bytesSent += Int64(body.count)
        }
        // The client's read timeout is for a silence between bytes: a server dripping a byte every few
        // seconds would hold a sync for good. A whole exchange may take four times that, and at least
        // the transfer timeout: a full 4 MiB pull page must still arrive over a 15 KB/s field
        // connection (at 120 s, one over 30 KB/s timed out on every try).
        let deadline = max(silence * 4, configuration.transferTimeout)
        // The answer's head must begin within the silence, once the body could have crossed at the
        // slowest rate a transfer is held to (as a download's head must): the client's read timer is
        // reset by every interim answer (`102 Processing`), and a server sending them without end held
        // a sync, a core busy, for the whole deadline (attack 131 F3: 300 s, 1.4 GB in the first 60).
        let rate = Double(max(configuration.minimumTransferBytesPerSecond, 1))
        let bodyTime = Duration.seconds(Double(body?.count ?? 0) / rate)
        let headDeadline = min(deadline, silence + bodyTime)
        let limit = configuration.maximumResponseBytes
        // Once its head has come, the answer has the silence again and the time its bytes earn at the
        // slowest rate a transfer is held to, within the deadline: a server dripping a byte every two
        // seconds (each within the silence) held a sync for the whole deadline (attack 132 F3: 300 s).
        // Counted inflated, as the client hands them over: at most about a thousand times the wire's
        // bytes, and never past the deadline. Until the head comes only the deadline counts, as before:
        // a process whose cooperative pool is busy for minutes starts the exchange late, not wrongly.
        let arrived = NIOLockedValueBox<Int64>(0)
        let headCame = NIOLockedValueBox<Duration?>(nil)
        let started = ContinuousClock.now
        let allowed: @Sendable () -> Duration = {
            guard let head = headCame.withLockedValue({ $0 }) else { return deadline }
            return head + silence + .seconds(Double(arrived.withLockedValue { $0 }) / rate)
        }
        let answer: Answer
        do {
            answer = try await Self.within(.zero, extendedBy: allowed, atMost: deadline, recheckingEvery: silence) { [request] in
                let response = try await client.execute(request, timeout: Self.timeAmount(headDeadline))
                headCame.withLockedValue { $0 = ContinuousClock.now - started }
                // Counted while it arrives, inflated: a body past the limit is cut off there.
                var collected = ByteBuffer()
                for try await part in response.body {
                    arrived.withLockedValue { $0 += Int64(part.readableBytes) }
                    guard collected.readableBytes + part.readableBytes <= limit else { throw NIOTooManyBytesError(maxBytes: limit) }
                    collected.writeImmutableBuffer(part)
                }
                return Answer(status: Int(response.status.code), headers: response.headers, body: Array(collected.readableBytesView))
            }
        } catch {
            throw classify(error, name: name, limit: limit)
        }
        let accepted = answer.headers[canonicalForm: SyncProtocol.acceptsHeader]
        if accepted.contains(where: { $0.trimmingCharacters(in: .whitespaces) == SyncProtocol.sharedClockForm }) {
            serverReadsSharedClock = true
        }
        if let text = answer.headers.first(name: SyncProtocol.conflictPolicyHeader) {
            serverConflictPolicyText = text
        }
        // Count the body as it crossed the wire: its Content-Length when it came compressed.
        let wireLength = answer.headers.first(name: "Content-Length").flatMap { Int64($0) }
        counts.bytesReceived += wireLength ?? Int64(answer.body.count)
        return answer
    }

    /// `work`'s result, or `TimedOut` once `deadline` passes; the work is cancelled then, which the
    /// client honours at once (it closes the connection). The client's own deadline covers only the
    /// wait for an answer's head, not its body. A dispatch timer, not a sleeping task, so a busy
    /// cooperative pool cannot make it late. `extendedBy` says how much later than `deadline` the work
    /// may end as it stands (a download's progress); asked when the deadline comes, which then moves,
    /// never past `atMost` if given, and asked again at least every `recheckingEvery` if given (for an
    /// allowance that can shrink as the work goes on).
    static func within<Value: Sendable>(
        _ deadline: Duration, extendedBy earnedTime: (@Sendable () -> Duration)? = nil, atMost cap: Duration? = nil,
        recheckingEvery recheck: Duration? = nil, _ work: @escaping @Sendable () async throws -> Value
    ) async throws -> Value {
        let task = Task { try await work() }
        let expired = NIOLockedValueBox(false)
        // The timer reaches the task through a box emptied when the exchange ends: a task holds its
        // result, and a timer holding the task kept every answer read (a whole pull page) alive until
        // the deadline passed, minutes later (attack 65 F3: 0.3 to 0.95 GB in 40 s of pages). A
        // cancelled timer source also leaves dispatch's queue at once, where a cancelled work item
        // waited out its deadline.
        let running = NIOLockedValueBox<Task<Value, any Error>?>(task)
        let cap = cap ?? .seconds(Int64.max)
        let timer = DispatchSource.makeTimerSource(queue: .global())
        let started = ContinuousClock.now
        // The handler holds its timer to move it; cancelling the timer below releases the handler.
        timer.setEventHandler { [timer] in
            if let earnedTime {
                let allowed = min(deadline + earnedTime(), cap)
                let left = allowed - (ContinuousClock.now - started)
                if left > .zero {
                    timer.schedule(deadline: .now() + min(left, recheck ?? left).seconds)
                    return
                }
            }
            expired.withLockedValue { $0 = true }
            running.withLockedValue { $0?.cancel() }
        }
        timer.schedule(deadline: .now() + deadline.seconds)
        timer.resume()
        defer {
            timer.cancel()
            running.withLockedValue { $0 = nil }
        }
        do {
            return try await withTaskCancellationHandler {
                try await task.value
            } onCancel: {
                task.cancel()
            }
        } catch {
            if expired.withLockedValue({ $0 }) {
                throw TimedOut(deadline: min(deadline + (earnedTime?() ?? .zero), cap))
            }
            throw error
        }
    }

    /// A gzip download that inflated past `Configuration.maximumInflationRatio` times its wire bytes.
    private struct InflatedTooFar: Error, CustomStringConvertible {
        var wireBytes: Int64
        var allowedBytes: Int64
        var ratio: Int64
        var description: String {
            "the answer's \(wireBytes) bytes of gzip inflated past \(allowedBytes) bytes, \(ratio) times their size after "
                + "the first MiB (no real bundle or file shrinks so far): cut off there"
        }
    }

    /// A download's answer in a content coding other than gzip or none.
    private struct UnreadableEncoding: Error, CustomStringConvertible {
        var encoding: String
        var description: String { "the answer is in a content coding this client cannot read: \(encoding.prefix(64))" }
    }

    /// The deadline of a whole exchange passed.
    private struct TimedOut: Error, CustomStringConvertible {
        var deadline: Duration
        var description: String { "no whole answer within \(deadline)" }
    }

    /// A bundle's partial file could not be created.
    private struct BundleFileError: Error, CustomStringConvertible {
        var path: String
        var description: String { "could not create \(path)" }
    }

    /// The answer's value, read by `read` when given, else by the type's own reader.
    private func decode<Response: Decodable>(
        _ answer: Answer, name: String, reading read: ((_ bytes: [UInt8]) throws(JSONReaderError) -> Response)? = nil
    ) throws(TransportError) -> Response {
        guard (200..<300).contains(answer.status) else {
            throw Self.failure(name: name, status: answer.status, headers: answer.headers, body: Data(answer.body))
        }
        do {
            if let read { return try read(answer.body) }
            if let readable = Response.self as? any WireReadable.Type {
                return try readable.init(wire: answer.body) as! Response
            }
            return try WireCoding.decoder().decode(Response.self, from: Data(answer.body))
        } catch {
            throw TransportError(
                .invalidResponse, request: name, status: answer.status,
                message: "the answer is not a valid \(Response.self): \(error)", underlying: error)
        }
    }

    /// Refuses a server address no connection can be made to (not http or https, no host, a port
    /// outside 1…65535), and plain HTTP to anything but loopback unless the app allowed it
    /// (`allowsPlainHTTP`). Handed on, a port past 65535 crashed the process in the HTTP client's
    /// address code (a mistyped `--server http://127.0.0.1:70000`; attack 101).
    private func checkScheme(name: String) throws(TransportError) {
        let url = configuration.baseURL
        let scheme = url.scheme?.lowercased()
        guard scheme == "http" || scheme == "https", let named = url.host, !named.isEmpty,
            url.port.map({ (1...65_535).contains($0) }) ?? true
        else {
            throw TransportError(
                .rejected, request: name,
                message: "the server address \(url.absoluteString) cannot be reached: it needs http or https, a host, and a port from 1 to 65535 if any")
        }
        guard scheme == "http", !configuration.allowsPlainHTTP else { return }
        let host = (url.host ?? "").lowercased().trimmingCharacters(in: CharacterSet(charactersIn: "[]"))
        // 127.0.0.0/8 as an address, never a name that merely starts with "127." (127.example.com).
        let octets = host.split(separator: ".", omittingEmptySubsequences: false).map { UInt8($0) }
        let loopback = host == "localhost" || host == "::1" || (octets.count == 4 && octets.allSatisfy { $0 != nil } && octets[0] == 127)
        guard !loopback else { return }
        throw TransportError(
            .rejected, request: name,
            message: "plain HTTP to \(host) is refused: the token and records would cross the network unencrypted; use https, or set allowsPlainHTTP for a network you trust")
    }

    /// A request with the protocol's headers, after the scheme check (nothing is built, let alone
    /// sent, for a server that plain HTTP may not reach).
    private func makeRequest(_ method: HTTPMethod, _ path: String, query: String? = nil, name: String)
        throws(TransportError) -> HTTPClientRequest
    {
        try checkScheme(name: name)
        var url = configuration.baseURL.appendingPathComponent(path).absoluteString
        if let query { url += "?" + query }
        var request = HTTPClientRequest(url: url)
        request.method = method
        request.headers.add(name: SyncProtocol.protocolVersionHeader, value: String(SyncProtocol.version))
        request.headers.add(name: SyncProtocol.schemaVersionHeader, value: String(configuration.schemaVersion))
        request.headers.add(name: "Accept", value: "application/json")
        request.headers.add(name: "Accept-Encoding", value: "gzip")
        if let token { request.headers.add(name: "Authorization", value: "Bearer \(token)") }
        return request
    }

    /// An error response as a `TransportError`, reading the error body and `Retry-After` (delta-seconds).
    static func failure(name: String, status: Int, headers: HTTPHeaders, body: Data) -> TransportError {
        let errorBody = try? WireCoding.decoder().decode(ErrorBody.self, from: body)
        let retryAfter = headers.first(name: "Retry-After")
            .flatMap { Int($0.trimmingCharacters(in: .whitespaces)) }
            .map { Duration.seconds(max(0, $0)) }
        if (300..<400).contains(status), errorBody == nil {
            let target = headers.first(name: "Location") ?? "nowhere"
            return TransportError(
                .invalidResponse, request: name, status: status,
                message: "the server redirected to \(target); redirects are not followed, so another host never gets the token or stands in for the server")
        }
        return TransportError(request: name, status: status, body: errorBody, retryAfter: retryAfter)
    }

    /// A failure of the exchange itself (no answer, a cut-off one, one past its limit) as a
    /// `TransportError`, the client's error kept as the cause.
    private func classify(_ error: any Error, name: String, limit: Int) -> TransportError {
        // A caller that cancelled gets `cancelled`, whatever the client failed with on the way out: a
        // connection attempt still under way when the request was cancelled can end in the client's
        // connect timeout, and a sync told `timedOut` backs off and retries what its app stopped.
        if Task.isCancelled {
            return TransportError(.cancelled, request: name, message: "cancelled", underlying: error)
        }
        switch error {
        case is TimedOut:
            return TransportError(.timedOut, request: name, message: "\(error)", underlying: error)
        case is NIOTooManyBytesError, is NIOHTTPDecompression.DecompressionError:
            return TransportError(
                .invalidResponse, request: name,
                message: "the answer is larger than \(limit) bytes; it was cut off where it passed that", underlying: error)
        case let gzip as GunzipStream.Failure where gzip.kind == .exceedsLimit:
            return TransportError(
                .invalidResponse, request: name,
                message: "the answer is larger than \(limit) bytes; it was cut off where it passed that", underlying: error)
        case is GunzipStream.Failure, is UnreadableEncoding, is InflatedTooFar:
            return TransportError(.invalidResponse, request: name, message: "\(error)", underlying: error)
        case is CancellationError:
            return TransportError(.cancelled, request: name, message: "cancelled", underlying: error)
        case let client as HTTPClientError:
            switch client {
            case .readTimeout, .connectTimeout, .deadlineExceeded:
                return TransportError(.timedOut, request: name, message: "\(client)", underlying: error)
            case .cancelled:
                return TransportError(.cancelled, request: name, message: "cancelled", underlying: error)
            case .invalidURL, .emptyHost, .emptyScheme:
                return TransportError(.rejected, request: name, message: "\(client)", underlying: error)
            default:
                return TransportError(.noConnection, request: name, message: "\(client)", underlying: error)
            }
        case HTTPParserError.invalidEOFState:
            // The connection closed before the length the head promised: a network cut, not a wrong
            // answer. What arrived is good so far, and a download keeps it to resume (attack 76, finding 1).
            return TransportError(.noConnection, request: name, message: "the connection closed part way through the answer (\(error))", underlying: error)
        case is HTTPParserError:
            return TransportError(.invalidResponse, request: name, message: "\(error)", underlying: error)
        default:
            return TransportError(.noConnection, request: name, message: "\(error)", underlying: error)
        }
    }
}

import Foundation
import OutpostConflicts
import OutpostSchema
import OutpostServer
import OutpostWire

/// A sync server for unit tests: the reference `SyncServer`, over a SQLite file in a temporary folder,
/// called in process as one user. Every push, pull, media upload and bundle goes through the server's
/// own rules (idempotency, conflict answers with the policy, project membership and roles, server ids,
/// clock limits, media checksums and quotas) and through the wire codec, so a test of the engine or of
/// an app meets what a device meets over the network. What it leaves out is HTTP itself: the version
/// headers, gzip, `Retry-After` parsing; `HTTPTransport`'s own tests cover those against a real port.
///
/// On top it plays injected failures (`inject`), logs the routes asked (`requests`), and lets a test
/// write as another device would (`apply`) and look at what the server holds (`record`).
public actor InProcessServer: SyncTransport {
    /// The routes, for aiming an injected failure at one of them.
    public enum Route: String, Sendable, Hashable, CaseIterable {
        case health, push, pushAnswers, pull, mediaStatus, mediaUpload, bundle, original
    }

    /// The one user every call is made as.
    public let userID: UUID
    private let folder: URL
    private let server: SyncServer
    private let token: String
    private var failures: [(failure: InjectedFailure, route: Route?)] = []
    private var counts = TransferCounts()

    /// Every request received, in order, as `Route`s (including the ones that failed).
    public private(set) var requests: [Route] = []

    /// Starts an empty server with one user. With `assignsServerIDs` every create gets an integer id
    /// (as `outpost serve --server-ids` does); `policy` is the server's conflict policy. Commits are not
    /// flushed to the disk (`durableCommits: false`): a test's server never outlives a power cut.
    /// `answersKept` lowers how many idempotency answers the server keeps per member (20,000), and how
    /// many more a member's pushes add before the older ones go.
    public init(
        assignsServerIDs: Bool = false, maximumBatchSize: Int = 500, maximumPullLimit: Int = ServerConfiguration.defaultMaximumPullLimit,
        policy: ConflictPolicy = ConflictPolicy(), answersKept: (count: Int, pruningEvery: Int64)? = nil
    ) async throws(ServerError) {
        folder = FileManager.default.temporaryDirectory.appendingPathComponent("outpost-test-server-\(UUID().uuidString)")
        do {
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        } catch {
            throw ServerError(.invalidConfiguration, message: "could not create \(folder.path)", underlying: error)
        }
        var configuration = ServerConfiguration(
            databasePath: folder.appendingPathComponent("server.sqlite").path, port: 0,
            assignsServerIDs: assignsServerIDs, maximumBatchSize: maximumBatchSize,
            maximumPullLimit: maximumPullLimit, logLevel: "error", conflictPolicy: policy, durableCommits: false)
        if let answersKept { configuration.keepAnswers(answersKept.count, pruningEvery: answersKept.pruningEvery) }
        server = try SyncServer(configuration: configuration)
        userID = UUID()
        token = "test-\(UUID().uuidString)"
        try await server.load(ServerSeed(
            members: [.init(userID: userID, name: "Test user", role: "owner", projects: [])],
            tokens: [.init(userID: userID, token: token)]))
    }

    deinit {
        try? FileManager.default.removeItem(at: folder)
    }

    // MARK: - Test controls

    /// Queues `failure` for the next request to `route` (any route when nil); repeat it `times` times.
    public func inject(_ failure: InjectedFailure, on route: Route? = nil, times: Int = 1) {
        failures += Array(repeating: (failure, route), count: times)
    }

    /// Creates `model` on the server as another device of the user would push it, every field stamped
    /// now; throws when the server does not apply it.
    public func create(_ model: some Syncable) async throws(ServerError) {
        let record = model.record
        let stamp = HybridTimestamp(
            physicalMilliseconds: Int64(Timestamp.now().timeIntervalSince1970 * 1000), counter: 0, node: NodeID(0x7E57))
        let outcome = try await apply(PushMutation(
            idempotencyKey: UUID(), entity: record.entity, operation: .create, recordID: record.id, baseVersion: 0,
            fields: record.fields, clocks: record.fields.mapValues { _ in stamp }))
        guard case .applied = outcome else {
            throw ServerError(.requestRefused, message: "the server did not create \(record.entity.rawValue) \(record.id): \(outcome)")
        }
    }

    /// Applies a mutation as another device of the same user would push it: the way to make changes on
    /// the server behind a device's back. Plays no injected failure and counts no traffic.
    @discardableResult
    public func apply(_ mutation: PushMutation) async throws(ServerError) -> MutationOutcome {
        let caller = try await server.caller(bearing: token)
        let results = try await server.push(PushRequest(mutations: [mutation]), by: caller).results
        return results[0].outcome
    }

    /// The server's current state of a record, tombstones with their last values included.
    public func record(_ id: UUID) async throws(ServerError) -> ServerRecord? {
        try await server.storedRecord(id)
    }

    /// The bytes of an attachment's file the server holds so far, the whole file once its upload
    /// completed; nil before its first chunk.
    public func mediaData(for attachmentID: UUID) -> Data? {
        let files = server.mediaFiles(of: attachmentID)
        return (try? Data(contentsOf: files.finished)) ?? (try? Data(contentsOf: files.part))
    }

    // MARK: - SyncTransport

    public var transferred: TransferCounts { counts }

    public var serverConflictPolicyText: String? {
        SyncProtocol.conflictPolicyText(server.configuration.conflictPolicy)
    }

    public func health() async throws(TransportError) -> HealthResponse {
        try await serve(.health, "GET /health") { _ throws(ServerError) in try await server.health() }
    }

    public func push(_ request: PushRequest) async throws(TransportError) -> PushResponse {
        let name = "POST /push"
        // Through the codec both ways, as over the network.
        let body: Data
        do {
            body = try request.json(sharingClocks: false)
        } catch {
            throw TransportError(.rejected, request: name, message: "could not encode the request: \(error)", underlying: error)
        }
        counts.bytesSent += Int64(body.count)
        let answer = try await serve(.push, name) { caller throws(ServerError) in
            let decoded = try server.readPush(body)
            // The answer's bytes as the route writes them.
            return Data(try PushResponseJSON.encode(try await server.push(decoded, by: caller)))
        }
        do {
            return try PushResponse(wire: answer)
        } catch {
            throw TransportError(.invalidResponse, request: name, message: "unreadable answer: \(error)", underlying: error)
        }
    }

    public func pushAnswers(_ request: PushAnswersRequest) async throws(TransportError) -> PushResponse {
        let name = "POST /push/answers"
        counts.bytesSent += Int64((try? WireCoding.encoder().encode(request).count) ?? 0)
        let answer = try await serve(.pushAnswers, name) { caller throws(ServerError) in
            Data(try PushResponseJSON.encode(try await server.pushAnswers(request, by: caller)))
        }
        do {
            return try PushResponse(wire: [UInt8](answer), answering: request.idempotencyKeys.count)
        } catch {
            throw TransportError(.invalidResponse, request: name, message: "unreadable answer: \(error)", underlying: error)
        }
    }

    public func pull(_ request: PullRequest) async throws(TransportError) -> PullResponse {
        let name = "POST /pull"
        counts.bytesSent += Int64((try? WireCoding.encoder().encode(request).count) ?? 0)
        let body = try await serve(.pull, name) { caller throws(ServerError) in
            try await server.pull(request, by: caller, gzip: false).data
        }
        do {
            return try PullResponse(wire: body)
        } catch {
            throw TransportError(.invalidResponse, request: name, message: "unreadable page: \(error)", underlying: error)
        }
    }

    public func mediaUploadStatus(for attachmentID: UUID) async throws(TransportError) -> MediaUploadStatus {
        try await serve(.mediaStatus, "GET /media/\(attachmentID.uuidString.lowercased())/upload") {
            caller throws(ServerError) in try await server.mediaStatus(of: attachmentID, by: caller)
        }
    }

    public func uploadMedia(_ chunk: MediaChunk) async throws(TransportError) -> MediaUploadStatus {
        counts.bytesSent += Int64(chunk.data.count)
        return try await serve(.mediaUpload, "PUT /media/\(chunk.attachmentID.uuidString.lowercased())/upload") {
            caller throws(ServerError) in
            try await server.receiveMedia(
                chunk.data,
                range: ContentRange(first: chunk.offset, length: Int64(chunk.data.count), total: chunk.totalBytes),
                sha256: chunk.sha256, for: chunk.attachmentID, by: caller)
        }
    }

    public func downloadBundle(project: UUID, format: BundleFormat, to destination: URL)
        async throws(TransportError) -> Int64
    {
        let name = "GET /projects/\(project.uuidString.lowercased())/bundle?format=\(format.rawValue)"
        let download = try await serve(.bundle, name) { caller throws(ServerError) in
            try await server.openBundle(project: project, format: format, by: caller)
        }
        var bytes = Data()
        do {
            try await download.write(gzip: false) { bytes.append(contentsOf: $0) }
            try bytes.write(to: destination)
        } catch {
            throw TransportError(.invalidResponse, request: name, message: "the bundle failed: \(error)", underlying: error)
        }
        counts.bytesReceived += Int64(bytes.count)
        return Int64(bytes.count)
    }

    public func downloadOriginal(of attachmentID: UUID, byteCount: Int64, appendingTo partial: URL)
        async throws(TransportError) -> OriginalDownload
    {
        let name = "GET /media/\(attachmentID.uuidString.lowercased())"
        let original = try await serve(.original, name) { caller throws(ServerError) in
            try await server.mediaOriginal(of: attachmentID, by: caller)
        }
        do {
            let held = (try? FileManager.default.attributesOfItem(atPath: partial.path)[.size] as? NSNumber)?.int64Value ?? 0
            let whole = try Data(contentsOf: URL(fileURLWithPath: original.path))
            guard held <= whole.count else {
                throw TransportError(.rejected, request: name, status: 416, message: "the partial file is longer than the original")
            }
            if !FileManager.default.fileExists(atPath: partial.path) {
                _ = FileManager.default.createFile(atPath: partial.path, contents: nil)
            }
            let handle = try FileHandle(forWritingTo: partial)
            defer { try? handle.close() }
            try handle.seekToEnd()
            let rest = whole.dropFirst(Int(held))
            try handle.write(contentsOf: rest)
            counts.bytesReceived += Int64(rest.count)
            return OriginalDownload(
                totalBytes: Int64(whole.count), heldBytes: Int64(whole.count), receivedBytes: Int64(rest.count),
                sha256: original.sha256)
        } catch let error as TransportError {
            throw error
        } catch {
            throw TransportError(.invalidResponse, request: name, message: "the original failed: \(error)", underlying: error)
        }
    }

    // MARK: - Serving

    /// Plays the next injected failure for `route`, or serves the request as the user; a refusal
    /// arrives as the `TransportError` its HTTP answer would have become.
    private func serve<Answer: Sendable>(
        _ route: Route, _ name: String, _ handler: (Caller) async throws(ServerError) -> Answer
    ) async throws(TransportError) -> Answer {
        requests.append(route)
        counts.requests += 1
        let failure = failures.firstIndex { $0.route == nil || $0.route == route }.map { failures.remove(at: $0) }
        switch failure?.failure {
        case .dropRequest?:
            throw TransportError(.noConnection, request: name, message: "injected: request dropped")
        case .httpError(let status, let code, let retryAfter)?:
            throw TransportError(
                request: name, status: status, body: ErrorBody(code: code, message: "injected failure"),
                retryAfter: retryAfter)
        case .dropResponse?:
            _ = try await answer(name, handler)
            throw TransportError(.timedOut, request: name, message: "injected: response dropped")
        case nil:
            let answer = try await answer(name, handler)
            if let encodable = answer as? any Encodable {
                counts.bytesReceived += Int64((try? WireCoding.encoder().encode(encodable).count) ?? 0)
            } else if let data = answer as? Data {
                counts.bytesReceived += Int64(data.count)
            }
            return answer
        }
    }

    private func answer<Answer: Sendable>(
        _ name: String, _ handler: (Caller) async throws(ServerError) -> Answer
    ) async throws(TransportError) -> Answer {
        do {
            return try await handler(try await server.caller(bearing: token))
        } catch {
            throw TransportError(
                request: name, status: error.httpStatus ?? 500, body: error.errorBody,
                retryAfter: error.retryAfterSeconds.map { .seconds($0) })
        }
    }
}

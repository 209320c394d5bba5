import Foundation
import OutpostConflicts
import OutpostModels
import OutpostWire

/// A test double: a small sync server in memory, for unit tests of the engine and of apps.
///
/// It applies each idempotency key at most once (a repeat gets the original result), answers a push
/// on a stale base version with a conflict carrying its record, keeps a change sequence that pull
/// pages through with tombstones, optionally assigns integer server ids, and plays injected failures.
/// It does not check projects or tokens, nor verify media checksums; the reference server does.
public actor InMemoryTransport: SyncTransport {
    /// The routes, for aiming an injected failure at one of them.
    public enum Route: String, Sendable, Hashable, CaseIterable {
        case health, push, pull, mediaStatus, mediaUpload, bundle
    }

    private let assignsServerIDs: Bool
    private let maximumBatchSize: Int
    private let maximumPullLimit: Int
    private var records: [UUID: ServerRecord] = [:]
    private var results: [UUID: MutationOutcome] = [:]
    private var sequence: Int64 = 0
    private var nextServerID = 1
    private var media: [UUID: (data: Data, total: Int64, complete: Bool)] = [:]
    private var bundles: [UUID: Data] = [:]
    private var failures: [(failure: InjectedFailure, route: Route?)] = []
    private var counts = TransferCounts()

    /// Every request received, in order, as `Route`s (including the ones that failed).
    public private(set) var requests: [Route] = []

    /// Creates an empty server; with `assignsServerIDs` every create gets an integer id (as `--server-ids` does).
    public init(assignsServerIDs: Bool = false, maximumBatchSize: Int = 500, maximumPullLimit: Int = 1000) {
        self.assignsServerIDs = assignsServerIDs
        self.maximumBatchSize = maximumBatchSize
        self.maximumPullLimit = maximumPullLimit
    }

    // MARK: - Test controls

    /// Queues `failure` for the next request to `route` (any route when nil); repeat it `times` times.
    public func inject(_ failure: InjectedFailure, on route: Route? = nil, times: Int = 1) {
        failures += Array(repeating: (failure, route), count: times)
    }

    /// The server's current state of a record, tombstones included.
    public func record(_ id: UUID) -> ServerRecord? {
        records[id]
    }

    /// Applies a mutation as if another device had pushed it: the way to create server-side changes.
    @discardableResult
    public func apply(_ mutation: PushMutation) -> MutationOutcome {
        if let original = results[mutation.idempotencyKey] { return .duplicate(original: original) }
        let outcome = outcome(of: mutation)
        results[mutation.idempotencyKey] = outcome
        return outcome
    }

    /// Sets the bytes `downloadBundle` serves for a project.
    public func setBundle(_ data: Data, for project: UUID) {
        bundles[project] = data
    }

    /// The bytes received so far for an attachment's file.
    public func mediaData(for attachmentID: UUID) -> Data? {
        media[attachmentID]?.data
    }

    // MARK: - SyncTransport

    public var transferred: TransferCounts { counts }

    public func health() async throws(TransportError) -> HealthResponse {
        try await serve(.health, "GET /health") { () throws(TransportError) in
            HealthResponse(
                minimumSchemaVersion: 1, maximumSchemaVersion: Int.max, maximumBatchSize: maximumBatchSize,
                maximumPullLimit: maximumPullLimit, assignsServerIDs: assignsServerIDs, serverTime: Timestamp.now())
        }
    }

    public func push(_ request: PushRequest) async throws(TransportError) -> PushResponse {
        count(sent: request)
        return try await serve(.push, "POST /push") { () throws(TransportError) in
            guard request.mutations.count <= maximumBatchSize else {
                throw TransportError(
                    request: "POST /push", status: 413,
                    body: ErrorBody(code: .batchTooLarge, message: "at most \(maximumBatchSize) mutations per push"),
                    retryAfter: nil)
            }
            return PushResponse(results: request.mutations.map {
                MutationResult(idempotencyKey: $0.idempotencyKey, outcome: apply($0))
            })
        }
    }

    public func pull(_ request: PullRequest) async throws(TransportError) -> PullResponse {
        count(sent: request)
        return try await serve(.pull, "POST /pull") { () throws(TransportError) in
            guard let after = request.cursor.map({ Int64($0) }) ?? 0, request.limit > 0 else {
                throw TransportError(
                    request: "POST /pull", status: 400,
                    body: ErrorBody(code: .invalidRequest, message: "unknown cursor or limit below 1"),
                    retryAfter: nil)
            }
            let pending = records.values.filter { $0.sequence > after }.sorted { $0.sequence < $1.sequence }
            let page = Array(pending.prefix(min(request.limit, maximumPullLimit)))
            return PullResponse(
                changes: page.map(Self.asPulled), nextCursor: String(page.last?.sequence ?? after),
                hasMore: pending.count > page.count)
        }
    }

    /// A record as the server's pull sends it: a tombstone without its contents, which stay on the
    /// server for the conflict answer of a member's write to it.
    private static func asPulled(_ record: ServerRecord) -> ServerRecord {
        guard record.isDeleted else { return record }
        var tombstone = record
        tombstone.fields = [:]
        tombstone.clocks = [:]
        return tombstone
    }

    public func mediaUploadStatus(for attachmentID: UUID) async throws(TransportError) -> MediaUploadStatus {
        try await serve(.mediaStatus, "GET /\(HTTPTransport.mediaPath(attachmentID))") { () throws(TransportError) in
            status(of: attachmentID)
        }
    }

    public func uploadMedia(_ chunk: MediaChunk) async throws(TransportError) -> MediaUploadStatus {
        counts.bytesSent += Int64(chunk.data.count)
        let name = "PUT /\(HTTPTransport.mediaPath(chunk.attachmentID))"
        return try await serve(.mediaUpload, name) { () throws(TransportError) in
            var upload = media[chunk.attachmentID] ?? (Data(), chunk.totalBytes, false)
            guard chunk.offset == Int64(upload.data.count), chunk.totalBytes == upload.total, !upload.complete else {
                throw TransportError(
                    request: name, status: 409,
                    body: ErrorBody(
                        code: .rangeMismatch,
                        message: "the server holds \(upload.data.count) of \(upload.total) bytes"),
                    retryAfter: nil)
            }
            upload.data.append(chunk.data)
            upload.complete = Int64(upload.data.count) == upload.total
            media[chunk.attachmentID] = upload
            return status(of: chunk.attachmentID)
        }
    }

    public func downloadBundle(project: UUID, format: BundleFormat, to destination: URL)
        async throws(TransportError) -> Int64
    {
        let name = "GET /projects/\(project.uuidString.lowercased())/bundle"
        let data = try await serve(.bundle, name) { () throws(TransportError) in
            guard let data = bundles[project] else {
                throw TransportError(
                    request: name, status: 404, body: ErrorBody(code: .notFound, message: "no such project"),
                    retryAfter: nil)
            }
            return data
        }
        do {
            try data.write(to: destination)
        } catch {
            throw TransportError(
                .invalidResponse, request: name, message: "could not write the bundle: \(error)", underlying: error)
        }
        return Int64(data.count)
    }

    // MARK: - The fake server

    /// Plays the next injected failure for `route`, or serves the request.
    private func serve<Response: Encodable>(
        _ route: Route, _ name: String, _ handler: () throws(TransportError) -> Response
    ) async throws(TransportError) -> Response {
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
            _ = try handler()
            throw TransportError(.timedOut, request: name, message: "injected: response dropped")
        case nil:
            let response = try handler()
            count(received: response)
            return response
        }
    }

    private func outcome(of mutation: PushMutation) -> MutationOutcome {
        if let problem = problem(with: mutation) {
            return .rejected(reason: problem)
        }
        let existing = records[mutation.recordID]
        switch (mutation.operation, existing) {
        case (.create, let current?):
            return .conflict(serverRecord: current)
        case (.update, nil), (.delete, nil):
            return .rejected(reason: ErrorBody(code: .notFound, message: "no \(mutation.entity.rawValue) \(mutation.recordID)"))
        case (_, let current?) where current.version != mutation.baseVersion:
            return .conflict(serverRecord: current)
        default:
            break
        }
        sequence += 1
        let now = Timestamp.now()
        var record =
            existing
            ?? ServerRecord(
                sequence: sequence, entity: mutation.entity, recordID: mutation.recordID,
                serverID: assignsServerIDs ? String(nextServerIDAndAdvance()) : nil, version: 0, fields: [:],
                clocks: [:], createdAt: mutation.createdAt ?? now, updatedAt: now)
        record.sequence = sequence
        record.updatedAt = now
        record.version += 1
        record.fields.merge(mutation.fields) { _, new in new }
        record.clocks.merge(mutation.clocks) { _, new in new }
        record.deletion = mutation.operation == .delete ? mutation.deletion : nil
        records[mutation.recordID] = record
        return .applied(version: record.version, serverID: record.serverID)
    }

    /// Why a mutation is malformed, if it is.
    private func problem(with mutation: PushMutation) -> ErrorBody? {
        let description = mutation.entity.description
        if let unknown = mutation.fields.keys.sorted().first(where: { description.field(named: $0) == nil }) {
            return ErrorBody(code: .invalidRequest, message: "'\(unknown)' is not a field of \(mutation.entity.rawValue)")
        }
        if Set(mutation.fields.keys) != Set(mutation.clocks.keys) {
            return ErrorBody(code: .invalidRequest, message: "every field needs a clock and every clock a field")
        }
        if (mutation.operation == .delete) != (mutation.deletion != nil) {
            return ErrorBody(code: .invalidRequest, message: "a delete, and only a delete, carries a deletion clock")
        }
        return nil
    }

    private func nextServerIDAndAdvance() -> Int {
        defer { nextServerID += 1 }
        return nextServerID
    }

    private func status(of attachmentID: UUID) -> MediaUploadStatus {
        let upload = media[attachmentID]
        return MediaUploadStatus(
            attachmentID: attachmentID, receivedBytes: Int64(upload?.data.count ?? 0), totalBytes: upload?.total,
            complete: upload?.complete ?? false)
    }

    private func count(sent body: some Encodable) {
        counts.bytesSent += Int64((try? WireCoding.encoder().encode(body).count) ?? 0)
    }

    private func count(received body: some Encodable) {
        counts.bytesReceived += Int64((try? WireCoding.encoder().encode(body).count) ?? 0)
    }
}

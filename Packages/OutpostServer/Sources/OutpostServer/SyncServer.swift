import Foundation
import Hummingbird
import NIOCore
import Logging
import OutpostBundles
import OutpostModels
import OutpostWire

/// The reference sync server: serves `schemas/sync-api.yaml` (health, push, pull, media uploads,
/// bundles, and `/metrics`) from one SQLite file or a PostgreSQL database several servers share.
/// Create it (which creates or migrates a SQLite file; PostgreSQL is migrated by `load` or `run`),
/// optionally load a seed, then `run` until the task is cancelled or the process is signalled.
public struct SyncServer: Sendable {
    /// The settings it was created with.
    public let configuration: ServerConfiguration
    private let storage: any ServerStorage
    let media: MediaStore
    private let metrics = ServerMetrics()
    /// Bundle downloads streaming at once, at most (see `BundleGate`); under PostgreSQL's pool of 20.
    static let maximumConcurrentBundles = 8
    /// A device downloads one bundle at a time; two leave room for a retry while the first winds down.
    static let maximumConcurrentBundlesPerCaller = 2
    private let bundleGate = BundleGate(
        limit: SyncServer.maximumConcurrentBundles, limitPerCaller: SyncServer.maximumConcurrentBundlesPerCaller)
    private let readAhead: PullReadAhead
    /// The connections held open now, against `configuration.maximumConnections`.
    let openConnections: OpenConnections
    private let logger: Logger

    /// Opens (creating and migrating) the SQLite file, or starts the PostgreSQL connection pool, and the
    /// media folder; nothing listens yet. Logs go to `logger`, or by default to standard error.
    public init(configuration: ServerConfiguration, logger: Logger? = nil) throws(ServerError) {
        try self.init(configuration: configuration, logger: logger, readAhead: PullReadAhead())
    }

    /// With the read-ahead's bounds chosen, for tests: a busy test run can stall a task for longer than
    /// the 30 s a prepared page normally lives.
    init(configuration: ServerConfiguration, logger: Logger?, readAhead: PullReadAhead) throws(ServerError) {
        self.readAhead = readAhead
        try configuration.validate()
        self.configuration = configuration
        self.openConnections = OpenConnections(maximum: configuration.maximumConnections)
        var logger = logger ?? Logger(label: "outpost.server")
        if let level = Logger.Level(rawValue: configuration.logLevel), logger.logLevel < level { logger.logLevel = level }
        self.logger = logger
        let storage: any ServerStorage =
            if let url = configuration.postgresURL {
                try PostgresStorage(
                    url: url, assignsServerIDs: configuration.assignsServerIDs, policy: configuration.conflictPolicy,
                    maximumMediaBytes: configuration.maximumMediaBytes,
                    waits: .init(lockSeconds: configuration.databaseLockWaitSeconds,
                                 idleTransactionSeconds: configuration.idleTransactionSeconds),
                    logger: logger)
            } else {
                try SQLiteStorage(
                    path: configuration.databasePath, assignsServerIDs: configuration.assignsServerIDs,
                    policy: configuration.conflictPolicy, durableCommits: configuration.durableCommits,
                    maximumMediaBytes: configuration.maximumMediaBytes)
            }
        self.storage = storage
        self.media = try MediaStore(
            directory: configuration.mediaDirectory, storage: storage, maximumFileBytes: configuration.maximumMediaBytes,
            quotas: MediaQuotas(
                perProject: configuration.maximumMediaBytesPerProject, perUser: configuration.maximumMediaBytesPerUser))
    }

    /// Creates the seed's projects, members and tokens that do not exist yet (tokens stored hashed).
    public func load(_ seed: ServerSeed) async throws(ServerError) {
        try await storage.prepare()
        try await storage.load(seed, now: Timestamp.now())
    }

    /// Takes `user` out of `project`: their next request to it is refused (403) on every instance, and
    /// their member record there becomes a tombstone every device pulls. Returns false when they were not
    /// a member. Their devices keep their unsent changes; pushes of them are refused.
    @discardableResult
    public func removeMember(_ user: UUID, from project: UUID) async throws(ServerError) -> Bool {
        try await storage.prepare()
        return try await storage.removeMember(user, from: project, now: Timestamp.now()) > 0
    }

    /// Adds `member` to each project it names (projects this server already has): the membership, and
    /// the project's member record with its role, which decides what they may write (money and
    /// membership are the office's). An existing member record is left as it is.
    public func addMember(_ member: ServerSeed.Member) async throws(ServerError) {
        var seed = ServerSeed(members: [member])
        seed.extendsServer = true
        try await load(seed)
    }

    /// A new bearer token for `user` (a user the server has), stored hashed; the token itself is
    /// returned once, never kept.
    public func issueToken(for user: UUID) async throws(ServerError) -> String {
        var generator = SystemRandomNumberGenerator()
        let token = (0..<4).map { _ in String(generator.next(), radix: 16) }.joined(separator: "-")
        var seed = ServerSeed(tokens: [.init(userID: user, token: token)])
        seed.extendsServer = true
        try await load(seed)
        return token
    }

    /// Revokes `token`: its next request is answered 401 on every instance. Returns false if unknown.
    @discardableResult
    public func revokeToken(_ token: String) async throws(ServerError) -> Bool {
        try await storage.prepare()
        return try await storage.revokeTokens(digest: TokenDigest.hex(of: token), user: nil) > 0
    }

    /// Revokes every token of `user`; returns how many.
    @discardableResult
    public func revokeTokens(of user: UUID) async throws(ServerError) -> Int {
        try await storage.prepare()
        return try await storage.revokeTokens(digest: nil, user: user)
    }

    /// Serves until cancelled (or, with `handlingSignals`, until SIGTERM/SIGINT), calling `onRunning`
    /// with the bound port once it listens: with port 0 that is how a caller learns it.
    public func run(handlingSignals: Bool = true, onRunning: @escaping @Sendable (Int) async -> Void = { _ in })
        async throws
    {
        try await storage.prepare()
        let router = Router()
        router.add(middleware: ProtocolMiddleware(
            schemaVersions: configuration.schemaVersions, metrics: metrics,
            conflictPolicy: SyncProtocol.conflictPolicyText(configuration.conflictPolicy)))
        addRoutes(to: router)
        let connections = openConnections
        let stalledWrite = TimeAmount.seconds(Int64(configuration.stalledWriteSeconds))
        let app = Application(
            router: router,
            server: .http1(configuration: .init(
                additionalChannelHandlers: [ConnectionGuard(connections: connections, stalledWrite: stalledWrite)],
                idleTimeout: .seconds(Int64(configuration.idleTimeoutSeconds)))),
            configuration: ApplicationConfiguration(
                address: .hostname(configuration.host, port: configuration.port), serverName: "outpost"),
            onServerRunning: { channel in await onRunning(channel.localAddress?.port ?? 0) },
            logger: logger)
        let media = self.media
        let sweeper = Task {
            while !Task.isCancelled {
                await media.sweep(now: Timestamp.now())
                try? await Task.sleep(for: .seconds(3600))
            }
        }
        defer { sweeper.cancel() }
        do {
            try await app.runService(gracefulShutdownSignals: handlingSignals ? [.sigterm, .sigint] : [])
        } catch {
            await readAhead.cancelAll()
            await storage.close()
            throw error
        }
        await readAhead.cancelAll()
        await storage.close()
    }

    private func addRoutes(to router: Router<BasicRequestContext>) {
        let configuration = self.configuration
        let storage = self.storage
        let media = self.media
        let metrics = self.metrics
        let bundleGate = self.bundleGate
        let readAhead = configuration.readsPullsAhead ? self.readAhead : nil
        let rules = PushRules(
            assignsServerIDs: configuration.assignsServerIDs, policy: configuration.conflictPolicy,
            maximumMediaBytes: configuration.maximumMediaBytes)

        router.get("health") { request, _ -> Response in
            // A load balancer asks here: an instance whose database does not answer is not healthy.
            try await storage.checkHealth()
            return try jsonResponse(
                HealthResponse(
                    minimumProtocolVersion: SyncProtocol.version, maximumProtocolVersion: SyncProtocol.version,
                    minimumSchemaVersion: configuration.schemaVersions.lowerBound,
                    maximumSchemaVersion: configuration.schemaVersions.upperBound,
                    maximumBatchSize: configuration.maximumBatchSize, maximumPullLimit: configuration.maximumPullLimit,
                    assignsServerIDs: configuration.assignsServerIDs, serverTime: Timestamp.now()),
                for: request)
        }

        router.post("push") { request, _ -> Response in
            let caller = try await Self.authenticate(request, storage)
            var request = request
            let push = try await request.read(PushRequest.self, limit: configuration.maximumBodyBytes) {
                (data: Data) throws(JSONReaderError) in try PushRequest(json: data)
            }
            guard push.mutations.count <= configuration.maximumBatchSize else {
                throw ServerError(
                    status: 413, .batchTooLarge, "at most \(configuration.maximumBatchSize) mutations per push")
            }
            let results = try await storage.push(push.mutations, by: caller, now: Timestamp.now())
            for result in results {
                await metrics.count("outpost_mutations_total", [("outcome", result.outcome.status)])
            }
            return jsonResponse(bytes: try PushResponseJSON.encode(results), for: request)
        }

        router.post("pull") { request, _ -> Response in
            let caller = try await Self.authenticate(request, storage)
            var request = request
            let pull = try await request.decode(PullRequest.self, limit: configuration.maximumBodyBytes)
            guard pull.limit >= 1 else { throw ServerError.badRequest("limit must be at least 1") }
            let after = try pull.cursor.map { text throws(ServerError) in try PullCursor(text: text) } ?? .start
            let answer = try await Self.pull(
                PullReadAhead.Request(
                    user: caller.userID, after: after, limit: min(pull.limit, configuration.maximumPullLimit),
                    projects: pull.projects, gzip: request.acceptsGzip,
                    sharedClock: pull.acceptsSharedClock),
                by: caller, storage: storage, rules: rules, maximumPageBytes: configuration.maximumPullPageBytes,
                readAhead: readAhead, metrics: metrics)
            await metrics.add("outpost_pulled_records_total", answer.records)
            return jsonResponse(answer.body)
        }

        router.get("media/:attachmentID/upload") { request, context -> Response in
            let caller = try await Self.authenticate(request, storage)
            let id = try Self.uuid(context.parameters.get("attachmentID"))
            return try jsonResponse(try await media.status(of: id, by: caller), for: request)
        }

        router.put("media/:attachmentID/upload") { request, context -> Response in
            let caller = try await Self.authenticate(request, storage)
            let id = try Self.uuid(context.parameters.get("attachmentID"))
            guard let rangeHeader = request.headers[.contentRange] else {
                throw ServerError.badRequest("Content-Range is required")
            }
            let range = try ContentRange(header: rangeHeader)
            guard range.length <= configuration.maximumChunkBytes else {
                throw ServerError(
                    status: 413, .payloadTooLarge, "chunks are limited to \(configuration.maximumChunkBytes) bytes")
            }
            guard let digest = request.headers[Header.mediaDigest] else {
                throw ServerError.badRequest("\(SyncProtocol.mediaDigestHeader) is required")
            }
            var request = request
            let data = try await request.data(limit: configuration.maximumChunkBytes, allowingGzip: false)
            let status = try await media.receive(
                data, range: range, sha256: digest, for: id, by: caller, now: Timestamp.now())
            await metrics.add("outpost_media_bytes_total", data.count)
            return try jsonResponse(status, for: request)
        }

        router.get("projects/:projectID/bundle") { request, context -> Response in
            let caller = try await Self.authenticate(request, storage)
            let project = try Self.uuid(context.parameters.get("projectID"))
            let format: BundleFormat
            switch request.uri.queryParameters.get("format") ?? "json" {
            case "json": format = .json
            case "xml": format = .xml
            default: throw ServerError.badRequest("format is json or xml")
            }
            guard let slot = bundleGate.enter(for: caller.userID) else {
                throw ServerError(
                    status: 503, .unavailable,
                    "\(SyncServer.maximumConcurrentBundles) bundle downloads, or \(SyncServer.maximumConcurrentBundlesPerCaller) "
                        + "of yours, are streaming; try again shortly",
                    retryAfterSeconds: 5)
            }
            let source = try await storage.bundle(project: project, by: caller)
            await metrics.count("outpost_bundles_total", [("format", format.rawValue)])
            return Self.stream(
                source, project: project, format: format,
                contentType: format == .xml ? "application/xml" : "application/json", gzip: request.acceptsGzip,
                holding: slot, metrics: metrics)
        }

        router.get("metrics") { _, _ -> Response in
            Response(
                status: .ok, headers: [.contentType: "text/plain; version=0.0.4"],
                body: ResponseBody(byteBuffer: ByteBuffer(string: await metrics.text)))
        }
    }

    /// A pull's answer: the page read ahead for this very request when nothing it depends on changed
    /// since (see `PullReadAhead`), else the page read now. When more changes wait, the next page is
    /// read ahead.
    private static func pull(
        _ request: PullReadAhead.Request, by caller: Caller, storage: any ServerStorage, rules: PushRules,
        maximumPageBytes: Int, readAhead: PullReadAhead?, metrics: ServerMetrics
    ) async throws(ServerError) -> PullReadAhead.Answer {
        @Sendable func read(_ request: PullReadAhead.Request) async throws(ServerError) -> PullReadAhead.Answer {
            let page = try await storage.pull(
                after: request.after, limit: request.limit, maximumBytes: maximumPageBytes, projects: request.projects,
                by: caller)
            let json = try page.json(rules: rules, sharedClock: request.sharedClock)
            return PullReadAhead.Answer(
                body: JSONBody(json, gzip: request.gzip), records: page.rows.count,
                nextCursor: page.nextCursor, hasMore: page.hasMore, basis: page.basis)
        }
        var answer: PullReadAhead.Answer?
        if let prepared = await readAhead?.take(request) {
            if let page = await prepared.value, try await storage.pullBasis(of: caller) == page.basis {
                answer = page
            }
            await metrics.count("outpost_pull_read_ahead_total", [("outcome", answer == nil ? "discarded" : "served")])
        }
        let result: PullReadAhead.Answer
        if let answer { result = answer } else { result = try await read(request) }
        if let readAhead, result.hasMore {
            let next = request.continued(after: result.nextCursor)
            await readAhead.prepare(next) { try? await read(next) }
        }
        return result
    }

    /// How many pull pages are held read ahead, once the reads under way have ended (for tests).
    func pagesReadAhead() async -> Int {
        await readAhead.settledCount()
    }

    /// The caller a bearer token names (401 when missing or unknown).
    private static func authenticate(_ request: Request, _ storage: any ServerStorage) async throws(ServerError)
        -> Caller
    {
        guard let header = request.headers[.authorization], header.hasPrefix("Bearer ") else {
            throw ServerError.unauthorized("a bearer token is required")
        }
        let token = header.dropFirst("Bearer ".count).trimmingCharacters(in: .whitespaces)
        guard !token.isEmpty, let caller = try await storage.caller(forTokenDigest: TokenDigest.hex(of: token)) else {
            throw ServerError.unauthorized("the bearer token is unknown or revoked")
        }
        return caller
    }

    private static func uuid(_ text: String?) throws(ServerError) -> UUID {
        guard let text, let id = UUID(uuidString: text) else { throw ServerError.notFound("not a record id") }
        return id
    }

    /// Streams a bundle as the storage reads it: each batch of records is encoded and sent before the
    /// next is read, so neither the project nor the bundle is ever whole in memory or on disk. Once the
    /// first byte is out an error can only cut the answer short (the importer then refuses the bundle).
    /// With `gzip` it goes as one gzip member, compressed as it is encoded: a bundle is the largest
    /// download a crew makes, and its JSON shrinks about 20 times.
    private static func stream(
        _ source: BundleRecords, project: UUID, format: BundleFormat, contentType: String,
        gzip: Bool, holding slot: BundleGate.Slot, metrics: ServerMetrics
    ) -> Response {
        let body = ResponseBody { writer in
            // The download's slot stays taken until the body is done (see `BundleGate`).
            defer { withExtendedLifetime(slot) {} }
            let encoder = try BundleStreamEncoder(project: project, asOf: source.asOf, format: format)
            let compressor = gzip ? GzipStream() : nil
            var pending: [UInt8] = []
            func add(_ bytes: [UInt8]) {
                pending += compressor?.compress(bytes) ?? bytes
            }
            func send() async throws {
                try await writer.write(ByteBuffer(bytes: pending))
                await metrics.add("outpost_bundle_bytes_total", pending.count)
                pending.removeAll(keepingCapacity: true)
            }
            add(encoder.take())
            for try await batch in source.batches {
                for record in batch { try encoder.write(record) }
                add(encoder.take())
                // Compressed, a batch (500 records, some 250 KB of JSON) gives about 14 KB once zlib
                // closes a block: sent after each such batch, the device inflates and writes one part
                // while the next is encoded, as with 64 KB plain (at 64 KB it waited on a megabyte).
                if pending.count >= (compressor == nil ? 64 : 8) * 1024 { try await send() }
            }
            // A cancelled stream ends like a finished one; never close a bundle whose records were cut short.
            try Task.checkCancellation()
            try encoder.finish()
            add(encoder.take())
            if let compressor { pending += compressor.finish() }
            try await send()
            try await writer.finish(nil)
        }
        var headers: HTTPFields = [.contentType: contentType, .vary: "Accept-Encoding"]
        if gzip { headers[.contentEncoding] = "gzip" }
        return Response(status: .ok, headers: headers, body: body)
    }
}

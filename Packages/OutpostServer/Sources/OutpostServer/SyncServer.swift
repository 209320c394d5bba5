import Foundation
import Hummingbird
import HummingbirdCore
import HummingbirdTLS
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOSSL
import OutpostBundles
import OutpostSchema
import OutpostWire

/// The reference sync server: serves `schemas/sync-api.yaml` (health, push, pull, media uploads,
/// bundles, and `/metrics`) from one SQLite file or a PostgreSQL database several servers share.
/// Create it (which creates or migrates a SQLite file; PostgreSQL is migrated by `load` or `run`),
/// optionally load a seed, then `run` until the task is cancelled or the process is signalled.
public struct SyncServer: Sendable {
    /// The settings it was created with.
    public let configuration: ServerConfiguration
    let storage: any ServerStorage
    /// When each token's last use was noted here (`IssuedToken.lastUsedAt`).
    private let tokenUses = TokenUseNotes()
    /// The digest of the scraper's token (`ServerConfiguration.metricsToken`): a presented token is
    /// compared by digest, as stored tokens are, so no comparison of the secret's bytes can be timed.
    /// Computed once, at start.
    private let metricsTokenDigest: String?
    let media: MediaStore
    private let metrics: ServerMetrics
    /// Bundle downloads streaming at once, at most (see `BundleGate`); under PostgreSQL's pool of 20.
    static let maximumConcurrentBundles = 8
    /// A device downloads one bundle at a time; two leave room for a retry while the first winds down.
    static let maximumConcurrentBundlesPerCaller = 2
    private let bundleGate = BundleGate(
        limit: SyncServer.maximumConcurrentBundles, limitPerCaller: SyncServer.maximumConcurrentBundlesPerCaller)
    /// Original downloads of one member under way at once, at most: a device downloads one at a time
    /// (`Device.original(of:)`), so four leave room for a member's few devices and a retry.
    static let maximumConcurrentOriginalsPerCaller = 4
    /// Each member's original downloads under way (`BundleGate`'s counting, per caller only: the bound
    /// in all is the connections'). Without it one member's 24 at once made everyone else's requests 28
    /// times slower over loopback (attack 113, F6).
    private let originalsGate = BundleGate(limit: .max, limitPerCaller: SyncServer.maximumConcurrentOriginalsPerCaller)
    /// The turns downloads take to encode a batch, so downloads never take every core (see `EncodingTurns`).
    let bundleEncoding = EncodingTurns()
    /// The turns a user's pushes and pulls take once their bodies have arrived
    /// (`ServerConfiguration.requestsWorkedAtOncePerUser`). Request limits count requests, but a pull's
    /// cost grows with its caller's projects: a member who made 990 projects and sent 32 one-record pulls
    /// at once kept both cores busy, and another member's pull went from 0.03 to 7–9 s (attack 112, F1).
    /// In turns, one user's parallel requests queue behind each other, not in front of everyone else's.
    /// Uploads and bundle downloads take none: they wait on the network, bounded by `BodiesInFlight` and
    /// `BundleGate`, and a body trickling in must not hold a turn. A page read ahead for a user is read
    /// in one of their turns too, when one is free (`Turns.inTurnIfFree`; a pull waits for it in a turn):
    /// 32 one-record pulls of a 990-project member, each followed by a page read ahead outside any turn,
    /// still cost another member 3–4 times what a one-project member's did (attack 113, F3).
    let requestTurns: Turns<UUID>
    /// A user's pushes wait here, one at a time, before they take a request turn: every push waits for
    /// the one writer, and four 8 MB pushes of one member in line for it made another member's one-record
    /// push 76 times slower (attack 113, F2); with one at a time, what one push costs.
    let pushTurns = Turns<UUID>(limit: 1)
    private let readAhead: PreparedPulls
    /// The seal on the cursors this server writes, its key read once.
    private let cursorSeal = CursorSeal()
    private let rules: PushRules
    /// Per-token request limits; nil when the configuration sets none.
    private let rateLimiter: RequestRateLimiter?
    /// The connections held open now, against `configuration.maximumConnections`.
    let openConnections: OpenConnections
    /// The database work under way, for `/metrics`.
    let activity: DatabaseActivity
    private let logger: Logger

    /// Opens (creating and migrating) the SQLite file, or starts the PostgreSQL connection pool, and the
    /// media folder; nothing listens yet. Logs go to `logger`, or by default to standard error. Serves
    /// the schema the process runs on (the field-service schema unless one was installed).
    public init(configuration: ServerConfiguration, logger: Logger? = nil) throws(ServerError) {
        try self.init(configuration: configuration, logger: logger, readAhead: PreparedPulls())
    }

    /// A server of an app's own schema: installs `schema` as the one this process runs on (refused
    /// with `invalidConfiguration` when the process already runs on another), then opens as
    /// `init(configuration:logger:)`. Scope, membership, roles, authorship and media come from it.
    public init(serving schema: AppSchema, configuration: ServerConfiguration, logger: Logger? = nil)
        throws(ServerError)
    {
        do {
            try EntityCatalog.install(schema)
        } catch {
            throw ServerError(.invalidConfiguration, message: error.message, underlying: error)
        }
        try self.init(configuration: configuration, logger: logger)
    }

    /// With the read-ahead's bounds chosen, for tests: a busy test run can stall a task for longer than
    /// the 30 s a prepared page normally lives.
    init(configuration: ServerConfiguration, logger: Logger?, readAhead: PreparedPulls) throws(ServerError) {
        self.readAhead = readAhead
        self.rules = PushRules(
            assignsServerIDs: configuration.assignsServerIDs, policy: configuration.conflictPolicy,
            maximumMediaBytes: configuration.maximumMediaBytes, bounds: configuration.effectivePushBounds)
        try configuration.validate()
        self.rateLimiter = configuration.requestsPerMinutePerToken.map(RequestRateLimiter.init(perMinute:))
        self.requestTurns = Turns(limit: configuration.requestsWorkedAtOncePerUser)
        self.configuration = configuration
        metricsTokenDigest = configuration.metricsToken.map { TokenDigest.hex(of: $0) }
        self.openConnections = OpenConnections(maximum: configuration.maximumConnections)
        var logger = logger ?? Logger(label: "outpost.server")
        if let level = Logger.Level(rawValue: configuration.logLevel), logger.logLevel < level { logger.logLevel = level }
        self.logger = logger
        let metrics = ServerMetrics()
        self.metrics = metrics
        let activity = DatabaseActivity { metrics.time("outpost_database_lock_wait_seconds", [], $0) }
        let storage: any ServerStorage =
            if let url = configuration.postgresURL {
                try PostgresStorage(
                    url: url, assignsServerIDs: configuration.assignsServerIDs, policy: configuration.conflictPolicy,
                    maximumMediaBytes: configuration.maximumMediaBytes,
                    waits: .init(lockSeconds: configuration.databaseLockWaitSeconds,
                                 idleTransactionSeconds: configuration.idleTransactionSeconds),
                    logger: logger, activity: activity, bounds: configuration.effectivePushBounds)
            } else {
                try SQLiteStorage(
                    path: configuration.databasePath, assignsServerIDs: configuration.assignsServerIDs,
                    policy: configuration.conflictPolicy, durableCommits: configuration.durableCommits,
                    maximumMediaBytes: configuration.maximumMediaBytes, lockWaitSeconds: configuration.databaseLockWaitSeconds,
                    activity: activity, bounds: configuration.effectivePushBounds, bundleWALLimitBytes: configuration.bundleWALLimitBytes)
            }
        self.storage = storage
        self.activity = activity
        self.media = try MediaStore(
            directory: configuration.mediaDirectory, storage: storage, maximumFileBytes: configuration.maximumMediaBytes,
            quotas: MediaQuotas(
                perProject: configuration.maximumMediaBytesPerProject, perUser: configuration.maximumMediaBytesPerUser,
                diskReserve: configuration.mediaDiskReserveBytes))
    }

    /// Sets the server up from `seed` (projects, members with their roles, tokens stored hashed) on its
    /// first start; a seed given again later changes nothing, since loading it again would undo the
    /// operator's removals and revocations since (use `outpost admin`). Returns whether it loaded.
    @discardableResult
    public func load(_ seed: ServerSeed) async throws(ServerError) -> Bool {
        // Named in the admin log as what an admin adds later is, by the actor "seed", in the seed's own
        // transaction: an operator reading it for who may reach what found no trace of the tokens a
        // server was set up with (attack 78), and written after it, a server stopped in between kept
        // the seed and lost its entries for good (attack 83).
        var lines: [AdminLogLine] = []
        for project in seed.projects {
            lines.append(.init(actor: "seed", action: "create-project", details: "project \(project.id.storageText) (\(project.name)): seeded"))
        }
        for member in seed.members {
            let role = (try? ServerSeed.role(of: member)) ?? member.role ?? "not named"
            for project in member.projects {
                lines.append(.init(
                    actor: "seed", action: "add-member",
                    details: "user \(member.userID.storageText), project \(project.storageText), role \(role): seeded"))
            }
        }
        for token in seed.tokens {
            lines.append(.init(actor: "seed", action: token.admin ? "issue-admin-token" : "issue-token", details: Self.details(of: token)))
        }
        return try await store(seed, logging: lines)
    }

    /// Stores `seed` with `logging` written to the admin log in its transaction.
    private func store(_ seed: ServerSeed, logging: [AdminLogLine]) async throws(ServerError) -> Bool {
        try await storage.prepare()
        return try await storage.load(seed, now: Timestamp.now()) { _ in logging }
    }

    /// How the admin log names a token: its user, its name (`tokens(of:)`'s `digestPrefix`, never the
    /// secret) and its expiry.
    private static func details(of token: ServerSeed.Token) -> String {
        let expiry = token.expiresAt.map { "expires \(Timestamp.string(from: $0))" } ?? "never expires"
        return "user \(token.userID.storageText), token \(TokenDigest.hex(of: token.token).prefix(12)), \(expiry)"
    }

    /// Takes `user` out of `project`: from their next request on, on every instance, the project is to
    /// them as if it did not exist (`not_found`, never telling what is there), and
    /// their member record there becomes a tombstone every device pulls. Returns false when they were not
    /// a member. Their devices keep their unsent changes; pushes of them are refused.
    /// `actor` names who did it in the admin log.
    @discardableResult
    public func removeMember(_ user: UUID, from project: UUID, by actor: String = "operator") async throws(ServerError) -> Bool {
        try await storage.prepare()
        return try await storage.removeMember(user, from: project, now: Timestamp.now()) { removed in
            AdminLogLine(
                actor: actor, action: "remove-member",
                details: "user \(user.storageText), project \(project.storageText): \(removed > 0 ? "removed" : "was not a member")")
        } > 0
    }

    /// Makes `member` a member of each project it names (projects this server already has) with exactly
    /// its role: the membership, and the member record with that role, which decides what they may
    /// write (money and membership are the office's). With no role, a member keeps theirs and a new
    /// member (or one added back) gets the schema's default (`crew`). A member added back after a
    /// removal gets their record back; an existing member's role is changed. Says, per project, what
    /// changed. `actor` names who did it in the admin log.
    @discardableResult
    public func addMember(_ member: ServerSeed.Member, by actor: String = "operator") async throws(ServerError) -> [UUID: MembershipChange] {
        var changes: [UUID: MembershipChange] = [:]
        for project in member.projects {
            changes[project] = try await addMember(
                member.userID, to: project, role: member.role, name: member.name,
                // A seed's empty address is none given (`ServerSeed.Member.email`).
                email: member.email.flatMap { $0.isEmpty ? nil : $0 }, by: actor)
        }
        return changes
    }

    /// Makes `user` a member of `project` (one this server already has) with exactly `role`, as
    /// `addMember(_:by:)` does, and says what changed. `name` and `email`, when given, are written to
    /// their member record; left out, a member keeps their own (a role change rewrote the member's name to
    /// the one the operator typed; attack 85, F5), and a user the server has never seen needs a name.
    @discardableResult
    public func addMember(
        _ user: UUID, to project: UUID, role: String? = nil, name: String? = nil, email: String? = nil,
        by actor: String = "operator"
    ) async throws(ServerError) -> MembershipChange {
        // The admin API's rule for every way in: `outpost admin add-member` took any name before, and an
        // empty address (an unset shell variable) blanked a member's (attack 87, 3).
        for (field, text, isName) in [("name", name, true), ("e-mail address", email, false)] {
            if let text, let problem = adminTextProblem(text, isName: isName) {
                throw ServerError(.invalidSeed, message: "the \(field) of user \(user.storageText) \(problem)")
            }
        }
        try await storage.prepare()
        let role = try role.map { _ throws(ServerError) in
            try ServerSeed.role(of: ServerSeed.Member(userID: user, name: name ?? user.storageText, role: role, projects: [project]))
        }
        return try await storage.addMember(user, to: project, name: name, email: email, role: role, now: Timestamp.now()) { change in
            AdminLogLine(
                actor: actor, action: "add-member",
                details: "user \(user.storageText), project \(project.storageText), role \(role ?? "not named"): \(change)")
        }
    }

    /// A new bearer token for `user` (a user the server has), stored hashed; the token itself is
    /// returned once, never kept. With `expiresAt`, its first request after that instant is answered
    /// 401 on every instance. An `admin` token reaches the `/admin` routes and nothing else; a member's
    /// token (the default) the sync routes and never `/admin`. `actor` names who did it in the admin log
    /// (which never holds the token).
    public func issueToken(
        for user: UUID, expiresAt: Date? = nil, admin: Bool = false, by actor: String = "operator"
    ) async throws(ServerError) -> String {
        // Past ten years an expiry is a typo (`--expires-in 999999999d` once stored year 506713, and a
        // larger one trapped converting to milliseconds).
        // A minute of slack: a caller's "ten years from now" was read a moment (and a rounding) earlier.
        if let expiresAt, expiresAt.timeIntervalSinceNow > Self.longestTokenLife + 60 {
            throw ServerError(.invalidSeed, message: "a token expires within ten years (\(Int(Self.longestTokenLife)) s)")
        }
        var generator = SystemRandomNumberGenerator()
        let token = (0..<4).map { _ in String(generator.next(), radix: 16) }.joined(separator: "-")
        let issued = ServerSeed.Token(userID: user, token: token, expiresAt: expiresAt, admin: admin)
        var seed = ServerSeed(tokens: [issued])
        seed.extendsServer = true
        // Logged in the token's own transaction, as a seed is: never a working token without its entry.
        let line = AdminLogLine(actor: actor, action: admin ? "issue-admin-token" : "issue-token", details: Self.details(of: issued))
        _ = try await store(seed, logging: [line])
        return token
    }

    /// Revokes `token`: its next request is answered 401 on every instance. Returns false if unknown.
    @discardableResult
    public func revokeToken(_ token: String, by actor: String = "operator") async throws(ServerError) -> Bool {
        try await storage.prepare()
        // Read as a request's token is (`bearerToken(of:)`): a token pasted with its line break still goes.
        let digest = TokenDigest.hex(of: token.trimmingCharacters(in: .whitespacesAndNewlines))
        return try await revoke(digest: digest, by: actor)
    }

    /// Revokes the token `tokens(of:)` lists as `name` (its `digestPrefix`, the first 12 hex digits of
    /// its SHA-256), without its secret: an operator seldom holds a member's token (a lost phone's), and
    /// one typed on a command line stays in the shell's history and shows in `ps`. Returns false when
    /// no token has that name. A name that is not 12 hex digits, or that two tokens share, is refused
    /// with `invalidRequest` and nothing is revoked (revoke that user's tokens then).
    @discardableResult
    public func revokeToken(named name: String, by actor: String = "operator") async throws(ServerError) -> Bool {
        let prefix = name.lowercased()
        guard prefix.utf8.count == 12, prefix.utf8.allSatisfy({ (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }) else {
            throw ServerError.badRequest("a token's name is the 12 hex digits 'tokens' lists, not '\(name.prefix(64))'")
        }
        try await storage.prepare()
        let digests = try await storage.tokenDigests(startingWith: prefix)
        guard digests.count <= 1 else {
            throw ServerError.badRequest(
                "\(digests.count) tokens are named \(prefix): nothing revoked; revoke every token of their user instead")
        }
        guard let digest = digests.first else {
            try await log("revoke-token", by: actor, "token \(prefix): unknown")
            return false
        }
        return try await revoke(digest: digest, by: actor)
    }

    /// Revokes the token whose SHA-256 is `digest` and logs it under its name: both ways of naming
    /// one token end here, so the admin log reads the same whichever the operator used.
    private func revoke(digest: String, by actor: String) async throws(ServerError) -> Bool {
        try await storage.revokeTokens(digest: digest, user: nil, now: Timestamp.now()) { revoked in
            AdminLogLine(actor: actor, action: "revoke-token", details: "token \(digest.prefix(12)): \(revoked > 0 ? "revoked" : "unknown")")
        } > 0
    }

    /// Revokes every token of `user`; returns how many.
    @discardableResult
    public func revokeTokens(of user: UUID, by actor: String = "operator") async throws(ServerError) -> Int {
        try await storage.prepare()
        return try await storage.revokeTokens(digest: nil, user: user, now: Timestamp.now()) { revoked in
            AdminLogLine(actor: actor, action: "revoke-token", details: "every token of user \(user.storageText): \(revoked) revoked")
        }
    }

    /// The id of `user`'s member record in `project` on this server (its seed's, the operator's
    /// commands' and a device-made project's creator's): for an operator's tools and tests.
    package func memberRecordID(project: UUID, user: UUID) async throws(ServerError) -> UUID {
        try await storage.prepare()
        return Roles.memberRecordID(project: project, user: user, salt: try await storage.memberIDSalt())
    }

    /// Writes a consistent copy of a SQLite server's database to `path` (a new file) while the server
    /// runs (`VACUUM INTO`, on a snapshot: writers are not held up). Back up the database before the
    /// media folder, so every original the copy names is in the folder's copy. A PostgreSQL server is
    /// backed up with `pg_dump` (refused here, saying so). Restoring either is safe for devices: each
    /// notices the older history on its next request and rebuilds (`ServerErrorCode.historyChanged`).
    /// The copy is logged once written, with `path` and `actor`: it holds every token digest, and a
    /// restore brings back what was removed and revoked since.
    public func backUp(to path: String, by actor: String = "operator") async throws(ServerError) {
        try await storage.prepare()
        try await storage.backUp(to: path)
        try await log("back-up", by: actor, "copy written to \(OneLineText.escaping(path))")
    }

    /// Serves until cancelled (or, with `handlingSignals`, until SIGTERM/SIGINT), calling `onRunning`
    /// with the bound port once it listens: with port 0 that is how a caller learns it.
    public func run(handlingSignals: Bool = true, onRunning: @escaping @Sendable (Int) async -> Void = { _ in })
        async throws
    {
        try await storage.prepare()
        // The cursor key is made (or read) before the first request: made by a pull, it took the
        // database's write lock, and a pull waited on another process holding it.
        try await cursorSeal.prepare(storage: storage)
        let router = Router(context: ServerRequestContext.self)
        router.add(middleware: ProtocolMiddleware(
            schemaVersions: configuration.schemaVersions, metrics: metrics,
            conflictPolicy: SyncProtocol.conflictPolicyText(configuration.conflictPolicy)))
        addRoutes(to: router)
        let connections = openConnections
        let bounds = configuration.bodyBytesInFlight
        let bodies = BodiesInFlight(perCaller: bounds.perCaller, total: bounds.total)
        let stalledWrite = TimeAmount.seconds(Int64(configuration.stalledWriteSeconds))
        let http1 = HTTPServerBuilder.http1(configuration: .init(
            additionalChannelHandlers: [ConnectionGuard(connections: connections, bodies: bodies, stalledWrite: stalledWrite)],
            idleTimeout: .seconds(Int64(configuration.idleTimeoutSeconds))))
        let app = Application(
            router: router,
            server: try tlsConfiguration().map { try .tls(http1, tlsConfiguration: $0) } ?? http1,
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

    /// The server's TLS settings from its PEM files; nil without them (plain HTTP).
    private func tlsConfiguration() throws(ServerError) -> TLSConfiguration? {
        guard let certificatePath = configuration.tlsCertificatePath, let keyPath = configuration.tlsKeyPath else { return nil }
        let chain: [NIOSSLCertificate]
        do {
            chain = try NIOSSLCertificate.fromPEMFile(certificatePath)
        } catch {
            throw ServerError(.invalidConfiguration, message: "the TLS certificate could not be read as PEM: \(error)", path: certificatePath, underlying: error)
        }
        guard !chain.isEmpty else {
            throw ServerError(.invalidConfiguration, message: "the TLS certificate file holds no certificate", path: certificatePath)
        }
        let key: NIOSSLPrivateKey
        do {
            key = try NIOSSLPrivateKey(file: keyPath, format: .pem)
        } catch {
            throw ServerError(.invalidConfiguration, message: "the TLS private key could not be read as PEM: \(error)", path: keyPath, underlying: error)
        }
        let tls = TLSConfiguration.makeServerConfiguration(certificateChain: chain.map { .certificate($0) }, privateKey: .privateKey(key))
        // The pair is checked here, where both files can be named: a key of another certificate failed
        // later, in the listener's set-up, as a bare "failedToLoadPrivateKey".
        do {
            _ = try NIOSSLContext(configuration: tls)
        } catch {
            throw ServerError(
                .invalidConfiguration,
                message: "the TLS private key \(keyPath) does not go with the certificate \(certificatePath): \(error)",
                path: keyPath, underlying: error)
        }
        return tls
    }

    private func addRoutes(to router: Router<ServerRequestContext>) {
        let server = self
        let metrics = self.metrics
        self.addAdminRoutes(to: router)

        router.get("health") { request, _ -> Response in
            try jsonResponse(try await server.health(), for: request)
        }

        // Probes a load balancer calls as plain HTTP (no token, no protocol headers): live while the
        // process answers; ready while the database answers too (503 `unavailable` otherwise).
        router.get("livez") { request, _ -> Response in
            try jsonResponse(ProbeResponse(status: "live"), for: request)
        }
        router.get("readyz") { request, _ -> Response in
            try await server.storage.checkHealth()
            return try jsonResponse(ProbeResponse(status: "ready"), for: request)
        }

        router.post("push") { request, _ -> Response in
            let caller = try await server.authenticate(request)
            var request = request
            let body = try await request.data(limit: server.configuration.maximumBodyBytes)
            // Read (8 MB of JSON is CPU work), applied and its answer written in the user's turn.
            let answer = try await server.pushTurns.inTurn(of: caller.userID) { () async throws(ServerError) in
                try await server.requestTurns.inTurn(of: caller.userID) { () async throws(ServerError) in
                    try PushResponseJSON.encode(try await server.push(try server.readPush(body), by: caller))
                }
            }
            return jsonResponse(bytes: answer, for: request)
        }

        router.post("push/answers") { request, _ -> Response in
            let caller = try await server.authenticate(request)
            var request = request
            let asked = try await request.decode(PushAnswersRequest.self, limit: server.configuration.maximumBodyBytes)
            let answer = try await server.requestTurns.inTurn(of: caller.userID) { () async throws(ServerError) in
                try await server.pushAnswers(asked, by: caller)
            }
            return jsonResponse(bytes: try PushResponseJSON.encode(answer), for: request)
        }

        router.post("pull") { request, _ -> Response in
            let caller = try await server.authenticate(request)
            var request = request
            let pull = try await request.decode(PullRequest.self, limit: server.configuration.maximumBodyBytes)
            let gzip = request.acceptsGzip
            return jsonResponse(try await server.requestTurns.inTurn(of: caller.userID) { () async throws(ServerError) in
                try await server.pull(pull, by: caller, gzip: gzip)
            })
        }

        router.get("media/:attachmentID/upload") { request, context -> Response in
            let caller = try await server.authenticate(request)
            let id = try Self.uuid(context.parameters.get("attachmentID"))
            RequestAttribution.note("attachment", id)
            return try jsonResponse(try await server.mediaStatus(of: id, by: caller), for: request)
        }

        router.put("media/:attachmentID/upload") { request, context -> Response in
            let caller = try await server.authenticate(request)
            let id = try Self.uuid(context.parameters.get("attachmentID"))
            RequestAttribution.note("attachment", id)
            guard let rangeHeader = request.headers[.contentRange] else {
                throw ServerError.badRequest("Content-Range is required")
            }
            let range = try ContentRange(header: rangeHeader)
            guard range.length <= server.configuration.maximumChunkBytes else {
                throw ServerError(
                    status: 413, .payloadTooLarge,
                    "chunks are limited to \(server.configuration.maximumChunkBytes) bytes")
            }
            guard let digest = request.headers[Header.mediaDigest], digest.utf8.count == 64,
                digest.utf8.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains($0) })
            else {
                throw ServerError.badRequest("\(SyncProtocol.mediaDigestHeader) is required: the file's SHA-256, 64 lowercase hex digits")
            }
            var request = request
            let data = try await request.data(limit: server.configuration.maximumChunkBytes, allowingGzip: false)
            return try jsonResponse(
                try await server.receiveMedia(data, range: range, sha256: digest, for: id, by: caller), for: request)
        }

        router.get("media/:attachmentID") { request, context -> Response in
            let caller = try await server.authenticate(request)
            let id = try Self.uuid(context.parameters.get("attachmentID"))
            RequestAttribution.note("attachment", id)
            let original = try await server.mediaOriginal(of: id, by: caller)
            // Held by the body until its last byte is written or the connection ends (the slot frees
            // itself with its last reference, whichever way the answer goes).
            guard let slot = server.originalsGate.enter(for: caller.userID) else {
                throw ServerError(
                    status: 503, .unavailable,
                    "\(SyncServer.maximumConcurrentOriginalsPerCaller) downloads of originals of yours are under way; try again shortly",
                    retryAfterSeconds: 5)
            }
            let size = original.byteCount
            let progress = await WriteProgress.of(context.channel)
            var headers: HTTPFields = [.contentType: "application/octet-stream", .acceptRanges: "bytes"]
            headers[Header.mediaDigest] = original.sha256
            headers[.eTag] = "\"\(original.sha256)\""
            // Only `bytes=N-` and `bytes=N-M` are honoured, as a resumed download asks; any other form
            // is ignored and the whole file sent, as RFC 9110 allows.
            guard let range = MediaRange(header: request.headers[.range]) else {
                let body = size == 0 ? ResponseBody() : try await Self.paced(
                    FileIO().loadFile(path: original.path, range: 0...Int(size - 1), context: context, chunkLength: BundleDownload.pieceBytes),
                    by: progress, metrics: metrics, holding: slot)
                headers[.contentLength] = String(size)
                return Response(status: .ok, headers: headers, body: body)
            }
            guard range.first < size else {
                throw ServerError(status: 416, .rangeMismatch, "the original has \(size) bytes; a range from \(range.first) is past its end")
            }
            let last = min(range.last ?? (size - 1), size - 1)
            headers[.contentRange] = "bytes \(range.first)-\(last)/\(size)"
            headers[.contentLength] = String(last - range.first + 1)
            let body = try await Self.paced(
                FileIO().loadFile(path: original.path, range: Int(range.first)...Int(last), context: context, chunkLength: BundleDownload.pieceBytes),
                by: progress, metrics: metrics, holding: slot)
            return Response(status: .partialContent, headers: headers, body: body)
        }

        router.get("projects/:projectID/bundle") { request, context -> Response in
            let caller = try await server.authenticate(request)
            let project = try Self.uuid(context.parameters.get("projectID"))
            let format: BundleFormat
            switch request.uri.queryParameters.get("format") ?? "json" {
            case "json": format = .json
            case "xml": format = .xml
            default: throw ServerError.badRequest("format is json or xml")
            }
            let download = try await server.openBundle(project: project, format: format, by: caller)
            RequestAttribution.note("project", project)
            let gzip = request.acceptsGzip
            let progress = await WriteProgress.of(context.channel)
            // Once the first byte is out an error can only cut the answer short (the importer then
            // refuses the bundle): the refusals all came from `openBundle`, before the headers.
            let body = ResponseBody { writer in
                try await download.write(gzip: gzip, pacedBy: progress) { bytes in
                    try await writer.write(ByteBuffer(bytes: bytes))
                }
                try await writer.finish(nil)
            }
            var headers: HTTPFields = [
                .contentType: format == .xml ? "application/xml" : "application/json", .vary: "Accept-Encoding",
            ]
            if gzip { headers[.contentEncoding] = "gzip" }
            return Response(status: .ok, headers: headers, body: body)
        }

        router.get("metrics") { request, _ -> Response in
            try await server.authorizeScrape(request)
            // Gauges are read as they stand when scraped.
            metrics.set("outpost_open_connections", server.openConnections.current)
            metrics.set("outpost_connection_limit", server.configuration.maximumConnections)
            metrics.set("outpost_bundle_downloads_streaming", server.bundleGate.streaming)
            metrics.set("outpost_bundle_snapshots_held", server.bundleGate.readingSnapshots)
            metrics.set("outpost_bundle_download_limit", server.bundleGate.limit)
            metrics.set("outpost_database_connections_in_use", server.activity.connectionsInUse)
            metrics.setEach(
                "outpost_pushes_in_progress", label: "project",
                Dictionary(uniqueKeysWithValues: server.activity.pushesByProject.map { ($0.key.storageText, $0.value) }))
            return Response(
                status: .ok, headers: [.contentType: "text/plain; version=0.0.4"],
                body: ResponseBody(byteBuffer: ByteBuffer(string: metrics.text)))
        }
    }

    // MARK: - What each route does, apart from HTTP
    //
    // The routes above only read the request and write the answer; these do the work. The in-process
    // server of `OutpostServerTesting` calls them too, so unit tests meet the very rules a device
    // meets over the network (the protocol middleware's version headers aside).

    /// The caller `token` (a bearer token as sent) belongs to: 401 when empty, unknown, revoked or
    /// expired; 429 `rate_limited` with `Retry-After` past the token's request limit.
    /// An admin token is refused here (401): it reaches the `/admin` routes only.
    package func caller(bearing token: String) async throws(ServerError) -> Caller {
        let (holder, digest) = try await holder(of: token)
        guard !holder.isAdmin else {
            throw ServerError.unauthorized("an admin token reaches only the /admin routes; sync with a member's token")
        }
        return Caller(userID: holder.userID, tokenDigest: digest)
    }

    /// 401 unless the token `caller` was let in by is still theirs, a member's and unexpired. A request is
    /// let in when it arrives and worked on in its turn, behind the user's other requests: one waiting
    /// when the office revokes a lost phone's token must not be answered after the revocation (attack
    /// 113, F7). One read of the token's row per request worked on; a push reads it in the transaction
    /// that writes it instead (`ServerStorage.push`).
    func requireTokenStillHeld(by caller: Caller) async throws(ServerError) {
        guard caller.isStillLetIn(by: try await storage.tokenHolder(forDigest: caller.tokenDigest)) else {
            throw ServerError.tokenGoneWhileWaiting
        }
    }

    /// The operator an admin token (`issueToken(admin: true)`) belongs to: 401 as `caller(bearing:)` for an
    /// unknown, revoked or expired token; 403 for a member's token, which administers nothing.
    package func administrator(bearing token: String) async throws(ServerError) -> Administrator {
        let (holder, digest) = try await holder(of: token)
        guard holder.isAdmin else {
            throw ServerError.forbidden("this token is a member's; the admin API takes an admin token")
        }
        return Administrator(userID: holder.userID, tokenPrefix: String(digest.prefix(12)))
    }

    /// Lets a scrape of `/metrics` through: the configured metrics token (`metricsToken`) or an admin
    /// token; 401 without a token or with an unknown one, 403 with a member's. The per-project series
    /// name the ids of projects being pushed to and when, which no member of another project and no
    /// one merely reaching the port may learn (attack finding 3 of stop 49).
    func authorizeScrape(_ request: Request) async throws(ServerError) {
        let token = try Self.bearerToken(of: request)
        if let metricsTokenDigest, !token.isEmpty, TokenDigest.hex(of: token) == metricsTokenDigest { return }
        let admin = try await administrator(bearing: token)
        RequestAttribution.note("user", admin.userID)
    }

    /// Whom `token` belongs to, and its digest; its use noted and counted against its request limit.
    private func holder(of token: String) async throws(ServerError) -> (TokenHolder, digest: String) {
        let digest = TokenDigest.hex(of: token)
        guard !token.isEmpty, let holder = try await storage.tokenHolder(forDigest: digest) else {
            throw ServerError.unauthorized("the bearer token is unknown or revoked")
        }
        // Its last use, at most once a minute per instance, written off the request's path: the write waits
        // for the database's writer (behind a push, or another process's write lock for the whole busy
        // timeout), and a request that writes nothing must not wait with it. A failure fails no request.
        let now = Timestamp.now()
        if tokenUses.shouldNote(digest, now: now) {
            let storage = self.storage, logger = self.logger
            Task {
                do { try await storage.noteTokenUse(digest: digest, now: now) } catch {
                    logger.warning("a token's last use was not noted", metadata: ["error": .string("\(error)")])
                }
            }
        }
        // Counted once the token is known: a stranger's guesses fill no bucket.
        if let rateLimiter, let wait = await rateLimiter.admit(digest) {
            let seconds = max(1, Int((wait / .seconds(1)).rounded(.up)))
            throw ServerError(
                status: 429, .rateLimited,
                "this token made its \(configuration.requestsPerMinutePerToken ?? 0) requests of the minute; try again in \(seconds) s",
                retryAfterSeconds: seconds)
        }
        return (holder, digest)
    }

    /// `/health`: the limits and versions, once the database answers (a load balancer asks here: an
    /// instance whose database does not answer is not healthy).
    package func health() async throws(ServerError) -> HealthResponse {
        try await storage.checkHealth()
        return HealthResponse(
            minimumProtocolVersion: SyncProtocol.version, maximumProtocolVersion: SyncProtocol.version,
            minimumSchemaVersion: configuration.schemaVersions.lowerBound,
            maximumSchemaVersion: configuration.schemaVersions.upperBound,
            maximumBatchSize: configuration.maximumBatchSize, maximumPullLimit: configuration.maximumPullLimit,
            assignsServerIDs: configuration.assignsServerIDs, serverTime: Timestamp.now())
    }

    /// Refuses a push while the SQLite file's volume has less free space than
    /// `ServerConfiguration.databaseDiskReserveBytes`.
    private func checkDatabaseDiskReserve() throws(ServerError) {
        guard configuration.postgresURL == nil, configuration.databaseDiskReserveBytes > 0 else { return }
        let folder = (configuration.databasePath as NSString).deletingLastPathComponent
        guard let free = MediaStore.freeBytes(at: folder.isEmpty ? "." : folder), free < configuration.databaseDiskReserveBytes else {
            return
        }
        throw ServerError(
            status: 507, .insufficientStorage,
            // No figures: how much disk the operator's machine has is not a member's business (round 67 F3).
            "the server is short of disk space: pushes wait until an operator frees space; pulls still answer",
            retryAfterSeconds: 300)
    }

    /// A push's body as `/push` reads it, refused at the mutation past the batch size or past the fields a
    /// batch holds (`PushRequest(wire:atMost:)`): 413 `batch_too_large`, so the device sends fewer at once;
    /// 400 with the line, column and reason for anything malformed.
    package func readPush(_ data: Data) throws(ServerError) -> PushRequest {
        do {
            return try PushRequest(wire: data, atMost: configuration.maximumBatchSize)
        } catch {
            if error.underlying is PushRequest.Overflow {
                throw ServerError(status: 413, .batchTooLarge, "\(error.message); send fewer mutations at once", underlying: error)
            }
            throw ServerError.badRequest("the body is not a valid PushRequest: \(error)", underlying: error)
        }
    }

    /// `/push/answers`: what the caller's pushes under `request`'s keys were answered, each key the server
    /// applied for the caller as `duplicate` (as the push route answers it sent again), none for the rest
    /// (`PushAnswersRequest`). Reads only: nothing is applied, whatever the keys.
    package func pushAnswers(_ request: PushAnswersRequest, by caller: Caller) async throws(ServerError) -> PushResponse {
        guard request.idempotencyKeys.count <= PushAnswersRequest.maximumKeys else {
            throw ServerError.badRequest("at most \(PushAnswersRequest.maximumKeys) idempotency keys per request")
        }
        try await requireTokenStillHeld(by: caller)
        var results: [MutationResult] = []
        for (key, outcome) in try await storage.storedAnswers(for: Array(Set(request.idempotencyKeys)), by: caller) {
            results.append(MutationResult(idempotencyKey: key, outcome: .duplicate(original: try OutcomeJSON.decode(outcome))))
        }
        return PushResponse(
            results: results.sorted { $0.idempotencyKey.uuidString < $1.idempotencyKey.uuidString },
            keepsEveryAnswer: try await storage.keepsEveryAnswer(of: caller))
    }

    /// `/push`: one result per mutation, in order (413 for a batch over the limit), and where the
    /// history stands after it (409 `history_changed`, nothing applied, when the request's checkpoint
    /// is not in this history).
    package func push(_ push: PushRequest, by caller: Caller) async throws(ServerError) -> PushResponse {
        guard push.mutations.count <= configuration.maximumBatchSize else {
            throw ServerError(status: 413, .batchTooLarge, "at most \(configuration.maximumBatchSize) mutations per push")
        }
        try checkDatabaseDiskReserve()
        let held = try await checkHistory(push.checkpoint)
        let results = try await storage.push(push.mutations, by: caller, now: Timestamp.now())
        for result in results {
            metrics.count("outpost_mutations_total", [("outcome", result.outcome.status)])
        }
        // The answer's checkpoint is the newest change the answers concern (the records applied, or
        // answered with), never older than the request's: a change of the caller's own records, so it
        // tells nothing of others' activity, and a restore that loses any of them is noticed.
        var newest = held.sequence
        var answered: [RecordKey] = []
        for (mutation, result) in zip(push.mutations, results) {
            switch result.outcome.unwrapped {
            case .applied: answered.append(RecordKey(entity: mutation.entity, id: mutation.recordID))
            case .conflict(let record): newest = max(newest, record.sequence)
            case .rejected, .duplicate: break
            }
        }
        newest = max(newest, try await storage.newestSequence(of: answered))
        return PushResponse(results: results, checkpoint: try await storage.historyCheckpoint(at: newest).text)
    }

    /// Refuses a request whose checkpoint this history does not hold: the database was restored from a
    /// backup taken before the device last heard from it, so its cursor would skip the changes made
    /// since the restore, and its changes were made on versions this history never had.
    @discardableResult
    private func checkHistory(_ text: String?) async throws(ServerError) -> HistoryCheckpoint {
        guard let text else { return .empty }
        guard let checkpoint = HistoryCheckpoint(text: text) else {
            throw ServerError(
                status: 400, .unknownCheckpoint,
                "'checkpoint' is not one this server wrote: pull everything again from the start without one")
        }
        guard try await storage.holdsHistory(checkpoint) else { throw historyChanged(losing: "the checkpoint \(text)") }
        return checkpoint
    }

    /// The 409 `history_changed` answer to a request naming a change this history no longer holds (a
    /// checkpoint or a bundle position), counted in `outpost_history_changed_total`.
    private func historyChanged(losing what: String) -> ServerError {
        metrics.count("outpost_history_changed_total", [])
        return ServerError(
            status: 409, .historyChanged,
            "this server's history no longer holds \(what) (restored from a backup taken before it): "
                + "pull everything again from the start and send again the changes it lost")
    }

    /// `/pull`: the page's JSON as it goes out (gzip-compressed when `gzip` and large enough).
    package func pull(_ pull: PullRequest, by caller: Caller, gzip: Bool) async throws(ServerError) -> JSONBody {
        // The API document's range: above it the number is refused rather than capped, as any value
        // outside a documented range is (the cap, maximumPullLimit, applies within it).
        guard (1...Int(Int32.max)).contains(pull.limit) else { throw ServerError.badRequest("limit must be 1 to \(Int32.max)") }
        try await requireTokenStillHeld(by: caller)
        if let cursor = pull.cursor { try await checkProjectCount(of: cursor, by: caller) }
        let held = try await checkHistory(pull.checkpoint)
        var after = PullCursor.start
        var told: Int64 = 0
        if let text = pull.cursor {
            let opened = try await cursorSeal.open(text, checkpoint: held.sequence, storage: storage)
            after = opened.cursor
            // The checkpoint the cursor's answer gave, sealed with it: a history that lost it lost changes
            // the caller was told of, whether or not the request sent a checkpoint (attack 96, finding 1).
            if let sealed = opened.checkpoint {
                guard try await storage.holdsHistory(sealed) else { throw historyChanged(losing: "the checkpoint of its cursor") }
                told = sealed.sequence
            }
        }
        // The answer's checkpoint is never older than a position the cursor took from a bundle: the
        // device holds the records up to it, and a restore that lost them must be noticed (attack 88).
        let adopted = try await adoptBundlePositions(pull.bundlePositions, into: &after)
        let reread = try await readAgain(pull.rereadProjects, in: &after, by: caller)
        guard var own = SequenceRanges(texts: pull.ownSequences) else {
            throw ServerError.badRequest(
                "'ownSequences' must be at most \(SequenceRanges.maximumCount) ranges of change sequences, as <first>-<last> or <n>")
        }
        // A push's answer carries a checkpoint at its sequences, and a device sends it back with them.
        // Past the request's checkpoint and its cursor's, a sequence is no one's own: with its cursor
        // alone, a client named the sequences its pushes took before a restore, and was sent the changes
        // the restored history wrote at them as its own, versions only, while its cursor passed them for
        // good (attack 97). Their changes come whole. A bundle position does not raise the bound: it is
        // another project's, and a bundle made after the restore carries a checkpoint past them all
        // (attack 98).
        own.removeAll(after: max(held.sequence, told))
        let checkpoint = max(held.sequence, adopted, told)
        let answer = try await Self.pull(
            PreparedPulls.Request(
                user: caller.userID, after: after, limit: min(pull.limit, configuration.maximumPullLimit),
                projects: pull.projects, gzip: gzip, sharedClock: pull.acceptsSharedClock, checkpoint: checkpoint,
                ownSequences: own, rereadProjects: reread),
            by: caller, storage: storage, seal: cursorSeal, rules: rules, maximumPageBytes: configuration.maximumPullPageBytes,
            readAhead: configuration.readsPullsAhead ? readAhead : nil, turns: requestTurns, metrics: metrics)
        metrics.add("outpost_pulled_records_total", answer.records)
        return answer.body
    }

    /// Refuses, before reading it, a cursor naming more projects than the caller belongs to by more than
    /// `PullCursor.maximumLeftAtOnce`: no cursor this server wrote does (`PullCursor.advanced`).
    /// Memberships are counted, not the projects with a role: reading every member record of the caller's
    /// projects to know their roles was a third of a one-record pull's CPU for a member of 990 projects
    /// (`perf`, attack 112, F1), and the pull reads them anyway. A cursor naming projects where the caller
    /// has a membership but no role passes here, bounded by those memberships, and reaches none of them.
    private func checkProjectCount(of cursor: String, by caller: Caller) async throws(ServerError) {
        let named = PullCursor.projectCount(of: cursor)
        guard named > PullCursor.maximumLeftAtOnce else { return }
        let memberships = try await storage.membershipCount(of: caller)
        guard named <= memberships + PullCursor.maximumLeftAtOnce else {
            throw ServerError(
                status: 400, .unknownCursor,
                "the cursor names \(named) projects, and you belong to \(memberships): a cursor this server wrote names "
                    + "your projects and at most \(PullCursor.maximumLeftAtOnce) you left since")
        }
    }

    /// Starts each project a bundle position names, and the cursor does not, where the bundle left it
    /// (`PullRequest.bundlePositions`): the bundle held every record of the project up to that change.
    /// A position whose checkpoint this history does not hold is answered `history_changed`, as a
    /// request's checkpoint is: the records the bundle brought come from a history a restore lost, and
    /// the device rebuilds. Left out, with the project read from its beginning, the lost records stayed
    /// on a device whose run was cut after its bundle's checkpoint was confirmed (attack 88's family).
    /// That answer depends on the history alone, never on the project. A project the caller is not a
    /// member of (removed since the bundle was made) is read by no pull and comes back in `leftProjects`,
    /// as a cursor's would: the device learns that the records its bundle brought are no longer its
    /// user's. Any id the caller is not a member of is answered so, so the answer tells nothing of
    /// whether such a project exists.
    /// Returns the newest sequence adopted (0 when none was): its checkpoint is one the caller sent and
    /// this history holds, so answering with it tells nothing new.
    private func adoptBundlePositions(_ positions: [String], into cursor: inout PullCursor) async throws(ServerError) -> Int64 {
        guard positions.count <= SyncProtocol.maximumBundlePositions else {
            throw ServerError.badRequest("at most \(SyncProtocol.maximumBundlePositions) bundle positions")
        }
        var newest: Int64 = 0
        for text in positions {
            guard let (project, sequence, mark) = SyncProtocol.bundlePositionParts(text) else {
                throw ServerError.badRequest("'bundlePositions' holds '\(text.prefix(80))', not a bundle's position")
            }
            guard try await storage.holdsHistory(HistoryCheckpoint(sequence: sequence, mark: mark)) else {
                throw historyChanged(losing: "the bundle position \(text)")
            }
            guard cursor.startsFresh(project) else { continue }
            cursor.adopt(project, at: sequence)
            newest = max(newest, sequence)
        }
        return newest
    }

    /// Forgets the cursor's position of each project the caller is a member of among `projects`
    /// (`PullRequest.rereadProjects`), so the pull reads it from its beginning; returns them all, in the
    /// order asked, duplicates dropped, for the answer to name. A project the caller is not a member of
    /// is left as the cursor names it (one it named comes back in `leftProjects`) and named back as well,
    /// so the answer tells nothing of whether such a project exists.
    private func readAgain(_ projects: [UUID], in cursor: inout PullCursor, by caller: Caller) async throws(ServerError) -> [UUID] {
        guard !projects.isEmpty else { return [] }
        guard projects.count <= SyncProtocol.maximumRereadProjects else {
            throw ServerError.badRequest("at most \(SyncProtocol.maximumRereadProjects) projects to read again")
        }
        var seen: Set<UUID> = []
        let asked = projects.filter { seen.insert($0).inserted }
        let memberships = try await storage.pullBasis(of: caller).memberships
        cursor.forget(asked.filter(memberships.contains), memberships: memberships)
        return asked
    }

    /// `GET /media/{id}/upload`: how much of the attachment's file the server holds.
    package func mediaStatus(of attachmentID: UUID, by caller: Caller) async throws(ServerError) -> MediaUploadStatus {
        try await media.status(of: attachmentID, by: caller)
    }

    /// `GET /media/{id}`: where the finished original is, its size and SHA-256, for a member of its project.
    package func mediaOriginal(of attachmentID: UUID, by caller: Caller) async throws(ServerError) -> MediaOriginal {
        try await media.original(of: attachmentID, by: caller)
    }

    /// `PUT /media/{id}/upload`: stores one chunk (the chunk-size limit is the route's, on the body read).
    package func receiveMedia(
        _ data: Data, range: ContentRange, sha256: String, for attachmentID: UUID, by caller: Caller
    ) async throws(ServerError) -> MediaUploadStatus {
        let status = try await media.receive(data, range: range, sha256: sha256, for: attachmentID, by: caller, now: Timestamp.now())
        metrics.add("outpost_media_bytes_total", data.count)
        return status
    }

    /// `GET /projects/{id}/bundle`, up to its first byte: every refusal (404, 403, 503 when too many
    /// download at once) happens here; `BundleDownload.write` then streams it.
    package func openBundle(project: UUID, format: BundleFormat, by caller: Caller) async throws(ServerError)
        -> BundleDownload
    {
        guard let slot = bundleGate.enter(for: caller.userID) else {
            throw ServerError(
                status: 503, .unavailable,
                "\(SyncServer.maximumConcurrentBundles) bundle downloads, or \(SyncServer.maximumConcurrentBundlesPerCaller) "
                    + "of yours, are streaming; try again shortly",
                retryAfterSeconds: 5)
        }
        let spool: BundleSpool
        do {
            spool = try BundleSpool(
                aheadLimit: configuration.bundleSpoolAheadBytes, waitLimit: .seconds(configuration.bundleSnapshotWaitSeconds))
        } catch {
            throw ServerError(
                status: 503, .unavailable, "cannot create the bundle's spool file (\(error)); try again shortly", retryAfterSeconds: 5)
        }
        let source = try await storage.bundle(project: project, by: caller)
        metrics.count("outpost_bundles_total", [("format", format.rawValue)])
        return BundleDownload(
            source: source, project: project, format: format, slot: slot, encoding: bundleEncoding, metrics: metrics,
            spool: spool, logger: logger)
    }

    /// A pull's answer: the page read ahead for this very request when nothing it depends on changed
    /// since (see `PreparedPulls`), else the page read now. When more changes wait, the next page is
    /// read ahead.
    private static func pull(
        _ request: PreparedPulls.Request, by caller: Caller, storage: any ServerStorage, seal: CursorSeal, rules: PushRules,
        maximumPageBytes: Int, readAhead: PreparedPulls?, turns: Turns<UUID>, metrics: ServerMetrics
    ) async throws(ServerError) -> PreparedPulls.Answer {
        @Sendable func read(_ request: PreparedPulls.Request) async throws(ServerError) -> PreparedPulls.Answer {
            var page = try await storage.pull(
                after: request.after, limit: request.limit, maximumBytes: maximumPageBytes, projects: request.projects,
                by: caller)
            // The newest change this caller was served, never older than the checkpoint, the bundle
            // positions or the cursor's sealed checkpoint it sent (which this history holds, mark and all):
            // only what it may see moves it
            // (`HistoryCheckpoint`). Not the cursor's positions: the caller writes those, and a made-up
            // one past everything it was told named a change of another project when the history held
            // it and nothing when not, an oracle of the server's newest change (attack finding 1 of stop 50).
            let checkpoint = try await storage.historyCheckpoint(at: max(request.checkpoint, page.rows.lazy.map(\.sequence).max() ?? 0))
            page.rereadProjects = request.rereadProjects
            let json = try page.json(
                rules: rules, sharedClock: request.sharedClock, checkpoint: checkpoint, ownSequences: request.ownSequences,
                cursorText: try await seal.text(of: page.nextCursor, checkpoint: checkpoint, storage: storage))
            return PreparedPulls.Answer(
                body: JSONBody(json, gzip: request.gzip), records: page.rows.count,
                nextCursor: page.nextCursor, hasMore: page.hasMore, basis: page.basis, checkpoint: checkpoint.sequence)
        }
        var answer: PreparedPulls.Answer?
        if let prepared = await readAhead?.take(request) {
            if let page = await prepared.value, try await storage.pullBasis(of: caller) == page.basis {
                answer = page
            }
            metrics.count("outpost_pull_read_ahead_total", [("outcome", answer == nil ? "discarded" : "served")])
        }
        let result: PreparedPulls.Answer
        if let answer { result = answer } else { result = try await read(request) }
        if let readAhead, result.hasMore {
            let next = request.continued(after: result)
            // Only in a turn free now: this request, and the one that will wait for the page, hold turns of
            // the same user, and a read waiting behind them waited for ever (attack 128, F1). With none
            // free, no page is read ahead and the next request reads its own in its turn.
            await readAhead.prepare(next) {
                (try? await turns.inTurnIfFree(of: caller.userID) { () async throws(ServerError) in try await read(next) }) ?? nil
            }
        }
        return result
    }

    /// A record as this server stores it, tombstones with their last values included, whoever may see
    /// it: nil when it has none by that id. For an operator's tools and tests; no route answers it.
    package func storedRecord(_ id: UUID) async throws(ServerError) -> ServerRecord? {
        for entity in EntityType.allCases {
            if let record = try await storage.record(entity, id: id) { return record.serverRecord }
        }
        return nil
    }

    /// The file a finished upload of an attachment is kept in, and the one an unfinished upload grows
    /// in (either may not exist).
    package func mediaFiles(of attachmentID: UUID) -> (finished: URL, part: URL) {
        (media.fileURL(of: attachmentID), media.partURL(of: attachmentID))
    }

    /// How many pull pages are held read ahead, once the reads under way have ended (for tests).
    func pagesReadAhead() async -> Int {
        await readAhead.settledCount()
    }

    /// The caller a request's bearer token names (401 when missing or unknown).
    private func authenticate(_ request: Request) async throws(ServerError) -> Caller {
        let caller = try await caller(bearing: try Self.bearerToken(of: request))
        RequestAttribution.note("user", caller.userID)
        return caller
    }

    /// The token of the request's `Authorization: Bearer` header (the scheme in any case, as HTTP
    /// reads it); 401 without one.
    static func bearerToken(of request: Request) throws(ServerError) -> String {
        guard let header = request.headers[.authorization], header.prefix(7).lowercased() == "bearer " else {
            throw ServerError.unauthorized("a bearer token is required")
        }
        return header.dropFirst("Bearer ".count).trimmingCharacters(in: .whitespaces)
    }

    /// The longest a token may be issued for: ten years.
    public static let longestTokenLife: TimeInterval = 315_360_000

    static func uuid(_ text: String?) throws(ServerError) -> UUID {
        guard let text, let id = UUID(uuidString: text) else { throw ServerError.notFound("not a record id") }
        return id
    }

    /// An original's body held to its client's pace, as a bundle's is (`BundleDownload.write`): a piece
    /// is handed to the connection only once its socket has taken all but `aheadOfSocketBytes` of the
    /// pieces before it. Handed on as fast as the disk gave them, every slow reader held megabytes of
    /// its file in the server (96 readers at 1 KB/s took it from 57 MB to 980 MB; attack 99, F1).
    static func paced(
        _ body: ResponseBody, by progress: WriteProgress?, metrics: ServerMetrics, holding slot: BundleGate.Slot? = nil
    ) -> ResponseBody {
        // Body bytes of earlier answers on this connection count from the first piece on, as for a bundle.
        let handed = NIOLockedValueBox<(base: Int?, bytes: Int)>((nil, 0))
        return body.map { piece in
            withExtendedLifetime(slot) {}  // the download's place, kept as long as its body
            let due = handed.withLockedValue { state -> Int in
                let base = state.base ?? progress?.written ?? 0
                state.base = base
                defer { state.bytes += piece.readableBytes }
                return base + state.bytes - BundleDownload.aheadOfSocketBytes
            }
            try await progress?.wait(untilWritten: due)
            metrics.add("outpost_original_bytes_total", piece.readableBytes)
            return piece
        }
    }
}

/// A bundle download the server agreed to: its records' source and the download slot it holds until
/// the last byte is written (see `BundleGate`).
package struct BundleDownload: Sendable {
    let source: BundleRecords
    let project: UUID
    let format: BundleFormat
    let slot: BundleGate.Slot
    let encoding: EncodingTurns
    let metrics: ServerMetrics
    let spool: BundleSpool
    let logger: Logger

    /// The most one write to the connection holds: in pieces of 64 KiB, each awaited. A page (megabytes
    /// of escaped XML) written as one piece left the connection unwritable until the client had read
    /// nearly all of it, so a client reading steadily at 63 KB/s met the stall timeout meant for one
    /// that stopped (attack 56).
    static let pieceBytes = 64 * 1024

    /// How far the pieces handed to the connection may run ahead of what its socket took: sixteen pieces.
    /// Beyond it the sender waits (`WriteProgress`), so a client that stops reading holds its slot, and
    /// the server holds its socket's buffer and this much of its download, until the stall timeout cuts it.
    static let aheadOfSocketBytes = 16 * pieceBytes

    /// How far the encoder may run ahead of the client, on disk (`BundleSpool`): 256 MiB, a gzip
    /// bundle of some eight million records, or the plain JSON of half a million.
    static let spoolAheadBytes = 256 << 20

    /// Streams the bundle: the storage's batches are encoded (gzip-compressed with `gzip`, as one member:
    /// a bundle is the largest download a crew makes, and its JSON shrinks about 20 times) into the
    /// download's spool as fast as they are read, and `send` takes the spool's bytes at the client's
    /// pace. The snapshot the records are read from is let go once the last batch is encoded, not when
    /// the client has read it (`BundleSpool`). Neither the project nor the bundle is ever whole in memory:
    /// with `progress`, the connection's, no piece is handed on while `aheadOfSocketBytes` wait for the socket.
    package func write(gzip: Bool, pacedBy progress: WriteProgress? = nil, to send: ([UInt8]) async throws -> Void)
        async throws
    {
        // The download's slot stays taken until the body is done.
        defer { withExtendedLifetime(slot) {} }
        let producer = Task { [self] in
            do {
                try await encode(gzip: gzip)
                await spool.finish()
            } catch {
                if error is BundleSpool.WaitedTooLong {
                    metrics.count("outpost_bundle_snapshot_cuts_total", [])
                    logger.warning("bundle download cut", metadata: ["project": "\(project.storageText)", "reason": "\(error)"])
                }
                await spool.fail(error)
            }
            slot.doneReading()
        }
        defer { producer.cancel() }
        do {
            var offset = 0
            // Body bytes of earlier answers on this connection count from here on as well: at most an
            // answer's worth more ahead, never less.
            let base = progress?.written ?? 0
            while let piece = try await spool.read(from: offset, upTo: Self.pieceBytes) {
                try await send(piece)
                offset += piece.count
                metrics.add("outpost_bundle_bytes_total", piece.count)
                try await progress?.wait(untilWritten: base + offset - Self.aheadOfSocketBytes)
            }
        } catch {
            // The client is gone or the encoder failed: an encoder waiting for room stops too.
            await spool.close()
            throw error
        }
    }

    /// The encoder's side of `write`: every batch into the spool, then the document's end.
    private func encode(gzip: Bool) async throws {
        let encoder = try BundleStreamEncoder(
            project: project, asOf: source.asOf, checkpoints: source.checkpoint.sequence > 0 ? [source.checkpoint.text] : [],
            format: format)
        let compressor = gzip ? GzipStream() : nil
        var pending: [UInt8] = []
        func add(_ bytes: [UInt8]) {
            pending += compressor?.compress(bytes) ?? bytes
        }
        func flush() async throws {
            guard !pending.isEmpty else { return }
            try await spool.append(pending)
            pending.removeAll(keepingCapacity: true)
        }
        add(encoder.take())
        // One batch read ahead while this one is encoded: reading a page (the snapshot's rows, their
        // fields decoded) took as long as encoding it, one after the other (`perf`). Still one read at a
        // time, and at most two batches in memory.
        var upcoming = Task { try await source.next() }
        defer { upcoming.cancel() }
        while let batch = try await upcoming.value {
            try Task.checkCancellation()
            upcoming = Task { try await source.next() }
            // Encoded and compressed in a turn, the spool's write after it: see `EncodingTurns`.
            try await encoding.run {
                for entry in batch {
                    if let wireFields = entry.wireFields {
                        try encoder.write(entry.record, wireFields: wireFields)
                    } else {
                        try encoder.write(entry.record)
                    }
                }
                add(encoder.take())
            }
            // Compressed, a batch (500 records, some 250 KB of JSON) gives about 14 KB once zlib
            // closes a block: handed on after each such batch, the device inflates and writes one part
            // while the next is encoded, as with 64 KB plain (at 64 KB it waited on a megabyte).
            if pending.count >= (compressor == nil ? 64 : 8) * 1024 { try await flush() }
        }
        // A cancelled stream ends like a finished one; never close a bundle whose records were cut short.
        try Task.checkCancellation()
        try encoder.finish()
        add(encoder.take())
        if let compressor { pending += compressor.finish() }
        try await flush()
    }
}

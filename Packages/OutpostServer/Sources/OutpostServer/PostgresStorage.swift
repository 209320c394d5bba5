import Foundation
import Logging
import OutpostConflicts
import OutpostSchema
import OutpostWire
import PostgresNIO

/// The storage for a team that outgrew one SQLite file: PostgreSQL through postgres-nio's pooled
/// client, so several stateless `outpost serve` instances can share one database.
///
/// **Several instances.** Every write transaction (push, seed) first takes one transaction-level
/// advisory lock (`pg_advisory_xact_lock`), held until commit. Writers are thus serialized across
/// all instances exactly as SQLite's single writer serializes them in one process: the idempotency
/// check sees every committed key (exactly once per mutation), and the change sequence, taken under
/// the lock, is committed in order. PostgreSQL makes a transaction visible before it releases its
/// locks, so a reader that sees sequence n + 1 also sees n: no pull ever skips a change committed
/// late by another instance. Reads take no lock.
final class PostgresStorage: ServerStorage {
    /// The URL with its password hidden, for errors.
    let location: String
    let assignsServerIDs: Bool
    /// The conflict policy pushes are settled with (`ServerConfiguration.conflictPolicy`).
    let policy: ConflictPolicy
    /// The largest media file the server takes, checked at push (`PushRules.maximumMediaBytes`).
    let maximumMediaBytes: Int64
    /// The push bounds (`PushRules.Bounds`).
    let bounds: PushRules.Bounds
    /// Each member's answers since their last pruning, across this process's pushes (`AnswerPruning`).
    private let answerPruning = AnswerPruning()
    private let client: PostgresClient
    private let connectionConfiguration: PostgresConnection.Configuration
    private let runTask: Task<Void, Never>
    private let readiness = Readiness()
    private let logger: Logger
    /// What `/metrics` reports of this database's work.
    let activity: DatabaseActivity
    private let waits: Waits

    /// The advisory lock every write transaction holds until it commits (see the type's comment).
    static let writeLockKey: Int64 = 0x6f75_7470_6f73_7402

    /// How long the pool's sessions wait (`ServerConfiguration.databaseLockWaitSeconds`,
    /// `idleTransactionSeconds`): set as each pooled session starts, so no transaction pays a round trip.
    struct Waits: Sendable {
        var lockSeconds = 10
        var idleTransactionSeconds = 15

        /// The longest one statement may run: six lock waits.
        var statementSeconds: Int { lockSeconds * 6 }

        /// The longest one storage call may take on its connection: a statement's bound and some.
        var operationSeconds: Int { statementSeconds + 10 }

        /// The session settings: lock waits and statements bounded, and a session idle in a
        /// transaction ended by the database, which frees its locks.
        var startupParameters: [(String, String)] {
            [
                ("lock_timeout", "\(lockSeconds)s"),
                ("statement_timeout", "\(statementSeconds)s"),
                ("idle_in_transaction_session_timeout", "\(idleTransactionSeconds)s"),
            ]
        }
    }

    /// Creates the client and starts its connection pool; nothing is queried until `prepare()`.
    init(
        url: String, assignsServerIDs: Bool, policy: ConflictPolicy = ConflictPolicy(), maximumMediaBytes: Int64 = .max,
        waits: Waits = Waits(), logger: Logger, activity: DatabaseActivity = DatabaseActivity(),
        bounds: PushRules.Bounds = PushRules.Bounds()
    ) throws(ServerError) {
        self.bounds = bounds
        self.activity = activity
        self.policy = policy
        self.waits = waits
        self.maximumMediaBytes = maximumMediaBytes
        let parsed = try PostgresConnectionURL(url)
        self.location = parsed.redacted
        self.assignsServerIDs = assignsServerIDs
        self.logger = logger
        self.connectionConfiguration = parsed.connection
        var pool = parsed.configuration
        pool.options.additionalStartupParameters = waits.startupParameters
        let client = PostgresClient(configuration: pool, backgroundLogger: logger)
        self.client = client
        self.runTask = Task { await client.run() }
    }

    deinit {
        runTask.cancel()
    }

    /// Migrates the schema once (later calls wait for the first); every other method calls it first.
    func prepare() async throws(ServerError) {
        let configuration = self.connectionConfiguration
        let logger = self.logger
        let location = self.location
        try await readiness.once { () async throws(ServerError) in
            do {
                let connection = try await PostgresConnection.connect(
                    configuration: configuration, id: 0, logger: logger)
                do {
                    try await PostgresSchema.migrate(on: connection, logger: logger)
                } catch {
                    try? await connection.close()
                    throw error
                }
                try await connection.close()
            } catch let error as ServerError {
                throw ServerError(error.code, message: error.message, path: location, underlying: error.underlying)
            } catch {
                throw ServerError(.databaseFailure, message: Self.describe(error), path: location, underlying: error)
            }
        }
    }

    /// Stops the connection pool: open connections close, and later calls fail.
    func close() async {
        runTask.cancel()
        // Not for ever: a connection held by a call the deadline gave up on may never be handed back.
        let run = runTask
        _ = try? await Deadline.run(seconds: 10) { await run.value }
    }

    // MARK: - Transactions

    /// Runs `body` on one pooled connection, after migrating; errors other than `ServerError` become
    /// `databaseFailure` with PostgreSQL's own message.
    ///
    /// Bounded by `Waits.operationSeconds`, then 503: a statement is bounded by the database, but not a
    /// connection whose session the database ended while this instance was frozen, nor a database that
    /// stopped answering (both left a request unanswered for good, and SIGTERM waiting on it).
    func withConnection<T: Sendable>(_ body: @escaping @Sendable (PostgresConnection) async throws -> T) async throws(ServerError) -> T {
        try await prepare()
        let client = self.client, seconds = waits.operationSeconds, activity = self.activity
        do {
            return try await Deadline.run(seconds: seconds) {
                try await client.withConnection { connection in
                    activity.connectionTaken()
                    defer { activity.connectionReturned() }
                    return try await body(connection)
                }
            }
        } catch let error as Deadline.TimedOut {
            throw ServerError(
                status: 503, .unavailable, "the database did not answer within \(error.seconds) s; try again shortly",
                retryAfterSeconds: 5, underlying: error)
        } catch {
            throw map(error)
        }
    }

    /// A write transaction, serialized with every other writer of the database by the advisory lock.
    func write<T: Sendable>(_ body: @escaping @Sendable (PostgresConnection) async throws -> T) async throws(ServerError) -> T {
        let logger = self.logger, activity = self.activity
        return try await withConnection { connection in
            try await connection.withTransaction(logger: logger) { connection in
                let asked = ContinuousClock.now
                // Read to the end: a query's error (here the lock wait running out) reaches the caller
                // only with its rows, and unread it surfaced as the next statement's "transaction aborted".
                _ = try await connection.query("SELECT pg_advisory_xact_lock(\(Self.writeLockKey))", logger: logger).collect()
                activity.lockWaited(ContinuousClock.now - asked)
                return try await body(connection)
            }
        }
    }

    /// A read-only transaction on one snapshot, so a page and the references it names agree.
    func read<T: Sendable>(_ body: @escaping @Sendable (PostgresConnection) async throws -> T) async throws(ServerError) -> T {
        let logger = self.logger
        return try await withConnection { connection in
            try await connection.withTransaction(logger: logger) { connection in
                try await connection.query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY", logger: logger)
                return try await body(connection)
            }
        }
    }

    private func map(_ error: any Error) -> ServerError {
        if let error = error as? ServerError { return error }
        if let error = error as? PostgresTransactionError,
            let inner = error.closureError ?? error.beginError ?? error.commitError
        {
            return map(inner)
        }
        if let error = error as? PSQLError,
            Self.lostConnection.contains(error.code) || (error.serverInfo?[.sqlState]).map(Self.isUnreachable) == true
        {
            // The database ended the session (this instance was frozen past the idle limit) or the
            // network to it broke: nothing was committed, and the client sends the batch again.
            return ServerError(
                status: 503, .unavailable, "the connection to the database was lost (\(Self.describe(error))); try again shortly",
                retryAfterSeconds: 2, underlying: error)
        }
        if let error = error as? PSQLError, let state = error.serverInfo?[.sqlState], Self.busyStates.contains(state) {
            // Another instance holds the lock, or a statement ran out its time: a client retries later.
            return ServerError(
                status: 503, .unavailable, "the database is busy (\(Self.describe(error))); try again shortly",
                retryAfterSeconds: 2, underlying: error)
        }
        // The pool's own refusals (its circuit breaker open after failing to connect for a while, the pool
        // shut down): the database cannot be reached, which a client waits out, not a failure of the request.
        if String(describing: type(of: error)) == "ConnectionPoolError" {
            return ServerError(
                status: 503, .unavailable, "the database cannot be reached (\(error)); try again shortly",
                retryAfterSeconds: 5, underlying: error)
        }
        return ServerError(.databaseFailure, message: Self.describe(error), path: location, underlying: error)
    }

    /// Whether a SQLSTATE says the database cannot be reached now: a connection exception (class 08),
    /// the server shutting down or starting (57P01 administrator shutdown, 57P02 crash shutdown, 57P03
    /// cannot connect now), or too many connections (53300). Answered 500, devices charged it to their
    /// retry budget as a failure of the request.
    static func isUnreachable(_ state: String) -> Bool {
        state.hasPrefix("08") || ["57P01", "57P02", "57P03", "53300"].contains(state)
    }

    /// SQLSTATEs of a bounded wait that ran out: lock_not_available (`lock_timeout`), query_canceled
    /// (`statement_timeout`), idle_in_transaction_session_timeout (this session was ended while idle).
    static let busyStates: Set<String> = ["55P03", "57014", "25P03"]

    /// postgres-nio's codes for a connection that is gone under a call.
    static let lostConnection: Set<PSQLError.Code> = [.clientClosedConnection, .serverClosedConnection, .connectionError, .poolClosed]

    func probeDatabase() async throws(ServerError) {
        let logger = self.logger
        _ = try await withConnection { connection in try await connection.query("SELECT 1", logger: logger).collect() }
    }

    /// PostgreSQL's own message when there is one (postgres-nio's description hides it by default).
    static func describe(_ error: any Error) -> String {
        if let error = error as? PSQLError {
            if let message = error.serverInfo?[.message] {
                return "PostgreSQL: \(message) (\(error.serverInfo?[.sqlState] ?? "?"))"
            }
            return "PostgreSQL: \(error.code)"
        }
        if let error = error as? PostgresTransactionError {
            if let inner = error.closureError ?? error.commitError ?? error.beginError ?? error.rollbackError {
                return describe(inner)
            }
        }
        return "\(error)"
    }

    var logContext: Logger { logger }

    // MARK: - Tokens

    func tokenHolder(forDigest digest: String) async throws(ServerError) -> TokenHolder? {
        let logger = self.logger
        return try await withConnection { connection in
            try await Self.tokenHolder(forDigest: digest, now: Timestamp.now(), on: connection, logger: logger)
        }
    }

    /// The holder of the token with `digest`, unexpired at `now`; nil for none.
    private static func tokenHolder(forDigest digest: String, now: Date, on connection: PostgresConnection, logger: Logger)
        async throws -> TokenHolder?
    {
        for try await (userID, admin) in try await connection.query(
            """
            SELECT user_id, admin FROM tokens
            WHERE token_sha256 = \(digest) AND (expires_at IS NULL OR expires_at > \(now.milliseconds))
            """, logger: logger
        ).decode((String, Bool).self) {
            return UUID(uuidString: userID).map { TokenHolder(userID: $0, isAdmin: admin) }
        }
        return nil
    }

    /// Throws `tokenGoneWhileWaiting` unless `caller`'s token still lets it in at `now`: read in the
    /// transaction that writes, after the write lock, so a revocation that committed while the work
    /// waited holds.
    private static func requireStillLetIn(_ caller: Caller, now: Date, on connection: PostgresConnection, logger: Logger)
        async throws
    {
        let holder = try await tokenHolder(forDigest: caller.tokenDigest, now: now, on: connection, logger: logger)
        guard caller.isStillLetIn(by: holder) else { throw ServerError.tokenGoneWhileWaiting }
    }

    // MARK: - Push

    func push(_ mutations: [PushMutation], by caller: Caller, now: Date) async throws(ServerError) -> [MutationResult] {
        let logger = self.logger
        let rules = PushRules(
            assignsServerIDs: assignsServerIDs, policy: policy, maximumMediaBytes: maximumMediaBytes, bounds: bounds,
            storedBytes: PostgresRecords.storedBytes, answerPruning: answerPruning)
        let batch = PushBatch(mutations: mutations, caller: caller, now: now)
        let named = batch.namedProjects
        activity.push(into: named, begun: true)
        defer { activity.push(into: named, begun: false) }
        return try await write { connection in
            // Read in the transaction that writes the push, after the write lock: a push that waited its
            // turn or for the lock while the office revoked its token writes nothing (attack 113, F7).
            try await Self.requireStillLetIn(caller, now: now, on: connection, logger: logger)
            let snapshot = try await Self.loadSnapshot(for: batch, on: connection, logger: logger)
            let plan = try rules.plan(batch, snapshot: snapshot)
            try await Self.write(plan, on: connection, logger: logger)
            return plan.results
        }
    }

    // MARK: - Pull

    func pull(after cursor: PullCursor, limit: Int, maximumBytes: Int, projects: [UUID]?, by caller: Caller)
        async throws(ServerError) -> PullPage
    {
        let logger = self.logger
        let assignsServerIDs = self.assignsServerIDs
        return try await read { connection in
            let mine = try await PostgresAccess.projects(of: caller, on: connection, logger: logger)
            if let projects, let other = projects.first(where: { !mine.contains($0) }) {
                throw ServerError.forbidden("you are not a member of project \(other.storageText)")
            }
            let read = (projects.map { Set($0) } ?? mine).sortedByStorageText { $0 }
            let visible = read.map(\.storageText)
            // Each project's changes after its own position: the sequence index is walked from the lowest
            // and every row checked against its project's position, so a page still stops at its size.
            let positions = read.map(cursor.position(of:))
            let lowest = cursor.lowestPosition(among: read, includingBase: projects == nil)
            // Another user's id matches no row, so passing nobody's keeps one statement for both cases.
            let unlinkedOwner = projects == nil ? caller.userID.storageText : ""
            // The candidates' sizes first (octet_length reads a TOASTed value's length, not the value),
            // then only the rows that make the page, in the same snapshot: a page of large records is
            // never read whole.
            var extent = PullPage.Extent(limit: limit, maximumBytes: maximumBytes)
            var sequences: [Int64] = []
            var candidates = 0
            for try await (sequence, size) in try await connection.query(
                """
                SELECT sequence, octet_length(fields) + octet_length(clocks) FROM records
                WHERE sequence > \(lowest)
                  AND ((project_id = ANY(\(visible)::text[])
                        AND sequence > (\(positions)::bigint[])[array_position(\(visible)::text[], project_id)])
                    OR (project_id IS NULL AND owner_id = \(unlinkedOwner) AND sequence > \(cursor.base)))
                ORDER BY sequence LIMIT \(Int64(limit + 1))
                """, logger: logger
            ).decode((Int64, Int64).self) {
                candidates += 1
                // Once one is refused, every later one is too: the page is full.
                if extent.admit(size: Int(size)) { sequences.append(sequence) }
            }
            let hasMore = sequences.count < candidates
            let rows = sequences.isEmpty ? [] : try await PostgresRecords.fetchRows(
                """
                SELECT \(unescaped: PostgresRecords.columns) FROM records
                WHERE sequence = ANY(\(sequences)::bigint[]) ORDER BY sequence
                """, on: connection, logger: logger)
            let left = cursor.projectsLeft(outside: mine)
            var page = PullPage(
                rows: rows,
                nextCursor: cursor.advanced(
                    through: rows.last?.sequence, reading: read, includingBase: projects == nil, memberships: mine.union(left.untold)),
                hasMore: hasMore || !left.untold.isEmpty, leftProjects: left.told,
                basis: PullBasis(
                    memberships: mine,
                    newestSequence: try await Self.newestSequence(of: mine, by: caller, on: connection, logger: logger)))
            if assignsServerIDs {
                for summary in try await Self.summaries(
                    of: Array(try PullPage.parentKeys(of: rows)), on: connection, logger: logger)
                {
                    page.parents[summary.key] = summary
                }
            }
            return page
        }
    }

    func pullBasis(of caller: Caller) async throws(ServerError) -> PullBasis {
        let logger = self.logger
        // One connection, no transaction: each answer is current, and a change between the two only
        // makes the check fail, which reads the page again.
        return try await withConnection { connection in
            let mine = try await PostgresAccess.projects(of: caller, on: connection, logger: logger)
            return PullBasis(
                memberships: mine, newestSequence: try await Self.newestSequence(of: mine, by: caller, on: connection, logger: logger))
        }
    }

    func backUp(to path: String) async throws(ServerError) {
        throw ServerError(
            .invalidConfiguration,
            message: "a PostgreSQL server is backed up with pg_dump (see the server's README, \"Backup and restore\")")
    }

    /// As `SQLiteStorage.memberIDSalt(in:)`.
    static func memberIDSalt(on connection: PostgresConnection, logger: Logger) async throws -> String {
        for try await salt in try await connection.query(
            "SELECT value FROM server_settings WHERE name = 'member_id_salt'", logger: logger
        ).decode(String.self) {
            return salt
        }
        return ""
    }

    func memberIDSalt() async throws(ServerError) -> String {
        let logger = self.logger
        return try await withConnection { connection in try await Self.memberIDSalt(on: connection, logger: logger) }
    }

    func cursorKey(proposing proposal: String) async throws(ServerError) -> String {
        let logger = self.logger
        return try await withConnection { connection in
            try await connection.query(
                "INSERT INTO server_settings (name, value) VALUES ('cursor_key', \(proposal)) ON CONFLICT (name) DO NOTHING",
                logger: logger)
            for try await value in try await connection.query(
                "SELECT value FROM server_settings WHERE name = 'cursor_key'", logger: logger
            ).decode(String.self) {
                return value
            }
            return proposal
        }
    }

    func historyCheckpoint(at sequence: Int64) async throws(ServerError) -> HistoryCheckpoint {
        guard sequence > 0 else { return .empty }
        let logger = self.logger
        return try await withConnection { connection in try await Self.checkpoint(at: sequence, on: connection, logger: logger) }
    }

    /// The checkpoint of change `sequence` as `connection`'s transaction (or snapshot) holds its commit.
    private static func checkpoint(at sequence: Int64, on connection: PostgresConnection, logger: Logger) async throws
        -> HistoryCheckpoint
    {
        guard sequence > 0 else { return .empty }
        return try await coveringMark(of: sequence, on: connection, logger: logger)
            .map { HistoryCheckpoint(sequence: sequence, commitMark: $0) } ?? .empty
    }

    func holdsHistory(_ checkpoint: HistoryCheckpoint) async throws(ServerError) -> Bool {
        guard checkpoint.sequence > 0 else { return true }
        let logger = self.logger
        return try await withConnection { connection in
            checkpoint.isHeld(byCommitMark: try await Self.coveringMark(of: checkpoint.sequence, on: connection, logger: logger))
        }
    }

    /// As `SQLiteStorage.coveringMark`.
    private static func coveringMark(of sequence: Int64, on connection: PostgresConnection, logger: Logger) async throws
        -> String?
    {
        for try await mark in try await connection.query(
            "SELECT mark FROM history_marks WHERE sequence >= \(sequence) ORDER BY sequence LIMIT 1", logger: logger
        ).decode(String.self) {
            return mark
        }
        return nil
    }

    func membershipCount(of caller: Caller) async throws(ServerError) -> Int {
        let logger = self.logger
        return try await withConnection { connection in
            for try await count in try await connection.query(
                "SELECT count(*) FROM memberships WHERE user_id = \(caller.userID.storageText)", logger: logger
            ).decode(Int64.self) {
                return Int(count)
            }
            return 0
        }
    }

    func newestSequence(of records: [RecordKey]) async throws(ServerError) -> Int64 {
        guard !records.isEmpty else { return 0 }
        let logger = self.logger
        let entities = records.map(\.entity.rawValue), ids = records.map(\.id.storageText)
        return try await withConnection { connection in
            for try await newest in try await connection.query(
                """
                SELECT COALESCE(MAX(r.sequence), 0) FROM records AS r
                JOIN unnest(\(entities)::text[], \(ids)::text[]) AS k(entity, id) ON r.entity = k.entity AND r.id = k.id
                """, logger: logger
            ).decode(Int64.self) {
                return newest
            }
            return 0
        }
    }

    /// As `SQLiteStorage.newestSequence(of:by:in:)`: of the caller's projects and unlinked records only
    /// (attack 111, F1), one index read each (`records_by_project`, `records_unlinked_by_owner`).
    private static func newestSequence(
        of mine: Set<UUID>, by caller: Caller, on connection: PostgresConnection, logger: Logger
    ) async throws -> Int64 {
        let projects = mine.map(\.storageText)
        for try await newest in try await connection.query(
            """
            SELECT COALESCE(MAX(newest), 0)::bigint FROM (
                SELECT (SELECT MAX(sequence) FROM records WHERE project_id = p) AS newest FROM unnest(\(projects)::text[]) AS p
                UNION ALL SELECT MAX(sequence) FROM records WHERE project_id IS NULL AND owner_id = \(caller.userID.storageText)) AS n
            """, logger: logger
        ).decode(Int64.self) {
            return newest
        }
        return 0
    }

    // MARK: - Media

    func record(_ entity: EntityType, id: UUID) async throws(ServerError) -> StoredRecord? {
        let logger = self.logger
        return try await read { connection in
            try await PostgresRecords.fetch(entity, id: id, on: connection, logger: logger)
        }
    }

    func storedAnswers(for keys: [UUID], by caller: Caller) async throws(ServerError) -> [(key: UUID, outcome: String)] {
        let logger = self.logger
        return try await read { connection in
            // The caller's access read once, and each record's project and creator joined in.
            let access = try await PostgresAccess.access(of: caller, on: connection, logger: logger)
            var answers: [(key: UUID, outcome: String)] = []
            for try await (key, outcome, project, owner, deleted, updatedAt) in try await connection.query(
                """
                SELECT a.idempotency_key, a.outcome, r.project_id, r.owner_id, r.deletion IS NOT NULL, r.updated_at
                FROM applied_mutations a
                JOIN records r ON r.entity = a.entity AND r.id = a.record_id
                WHERE a.user_id = \(caller.userID.storageText) AND a.idempotency_key = ANY(\(keys.map(\.storageText)))
                """, logger: logger
            ).decode((String, String, String?, String, Bool, Int64).self) {
                // A record the caller may no longer see (removed, no role, deleted while they were away):
                // as unknown, fail closed.
                guard let key = UUID(uuidString: key),
                    access.canSee(recordOf: project, ownedBy: owner, deleted: deleted, updatedAt: updatedAt, caller: caller)
                else { continue }
                answers.append((key, outcome))
            }
            return answers
        }
    }

    func keepsEveryAnswer(of caller: Caller) async throws(ServerError) -> Bool {
        let logger = self.logger, kept = bounds.answersKeptPerUser
        return try await read { connection in
            // The member's index (step 14) walked to the `kept`-th answer at most.
            let rows = try await connection.query(
                """
                SELECT count(*) FROM (
                    SELECT 1 FROM applied_mutations WHERE user_id = \(caller.userID.storageText) LIMIT 1 OFFSET \(kept - 1)) AS past
                """, logger: logger)
            for try await count in rows.decode(Int64.self) { return count == 0 }
            return false
        }
    }

    func mediaAttachment(_ id: UUID, by caller: Caller, checkingArchive: Bool) async throws(ServerError)
        -> (record: StoredRecord, role: String, archived: Bool)
    {
        let logger = self.logger
        return try await read { connection in
            try await Self.mediaAttachment(id, by: caller, checkingArchive: checkingArchive, on: connection, logger: logger)
        }
    }

    private static func mediaAttachment(
        _ id: UUID, by caller: Caller, checkingArchive: Bool, on connection: PostgresConnection, logger: Logger
    ) async throws -> (record: StoredRecord, role: String, archived: Bool) {
        // One answer for an attachment that does not exist and one the caller may not see.
        let missing = ServerError.noMediaAttachment(id)
        var found: StoredRecord?
        for entity in ServedSchema.current.media.sorted() where found == nil {
            found = try await PostgresRecords.fetch(entity, id: id, on: connection, logger: logger)
        }
        guard let record = found, let project = record.projectID,
            let role = try await PostgresAccess.access(of: caller, on: connection, logger: logger, project: project)
                .roles[project]
        else { throw missing }
        var archived = false
        // Asked for an upload only: a download of what was stored is not a change.
        if checkingArchive {
            for try await _ in try await connection.query(
                "SELECT project_id FROM archived_projects WHERE project_id = \(project.storageText)", logger: logger
            ).decode(String.self) {
                archived = true
            }
        }
        return (record, role, archived)
    }

    func mediaUpload(_ id: UUID) async throws(ServerError) -> MediaUploadState? {
        let logger = self.logger
        return try await withConnection { connection in
            for try await (total, received, sha256, complete, completedSequence, updatedAt) in try await connection.query(
                """
                SELECT total_bytes, received_bytes, sha256, complete, completed_sequence, updated_at FROM media_uploads
                WHERE attachment_id = \(id.storageText)
                """, logger: logger
            ).decode((Int64, Int64, String, Bool, Int64?, Int64).self) {
                return MediaUploadState(
                    totalBytes: total, receivedBytes: received, sha256: sha256, complete: complete,
                    completedSequence: completedSequence, updatedAt: Date(milliseconds: updatedAt))
            }
            return nil
        }
    }

    func mediaBytesHeld(project: UUID?, owner: UUID, excluding attachment: UUID, reservedSince: Date) async throws(ServerError)
        -> (project: Int64, owner: Int64)
    {
        let logger = self.logger
        return try await withConnection { connection in
            var held = (project: Int64(0), owner: Int64(0))
            for try await (ofProject, ofOwner) in try await connection.query(
                """
                WITH m AS (
                    SELECT attachment_id,
                           CASE WHEN complete OR updated_at >= \(reservedSince.milliseconds) THEN total_bytes ELSE received_bytes END AS held
                    FROM media_uploads)
                SELECT coalesce(sum(m.held) FILTER (WHERE r.project_id = \(project?.storageText ?? "")), 0)::bigint,
                       coalesce(sum(m.held) FILTER (WHERE r.owner_id = \(owner.storageText)), 0)::bigint
                FROM m
                JOIN records r ON r.entity = ANY(\(schema.media.map(\.rawValue).sorted())::text[]) AND r.id = m.attachment_id
                WHERE m.attachment_id <> \(attachment.storageText)
                """, logger: logger
            ).decode((Int64, Int64).self) {
                held = (ofProject, ofOwner)
            }
            return held
        }
    }

    func deletedAttachments(among attachments: [UUID]) async throws(ServerError) -> Set<UUID> {
        let logger = self.logger
        return try await withConnection { connection in
            var deleted: Set<UUID> = []
            for try await id in try await connection.query(
                """
                SELECT id FROM records WHERE entity = ANY(\(schema.media.map(\.rawValue).sorted())::text[]) AND deletion IS NOT NULL
                AND id = ANY(\(attachments.map(\.storageText))::text[])
                """, logger: logger
            ).decode(String.self) {
                if let uuid = UUID(uuidString: id) { deleted.insert(uuid) }
            }
            return deleted
        }
    }

    @discardableResult
    func setMediaUpload(_ state: MediaUploadState?, for id: UUID, now: Date, uploadedBy caller: Caller?) async throws(ServerError) -> MediaUploadState? {
        let logger = self.logger
        guard let state else {
            try await withConnection { connection in
                _ = try await connection.query(
                    "DELETE FROM media_uploads WHERE attachment_id = \(id.storageText)", logger: logger)
            }
            return nil
        }
        let upsert = { @Sendable (connection: PostgresConnection, state: MediaUploadState) in
            _ = try await connection.query(
                """
                INSERT INTO media_uploads (attachment_id, total_bytes, received_bytes, sha256, complete, updated_at, completed_sequence)
                VALUES (\(id.storageText), \(state.totalBytes), \(state.receivedBytes), \(state.sha256),
                        \(state.complete), \(now.milliseconds), \(state.completedSequence))
                ON CONFLICT (attachment_id) DO UPDATE SET
                    total_bytes = EXCLUDED.total_bytes, received_bytes = EXCLUDED.received_bytes,
                    sha256 = EXCLUDED.sha256, complete = EXCLUDED.complete, updated_at = EXCLUDED.updated_at,
                    completed_sequence = EXCLUDED.completed_sequence
                """, logger: logger)
        }
        let finishes = state.complete && state.completedSequence == nil
        guard finishes || caller != nil else {
            try await withConnection { connection in try await upsert(connection, state) }
            return state
        }
        let chunk = state
        // A finished upload takes the next change sequence in the write transaction pushes take, so
        // the counter's trigger marks the history as for any change. A chunk's uploader is asked for
        // under the same lock the office's revocations, removals, role changes and archives take: one
        // that committed while the chunk waited holds (attack 115, F2).
        return try await write { connection in
            if let caller {
                try await Self.requireStillLetIn(caller, now: Timestamp.now(), on: connection, logger: logger)
                let attachment = try await Self.mediaAttachment(id, by: caller, checkingArchive: true, on: connection, logger: logger)
                if let refusal = MediaStore.uploadRefusal(attachment, of: id, by: caller) { throw refusal }
            }
            var saved = chunk
            if finishes {
                saved.completedSequence = try await PostgresRecords.nextValue("change_sequence", on: connection, logger: logger)
            }
            try await upsert(connection, saved)
            return saved
        }
    }

    // MARK: - Bundles

    /// The checks and every page are read in one `REPEATABLE READ` transaction that a producer task
    /// holds open while the download lasts, so the bundle is one consistent snapshot yet at most two pages
    /// (`BundleRecords.pageRecords` and `pageBytes` each: one being sent, the next read ahead) are in
    /// memory at a time. The producer reads a page only when the consumer asks, and ends (committing and
    /// returning its connection) at the last page, on an error, or when the consumer drops the stream (a
    /// client that hung up).
    func bundle(project: UUID, by caller: Caller) async throws(ServerError) -> BundleRecords {
        try await prepare()
        let (requests, requestSink) = AsyncStream<PostgresBundlePages.Request>.makeStream()
        let opening: PostgresBundleState.Opening
        do {
            opening = try await withCheckedThrowingContinuation { (opened: CheckedContinuation<PostgresBundleState.Opening, any Error>) in
                Task { await self.serveBundle(project, to: caller, opened: opened, requests: requests, sink: requestSink) }
            }
        } catch {
            throw map(error)
        }
        let pages = PostgresBundlePages(sink: requestSink)
        return BundleRecords(
            asOf: opening.asOf, checkpoint: opening.checkpoint, next: { try await pages.next() })
    }

    /// How long a bundle's transaction may wait for its consumer to ask for the next page.
    static let bundleIdleMilliseconds = 300_000

    /// The producer side of `bundle`: answers `opened` after the checks, then one request per page.
    private func serveBundle(
        _ project: UUID, to caller: Caller, opened: CheckedContinuation<PostgresBundleState.Opening, any Error>,
        requests: AsyncStream<PostgresBundlePages.Request>, sink: AsyncStream<PostgresBundlePages.Request>.Continuation
    ) async {
        let logger = self.logger
        let state = PostgresBundleState(opened: opened)
        do {
            try await read { connection in
                // A client that stops reading must not hold a connection and an old snapshot forever:
                // PostgreSQL ends the session after 5 minutes without a page asked for.
                try await connection.query(
                    "SET LOCAL idle_in_transaction_session_timeout = \(unescaped: String(Self.bundleIdleMilliseconds))",
                    logger: logger)
                // One answer for a project that does not exist and one the caller may not reach.
                guard let projectRecord = try await PostgresRecords.fetch(schema.scope, id: project, on: connection, logger: logger),
                    try await PostgresAccess.isMember(caller, of: project, on: connection, logger: logger)
                else { throw ServerError.notFound("no project \(project.storageText) of yours") }
                var cursor = PostgresBundleCursor(project: project)
                let newest = try await cursor.open(projectRecord, for: caller, on: connection, logger: logger)
                // The mark read in the same snapshot as the records: the commit of that change is in it.
                state.open(.init(
                    asOf: newest.asOf, checkpoint: try await Self.checkpoint(at: newest.sequence, on: connection, logger: logger)))
                for await request in requests {
                    do {
                        let page = try await cursor.next(on: connection, logger: logger)
                        request.resume(returning: page)
                        if page == nil { break }
                    } catch {
                        request.resume(throwing: self.map(error))
                        throw error
                    }
                }
            }
            state.fail(ServerError(.databaseFailure, message: "the bundle ended before it opened"))
        } catch {
            state.fail(error)
        }
        // Later requests (after the last page, or after an error) get the end of the stream.
        sink.finish()
        for await late in requests { late.resume(returning: nil) }
    }

    // MARK: - Seed

    func setArchived(
        _ project: UUID, _ archived: Bool, now: Date, logging: @escaping AdminLogLine.Maker<AdminLogLine, Bool>
    ) async throws(ServerError) -> Bool {
        let logger = self.logger
        return try await write { connection in
            let statement: PostgresQuery =
                archived
                ? """
                INSERT INTO archived_projects (project_id, archived_at) VALUES (\(project.storageText), \(now.milliseconds))
                ON CONFLICT (project_id) DO NOTHING RETURNING project_id
                """
                : "DELETE FROM archived_projects WHERE project_id = \(project.storageText) RETURNING project_id"
            var changed = false
            for try await _ in try await connection.query(statement, logger: logger).decode(String.self) { changed = true }
            try await Self.append(logging(changed), at: now, on: connection, logger: logger)
            return changed
        }
    }

    func removeMember(
        _ user: UUID, from project: UUID, now: Date, logging: @escaping AdminLogLine.Maker<AdminLogLine, Int>
    ) async throws(ServerError) -> Int {
        let logger = self.logger
        return try await write { connection in
            var removed = 0
            for try await _ in try await connection.query(
                """
                DELETE FROM memberships WHERE project_id = \(project.storageText) AND user_id = \(user.storageText)
                RETURNING project_id
                """, logger: logger
            ).decode(String.self) { removed += 1 }
            let members = try await PostgresRecords.fetchAll(
                """
                SELECT \(unescaped: PostgresRecords.columns) FROM records
                WHERE project_id = \(project.storageText) AND entity = \(schema.membership.rawValue) AND deletion IS NULL
                """,
                on: connection, logger: logger)
            for var member in members where member.fields[schema.userField] == .uuid(user) {
                member.tombstone(
                    at: now, sequence: try await PostgresRecords.nextValue("change_sequence", on: connection, logger: logger))
                try await PostgresRecords.save([member], on: connection, logger: logger)
            }
            try await Self.append(logging(removed), at: now, on: connection, logger: logger)
            return removed
        }
    }

    func memberRecords(of project: UUID) async throws(ServerError) -> [StoredRecord] {
        let logger = self.logger
        let membership = schema.membership.rawValue
        return try await withConnection { connection in
            try await PostgresRecords.fetchAll(
                """
                SELECT \(unescaped: PostgresRecords.columns) FROM records
                WHERE project_id = \(project.storageText) AND entity = \(membership) AND deletion IS NULL
                """,
                on: connection, logger: logger)
        }
    }

    func memberUsers(of project: UUID) async throws(ServerError) -> Set<UUID> {
        let logger = self.logger
        return try await withConnection { connection in
            var users: Set<UUID> = []
            for try await user in try await connection.query(
                "SELECT user_id FROM memberships WHERE project_id = \(project.storageText)", logger: logger
            ).decode(String.self) {
                if let id = UUID(uuidString: user) { users.insert(id) }
            }
            return users
        }
    }

    func tokens(of user: UUID?) async throws(ServerError) -> [IssuedToken] {
        let logger = self.logger
        let userText = user?.storageText
        return try await withConnection { connection in
            var tokens: [IssuedToken] = []
            let milliseconds = { (value: Int64?) in value.map { Date(timeIntervalSince1970: Double($0) / 1000) } }
            for try await (digest, userID, created, expires, lastUsed, admin) in try await connection.query(
                """
                SELECT token_sha256, user_id, created_at, expires_at, last_used_at, admin FROM tokens
                WHERE \(userText)::text IS NULL OR user_id = \(userText) ORDER BY created_at DESC, token_sha256
                """, logger: logger
            ).decode((String, String, Int64, Int64?, Int64?, Bool).self) {
                guard let id = UUID(uuidString: userID) else { continue }
                tokens.append(IssuedToken(
                    userID: id, digestPrefix: String(digest.prefix(12)), createdAt: milliseconds(created) ?? Date(timeIntervalSince1970: 0),
                    expiresAt: milliseconds(expires), lastUsedAt: milliseconds(lastUsed), isAdmin: admin))
            }
            return tokens
        }
    }

    func noteTokenUse(digest: String, now: Date) async throws(ServerError) {
        // Outside the writers' lock: a token's last use orders nothing, and must never wait behind a push.
        let logger = self.logger
        _ = try await withConnection { connection in
            try await connection.query(
                """
                UPDATE tokens SET last_used_at = \(now.milliseconds)
                WHERE token_sha256 = \(digest) AND (last_used_at IS NULL OR last_used_at < \(now.milliseconds))
                """, logger: logger
            ).collect()
        }
    }

    func appendAdminLog(at: Date, actor: String, action: String, details: String) async throws(ServerError) {
        let logger = self.logger
        _ = try await withConnection { connection in
            try await Self.append(AdminLogLine(actor: actor, action: action, details: details), at: at, on: connection, logger: logger)
        }
    }

    /// Writes one admin log entry on `connection`, in its transaction when it has one.
    private static func append(_ line: AdminLogLine, at: Date, on connection: PostgresConnection, logger: Logger) async throws {
        _ = try await connection.query(
            """
            INSERT INTO admin_log (at, actor, action, details) VALUES (\(at.milliseconds), \(line.actor), \(line.action), \(line.details))
            """, logger: logger
        ).collect()
    }

    func adminLog(limit: Int) async throws(ServerError) -> [AdminLogEntry] {
        let logger = self.logger
        return try await withConnection { connection in
            var entries: [AdminLogEntry] = []
            for try await (sequence, at, actor, action, details) in try await connection.query(
                "SELECT seq, at, actor, action, details FROM admin_log ORDER BY seq DESC LIMIT \(limit)", logger: logger
            ).decode((Int64, Int64, String, String, String).self) {
                entries.append(AdminLogEntry(
                    sequence: sequence, at: Date(timeIntervalSince1970: Double(at) / 1000), actor: actor, action: action, details: details))
            }
            return entries.reversed()
        }
    }

    func revokeTokens(
        digest: String?, user: UUID?, now: Date, logging: @escaping AdminLogLine.Maker<AdminLogLine, Int>
    ) async throws(ServerError) -> Int {
        let logger = self.logger
        return try await write { connection in
            var revoked = 0
            if let digest {
                for try await _ in try await connection.query(
                    "DELETE FROM tokens WHERE token_sha256 = \(digest) RETURNING user_id", logger: logger
                ).decode(String.self) { revoked += 1 }
            } else if let user {
                for try await _ in try await connection.query(
                    "DELETE FROM tokens WHERE user_id = \(user.storageText) RETURNING user_id", logger: logger
                ).decode(String.self) { revoked += 1 }
            }
            try await Self.append(logging(revoked), at: now, on: connection, logger: logger)
            return revoked
        }
    }

    func tokenDigests(startingWith prefix: String) async throws(ServerError) -> [String] {
        let logger = self.logger
        return try await read { connection in
            // A scan of the tokens table (one row per device, rarely more than thousands), compared as
            // plain text: a range of the key would depend on the column's collation ordering hex digits.
            var digests: [String] = []
            for try await digest in try await connection.query(
                "SELECT token_sha256 FROM tokens WHERE starts_with(token_sha256, \(prefix))",
                logger: logger
            ).decode(String.self) { digests.append(digest) }
            return digests
        }
    }

    @discardableResult
    func load(_ seed: ServerSeed, now: Date, logging: @escaping AdminLogLine.Maker<[AdminLogLine], Bool>) async throws(ServerError) -> Bool {
        try seed.validate()
        let logger = self.logger
        let assignsServerIDs = self.assignsServerIDs
        return try await write { connection in
            // A seed sets a server up once (see `ServerStorage.load`): the first instance to start loads it.
            if !seed.extendsServer {
                var inserted = false
                for try await _ in try await connection.query(
                    """
                    INSERT INTO counters (name, value) VALUES ('seeded_at', \(now.milliseconds))
                    ON CONFLICT (name) DO NOTHING RETURNING name
                    """, logger: logger
                ).decode(String.self) { inserted = true }
                guard inserted else { return false }
            }
            let stamp = HybridTimestamp(physicalMilliseconds: now.milliseconds, counter: 0, node: NodeID(0))
            let firstMember = seed.members.first?.userID ?? UUID(uuidString: "00000000-0000-0000-0000-000000000000")!
            func insertSeeded(
                _ entity: EntityType, id: UUID, projectID: UUID, owner: UUID, fields: [String: FieldValue]
            ) async throws {
                let record = StoredRecord(
                    entity: entity, id: id,
                    serverID: assignsServerIDs
                        ? try await PostgresRecords.nextValue("server_id", on: connection, logger: logger) : nil,
                    projectID: projectID, ownerID: owner, version: 1,
                    sequence: try await PostgresRecords.nextValue("change_sequence", on: connection, logger: logger),
                    fields: fields, clocks: fields.mapValues { _ in stamp }, deletion: nil, createdAt: now, updatedAt: now)
                try record.checkAsOperatorsWrite()
                try await PostgresRecords.save([record], on: connection, logger: logger)
            }
            var createdProjects = 0
            for project in seed.projects {
                guard try await PostgresRecords.fetch(schema.scope, id: project.id, on: connection, logger: logger) == nil
                else { continue }
                createdProjects += 1
                let fields = schema.blankFields(
                    of: schema.scope, given: ["name": .text(project.name), "address": .text(project.address ?? "")], now: now)
                try await insertSeeded(schema.scope, id: project.id, projectID: project.id, owner: firstMember, fields: fields)
            }
            for member in seed.members {
                try await connection.query(
                    """
                    INSERT INTO users (id, name) VALUES (\(member.userID.storageText), \(member.name))
                    ON CONFLICT (id) DO UPDATE SET name = EXCLUDED.name
                    """, logger: logger)
                for project in member.projects {
                    guard try await PostgresRecords.fetch(schema.scope, id: project, on: connection, logger: logger) != nil else {
                        throw ServerError(.invalidSeed, message: "no project \(project.storageText) on this server")
                    }
                    try await PostgresAccess.addMembership(project, member.userID, at: now.milliseconds, on: connection, logger: logger)
                    let id = Roles.memberRecordID(
                        project: project, user: member.userID,
                        salt: try await Self.memberIDSalt(on: connection, logger: logger))
                    guard try await PostgresRecords.fetch(schema.membership, id: id, on: connection, logger: logger) == nil
                    else { continue }
                    let fields = schema.membershipFields(
                        scope: project, user: member.userID, role: try ServerSeed.role(of: member), name: member.name,
                        email: member.email, now: now)
                    try await insertSeeded(schema.membership, id: id, projectID: project, owner: member.userID, fields: fields)
                }
            }
            for token in seed.tokens {
                var known = false
                for try await _ in try await connection.query(
                    "SELECT id FROM users WHERE id = \(token.userID.storageText)", logger: logger
                ).decode(String.self) { known = true }
                guard known else { throw ServerError.notFound("no user \(token.userID.storageText) on this server") }
                try await connection.query(
                    """
                    INSERT INTO tokens (token_sha256, user_id, created_at, expires_at, admin)
                    VALUES (\(TokenDigest.hex(of: token.token)), \(token.userID.storageText), \(now.milliseconds),
                            \(token.expiresAt?.milliseconds), \(token.admin))
                    ON CONFLICT (token_sha256) DO UPDATE
                    SET user_id = EXCLUDED.user_id, created_at = EXCLUDED.created_at, expires_at = EXCLUDED.expires_at,
                        admin = EXCLUDED.admin
                    """, logger: logger)
            }
            let loaded = seed.createsOnlyProjects ? createdProjects > 0 : true
            for line in logging(loaded) { try await Self.append(line, at: now, on: connection, logger: logger) }
            return loaded
        }
    }

    func addMember(
        _ user: UUID, to project: UUID, name: String?, email: String?, role: String?, now: Date,
        logging: @escaping AdminLogLine.Maker<AdminLogLine, MembershipChange>
    ) async throws(ServerError) -> MembershipChange {
        let logger = self.logger
        let rules = PushRules(assignsServerIDs: assignsServerIDs)
        return try await write { connection in
            // A deleted project takes no member (see `SyncServer.requireLiveProject`).
            guard let projectRecord = try await PostgresRecords.fetch(schema.scope, id: project, on: connection, logger: logger),
                projectRecord.deletion == nil
            else {
                throw ServerError.notFound("no project \(project.storageText) on this server")
            }
            var userName = name
            if let name {
                try await connection.query(
                    """
                    INSERT INTO users (id, name) VALUES (\(user.storageText), \(name))
                    ON CONFLICT (id) DO UPDATE SET name = EXCLUDED.name
                    """, logger: logger)
            } else {
                for try await known in try await connection.query(
                    "SELECT name FROM users WHERE id = \(user.storageText)", logger: logger
                ).decode(String.self) { userName = known }
            }
            guard let userName else { throw MembershipEdit.unnamed(user) }
            var hasMembership = false
            for try await _ in try await connection.query(
                "SELECT project_id FROM memberships WHERE project_id = \(project.storageText) AND user_id = \(user.storageText)",
                logger: logger
            ).decode(String.self) { hasMembership = true }
            let members = try await PostgresRecords.fetchAll(
                """
                SELECT \(unescaped: PostgresRecords.columns) FROM records
                WHERE project_id = \(project.storageText) AND entity = \(schema.membership.rawValue)
                """,
                on: connection, logger: logger)
            // The counters move by what the plan used; every write holds the advisory lock, so none moves them meanwhile.
            var counters: (changeSequence: Int64, lastServerID: Int64) = (0, 0)
            for try await (counter, value) in try await connection.query(
                "SELECT name, value FROM counters WHERE name IN ('change_sequence', 'server_id')", logger: logger
            ).decode((String, Int64).self) {
                if counter == "change_sequence" { counters.changeSequence = value } else { counters.lastServerID = value }
            }
            let plan = try MembershipEdit.plan(
                user: user, project: project, name: name, userName: userName, email: email, role: role, hasMembership: hasMembership,
                memberRecords: members, salt: try await Self.memberIDSalt(on: connection, logger: logger), now: now,
                rules: rules, counters: &counters)
            try await PostgresRecords.save(plan.records, on: connection, logger: logger)
            if plan.addsMembership {
                try await PostgresAccess.addMembership(project, user, at: now.milliseconds, on: connection, logger: logger)
            } else if plan.restartsMembership {
                try await PostgresAccess.restartMembership(project, user, at: now.milliseconds, on: connection, logger: logger)
            }
            try await connection.query(
                "UPDATE counters SET value = \(counters.changeSequence) WHERE name = 'change_sequence'", logger: logger)
            try await connection.query(
                "UPDATE counters SET value = \(counters.lastServerID) WHERE name = 'server_id'", logger: logger)
            try await Self.append(logging(plan.change), at: now, on: connection, logger: logger)
            return plan.change
        }
    }
}

/// Runs a piece of work once; later callers wait for (and share) its outcome.
private actor Readiness {
    private var task: Task<Void, any Error>?

    func once(_ work: @escaping @Sendable () async throws(ServerError) -> Void) async throws(ServerError) {
        let task = self.task ?? Task { try await work() }
        self.task = task
        do {
            try await task.value
        } catch let error as ServerError {
            throw error
        } catch {
            throw ServerError(.databaseFailure, message: "\(error)", underlying: error)
        }
    }
}

/// Membership checks on PostgreSQL, the same questions `Access` asks SQLite, answered by the same rule
/// (`Roles.access`): a project is the caller's only where a role is established for them.
enum PostgresAccess {
    /// The caller's standing in their projects (only `project`, when given).
    static func access(
        of caller: Caller, on connection: PostgresConnection, logger: Logger, project: UUID? = nil
    ) async throws -> ProjectAccess {
        let user = caller.userID.storageText
        let only = project?.storageText
        var memberships: [UUID: Int64] = [:]
        for try await (id, added) in try await connection.query(
            """
            SELECT m.project_id, coalesce(s.added_at, 0) FROM memberships m
            LEFT JOIN membership_starts s ON s.project_id = m.project_id AND s.user_id = m.user_id
            WHERE m.user_id = \(user) AND (\(only)::text IS NULL OR m.project_id = \(only))
            """, logger: logger
        ).decode((String, Int64).self) {
            if let id = UUID(uuidString: id) { memberships[id] = added }
        }
        guard !memberships.isEmpty else { return ProjectAccess() }
        let members = StoredRow.readableMemberRecords(try await PostgresRecords.fetchRows(
            """
            SELECT \(unescaped: PostgresRecords.qualifiedColumns) FROM memberships m
            JOIN records r ON r.project_id = m.project_id AND r.entity = \(schema.membership.rawValue) AND r.deletion IS NULL
            WHERE m.user_id = \(user) AND (\(only)::text IS NULL OR m.project_id = \(only))
            """,
            on: connection, logger: logger))
        var projectMembers: [UUID: Set<UUID>] = [:]
        for try await (project, member) in try await connection.query(
            """
            SELECT o.project_id, o.user_id FROM memberships m
            JOIN memberships o ON o.project_id = m.project_id
            WHERE m.user_id = \(user) AND (\(only)::text IS NULL OR m.project_id = \(only))
            """, logger: logger
        ).decode((String, String).self) {
            if let project = UUID(uuidString: project), let member = UUID(uuidString: member) {
                projectMembers[project, default: []].insert(member)
            }
        }
        return Roles.access(
            of: caller.userID, memberships: memberships,
            memberRecords: Dictionary(grouping: members.filter { $0.projectID != nil }, by: { $0.projectID! }),
            projectMembers: projectMembers)
    }

    /// Makes `user` a member of `project` from `milliseconds` on (a membership that exists stays as it is).
    static func addMembership(
        _ project: UUID, _ user: UUID, at milliseconds: Int64, on connection: PostgresConnection, logger: Logger
    ) async throws {
        try await connection.query(
            """
            WITH added AS (
                INSERT INTO memberships (project_id, user_id) VALUES (\(project.storageText), \(user.storageText))
                ON CONFLICT DO NOTHING RETURNING project_id, user_id)
            INSERT INTO membership_starts (project_id, user_id, added_at) SELECT project_id, user_id, \(milliseconds) FROM added
            ON CONFLICT (project_id, user_id) DO UPDATE SET added_at = EXCLUDED.added_at
            """, logger: logger)
    }

    /// `Access.restartMembership` on PostgreSQL.
    static func restartMembership(
        _ project: UUID, _ user: UUID, at milliseconds: Int64, on connection: PostgresConnection, logger: Logger
    ) async throws {
        try await connection.query(
            """
            INSERT INTO membership_starts (project_id, user_id, added_at)
            SELECT project_id, user_id, \(milliseconds) FROM memberships
            WHERE project_id = \(project.storageText) AND user_id = \(user.storageText)
            ON CONFLICT (project_id, user_id) DO UPDATE SET added_at = EXCLUDED.added_at
            """, logger: logger)
    }

    static func isMember(_ caller: Caller, of project: UUID, on connection: PostgresConnection, logger: Logger)
        async throws -> Bool
    {
        try await access(of: caller, on: connection, logger: logger, project: project).roles[project] != nil
    }

    static func projects(of caller: Caller, on connection: PostgresConnection, logger: Logger) async throws -> Set<UUID> {
        try await access(of: caller, on: connection, logger: logger).projects
    }
}

/// Reading and writing `records` rows on PostgreSQL.
enum PostgresRecords {
    /// The columns every record query selects, in the order `fetchRows` reads them.
    static let columns =
        "entity, id, server_id, project_id, owner_id, version, sequence, fields, clocks, deletion, created_at, updated_at"
    /// The same, qualified for a join on `records r`.
    static let qualifiedColumns = columns.split(separator: ",").map { "r." + $0.trimmingCharacters(in: .whitespaces) }
        .joined(separator: ", ")

    static func fetch(_ entity: EntityType, id: UUID, on connection: PostgresConnection, logger: Logger) async throws
        -> StoredRecord?
    {
        try await fetchRows(
            "SELECT \(unescaped: columns) FROM records WHERE entity = \(entity.rawValue) AND id = \(id.storageText)",
            on: connection, logger: logger
        ).first?.decoded()
    }

    static func fetchAll(_ query: PostgresQuery, on connection: PostgresConnection, logger: Logger) async throws
        -> [StoredRecord]
    {
        var records: [StoredRecord] = []
        for row in try await fetchRows(query, on: connection, logger: logger) { records.append(try row.decoded()) }
        return records
    }

    /// Rows as stored, fields and clocks still JSON text.
    static func fetchRows(_ query: PostgresQuery, on connection: PostgresConnection, logger: Logger) async throws
        -> [StoredRow]
    {
        var rows: [StoredRow] = []
        for try await row in try await connection.query(query, logger: logger).decode(
            (String, String, Int64?, String?, String, Int64, Int64, String, String, String?, Int64, Int64).self)
        {
            let (entityName, idText, serverID, projectText, ownerText, version, sequence, fields, clocks, deletion,
                 createdAt, updatedAt) = row
            guard let entity = EntityType(rawValue: entityName), let id = UUID(uuidString: idText),
                let owner = UUID(uuidString: ownerText)
            else { throw ServerError(.databaseFailure, message: "a stored record has an unknown entity or id") }
            rows.append(StoredRow(
                entity: entity, id: id, serverID: serverID, projectID: projectText.flatMap(UUID.init(uuidString:)),
                ownerID: owner, version: version, sequence: sequence, fieldsJSON: fields, clocksJSON: clocks,
                deletion: deletion, createdAt: createdAt, updatedAt: updatedAt))
        }
        return rows
    }

    static func summary(_ row: (String, String, Int64?, String?, String, Int64)) throws -> RecordSummary {
        let (entityName, idText, serverID, projectText, ownerText, sequence) = row
        guard let entity = EntityType(rawValue: entityName), let id = UUID(uuidString: idText),
            let owner = UUID(uuidString: ownerText)
        else { throw ServerError(.databaseFailure, message: "a stored record has an unknown entity or id") }
        return RecordSummary(
            key: RecordKey(entity: entity, id: id), serverID: serverID,
            projectID: projectText.flatMap(UUID.init(uuidString:)), ownerID: owner, sequence: sequence)
    }

    /// Inserts the rows, or replaces those with the same entity and id, in one statement. Arrays cannot
    /// carry NULL here, so a missing server id travels as -1, a missing project, deletion or writer as ''.
    static func save(_ records: [StoredRecord], on connection: PostgresConnection, logger: Logger) async throws {
        guard !records.isEmpty else { return }
        let encoder = WireCoding.encoder()
        var fields: [String] = [], clocks: [String] = []
        fields.reserveCapacity(records.count)
        clocks.reserveCapacity(records.count)
        for record in records {
            let text = try storedText(record.fields, record.clocks, encoder: encoder)
            fields.append(text.fields)
            clocks.append(text.clocks)
        }
        try await connection.query(
            """
            INSERT INTO records (\(unescaped: columns), written_by)
            SELECT e, i, NULLIF(s, -1), NULLIF(p, ''), o, v, q, f, c, NULLIF(d, ''), ca, ua, NULLIF(w, '') FROM unnest(
                \(records.map(\.entity.rawValue))::text[], \(records.map(\.id.storageText))::text[],
                \(records.map { $0.serverID ?? -1 })::bigint[], \(records.map { $0.projectID?.storageText ?? "" })::text[],
                \(records.map(\.ownerID.storageText))::text[], \(records.map(\.version))::bigint[],
                \(records.map(\.sequence))::bigint[], \(fields)::text[], \(clocks)::text[],
                \(records.map { $0.deletion?.encoded ?? "" })::text[], \(records.map(\.createdAt.milliseconds))::bigint[],
                \(records.map(\.updatedAt.milliseconds))::bigint[], \(records.map { $0.writtenBy?.storageText ?? "" })::text[])
                AS n(e, i, s, p, o, v, q, f, c, d, ca, ua, w)
            ON CONFLICT (entity, id) DO UPDATE SET
                server_id = EXCLUDED.server_id, project_id = EXCLUDED.project_id, owner_id = EXCLUDED.owner_id,
                version = EXCLUDED.version, sequence = EXCLUDED.sequence, fields = EXCLUDED.fields,
                clocks = EXCLUDED.clocks, deletion = EXCLUDED.deletion, created_at = EXCLUDED.created_at,
                updated_at = EXCLUDED.updated_at, written_by = EXCLUDED.written_by
            """, logger: logger)
    }

    /// A record's `fields` and `clocks` columns as `save` writes them.
    static func storedText(
        _ fields: [String: FieldValue], _ clocks: [String: HybridTimestamp], encoder: JSONEncoder = WireCoding.encoder()
    ) throws -> (fields: String, clocks: String) {
        (String(decoding: try encoder.encode(fields), as: UTF8.self),
         String(decoding: try encoder.encode(clocks.mapValues(\.encoded)), as: UTF8.self))
    }

    /// The bytes `save` writes a record's fields and clocks in, as `record_usage` counts them.
    @Sendable static func storedBytes(_ fields: [String: FieldValue], _ clocks: [String: HybridTimestamp]) throws -> Int {
        let text = try storedText(fields, clocks)
        return text.fields.utf8.count + text.clocks.utf8.count
    }

    /// The next value of a counter, inside the caller's (locked) write transaction.
    static func nextValue(_ counter: String, on connection: PostgresConnection, logger: Logger) async throws -> Int64 {
        for try await value in try await connection.query(
            "UPDATE counters SET value = value + 1 WHERE name = \(counter) RETURNING value", logger: logger
        ).decode(Int64.self) {
            return value
        }
        throw ServerError(.databaseFailure, message: "the counter \(counter) is missing")
    }
}

/// The schema this server serves.
private var schema: ServedSchema { .current }

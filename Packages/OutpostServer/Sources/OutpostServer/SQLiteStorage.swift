import Crypto
import Foundation
import GRDB
import OutpostConflicts
import OutpostMigrator
import OutpostSchema
import OutpostWire

/// The embedded storage: one SQLite file in WAL mode, created and migrated on open. GRDB's pool has
/// one writer at a time, so the change sequence, taken inside each write transaction, commits in
/// order: a reader's snapshot never holds sequence n + 1 without n, and no pull skips a change.
final class SQLiteStorage: ServerStorage {
    let path: String
    /// How long a request waits for a lock another process holds (SQLite's busy timeout) before its 503.
    let lockWaitSeconds: Int
    private let pool: DatabasePool
    private let rules: PushRules
    /// What `/metrics` reports of this database's work.
    let activity: DatabaseActivity

    /// The page size of a new database file, in bytes.
    static let pageSize = 8192

    /// Refuses a file that is not this server's before anything is written to it (opening the pool
    /// alone turns WAL on in the file's header). `outpost serve --db` on another program's file, or a
    /// device's store, added the server's tables to it and served from it. New is a missing or empty
    /// file, or one with no tables; the server's own has a ledger begun by the server's first step.
    static func checkOwnership(of path: String, waitingSeconds: Int) throws(ServerError) {
        guard FileManager.default.fileExists(atPath: path) else { return }
        let history: Migrator.History
        var refusal: ServerError?
        do {
            var configuration = Configuration()
            configuration.readonly = true
            // As long as the pool waits: another server starting on the same new file holds it while it
            // turns WAL on and migrates, and a read that did not wait stopped this one "database is
            // locked" (attack 74, finding 3).
            configuration.busyMode = .timeout(TimeInterval(waitingSeconds))
            let queue = try DatabaseQueue(path: path, configuration: configuration)
            defer { try? queue.close() }
            history = try queue.read { db in
                let history = try ServerSchema.migrator.history(in: db)
                // Another app's server file: told here too, read-only, since opening the pool already
                // writes (GRDB's WAL check creates and drops a table, and the file grew by a page).
                if case .ours = history, try db.tableExists("server_settings"), try db.tableExists("records") {
                    let recorded = try String.fetchOne(db, sql: "SELECT value FROM server_settings WHERE name = 'app_schema'")
                    let holdsRecords = try Bool.fetchOne(db, sql: "SELECT EXISTS (SELECT 1 FROM records)") ?? false
                    refusal = ServedSchema.refusal(recorded: recorded, holdsRecords: holdsRecords, path: path)
                }
                return history
            }
        } catch {
            throw ServerError(.databaseFailure, message: "\(error)", path: path, underlying: error)
        }
        if let refusal { throw refusal }
        switch history {
        case .new, .ours:
            return
        case .unrecorded(let tables):
            let named = tables.prefix(5).joined(separator: ", ") + (tables.count > 5 ? ", …" : "")
            throw ServerError(
                .migrationFailed,
                message: "\(path) belongs to no Outpost server: it has tables (\(named)) and no server migration history; nothing was written to it",
                path: path)
        case .foreign(let first):
            throw ServerError(
                .migrationFailed,
                message: "\(path) belongs to another program or app: its migration history begins with step \(first.version) '\(first.name)', not this server's '\(ServerSchema.migrator.steps.first?.name ?? "")'; nothing was written to it",
                path: path)
        }
    }

    /// Opens (creating and migrating) the database at `path`. `durableCommits` false keeps SQLite's
    /// NORMAL (`ServerConfiguration.durableCommits`: throwaway servers only).
    init(
        path: String, assignsServerIDs: Bool, policy: ConflictPolicy = ConflictPolicy(), durableCommits: Bool = true,
        maximumMediaBytes: Int64 = .max, lockWaitSeconds: Int = 10, activity: DatabaseActivity = DatabaseActivity(),
        bounds: PushRules.Bounds = PushRules.Bounds(), bundleWALLimitBytes: Int = 256 << 20
    ) throws(ServerError) {
        self.path = path
        self.bundleWALLimitBytes = bundleWALLimitBytes
        self.lockWaitSeconds = lockWaitSeconds
        self.activity = activity
        self.rules = PushRules(assignsServerIDs: assignsServerIDs, policy: policy, maximumMediaBytes: maximumMediaBytes, bounds: bounds)
        // Before the pool's first connection: its readers and writer would queue on SQLite's
        // allocation statistics mutex (OutpostMigrator's README, `SQLiteProcessSettings`).
        SQLiteProcessSettings.apply()
        try Self.checkOwnership(of: path, waitingSeconds: lockWaitSeconds)
        do {
            var configuration = Configuration()
            configuration.busyMode = .timeout(TimeInterval(lockWaitSeconds))
            configuration.prepareDatabase { db in
                // Records are keyed by UUIDs, random ones from older clients and imports, so a push
                // can land on pages all over the tables and their indexes: with SQLite's default 2 MB
                // page cache most of them were read again with `pread` on each batch (a fifth of the
                // writer's time). Reads map the file; the cache holds 32 MB of pages per connection.
                // A record's row (its fields and clocks as JSON) is about 1 KB, the most a cell of a
                // WITHOUT ROWID B-tree keeps on a 4 KB page: every row spilled into an overflow page,
                // read and written beside it. 8 KB pages keep rows up to about 2 KB whole (push +39–48 %,
                // the HTTP pull alone +15 %). Only a new file takes it: an existing
                // one keeps its page size and works as before.
                try db.execute(sql: "PRAGMA page_size = \(Self.pageSize)")
                try db.execute(sql: "PRAGMA mmap_size = \(256 << 20)")
                try db.execute(sql: "PRAGMA cache_size = -32768")
                // A WAL a long reader let grow is cut back to this once checkpointed; without it, it
                // stayed at its largest (1.5 GB) until the server restarted (attack 125, F2).
                try db.execute(sql: "PRAGMA journal_size_limit = \(Self.walSizeLimitBytes)")
            }
            pool = try DatabasePool(path: path, configuration: configuration)
            // An `applied` answer must survive a power loss, not only a crash of the process: a device
            // drops its copy of the change once answered, and a lost commit would also roll the change
            // sequence back below cursors devices already hold, so later changes reusing those numbers
            // would never be pulled. WAL with NORMAL syncs only at checkpoints; FULL syncs the WAL on
            // every commit. Set on the writer after the pool is open: GRDB sets NORMAL when it turns
            // WAL on, after `prepareDatabase` ran.
            if durableCommits {
                try pool.writeWithoutTransaction { try $0.execute(sql: "PRAGMA synchronous = FULL") }
            }
        } catch {
            throw ServerError(.databaseFailure, message: "\(error)", path: path, underlying: error)
        }
        do {
            _ = try ServerSchema.migrator.migrate(pool)
        } catch {
            throw ServerError(.migrationFailed, message: "\(error)", path: path, underlying: error)
        }
        // The app whose records the file holds, named on first use (see `ServedSchema.refusal`).
        do {
            try pool.write { db in
                let recorded = try String.fetchOne(db, sql: "SELECT value FROM server_settings WHERE name = 'app_schema'")
                let holdsRecords = try Bool.fetchOne(db, sql: "SELECT EXISTS (SELECT 1 FROM records)") ?? false
                if let refusal = ServedSchema.refusal(recorded: recorded, holdsRecords: holdsRecords, path: path) { throw refusal }
                if recorded == nil {
                    try db.execute(
                        sql: "INSERT INTO server_settings (name, value) VALUES ('app_schema', ?)", arguments: [EntityCatalog.schema.name])
                }
            }
        } catch let error as ServerError {
            throw error
        } catch {
            throw ServerError(.databaseFailure, message: "\(error)", path: path, underlying: error)
        }
    }

    /// The writer connection's `PRAGMA synchronous` (2 is FULL), for the durability test.
    func writerSynchronousMode() async throws -> Int {
        try await pool.write { try Int.fetchOne($0, sql: "PRAGMA synchronous") ?? -1 }
    }

    /// Runs `body` in a write transaction, turning anything but a `ServerError` into `databaseFailure`
    /// (a lock another process held past the wait into 503, `lockWaitRefusal`).
    private func write<T: Sendable>(_ body: @escaping @Sendable (Database) throws -> T) async throws(ServerError) -> T {
        let activity = self.activity, asked = ContinuousClock.now
        do {
            // The closure starts once this connection is SQLite's writer: the wait before it is the lock wait.
            return try await pool.write { db in
                activity.lockWaited(ContinuousClock.now - asked)
                activity.connectionTaken()
                defer { activity.connectionReturned() }
                return try body(db)
            }
        } catch let error as ServerError {
            throw error
        } catch {
            throw lockWaitRefusal(error) ?? ServerError(.databaseFailure, message: "\(error)", path: path, underlying: error)
        }
    }

    /// A lock another process held past `lockWaitSeconds` (SQLite's busy timeout) as PostgreSQL's wait
    /// is answered: 503 with `Retry-After`. It was a 500, which told a client the server had failed
    /// when another writer (an operator's tool, a backup) only held the file a while.
    private func lockWaitRefusal(_ error: any Error) -> ServerError? {
        guard let error = error as? DatabaseError, error.resultCode == .SQLITE_BUSY || error.resultCode == .SQLITE_LOCKED else {
            return nil
        }
        return ServerError(
            status: 503, .unavailable, "another writer held the database past \(lockWaitSeconds) s; try again shortly",
            retryAfterSeconds: 2, underlying: error)
    }

    private func read<T: Sendable>(_ body: @escaping @Sendable (Database) throws -> T) async throws(ServerError) -> T {
        let activity = self.activity
        do {
            return try await pool.read { db in
                activity.connectionTaken()
                defer { activity.connectionReturned() }
                return try body(db)
            }
        } catch let error as ServerError {
            throw error
        } catch {
            throw lockWaitRefusal(error) ?? ServerError(.databaseFailure, message: "\(error)", path: path, underlying: error)
        }
    }

    /// Closes the pool once the server stops serving, not later from a deinit, when the file at that
    /// path may already be another database's (a backup an operator or a test put in place before
    /// serving it again). Every change is first checkpointed into the file and the WAL emptied: the pool
    /// closes its writer before its readers, and SQLite leaves the WAL to the last connection to close,
    /// a reader, which may not checkpoint. A stopped server's file alone held no table, every change
    /// still in the WAL beside it, so a copy of it as a cold backup was empty (attack 75, finding 2).
    func close() async {
        checkpointAndClose()
    }

    /// Not async: the task stopping the server may be cancelled, and GRDB's async write then throws
    /// before it runs.
    private func checkpointAndClose() {
        _ = try? pool.writeWithoutTransaction { try $0.checkpoint(.truncate) }
        try? pool.close()
    }

    /// The size a WAL is cut back to once it has been checkpointed (`journal_size_limit`).
    static let walSizeLimitBytes = 16 << 20
    /// See `refuseBundlesWhileTheLogIsBehind`.
    private let bundleWALLimitBytes: Int

    func probeDatabase() async throws(ServerError) {
        _ = try await read { db in try Int.fetchOne(db, sql: "SELECT 1") }
    }

    // MARK: - Tokens

    func tokenHolder(forDigest digest: String) async throws(ServerError) -> TokenHolder? {
        try await read { db in try Self.tokenHolder(forDigest: digest, now: Timestamp.now(), in: db) }
    }

    /// The holder of the token with `digest`, unexpired at `now`; nil for none.
    private static func tokenHolder(forDigest digest: String, now: Date, in db: Database) throws -> TokenHolder? {
        guard
            let row = try Row.fetchOne(
                db, sql: "SELECT user_id, admin FROM tokens WHERE token_sha256 = ? AND (expires_at IS NULL OR expires_at > ?)",
                arguments: [digest, now.milliseconds]),
            let user = UUID(hyphenatedText: row["user_id"] as String)
        else { return nil }
        return TokenHolder(userID: user, isAdmin: row["admin"] as Bool)
    }

    /// Throws `tokenGoneWhileWaiting` unless `caller`'s token still lets it in at `now`: read in the
    /// transaction that writes, so a revocation that committed while the work waited holds.
    private static func requireStillLetIn(_ caller: Caller, now: Date, in db: Database) throws {
        guard caller.isStillLetIn(by: try tokenHolder(forDigest: caller.tokenDigest, now: now, in: db)) else {
            throw ServerError.tokenGoneWhileWaiting
        }
    }

    // MARK: - Push

    func push(_ mutations: [PushMutation], by caller: Caller, now: Date) async throws(ServerError) -> [MutationResult] {
        let rules = self.rules
        let batch = PushBatch(mutations: mutations, caller: caller, now: now)
        let named = batch.namedProjects
        activity.push(into: named, begun: true)
        defer { activity.push(into: named, begun: false) }
        return try await write { db in
            // Read in the transaction that writes the push: a push that waited its turn or for the writer
            // while the office revoked its token writes nothing (attack 113, F7).
            try Self.requireStillLetIn(caller, now: now, in: db)
            let snapshot = try Self.loadSnapshot(for: batch, in: db)
            let plan = try rules.plan(batch, snapshot: snapshot)
            try Self.write(plan, in: db)
            return plan.results
        }
    }

    func storedAnswers(for keys: [UUID], by caller: Caller) async throws(ServerError) -> [(key: UUID, outcome: String)] {
        try await read { db in
            // The caller's access read once, and each record's project and creator joined in.
            let access = try Access.access(of: caller, in: db)
            var answers: [(key: UUID, outcome: String)] = []
            for chunk in Self.chunks(keys.map(\.storageText)) {
                let rows = try Row.fetchAll(
                    db,
                    sql: """
                        SELECT a.idempotency_key, a.outcome, r.project_id, r.owner_id, r.deletion IS NOT NULL AS deleted, r.updated_at
                        FROM applied_mutations AS a
                        JOIN records AS r ON r.entity = a.entity AND r.id = a.record_id
                        WHERE a.user_id = ? AND a.idempotency_key IN (\(Self.placeholders(chunk.count)))
                        """,
                    arguments: [caller.userID.storageText] + StatementArguments(chunk))
                for row in rows {
                    // A record the caller may no longer see (removed, no role, deleted while they were
                    // away): as unknown, fail closed.
                    guard let key = UUID(hyphenatedText: row["idempotency_key"]),
                        access.canSee(
                            recordOf: row["project_id"], ownedBy: row["owner_id"], deleted: row["deleted"],
                            updatedAt: row["updated_at"], caller: caller)
                    else { continue }
                    answers.append((key, row["outcome"]))
                }
            }
            return answers
        }
    }

    func keepsEveryAnswer(of caller: Caller) async throws(ServerError) -> Bool {
        let kept = rules.bounds.answersKeptPerUser
        return try await read { db in
            // The member's index (step 14) walked to the `kept`-th answer at most.
            try Bool.fetchOne(
                db, sql: "SELECT NOT EXISTS (SELECT 1 FROM applied_mutations WHERE user_id = ? LIMIT 1 OFFSET ?)",
                arguments: [caller.userID.storageText, kept - 1]) ?? false
        }
    }

    /// The push seam's loading half: what `batch` touches, in a handful of queries (the counters first).
    private static func loadSnapshot(for batch: PushBatch, in db: Database) throws -> PushSnapshot {
        var snapshot = PushSnapshot()
        if batch.createsProjects { snapshot.memberIDSalt = try memberIDSalt(in: db) }
        for row in try Row.fetchAll(db, sql: "SELECT name, value FROM counters") {
            switch row["name"] as String {
            case "change_sequence": snapshot.changeSequence = row["value"]
            case "server_id": snapshot.lastServerID = row["value"]
            default: break
            }
        }
        for keys in chunks(batch.idempotencyKeys.map(\.storageText)) {
            let rows = try Row.fetchAll(
                db,
                sql: "SELECT idempotency_key, user_id, entity, record_id, outcome, change_digest FROM applied_mutations WHERE idempotency_key IN (\(placeholders(keys.count)))",
                arguments: StatementArguments(keys))
            for row in rows {
                guard let key = UUID(hyphenatedText: row["idempotency_key"]), let user = UUID(hyphenatedText: row["user_id"]) else {
                    continue
                }
                snapshot.applied[key] = AppliedMutation(
                    userID: user, entity: row["entity"], recordID: row["record_id"], outcome: row["outcome"],
                    changeDigest: row["change_digest"])
            }
        }
        // Where each target belongs first, then how big the ones the caller may see are (each value read
        // and let go, one row at a time, no further than their bound), then those whole.
        snapshot.access = try Access.access(of: batch.caller, in: db)
        var stored: [TargetSummary] = []
        for (entity, ids) in grouped(batch.targets) {
            for chunk in chunks(ids) {
                for row in try Row.fetchAll(
                    db,
                    sql: """
                        SELECT \(summaryColumns), deletion IS NOT NULL AS deleted, updated_at
                        FROM records WHERE entity = ? AND id IN (\(placeholders(chunk.count)))
                        """,
                    arguments: StatementArguments([entity.rawValue] + chunk))
                {
                    stored.append(TargetSummary(summary: try RecordSummary(row: row), deleted: row["deleted"], updatedAt: row["updated_at"]))
                }
            }
        }
        let read = batch.targetsToRead(among: stored, access: snapshot.access)
        for target in stored where !read.contains(target.summary.key) { snapshot.records[target.summary.key] = StoredRecord(unread: target) }
        var weighed = 0
        for (entity, ids) in grouped(read) {
            for chunk in chunks(ids) {
                let sizes = try Row.fetchCursor(
                    db,
                    sql: """
                        SELECT id, length(CAST(fields AS BLOB)) + length(CAST(clocks AS BLOB)), coalesce(written_by, owner_id)
                        FROM records WHERE entity = ? AND id IN (\(placeholders(chunk.count)))
                        """,
                    arguments: StatementArguments([entity.rawValue] + chunk))
                while let row = try sizes.next() {
                    let size: Int = row[1]
                    try batch.weigh(size, into: &weighed)
                    if let id = UUID(hyphenatedText: row[0]), let writer = UUID(hyphenatedText: row[2]) {
                        snapshot.storedBytes[RecordKey(entity: entity, id: id)] = StoredSize(bytes: size, writer: writer)
                    }
                }
            }
        }
        for (entity, ids) in grouped(read) {
            for chunk in chunks(ids) {
                let records = try StoredRecord.fetchAll(
                    db, sql: "SELECT * FROM records WHERE entity = ? AND id IN (\(placeholders(chunk.count)))",
                    arguments: StatementArguments([entity.rawValue] + chunk))
                for record in records { snapshot.records[record.key] = record }
            }
        }
        let projects = RecordBytesHolder.asked(access: snapshot.access, stored: stored)
        for (holder, ids) in [("project", projects), ("writer", [batch.caller.userID.storageText])] {
            for chunk in chunks(ids) {
                for row in try Row.fetchAll(
                    db, sql: "SELECT id, bytes FROM record_usage WHERE holder = ? AND id IN (\(placeholders(chunk.count)))",
                    arguments: StatementArguments([holder] + chunk))
                {
                    if let key = RecordBytesHolder(holder: holder, id: row[0]) { snapshot.recordBytes[key] = row[1] }
                }
            }
        }
        let references = batch.references(stored: snapshot.records)
        let missing = references.keys.filter { snapshot.records[$0] == nil }
        for summary in try summaries(of: Set(missing), in: db) { snapshot.summaries[summary.key] = summary }
        for (entity, serverIDs) in Dictionary(grouping: references.serverIDs, by: \.entity) {
            for chunk in chunks(serverIDs.map(\.serverID)) {
                let rows = try Row.fetchAll(
                    db,
                    sql: "SELECT \(summaryColumns) FROM records WHERE entity = ? AND server_id IN (\(placeholders(chunk.count)))",
                    arguments: [entity.rawValue] + StatementArguments(chunk))
                for row in rows {
                    let summary = try RecordSummary(row: row)
                    snapshot.summaries[summary.key] = snapshot.summaries[summary.key] ?? summary
                    if let serverID = summary.serverID {
                        snapshot.serverIDs[ServerIDKey(entity: entity, serverID: serverID)] = summary.key
                    }
                }
            }
        }
        for chunk in chunks(snapshot.access.projects.map(\.storageText)) {
            let archived = try String.fetchAll(
                db, sql: "SELECT project_id FROM archived_projects WHERE project_id IN (\(placeholders(chunk.count)))",
                arguments: StatementArguments(chunk))
            snapshot.archivedProjects.formUnion(archived.compactMap(UUID.init(hyphenatedText:)))
        }
        snapshot.callerName = try String.fetchOne(
            db, sql: "SELECT name FROM users WHERE id = ?", arguments: [batch.caller.userID.storageText]) ?? ""
        for chunk in chunks(batch.projects.map(\.storageText)) {
            let projects = try String.fetchAll(
                db, sql: "SELECT DISTINCT project_id FROM memberships WHERE project_id IN (\(placeholders(chunk.count)))",
                arguments: StatementArguments(chunk))
            snapshot.projectsWithMembers.formUnion(projects.compactMap(UUID.init(hyphenatedText:)))
        }
        return snapshot
    }

    /// The push seam's writing half: the plan's rows and the counters' final values.
    private static func write(_ plan: PushPlan, in db: Database) throws {
        for record in plan.records.values.sorted(by: { $0.sequence < $1.sequence }) {
            try record.save(in: db)
        }
        for (key, move) in plan.moves {
            try db.cachedStatement(sql: "UPDATE records SET project_id = ?, sequence = ? WHERE entity = ? AND id = ?")
                .execute(arguments: [move.projectID.storageText, move.sequence, key.entity.rawValue, key.id.storageText])
        }
        let now = Date().milliseconds
        for membership in plan.memberships {
            try Access.addMembership(membership.projectID, membership.userID, at: now, in: db)
        }
        for restart in plan.roleRestarts {
            try Access.restartMembership(restart.projectID, restart.userID, at: now, in: db)
        }
        for applied in plan.applied {
            try db.cachedStatement(
                sql: """
                    INSERT INTO applied_mutations (idempotency_key, user_id, entity, record_id, outcome, applied_at, change_digest)
                    VALUES (?, ?, ?, ?, ?, ?, ?)
                    """
            ).execute(arguments: [
                applied.key.storageText, applied.userID.storageText, applied.entity.rawValue,
                applied.recordID.storageText, applied.outcome, now, applied.changeDigest,
            ])
        }
        if let keep = plan.answersToKeep {
            try db.cachedStatement(
                sql: """
                    DELETE FROM applied_mutations WHERE user_id = ?1 AND applied_at < (
                        SELECT applied_at FROM applied_mutations WHERE user_id = ?1 ORDER BY applied_at DESC LIMIT 1 OFFSET ?2)
                    """
            ).execute(arguments: [keep.userID.storageText, keep.count])
        }
        try writeCounters(changeSequence: plan.changeSequence, lastServerID: plan.lastServerID, in: db)
    }

    private static func writeCounters(changeSequence: Int64, lastServerID: Int64, in db: Database) throws {
        try db.execute(
            sql: "UPDATE counters SET value = ? WHERE name = 'change_sequence'", arguments: [changeSequence])
        try db.execute(sql: "UPDATE counters SET value = ? WHERE name = 'server_id'", arguments: [lastServerID])
    }

    /// The pull's query for at most `maximumArms` projects. Each project is its own arm, read in
    /// sequence order from `records_by_project` and cut at the page size, and the arms are merged: a page
    /// costs at most (projects + 1) × page rows, however many changes wait after the cursor. (One `OR`
    /// over every project made SQLite gather and sort all of them for every page.) The arms merge only
    /// sequence numbers, read from the indexes alone; `pull` then reads the page's rows by sequence.
    /// Merged whole, each arm's rows (about 1 KB each) were copied into a temporary B-tree to be sorted
    /// again (`USE TEMP B-TREE FOR ORDER BY`), though the index had read them in order: 5.4 against
    /// 2.2 ms per 500-record page. Past `maximumArms` projects a page walks `records_by_sequence`
    /// instead, within a bounded window (`walkWindow`).
    private static func pullQuery(after cursor: PullCursor, limit: Int, projects: [UUID], unlinkedOf caller: Caller?)
        -> (sql: String, arguments: StatementArguments)
    {
        var arguments: StatementArguments = []
        var arms: [String] = []
        for project in projects.sortedByStorageText({ $0 }) {
            arms.append(
                "SELECT sequence FROM (SELECT sequence FROM records WHERE project_id = ? AND sequence > ? ORDER BY sequence LIMIT ?)")
            arguments += [project.storageText, cursor.position(of: project), limit + 1]
        }
        if let caller {
            arms.append("""
                SELECT sequence FROM (SELECT sequence FROM records WHERE project_id IS NULL AND owner_id = ? AND sequence > ?
                ORDER BY sequence LIMIT ?)
                """)
            arguments += [caller.userID.storageText, cursor.base, limit + 1]
        }
        guard !arms.isEmpty else { return ("SELECT sequence FROM records WHERE 0", []) }
        arguments += [limit + 1]
        return (arms.joined(separator: " UNION ALL ") + " ORDER BY sequence LIMIT ?", arguments)
    }

    /// More projects than a compound query takes arms for (SQLite allows 500; 200 keeps the statement short).
    static let maximumArms = 200

    /// How many rows of `records_by_sequence` a page past `maximumArms` projects may walk, per record it
    /// may hold. A walk from the lowest position checked every row after it against the caller's
    /// projects, other projects' included: a cursor that named one project at an old position made each
    /// page read the server's whole history since (attack 113, F4).
    static let walkedRowsPerPageRecord = 20

    /// The sequences a page past `maximumArms` projects walks, `first...last`, and the newest the
    /// server holds; nil when nothing of the caller's waits. `first` is the next change of any of
    /// `projects` (or of the caller's own unlinked records) after its position, found per project through
    /// `records_by_project` (one index step each), so the walk starts on a change of the caller's; it
    /// stops `walkedRowsPerPageRecord` × `limit` rows later, or at the newest.
    private static func walkWindow(
        after cursor: PullCursor, limit: Int, groups: [(position: Int64, projects: [UUID])], unlinkedOf caller: Caller?,
        in db: Database
    ) throws -> (first: Int64, last: Int64, newest: Int64)? {
        var next: Int64?
        let nextOfProjects = try db.cachedStatement(sql: """
            SELECT MIN(next) FROM (
                SELECT (SELECT MIN(sequence) FROM records WHERE project_id = page.value AND sequence > ?) AS next
                FROM json_each(?) AS page)
            """)
        for (position, group) in groups {
            // An id's text needs no JSON escaping.
            let ids = "[" + group.map { "\"\($0.storageText)\"" }.joined(separator: ",") + "]"
            if let found = try Int64.fetchOne(nextOfProjects, arguments: [position, ids]) { next = min(next ?? found, found) }
        }
        if let caller, let found = try Int64.fetchOne(
            db.cachedStatement(sql: "SELECT MIN(sequence) FROM records WHERE project_id IS NULL AND owner_id = ? AND sequence > ?"),
            arguments: [caller.userID.storageText, cursor.base])
        {
            next = min(next ?? found, found)
        }
        guard let first = next,
            let newest = try Int64.fetchOne(db.cachedStatement(sql: "SELECT MAX(sequence) FROM records"))
        else { return nil }
        let (end, overflow) = first.addingReportingOverflow(Int64(walkedRowsPerPageRecord) * Int64(max(limit, 1)) - 1)
        return (first, overflow ? newest : min(end, newest), newest)
    }

    /// The walk of `records_by_sequence` over `window` for more than `maximumArms` projects, each row
    /// checked against its project's position; rows read at once.
    private static func walkQuery(
        after cursor: PullCursor, limit: Int, groups: [(position: Int64, projects: [UUID])], unlinkedOf caller: Caller?,
        window: ClosedRange<Int64>
    ) -> (sql: String, arguments: StatementArguments) {
        var conditions: [String] = []
        var arguments: StatementArguments = [window.lowerBound, window.upperBound]
        for (position, group) in groups {
            conditions.append("(project_id IN (\(placeholders(group.count))) AND sequence > ?)")
            arguments += StatementArguments(group.map(\.storageText).sorted())
            arguments += [position]
        }
        if let caller {
            conditions.append("(project_id IS NULL AND owner_id = ? AND sequence > ?)")
            arguments += [caller.userID.storageText, cursor.base]
        }
        arguments += [limit + 1]
        let sql = """
            SELECT * FROM records INDEXED BY records_by_sequence WHERE sequence BETWEEN ? AND ?
            AND (\(conditions.joined(separator: " OR "))) ORDER BY sequence LIMIT ?
            """
        return (sql, arguments)
    }

    private static let summaryColumns = "entity, id, server_id, project_id, owner_id, sequence"

    /// The rows whose sequences a JSON array (the one argument) lists, in sequence order (read from
    /// `records_by_sequence` in its order, with no sort).
    private static let rowsBySequence =
        "SELECT * FROM records WHERE sequence IN (SELECT value FROM json_each(?)) ORDER BY sequence"

    /// `[1,2,3]`: sequences as one bound JSON value.
    private static func jsonArray(_ values: [Int64]) -> String {
        "[" + values.map(String.init).joined(separator: ",") + "]"
    }

    /// Summaries of the records among `keys` that exist.
    private static func summaries(of keys: Set<RecordKey>, in db: Database) throws -> [RecordSummary] {
        var found: [RecordSummary] = []
        for (entity, ids) in grouped(keys) {
            for chunk in chunks(ids) {
                let rows = try Row.fetchAll(
                    db,
                    sql: "SELECT \(summaryColumns) FROM records WHERE entity = ? AND id IN (\(placeholders(chunk.count)))",
                    arguments: StatementArguments([entity.rawValue] + chunk))
                found += try rows.map(RecordSummary.init(row:))
            }
        }
        return found
    }

    /// Ids by entity, as storage text.
    private static func grouped(_ keys: Set<RecordKey>) -> [EntityType: [String]] {
        Dictionary(grouping: keys, by: \.entity).mapValues { $0.map(\.id.storageText) }
    }

    /// Lists of at most 500 values, well under SQLite's bound-parameter limit.
    private static func chunks<T>(_ values: [T]) -> [ArraySlice<T>] {
        stride(from: 0, to: values.count, by: 500).map { values[$0..<min($0 + 500, values.count)] }
    }

    /// `?, ?, …`: placeholders only; the values stay bound parameters.
    private static func placeholders(_ count: Int) -> String {
        Array(repeating: "?", count: count).joined(separator: ", ")
    }

    // MARK: - Pull

    func pull(after cursor: PullCursor, limit: Int, maximumBytes: Int, projects: [UUID]?, by caller: Caller)
        async throws(ServerError) -> PullPage
    {
        let assignsServerIDs = rules.assignsServerIDs
        return try await read { db in
            let mine = try Access.projects(of: caller, in: db)
            if let projects, let other = projects.first(where: { !mine.contains($0) }) {
                throw ServerError.forbidden("you are not a member of project \(other.storageText)")
            }
            let read = Array(projects.map { Set($0) } ?? mine)
            let unlinkedOf = projects == nil ? caller : nil
            var extent = PullPage.Extent(limit: limit, maximumBytes: maximumBytes)
            var rows: [StoredRow]
            let hasMore: Bool
            // The page's end: every change of the projects read up to it was in the page.
            var through: Int64?
            if read.count > Self.maximumArms {
                // The projects by position, one condition or statement each: after a catch-up every
                // project stands at the same one.
                let groups = Dictionary(grouping: read, by: cursor.position(of:)).sorted { $0.key < $1.key }
                    .map { (position: $0.key, projects: $0.value) }
                if let window = try Self.walkWindow(after: cursor, limit: limit, groups: groups, unlinkedOf: unlinkedOf, in: db) {
                    let query = Self.walkQuery(
                        after: cursor, limit: limit, groups: groups, unlinkedOf: unlinkedOf, window: window.first...window.last)
                    // Rows are read one by one until the page is full; the row that did not fit says more wait.
                    let (found, stopped) = try StoredRow.fetchPage(db, sql: query.sql, arguments: query.arguments, extent: &extent)
                    rows = found
                    // A page the window ended read every change up to the window's end, past its last row.
                    (hasMore, through) = stopped ? (true, found.last?.sequence) : (window.last < window.newest, window.last)
                } else {
                    (rows, hasMore) = ([], false)
                }
            } else {
                let query = Self.pullQuery(after: cursor, limit: limit, projects: read, unlinkedOf: unlinkedOf)
                // One more than a page is asked for, to know whether more wait; only the page's rows
                // are read, in the same read transaction, so the sequences still name them. They come
                // sorted, and the rows are read in sequence order. The rows' statement is prepared once
                // per connection: it takes a JSON array of sequences rather than `IN` lists of 500
                // placeholders, whose parsing was a fifth of the server's pull (`perf`). The sequences'
                // statement is not cached: its text differs with every number of projects, and a cache
                // of every form (GRDB's has no bound) held up to hundreds of MB per reader.
                let sequences = try Int64.fetchAll(db, sql: query.sql, arguments: query.arguments)
                (rows, _) = try StoredRow.fetchPage(
                    db.cachedStatement(sql: Self.rowsBySequence), arguments: [Self.jsonArray(sequences)], extent: &extent)
                hasMore = rows.count < sequences.count
                through = rows.last?.sequence
            }
            let left = cursor.projectsLeft(outside: mine)
            var page = PullPage(
                rows: rows,
                nextCursor: cursor.advanced(
                    through: through, reading: read, includingBase: projects == nil, memberships: mine.union(left.untold)),
                hasMore: hasMore || !left.untold.isEmpty, leftProjects: left.told,
                basis: PullBasis(memberships: mine, newestSequence: try Self.newestSequence(of: mine, by: caller, in: db)))
            if assignsServerIDs {
                for summary in try Self.summaries(of: PullPage.parentKeys(of: rows), in: db) {
                    page.parents[summary.key] = summary
                }
            }
            return page
        }
    }

    func pullBasis(of caller: Caller) async throws(ServerError) -> PullBasis {
        try await read { db in
            let mine = try Access.projects(of: caller, in: db)
            return PullBasis(memberships: mine, newestSequence: try Self.newestSequence(of: mine, by: caller, in: db))
        }
    }

    func membershipCount(of caller: Caller) async throws(ServerError) -> Int {
        try await read { db in
            try Int.fetchOne(db, sql: "SELECT count(*) FROM memberships WHERE user_id = ?", arguments: [caller.userID.storageText]) ?? 0
        }
    }

    func backUp(to path: String) async throws(ServerError) {
        guard !FileManager.default.fileExists(atPath: path) else {
            throw ServerError(.invalidConfiguration, message: "\(path) exists; a backup is written to a new file", path: path)
        }
        do {
            // Outside a transaction (VACUUM refuses to run in one), on a reader: a snapshot, no writer held.
            try await pool.unsafeRead { db in try db.execute(sql: "VACUUM INTO ?", arguments: [path]) }
        } catch {
            throw ServerError(.databaseFailure, message: "backing up to \(path): \(error)", path: path, underlying: error)
        }
    }

    func historyCheckpoint(at sequence: Int64) async throws(ServerError) -> HistoryCheckpoint {
        guard sequence > 0 else { return .empty }
        return try await read { db in try Self.checkpoint(at: sequence, in: db) }
    }

    /// The checkpoint of change `sequence` as `db` (a transaction or snapshot) holds its commit.
    private static func checkpoint(at sequence: Int64, in db: Database) throws -> HistoryCheckpoint {
        guard sequence > 0 else { return .empty }
        return try coveringMark(of: sequence, in: db).map { HistoryCheckpoint(sequence: sequence, commitMark: $0) } ?? .empty
    }

    func holdsHistory(_ checkpoint: HistoryCheckpoint) async throws(ServerError) -> Bool {
        guard checkpoint.sequence > 0 else { return true }
        return try await read { db in checkpoint.isHeld(byCommitMark: try Self.coveringMark(of: checkpoint.sequence, in: db)) }
    }

    /// The mark of the commit that wrote change `sequence`: the first mark at or after it (a commit
    /// marks the sequence it ends at).
    private static func coveringMark(of sequence: Int64, in db: Database) throws -> String? {
        try String.fetchOne(
            db.cachedStatement(sql: "SELECT mark FROM history_marks WHERE sequence >= ? ORDER BY sequence LIMIT 1"),
            arguments: [sequence])
    }

    func newestSequence(of records: [RecordKey]) async throws(ServerError) -> Int64 {
        guard !records.isEmpty else { return 0 }
        return try await read { db in
            // One query a chunk, not one a record: a push answers up to 500 mutations.
            var newest: Int64 = 0
            for chunk in Self.chunks(records) {
                let pairs = Array(repeating: "(?, ?)", count: chunk.count).joined(separator: ", ")
                let sequence = try Int64.fetchOne(
                    db, sql: "SELECT MAX(sequence) FROM records WHERE (entity, id) IN (VALUES \(pairs))",
                    arguments: StatementArguments(chunk.flatMap { [$0.entity.rawValue, $0.id.storageText] }))
                newest = max(newest, sequence ?? 0)
            }
            return newest
        }
    }

    /// The newest change a pull by `caller` could read: of the projects it reaches (`mine`) and of its
    /// records no project references yet (one index seek each). The server's newest change discarded
    /// every page read ahead on any write anywhere, and the next page's time told any reader when
    /// someone wrote in a project they may not see (attack 111, F1).
    private static func newestSequence(of mine: Set<UUID>, by caller: Caller, in db: Database) throws -> Int64 {
        try Int64.fetchOne(
            db.cachedStatement(sql: """
                SELECT MAX(newest) FROM (
                    SELECT (SELECT MAX(sequence) FROM records WHERE project_id = page.value) AS newest FROM json_each(?) AS page
                    UNION ALL SELECT MAX(sequence) FROM records WHERE project_id IS NULL AND owner_id = ?)
                """),
            // An id's text needs no JSON escaping.
            arguments: ["[" + mine.map { "\"\($0.storageText)\"" }.joined(separator: ",") + "]", caller.userID.storageText]) ?? 0
    }

    // MARK: - Media

    func record(_ entity: EntityType, id: UUID) async throws(ServerError) -> StoredRecord? {
        try await read { db in try StoredRecord.fetch(entity, id: id, in: db) }
    }

    func mediaAttachment(_ id: UUID, by caller: Caller, checkingArchive: Bool) async throws(ServerError)
        -> (record: StoredRecord, role: String, archived: Bool)
    {
        try await read { db in try Self.mediaAttachment(id, by: caller, checkingArchive: checkingArchive, in: db) }
    }

    private static func mediaAttachment(_ id: UUID, by caller: Caller, checkingArchive: Bool, in db: Database) throws
        -> (record: StoredRecord, role: String, archived: Bool)
    {
        // One answer for an attachment that does not exist and one the caller may not see.
        let missing = ServerError.noMediaAttachment(id)
        let found = try ServedSchema.current.media.sorted().lazy.compactMap { try StoredRecord.fetch($0, id: id, in: db) }.first
        guard let record = found, let project = record.projectID,
            let role = try Access.access(of: caller, in: db, project: project).roles[project]
        else { throw missing }
        let archived = try checkingArchive && Bool.fetchOne(
            db, sql: "SELECT EXISTS (SELECT 1 FROM archived_projects WHERE project_id = ?)", arguments: [project.storageText]) == true
        return (record, role, archived)
    }

    func mediaUpload(_ id: UUID) async throws(ServerError) -> MediaUploadState? {
        try await read { db in
            try Row.fetchOne(db, sql: "SELECT * FROM media_uploads WHERE attachment_id = ?", arguments: [id.storageText])
                .map { row in
                    MediaUploadState(
                        totalBytes: row["total_bytes"], receivedBytes: row["received_bytes"], sha256: row["sha256"],
                        complete: row["complete"], completedSequence: row["completed_sequence"],
                        updatedAt: Date(milliseconds: row["updated_at"]))
                }
        }
    }

    func mediaBytesHeld(project: UUID?, owner: UUID, excluding attachment: UUID, reservedSince: Date) async throws(ServerError)
        -> (project: Int64, owner: Int64)
    {
        try await read { db in
            let media = schema.media.map(\.rawValue).sorted()
            let held = """
                SELECT coalesce(sum(CASE WHEN m.complete OR m.updated_at >= ? THEN m.total_bytes ELSE m.received_bytes END), 0)
                FROM media_uploads m
                JOIN records r ON r.entity IN (\(Self.placeholders(media.count))) AND r.id = m.attachment_id
                WHERE m.attachment_id != ?
                """
            let since: [any DatabaseValueConvertible] = [reservedSince.milliseconds]
            let ofProject = try project.map { project in
                try Int64.fetchOne(
                    db, sql: held + " AND r.project_id = ?",
                    arguments: StatementArguments(since + media + [attachment.storageText, project.storageText]))
            } ?? 0
            let ofOwner = try Int64.fetchOne(
                db, sql: held + " AND r.owner_id = ?",
                arguments: StatementArguments(since + media + [attachment.storageText, owner.storageText]))
            return (ofProject ?? 0, ofOwner ?? 0)
        }
    }

    func deletedAttachments(among attachments: [UUID]) async throws(ServerError) -> Set<UUID> {
        try await read { db in
            let media = schema.media.map(\.rawValue).sorted()
            var deleted: Set<UUID> = []
            for chunk in Self.chunks(attachments.map(\.storageText)) {
                let ids = try String.fetchAll(
                    db,
                    sql: """
                        SELECT id FROM records WHERE entity IN (\(Self.placeholders(media.count))) AND deletion IS NOT NULL
                        AND id IN (\(Self.placeholders(chunk.count)))
                        """,
                    arguments: StatementArguments(media + Array(chunk)))
                deleted.formUnion(ids.compactMap(UUID.init(uuidString:)))
            }
            return deleted
        }
    }

    @discardableResult
    func setMediaUpload(_ state: MediaUploadState?, for id: UUID, now: Date, uploadedBy caller: Caller?) async throws(ServerError) -> MediaUploadState? {
        try await write { db in
            guard var state else {
                try db.execute(sql: "DELETE FROM media_uploads WHERE attachment_id = ?", arguments: [id.storageText])
                return nil
            }
            if let caller {
                // In the transaction that saves the chunk: the office's revocation, removal, role change
                // or archive that committed while it waited for the writer holds (attack 115, F2).
                try Self.requireStillLetIn(caller, now: Timestamp.now(), in: db)
                let attachment = try Self.mediaAttachment(id, by: caller, checkingArchive: true, in: db)
                if let refusal = MediaStore.uploadRefusal(attachment, of: id, by: caller) { throw refusal }
            }
            if state.complete, state.completedSequence == nil {
                // The counter's trigger writes this commit's mark (`history_marks`).
                try db.execute(sql: "UPDATE counters SET value = value + 1 WHERE name = 'change_sequence'")
                state.completedSequence = try Int64.fetchOne(db, sql: "SELECT value FROM counters WHERE name = 'change_sequence'")
            }
            try db.execute(
                sql: """
                    INSERT OR REPLACE INTO media_uploads
                        (attachment_id, total_bytes, received_bytes, sha256, complete, updated_at, completed_sequence)
                    VALUES (?, ?, ?, ?, ?, ?, ?)
                    """,
                arguments: [
                    id.storageText, state.totalBytes, state.receivedBytes, state.sha256, state.complete, now.milliseconds,
                    state.completedSequence,
                ])
            return state
        }
    }

    // MARK: - Bundles

    func bundle(project: UUID, by caller: Caller) async throws(ServerError) -> BundleRecords {
        try await refuseBundlesWhileTheLogIsBehind()
        let snapshot: DatabaseSnapshot
        do {
            snapshot = try pool.makeSnapshot()
        } catch {
            throw ServerError(.databaseFailure, message: "\(error)", path: path, underlying: error)
        }
        let path = self.path
        // The checks and the header read the same snapshot the records then stream from.
        let (asOf, checkpoint, aboveScope) = try await Self.read(snapshot, path: path) {
            db -> (Date?, HistoryCheckpoint, [EntityType: [UUID]]) in
            // One answer for a project that does not exist and one the caller may not reach.
            guard let projectRecord = try StoredRecord.fetch(schema.scope, id: project, in: db),
                try Access.isMember(caller, of: project, in: db)
            else { throw ServerError.notFound("no project \(project.storageText) of yours") }
            // Every row's time, not the newest change's: a push takes its time before the write lock and
            // its sequence under it, so a later change can carry an older time, and `asOf` read from the
            // newest change was older than records in the bundle (attack 115, F1). Two statements, each
            // one step of its index (`records_by_project_time`, server schema step 12; `records_by_project`):
            // asked together, SQLite read every row of the project, 44 ms for 50,000 records before the
            // bundle's first byte went out.
            var newest = try Int64.fetchOne(
                db, sql: "SELECT MAX(updated_at) FROM records WHERE project_id = ?", arguments: [project.storageText])
            var sequence = try Int64.fetchOne(
                db, sql: "SELECT MAX(sequence) FROM records WHERE project_id = ?", arguments: [project.storageText]) ?? 0
            var extra: [EntityType: [UUID]] = [:]
            // The records above the scope the project names, when it belongs to no project yet (one this project owns
            // streams with its records; one another project owns is that project's members' business).
            for relation in schema.scopeParents {
                // Only the caller's own: one that belongs to no project is its owner's alone (`PushRules.link`).
                guard case .uuid(let above) = projectRecord.fields[relation.field] ?? .null,
                    let row = try Row.fetchOne(
                        db, sql: "SELECT project_id, owner_id, updated_at, sequence FROM records WHERE entity = ? AND id = ?",
                        arguments: [relation.entity.rawValue, above.storageText]),
                    row["project_id"] as String? == nil, row["owner_id"] as String? == caller.userID.storageText
                else { continue }
                extra[relation.entity, default: []].append(above)
                newest = max(newest ?? 0, row["updated_at"] as Int64)
                sequence = max(sequence, row["sequence"] as Int64)
            }
            return (newest.map(Date.init(milliseconds:)), try Self.checkpoint(at: sequence, in: db), extra)
        }
        let cursor = BundleCursor(snapshot: snapshot, path: path, project: project, aboveScope: aboveScope)
        return BundleRecords(asOf: asOf, checkpoint: checkpoint, next: { try await cursor.next() })
    }

    /// Refuses a bundle (503, try again) while the WAL holds more than `bundleWALLimitBytes` and
    /// readers keep it from starting again. A download cut after its snapshot wait still overlapped the
    /// next (a member starting one every 15 s): SQLite starts its log again only once a checkpoint has
    /// copied all of it back, which no checkpoint can while some reader is on an older snapshot, so the
    /// WAL grew for as long as they went on (attack 125, F2). Counting only what a checkpoint could not
    /// copy let them in, since each reader is younger than the last (attack 126, F1). Refused new
    /// snapshots, the old ones end within the wait, the log is copied back whole, and the next write
    /// starts it again. The file's size is read first (a stat); only past the limit does a passive
    /// checkpoint, which waits for no reader, say how long the log is and whether all of it is back.
    private func refuseBundlesWhileTheLogIsBehind() async throws(ServerError) {
        let walBytes = ((try? FileManager.default.attributesOfItem(atPath: path + "-wal"))?[.size] as? NSNumber)?.intValue ?? 0
        guard walBytes > bundleWALLimitBytes else { return }
        let log: (bytes: Int, copiedBack: Bool)
        do {
            log = try await pool.writeWithoutTransaction { db in
                let frames = try db.checkpoint(.passive)
                let pageSize = try Int.fetchOne(db, sql: "PRAGMA page_size") ?? Self.pageSize
                return (frames.walFrameCount * pageSize, frames.checkpointedFrameCount >= frames.walFrameCount)
            }
        } catch {
            throw ServerError(.databaseFailure, message: "\(error)", path: path, underlying: error)
        }
        guard log.bytes > bundleWALLimitBytes, !log.copiedBack else { return }
        throw ServerError(
            status: 503, .unavailable,
            "the database's log holds \(log.bytes) bytes that long reads keep from being checkpointed; bundles wait until it is: try again shortly",
            retryAfterSeconds: 30)
    }

    fileprivate static func read<T: Sendable>(
        _ snapshot: DatabaseSnapshot, path: String, _ body: @escaping @Sendable (Database) throws -> T
    ) async throws(ServerError) -> T {
        do {
            return try await snapshot.read(body)
        } catch let error as ServerError {
            throw error
        } catch {
            throw ServerError(.databaseFailure, message: "\(error)", path: path, underlying: error)
        }
    }

    // MARK: - Seed

    @discardableResult
    func load(_ seed: ServerSeed, now: Date, logging: @escaping AdminLogLine.Maker<[AdminLogLine], Bool>) async throws(ServerError) -> Bool {
        try seed.validate()
        let rules = self.rules
        return try await write { db in
            // A seed sets a server up once: loaded again at a restart it put back the memberships and
            // tokens the operator had removed and revoked since.
            if !seed.extendsServer {
                guard try Int64.fetchOne(db, sql: "SELECT value FROM counters WHERE name = 'seeded_at'") == nil else { return false }
                try db.execute(sql: "INSERT INTO counters (name, value) VALUES ('seeded_at', ?)", arguments: [now.milliseconds])
            }
            let stamp = HybridTimestamp(physicalMilliseconds: now.milliseconds, counter: 0, node: NodeID(0))
            let firstMember = seed.members.first?.userID ?? UUID(uuidString: "00000000-0000-0000-0000-000000000000")!
            var counters: (changeSequence: Int64, lastServerID: Int64) = (0, 0)
            for row in try Row.fetchAll(db, sql: "SELECT name, value FROM counters") {
                if row["name"] as String == "change_sequence" { counters.changeSequence = row["value"] }
                if row["name"] as String == "server_id" { counters.lastServerID = row["value"] }
            }
            var createdProjects = 0
            for project in seed.projects where try StoredRecord.fetch(schema.scope, id: project.id, in: db) == nil {
                createdProjects += 1
                let fields = schema.blankFields(
                    of: schema.scope, given: ["name": .text(project.name), "address": .text(project.address ?? "")], now: now)
                try rules.seededRecord(
                    schema.scope, id: project.id, projectID: project.id, owner: firstMember, fields: fields, stamp: stamp,
                    now: now, counters: &counters
                ).save(in: db)
            }
            for member in seed.members {
                try db.execute(
                    sql: "INSERT OR REPLACE INTO users (id, name) VALUES (?, ?)",
                    arguments: [member.userID.storageText, member.name])
                for project in member.projects {
                    guard try StoredRecord.fetch(schema.scope, id: project, in: db) != nil else {
                        throw ServerError(.invalidSeed, message: "no project \(project.storageText) on this server")
                    }
                    try Access.addMembership(project, member.userID, at: now.milliseconds, in: db)
                    let id = Roles.memberRecordID(project: project, user: member.userID, salt: try Self.memberIDSalt(in: db))
                    guard try StoredRecord.fetch(schema.membership, id: id, in: db) == nil else { continue }
                    let fields = schema.membershipFields(
                        scope: project, user: member.userID, role: try ServerSeed.role(of: member), name: member.name,
                        email: member.email, now: now)
                    try rules.seededRecord(
                        schema.membership, id: id, projectID: project, owner: member.userID, fields: fields, stamp: stamp,
                        now: now, counters: &counters
                    ).save(in: db)
                }
            }
            try Self.writeCounters(changeSequence: counters.changeSequence, lastServerID: counters.lastServerID, in: db)
            for token in seed.tokens {
                guard try Bool.fetchOne(db, sql: "SELECT 1 FROM users WHERE id = ?", arguments: [token.userID.storageText]) ?? false
                else { throw ServerError.notFound("no user \(token.userID.storageText) on this server") }
                try db.execute(
                    sql: "INSERT OR REPLACE INTO tokens (token_sha256, user_id, created_at, expires_at, admin) VALUES (?, ?, ?, ?, ?)",
                    arguments: [
                        TokenDigest.hex(of: token.token), token.userID.storageText, now.milliseconds, token.expiresAt?.milliseconds,
                        token.admin,
                    ])
            }
            let loaded = seed.createsOnlyProjects ? createdProjects > 0 : true
            for line in logging(loaded) { try Self.append(line, at: now, in: db) }
            return loaded
        }
    }

    func addMember(
        _ user: UUID, to project: UUID, name: String?, email: String?, role: String?, now: Date,
        logging: @escaping AdminLogLine.Maker<AdminLogLine, MembershipChange>
    ) async throws(ServerError) -> MembershipChange {
        let rules = self.rules
        return try await write { db in
            // A deleted project takes no member (see `SyncServer.requireLiveProject`).
            guard let projectRecord = try StoredRecord.fetch(schema.scope, id: project, in: db), projectRecord.deletion == nil else {
                throw ServerError.notFound("no project \(project.storageText) on this server")
            }
            if let name {
                try db.execute(
                    sql: "INSERT INTO users (id, name) VALUES (?, ?) ON CONFLICT(id) DO UPDATE SET name = excluded.name",
                    arguments: [user.storageText, name])
            }
            let userName = try name ?? String.fetchOne(db, sql: "SELECT name FROM users WHERE id = ?", arguments: [user.storageText])
            guard let userName else { throw MembershipEdit.unnamed(user) }
            let hasMembership = try Bool.fetchOne(
                db, sql: "SELECT 1 FROM memberships WHERE project_id = ? AND user_id = ?",
                arguments: [project.storageText, user.storageText]) ?? false
            let members = try StoredRecord.fetchAll(
                db, sql: "SELECT * FROM records WHERE project_id = ? AND entity = ?",
                arguments: [project.storageText, schema.membership.rawValue])
            var counters: (changeSequence: Int64, lastServerID: Int64) = (
                try Int64.fetchOne(db, sql: "SELECT value FROM counters WHERE name = 'change_sequence'") ?? 0,
                try Int64.fetchOne(db, sql: "SELECT value FROM counters WHERE name = 'server_id'") ?? 0)
            let plan = try MembershipEdit.plan(
                user: user, project: project, name: name, userName: userName, email: email, role: role, hasMembership: hasMembership,
                memberRecords: members, salt: try Self.memberIDSalt(in: db), now: now, rules: rules, counters: &counters)
            for record in plan.records { try record.save(in: db) }
            if plan.addsMembership {
                try Access.addMembership(project, user, at: now.milliseconds, in: db)
            } else if plan.restartsMembership {
                try Access.restartMembership(project, user, at: now.milliseconds, in: db)
            }
            try Self.writeCounters(changeSequence: counters.changeSequence, lastServerID: counters.lastServerID, in: db)
            try Self.append(logging(plan.change), at: now, in: db)
            return plan.change
        }
    }

    func setArchived(
        _ project: UUID, _ archived: Bool, now: Date, logging: @escaping AdminLogLine.Maker<AdminLogLine, Bool>
    ) async throws(ServerError) -> Bool {
        try await write { db in
            if archived {
                try db.execute(
                    sql: "INSERT OR IGNORE INTO archived_projects (project_id, archived_at) VALUES (?, ?)",
                    arguments: [project.storageText, now.milliseconds])
            } else {
                try db.execute(sql: "DELETE FROM archived_projects WHERE project_id = ?", arguments: [project.storageText])
            }
            let changed = db.changesCount > 0
            try Self.append(logging(changed), at: now, in: db)
            return changed
        }
    }

    func removeMember(
        _ user: UUID, from project: UUID, now: Date, logging: @escaping AdminLogLine.Maker<AdminLogLine, Int>
    ) async throws(ServerError) -> Int {
        try await write { db in
            try db.execute(
                sql: "DELETE FROM memberships WHERE project_id = ? AND user_id = ?",
                arguments: [project.storageText, user.storageText])
            let removed = db.changesCount
            var sequence = try Int64.fetchOne(db, sql: "SELECT value FROM counters WHERE name = 'change_sequence'") ?? 0
            let lastServerID = try Int64.fetchOne(db, sql: "SELECT value FROM counters WHERE name = 'server_id'") ?? 0
            let members = try StoredRecord.fetchAll(
                db, sql: "SELECT * FROM records WHERE project_id = ? AND entity = ? AND deletion IS NULL",
                arguments: [project.storageText, schema.membership.rawValue])
            for var member in members where member.fields[schema.userField] == .uuid(user) {
                sequence += 1
                member.tombstone(at: now, sequence: sequence)
                try member.save(in: db)
            }
            try Self.writeCounters(changeSequence: sequence, lastServerID: lastServerID, in: db)
            try Self.append(logging(removed), at: now, in: db)
            return removed
        }
    }

    func memberRecords(of project: UUID) async throws(ServerError) -> [StoredRecord] {
        let membership = schema.membership.rawValue
        return try await read { db in
            try StoredRecord.fetchAll(
                db, sql: "SELECT * FROM records WHERE project_id = ? AND entity = ? AND deletion IS NULL",
                arguments: [project.storageText, membership])
        }
    }

    func memberUsers(of project: UUID) async throws(ServerError) -> Set<UUID> {
        try await read { db in
            Set(try String.fetchAll(db, sql: "SELECT user_id FROM memberships WHERE project_id = ?", arguments: [project.storageText])
                .compactMap(UUID.init(hyphenatedText:)))
        }
    }

    func tokens(of user: UUID?) async throws(ServerError) -> [IssuedToken] {
        try await read { db in
            let rows = try Row.fetchAll(
                db,
                sql: """
                    SELECT token_sha256, user_id, created_at, expires_at, last_used_at, admin FROM tokens
                    WHERE ? IS NULL OR user_id = ? ORDER BY created_at DESC, token_sha256
                    """,
                arguments: [user?.storageText, user?.storageText])
            return rows.compactMap { row -> IssuedToken? in
                guard let userID = UUID(hyphenatedText: row["user_id"] as String) else { return nil }
                let milliseconds = { (value: Int64?) in value.map { Date(timeIntervalSince1970: Double($0) / 1000) } }
                return IssuedToken(
                    userID: userID, digestPrefix: String((row["token_sha256"] as String).prefix(12)),
                    createdAt: milliseconds(row["created_at"]) ?? Date(timeIntervalSince1970: 0),
                    expiresAt: milliseconds(row["expires_at"]), lastUsedAt: milliseconds(row["last_used_at"]),
                    isAdmin: row["admin"] as Bool)
            }
        }
    }

    func noteTokenUse(digest: String, now: Date) async throws(ServerError) {
        try await write { db in
            try db.execute(
                sql: "UPDATE tokens SET last_used_at = ? WHERE token_sha256 = ? AND (last_used_at IS NULL OR last_used_at < ?)",
                arguments: [now.milliseconds, digest, now.milliseconds])
        }
    }

    func appendAdminLog(at: Date, actor: String, action: String, details: String) async throws(ServerError) {
        try await write { db in try Self.append(AdminLogLine(actor: actor, action: action, details: details), at: at, in: db) }
    }

    /// Writes one admin log entry in the caller's transaction.
    private static func append(_ line: AdminLogLine, at: Date, in db: Database) throws {
        try db.execute(
            sql: "INSERT INTO admin_log (at, actor, action, details) VALUES (?, ?, ?, ?)",
            arguments: [at.milliseconds, line.actor, line.action, line.details])
    }

    func adminLog(limit: Int) async throws(ServerError) -> [AdminLogEntry] {
        try await read { db in
            try Row.fetchAll(
                db, sql: "SELECT seq, at, actor, action, details FROM admin_log ORDER BY seq DESC LIMIT ?", arguments: [limit]
            ).reversed().map { row in
                AdminLogEntry(
                    sequence: row["seq"], at: Date(timeIntervalSince1970: Double(row["at"] as Int64) / 1000),
                    actor: row["actor"], action: row["action"], details: row["details"])
            }
        }
    }

    func revokeTokens(
        digest: String?, user: UUID?, now: Date, logging: @escaping AdminLogLine.Maker<AdminLogLine, Int>
    ) async throws(ServerError) -> Int {
        try await write { db in
            if let digest {
                try db.execute(sql: "DELETE FROM tokens WHERE token_sha256 = ?", arguments: [digest])
            } else if let user {
                try db.execute(sql: "DELETE FROM tokens WHERE user_id = ?", arguments: [user.storageText])
            }
            let revoked = db.changesCount
            try Self.append(logging(revoked), at: now, in: db)
            return revoked
        }
    }

    func tokenDigests(startingWith prefix: String) async throws(ServerError) -> [String] {
        // The same plain comparison as PostgreSQL's (a scan of a table of one row per device).
        try await read { db in
            try String.fetchAll(
                db, sql: "SELECT token_sha256 FROM tokens WHERE substr(token_sha256, 1, ?) = ?",
                arguments: [prefix.utf8.count, prefix])
        }
    }

    /// This server's salt for member record ids ("" for one seeded before it had one).
    static func memberIDSalt(in db: Database) throws -> String {
        try String.fetchOne(db.cachedStatement(sql: "SELECT value FROM server_settings WHERE name = 'member_id_salt'")) ?? ""
    }

    func memberIDSalt() async throws(ServerError) -> String {
        try await read { db in try Self.memberIDSalt(in: db) }
    }

    func cursorKey(proposing proposal: String) async throws(ServerError) -> String {
        // Read first: a database that has the key needs no write lock for it.
        let stored = try await read { db in
            try String.fetchOne(db, sql: "SELECT value FROM server_settings WHERE name = 'cursor_key'")
        }
        if let stored { return stored }
        return try await write { db in
            try db.execute(
                sql: "INSERT INTO server_settings (name, value) VALUES ('cursor_key', ?) ON CONFLICT (name) DO NOTHING",
                arguments: [proposal])
            return try String.fetchOne(db, sql: "SELECT value FROM server_settings WHERE name = 'cursor_key'") ?? proposal
        }
    }
}

/// Walks a project's records from a snapshot, entity by entity in catalog order and by id within
/// one, a page per call, so a bundle of any size streams in constant memory.
private actor BundleCursor {
    /// Let go after the last page: a snapshot held keeps the WAL from being checkpointed.
    private var snapshot: DatabaseSnapshot?
    private let path: String
    private let project: UUID
    /// The records above the scope the project names that belong to no project yet, by entity: sent
    /// with that entity's records.
    private var aboveScope: [EntityType: [UUID]]
    private var entities = EntityCatalog.all.map(\.type)[...]
    private var lastID: String?

    init(snapshot: DatabaseSnapshot, path: String, project: UUID, aboveScope: [EntityType: [UUID]]) {
        self.snapshot = snapshot
        self.path = path
        self.project = project
        self.aboveScope = aboveScope
    }

    /// The next page, nil after the last.
    func next() async throws -> [BundleEntry]? {
        while let entity = entities.first, let snapshot {
            let (project, after, extra) = (self.project, lastID, aboveScope.removeValue(forKey: entity) ?? [])
            let (page, full, extraRecords) = try await SQLiteStorage.read(snapshot, path: path) {
                db -> ([BundleEntry], Bool, [BundleEntry]) in
                // Bounded in bytes as pulls are (`BundleRecords.pageBytes`): the rows past the bound are
                // never read.
                var extent = PullPage.Extent(limit: BundleRecords.pageRecords, maximumBytes: BundleRecords.pageBytes)
                let (rows, stopped) = try StoredRow.fetchPage(
                    db,
                    sql: """
                        SELECT * FROM records WHERE project_id = ? AND entity = ? AND id > ? AND deletion IS NULL
                        ORDER BY id LIMIT ?
                        """,
                    arguments: [project.storageText, entity.rawValue, after ?? "", BundleRecords.pageRecords], extent: &extent)
                return (
                    rows.map(\.bundleEntry), stopped || rows.count == BundleRecords.pageRecords,
                    try extra.compactMap { id in try StoredRecord.fetch(entity, id: id, in: db).map { BundleEntry($0.entityRecord) } }
                )
            }
            if full {
                lastID = page.last?.record.id.storageText
            } else {
                entities = entities.dropFirst()
                lastID = nil
            }
            let records = page + extraRecords
            if !records.isEmpty {
                return records.sortedByStorageText(\.record.id)
            }
        }
        snapshot = nil
        return nil
    }
}

/// Membership checks, shared by every route. A project is the caller's only where a role is
/// established for them (`Roles.access`): a membership whose member record is gone, or names no role
/// this server knows, reaches nothing.
enum Access {
    /// The caller's standing in their projects (only `project`, when given).
    static func access(of caller: Caller, in db: Database, project: UUID? = nil) throws -> ProjectAccess {
        let only = project == nil ? "" : " AND m.project_id = ?"
        let arguments: StatementArguments = [caller.userID.storageText] + StatementArguments(project.map { [$0.storageText] } ?? [])
        var memberships: [UUID: Int64] = [:]
        // Both statements are prepared once per connection (two forms each): every request asks, and a
        // pull asks every page, where preparing them was a tenth of the page's read (`perf`).
        for row in try Row.fetchAll(
            db.cachedStatement(
                sql: """
                    SELECT m.project_id, coalesce(s.added_at, 0) AS added_at FROM memberships m
                    LEFT JOIN membership_starts s ON s.project_id = m.project_id AND s.user_id = m.user_id
                    WHERE m.user_id = ?
                    """ + only),
            arguments: arguments)
        {
            if let id = UUID(hyphenatedText: row["project_id"] as String) { memberships[id] = row["added_at"] }
        }
        guard !memberships.isEmpty else { return ProjectAccess() }
        var everything = PullPage.Extent(limit: .max, maximumBytes: .max)
        let members = StoredRow.readableMemberRecords(try StoredRow.fetchPage(
            db.cachedStatement(
                sql: """
                    SELECT r.* FROM memberships m
                    JOIN records r ON r.project_id = m.project_id AND r.entity = ? AND r.deletion IS NULL
                    WHERE m.user_id = ?
                    """ + only),
            arguments: [schema.membership.rawValue] + arguments, extent: &everything
        ).rows)
        var projectMembers: [UUID: Set<UUID>] = [:]
        for row in try Row.fetchAll(
            db.cachedStatement(
                sql: """
                    SELECT o.project_id, o.user_id FROM memberships m
                    JOIN memberships o ON o.project_id = m.project_id
                    WHERE m.user_id = ?
                    """ + only),
            arguments: arguments)
        {
            if let project = UUID(hyphenatedText: row["project_id"] as String), let user = UUID(hyphenatedText: row["user_id"] as String) {
                projectMembers[project, default: []].insert(user)
            }
        }
        return Roles.access(
            of: caller.userID, memberships: memberships,
            memberRecords: Dictionary(grouping: members.filter { $0.projectID != nil }, by: { $0.projectID! }),
            projectMembers: projectMembers)
    }

    /// Makes `user` a member of `project` from `milliseconds` on (a membership that exists stays as it is).
    static func addMembership(_ project: UUID, _ user: UUID, at milliseconds: Int64, in db: Database) throws {
        try db.execute(
            sql: "INSERT OR IGNORE INTO memberships (project_id, user_id) VALUES (?, ?)",
            arguments: [project.storageText, user.storageText])
        guard db.changesCount > 0 else { return }
        try db.execute(
            sql: "INSERT OR REPLACE INTO membership_starts (project_id, user_id, added_at) VALUES (?, ?, ?)",
            arguments: [project.storageText, user.storageText, milliseconds])
    }

    /// Begins `user`'s membership of `project` again at `milliseconds`, when they are a member: a role given
    /// again to a member who had none (`PushPlan.roleRestarts`, `MembershipEdit.Plan.restartsMembership`).
    static func restartMembership(_ project: UUID, _ user: UUID, at milliseconds: Int64, in db: Database) throws {
        try db.execute(
            sql: """
                INSERT OR REPLACE INTO membership_starts (project_id, user_id, added_at)
                SELECT project_id, user_id, ? FROM memberships WHERE project_id = ? AND user_id = ?
                """,
            arguments: [milliseconds, project.storageText, user.storageText])
    }

    static func isMember(_ caller: Caller, of project: UUID, in db: Database) throws -> Bool {
        try access(of: caller, in: db, project: project).roles[project] != nil
    }

    static func projects(of caller: Caller, in db: Database) throws -> Set<UUID> {
        try access(of: caller, in: db).projects
    }
}

extension StoredRow {
    /// Where each column of a `records` row is, looked up once per query: GRDB's lookup by name
    /// lowercases the name on every access, a tenth of a pull page's build.
    struct Columns {
        let entity, id, serverID, projectID, ownerID, version, sequence, fields, clocks, deletion, createdAt, updatedAt: Int

        init(_ row: Row) throws {
            let names = Array(row.columnNames)
            func index(_ name: String) throws -> Int {
                guard let index = names.firstIndex(of: name) else {
                    throw ServerError(.databaseFailure, message: "a records query returned no \(name) column")
                }
                return index
            }
            (entity, id, serverID, projectID) = (try index("entity"), try index("id"), try index("server_id"), try index("project_id"))
            (ownerID, version, sequence, fields) = (try index("owner_id"), try index("version"), try index("sequence"), try index("fields"))
            (clocks, deletion, createdAt, updatedAt) = (
                try index("clocks"), try index("deletion"), try index("created_at"), try index("updated_at")
            )
        }
    }

    init(row: Row) throws {
        try self.init(row: row, columns: Columns(row))
    }

    init(row: Row, columns: Columns) throws {
        let entityName: String = row[columns.entity]
        guard let entity = EntityType(rawValue: entityName), let id = UUID(hyphenatedText: row[columns.id]),
            let owner = UUID(hyphenatedText: row[columns.ownerID])
        else { throw ServerError(.databaseFailure, message: "a stored record has an unknown entity or id") }
        self.init(
            entity: entity, id: id, serverID: row[columns.serverID],
            projectID: (row[columns.projectID] as String?).flatMap(UUID.init(hyphenatedText:)), ownerID: owner,
            version: row[columns.version], sequence: row[columns.sequence], fieldsJSON: row[columns.fields],
            clocksJSON: row[columns.clocks], deletion: row[columns.deletion], createdAt: row[columns.createdAt],
            updatedAt: row[columns.updatedAt])
    }

    /// The rows `sql` selects from `records` while `extent` admits them (the columns found once), and
    /// whether it stopped before the last one: the rows after the stop are never read.
    static func fetchPage(
        _ db: Database, sql: String, arguments: StatementArguments, extent: inout PullPage.Extent
    ) throws -> (rows: [StoredRow], stopped: Bool) {
        try fetchPage(db.makeStatement(sql: sql), arguments: arguments, extent: &extent)
    }

    /// `fetchPage` through a prepared statement (one cached for many pages).
    static func fetchPage(
        _ statement: Statement, arguments: StatementArguments, extent: inout PullPage.Extent
    ) throws -> (rows: [StoredRow], stopped: Bool) {
        let cursor = try Row.fetchCursor(statement, arguments: arguments)
        var columns: Columns?
        var rows: [StoredRow] = []
        while let row = try cursor.next() {
            let found = try columns ?? Columns(row)
            columns = found
            let stored = try StoredRow(row: row, columns: found)
            guard extent.admit(size: stored.fieldsJSON.utf8.count + stored.clocksJSON.utf8.count) else {
                return (rows, true)
            }
            rows.append(stored)
        }
        return (rows, false)
    }

    /// Every row `sql` selects from `records`.
    static func fetchAll(_ db: Database, sql: String, arguments: StatementArguments) throws -> [StoredRow] {
        var everything = PullPage.Extent(limit: .max, maximumBytes: .max)
        return try fetchPage(db, sql: sql, arguments: arguments, extent: &everything).rows
    }
}

extension StoredRecord {
    init(row: Row) throws {
        self = try StoredRow(row: row).decoded()
    }

    static func fetch(_ entity: EntityType, id: UUID, in db: Database) throws -> StoredRecord? {
        try Row.fetchOne(
            db, sql: "SELECT * FROM records WHERE entity = ? AND id = ?", arguments: [entity.rawValue, id.storageText]
        ).map(StoredRecord.init(row:))
    }

    static func fetchAll(_ db: Database, sql: String, arguments: StatementArguments) throws -> [StoredRecord] {
        try StoredRow.fetchAll(db, sql: sql, arguments: arguments).map { try $0.decoded() }
    }

    /// Inserts the row, or updates the one of its entity and id: an update, not a replace, so the
    /// `record_usage` triggers see the old row go (`ServerSchema.version13`).
    func save(in db: Database) throws {
        try db.cachedStatement(
            sql: """
                INSERT INTO records (entity, id, server_id, project_id, owner_id, version, sequence, fields,
                    clocks, deletion, created_at, updated_at, written_by)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                ON CONFLICT (entity, id) DO UPDATE SET
                    server_id = excluded.server_id, project_id = excluded.project_id, owner_id = excluded.owner_id,
                    version = excluded.version, sequence = excluded.sequence, fields = excluded.fields,
                    clocks = excluded.clocks, deletion = excluded.deletion, created_at = excluded.created_at,
                    updated_at = excluded.updated_at, written_by = excluded.written_by
                """
        ).execute(
            arguments: [
                entity.rawValue, id.storageText, serverID, projectID?.storageText, ownerID.storageText, version, sequence,
                try StoredJSON.fields(fields), StoredJSON.clocks(clocks), deletion?.encoded,
                createdAt.milliseconds, updatedAt.milliseconds, writtenBy?.storageText,
            ])
    }
}

extension RecordSummary {
    init(row: Row) throws {
        guard let entity = EntityType(rawValue: row["entity"]), let id = UUID(hyphenatedText: row["id"]),
            let owner = UUID(hyphenatedText: row["owner_id"])
        else { throw ServerError(.databaseFailure, message: "a stored record has an unknown entity or id") }
        self.init(
            key: RecordKey(entity: entity, id: id), serverID: row["server_id"],
            projectID: (row["project_id"] as String?).flatMap(UUID.init(hyphenatedText:)), ownerID: owner,
            sequence: row["sequence"])
    }
}

extension UUID {
    /// Lowercase text, the form every id is stored and compared in.
    var storageText: String { lowercasedText }
}

extension Sequence {
    /// The elements in the order of their ids' stored text, each text made once. A comparison that made
    /// both texts itself spent 5 of a pull's 5.5 CPU-seconds on a cursor naming 100,000 projects (perf,
    /// attack finding 6 of stop 49), and every bundle page paid it per record.
    func sortedByStorageText(_ id: (Element) -> UUID) -> [Element] {
        map { (id($0).storageText, $0) }.sorted { $0.0 < $1.0 }.map(\.1)
    }
}

extension Date {
    var milliseconds: Int64 { Int64((timeIntervalSince1970 * 1000).rounded()) }

    init(milliseconds: Int64) {
        self.init(timeIntervalSince1970: Double(milliseconds) / 1000)
    }
}

/// The schema this server serves.
private var schema: ServedSchema { .current }

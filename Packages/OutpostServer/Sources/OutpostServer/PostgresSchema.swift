import Foundation
import Logging
import OutpostMigrator
import OutpostSchema
import PostgresNIO

/// The server's schema on PostgreSQL, as ordered, additive, forward-only steps with a ledger of
/// checksums, the same rules as the SQLite side (`ServerSchema`): never edit a shipped step; append one.
///
/// The tables mirror the SQLite ones column for column (ids as lowercase text, times as epoch
/// milliseconds, fields and clocks as the wire's JSON text), so both backends store the same values.
enum PostgresSchema {
    /// The ledger table: one row per applied step, with the step's SHA-256.
    static let ledgerTable = "migrator_ledger"

    /// Every step, in version order. `MigrationStep` only supplies the number, name and checksum here;
    /// the statements are run by `migrate(on:logger:)`, one by one (separated by a line ending in `;`).
    static let steps: [MigrationStep] = [
        MigrationStep(version: 1, name: "reference server 1.0", sql: version1),
        MigrationStep(version: 2, name: "indexes for paged pulls and streamed bundles", sql: version2),
        MigrationStep(version: 3, name: "when each membership began; a server seeded once", sql: version3),
        MigrationStep(version: 4, name: "a mark for every change, to tell a restored history apart", sql: version4),
        MigrationStep(version: 5, name: "a secret of this server's for member record ids", sql: version5),
        MigrationStep(version: 6, name: "a finished upload is a change of the history", sql: version6),
        MigrationStep(version: 7, name: "a token may expire", sql: version7),
        MigrationStep(version: 8, name: "a token's last use; the admin log", sql: version8),
        MigrationStep(version: 9, name: "archived projects", sql: version9),
        MigrationStep(version: 10, name: "admin tokens", sql: version10),
        MigrationStep(version: 11, name: "what each idempotency key's change wrote", sql: version11),
        MigrationStep(version: 12, name: "a project's newest change time", sql: version12),
        MigrationStep(version: 13, name: "the bytes each project's and each creator's records hold", sql: version13),
        MigrationStep(version: 14, name: "a member's idempotency answers by time", sql: version14),
    ]

    /// Indexes a step builds without stalling writers, by the step's version. `CREATE INDEX` inside a
    /// step's transaction holds a lock that blocks every push to the table for the whole build (minutes
    /// on a large `records` table, across every instance); these are built after the step commits, with
    /// `CREATE INDEX CONCURRENTLY`, which PostgreSQL runs only outside a transaction. A step that adds an
    /// index to a table that may be large (records, applied mutations, memberships) lists it here rather
    /// than in its SQL. Steps 1 and 2 ran on empty tables.
    static let concurrentIndexes: [Int: [ConcurrentIndex]] = [
        // A bundle's `asOf`, its project's newest `updated_at`, in one index step (`PostgresBundle`).
        12: [ConcurrentIndex(name: "records_by_project_time", definition: "ON records (project_id, updated_at)")],
        // A member's idempotency answers newest first, for keeping only the newest (`PushRules.answersKeptPerUser`).
        14: [ConcurrentIndex(name: "applied_mutations_by_user_time", definition: "ON applied_mutations (user_id, applied_at)")],
    ]

    /// An index built with `CREATE INDEX CONCURRENTLY` once its step has committed.
    struct ConcurrentIndex: Sendable {
        /// The index's name, unique in the database.
        let name: String
        /// What follows the name: `ON table (columns)`, and a `WHERE` clause for a partial index.
        let definition: String
    }

    /// Any constant that other applications on the database are unlikely to use: the lock that keeps
    /// two instances starting together from migrating at once.
    static let migrationLockKey: Int64 = 0x6f75_7470_6f73_7401
    /// The lock one instance holds while it builds the indexes of `concurrentIndexes`.
    static let indexLockKey: Int64 = 0x6f75_7470_6f73_7402

    /// Brings the database to the latest version in one transaction, holding an advisory lock so
    /// concurrent starts wait for each other; refuses a database whose ledger the code cannot vouch for.
    static func migrate(
        on connection: PostgresConnection, logger: Logger, steps: [MigrationStep] = steps,
        concurrentIndexes: [Int: [ConcurrentIndex]] = concurrentIndexes
    ) async throws(ServerError) {
        try await applySteps(steps, on: connection, logger: logger)
        try await buildConcurrentIndexes(concurrentIndexes, of: steps, on: connection, logger: logger)
    }

    /// Builds, after their steps committed, the indexes of `indexes` that are missing or were left
    /// invalid by a build that stopped half-way (a killed instance, a cancelled statement): an invalid
    /// one is dropped concurrently and built again. One instance builds at a time; the others wait for
    /// it without holding a snapshot (a waiting statement would hold up the build it waits for). Pushes
    /// and pulls go on meanwhile: a concurrent build takes no lock that blocks writes, and the server
    /// serves without the index until it is valid (it is an optimization, never a constraint).
    static func buildConcurrentIndexes(
        _ indexes: [Int: [ConcurrentIndex]], of steps: [MigrationStep], on connection: PostgresConnection, logger: Logger
    ) async throws(ServerError) {
        let wanted = steps.flatMap { indexes[$0.version] ?? [] }
        guard !wanted.isEmpty else { return }
        do {
            while true {
                var locked = false
                for try await value in try await connection.query(
                    "SELECT pg_try_advisory_lock(\(indexLockKey))", logger: logger
                ).decode(Bool.self) { locked = value }
                if locked { break }
                try await Task.sleep(for: .milliseconds(200))
            }
            do {
                for index in wanted {
                    var valid: Bool?
                    for try await value in try await connection.query(
                        """
                        SELECT i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
                        WHERE c.relname = \(index.name) AND pg_table_is_visible(c.oid)
                        """, logger: logger
                    ).decode(Bool.self) { valid = value }
                    if valid == true { continue }
                    if valid == false {
                        logger.notice("rebuilding an index an interrupted build left invalid", metadata: ["index": .string(index.name)])
                        try await connection.query(PostgresQuery(unsafeSQL: "DROP INDEX CONCURRENTLY IF EXISTS \(index.name)"), logger: logger)
                    }
                    logger.notice("building an index without blocking writers", metadata: ["index": .string(index.name)])
                    try await connection.query(
                        PostgresQuery(unsafeSQL: "CREATE INDEX CONCURRENTLY \(index.name) \(index.definition)"), logger: logger)
                }
            } catch {
                _ = try? await connection.query("SELECT pg_advisory_unlock(\(indexLockKey))", logger: logger).collect()
                throw error
            }
            _ = try await connection.query("SELECT pg_advisory_unlock(\(indexLockKey))", logger: logger).collect()
        } catch let error as ServerError {
            throw error
        } catch {
            throw ServerError(.migrationFailed, message: "building an index: \(PostgresStorage.describe(error))", underlying: error)
        }
    }

    /// The ordered steps in one transaction, under the migration lock.
    private static func applySteps(_ steps: [MigrationStep], on connection: PostgresConnection, logger: Logger) async throws(ServerError) {
        do {
            try await connection.withTransaction(logger: logger) { connection in
                // Each statement of a step sees what committed before it, whatever the database's default
                // isolation: step 13 counts records after its trigger holds other instances' writes off,
                // and a snapshot taken at the lock below would miss those committed in between.
                try await connection.query("SET TRANSACTION ISOLATION LEVEL READ COMMITTED", logger: logger)
                _ = try await connection.query("SELECT pg_advisory_xact_lock(\(migrationLockKey))", logger: logger).collect()
                try await connection.query(
                    """
                    CREATE TABLE IF NOT EXISTS migrator_ledger (
                        version INTEGER PRIMARY KEY,
                        name TEXT NOT NULL,
                        checksum TEXT NOT NULL,
                        applied_at BIGINT NOT NULL
                    )
                    """, logger: logger)
                var applied: [(Int, String)] = []
                for try await (version, checksum) in try await connection.query(
                    "SELECT version, checksum FROM migrator_ledger ORDER BY version", logger: logger
                ).decode((Int32, String).self) {
                    applied.append((Int(version), checksum))
                }
                for (index, (version, checksum)) in applied.enumerated() {
                    guard version == index + 1 else {
                        throw ServerError(.migrationFailed, message: "the ledger skips from \(index) to \(version)")
                    }
                    guard version <= steps.count else {
                        throw ServerError(
                            .migrationFailed,
                            message: "the database is at version \(applied.count), newer than this server (\(steps.count))")
                    }
                    guard steps[index].checksum == checksum else {
                        throw ServerError(
                            .migrationFailed, message: "step \(version) changed since it was applied (checksum differs)")
                    }
                }
                for step in steps.dropFirst(applied.count) {
                    for statement in statements(of: step.sql ?? "") {
                        try await connection.query(PostgresQuery(unsafeSQL: statement), logger: logger)
                    }
                    try await connection.query(
                        """
                        INSERT INTO migrator_ledger (version, name, checksum, applied_at)
                        VALUES (\(Int32(step.version)), \(step.name), \(step.checksum), \(Date().milliseconds))
                        """, logger: logger)
                }
                // The app whose records the database holds, named on first use: another app's server
                // refuses it rather than serving its records under a schema they were not written in.
                var recorded: String?
                for try await value in try await connection.query(
                    "SELECT value FROM server_settings WHERE name = 'app_schema'", logger: logger
                ).decode(String.self) { recorded = value }
                var holdsRecords = false
                for try await _ in try await connection.query("SELECT 1 FROM records LIMIT 1", logger: logger).decode(Int32.self) {
                    holdsRecords = true
                }
                if let refusal = ServedSchema.refusal(recorded: recorded, holdsRecords: holdsRecords) { throw refusal }
                if recorded == nil {
                    try await connection.query(
                        "INSERT INTO server_settings (name, value) VALUES ('app_schema', \(EntityCatalog.schema.name))", logger: logger)
                }
            }
        } catch let error as PostgresTransactionError {
            if let inner = error.closureError as? ServerError { throw inner }
            throw ServerError(.migrationFailed, message: PostgresStorage.describe(error), underlying: error)
        } catch let error as ServerError {
            throw error
        } catch {
            throw ServerError(.migrationFailed, message: PostgresStorage.describe(error), underlying: error)
        }
    }

    /// The versions the ledger holds, for tests.
    static func appliedVersions(on connection: PostgresConnection, logger: Logger) async throws -> [Int] {
        var versions: [Int] = []
        for try await version in try await connection.query(
            "SELECT version FROM migrator_ledger ORDER BY version", logger: logger
        ).decode(Int32.self) {
            versions.append(Int(version))
        }
        return versions
    }

    /// A step's statements: our own SQL, one statement per line-ending `;`, no `;` inside literals.
    static func statements(of sql: String) -> [String] {
        sql.components(separatedBy: ";\n").map { $0.trimmingCharacters(in: .whitespacesAndNewlines) }
            .map { $0.hasSuffix(";") ? String($0.dropLast()) : $0 }.filter { !$0.isEmpty }
    }

    private static let version1 = """
        CREATE TABLE records (
            entity TEXT NOT NULL,
            id TEXT NOT NULL,
            server_id BIGINT,
            project_id TEXT,
            owner_id TEXT NOT NULL,
            version BIGINT NOT NULL,
            sequence BIGINT NOT NULL,
            fields TEXT NOT NULL,
            clocks TEXT NOT NULL,
            deletion TEXT,
            created_at BIGINT NOT NULL,
            updated_at BIGINT NOT NULL,
            PRIMARY KEY (entity, id)
        );
        CREATE UNIQUE INDEX records_by_sequence ON records(sequence);
        CREATE INDEX records_by_project ON records(project_id, sequence);
        CREATE UNIQUE INDEX records_by_server_id ON records(entity, server_id) WHERE server_id IS NOT NULL;
        CREATE TABLE applied_mutations (
            idempotency_key TEXT PRIMARY KEY NOT NULL,
            user_id TEXT NOT NULL,
            entity TEXT NOT NULL,
            record_id TEXT NOT NULL,
            outcome TEXT NOT NULL,
            applied_at BIGINT NOT NULL
        );
        CREATE TABLE counters (
            name TEXT PRIMARY KEY NOT NULL,
            value BIGINT NOT NULL
        );
        INSERT INTO counters (name, value) VALUES ('change_sequence', 0), ('server_id', 0);
        CREATE TABLE users (
            id TEXT PRIMARY KEY NOT NULL,
            name TEXT NOT NULL
        );
        CREATE TABLE tokens (
            token_sha256 TEXT PRIMARY KEY NOT NULL,
            user_id TEXT NOT NULL,
            created_at BIGINT NOT NULL
        );
        CREATE TABLE memberships (
            project_id TEXT NOT NULL,
            user_id TEXT NOT NULL,
            PRIMARY KEY (project_id, user_id)
        );
        CREATE INDEX memberships_by_user ON memberships(user_id);
        CREATE TABLE media_uploads (
            attachment_id TEXT PRIMARY KEY NOT NULL,
            total_bytes BIGINT NOT NULL,
            received_bytes BIGINT NOT NULL,
            sha256 TEXT NOT NULL,
            complete BOOLEAN NOT NULL DEFAULT FALSE,
            updated_at BIGINT NOT NULL
        );
        """

    /// The same indexes as the SQLite side's step 2: a project's records by entity and id (bundles), a
    /// user's unlinked opportunities in sequence order (pulls).
    private static let version2 = """
        CREATE INDEX records_by_project_entity ON records(project_id, entity, id);
        CREATE INDEX records_unlinked_by_owner ON records(owner_id, sequence) WHERE project_id IS NULL;
        """

    /// As `ServerSchema.version3`.
    private static let version3 = """
        CREATE TABLE membership_starts (
            project_id TEXT NOT NULL,
            user_id TEXT NOT NULL,
            added_at BIGINT NOT NULL,
            PRIMARY KEY (project_id, user_id)
        );
        INSERT INTO counters (name, value) SELECT 'seeded_at', 0 WHERE EXISTS (SELECT 1 FROM users);
        """

    /// As `ServerSchema.version4`. The function's body stays on one line: `statements(of:)` splits the
    /// step at line-ending semicolons.
    private static let version4 = """
        CREATE TABLE history_marks (
            sequence BIGINT PRIMARY KEY,
            mark TEXT NOT NULL
        );
        INSERT INTO history_marks (sequence, mark)
            SELECT value, substr(replace(gen_random_uuid()::text, '-', ''), 1, 16) FROM counters
            WHERE name = 'change_sequence' AND value > 0;
        CREATE FUNCTION outpost_mark_history() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN INSERT INTO history_marks (sequence, mark) VALUES (NEW.value, substr(replace(gen_random_uuid()::text, '-', ''), 1, 16)) ON CONFLICT (sequence) DO UPDATE SET mark = EXCLUDED.mark; RETURN NEW; END $$;
        CREATE TRIGGER history_marks_follow_changes AFTER UPDATE ON counters FOR EACH ROW
            WHEN (NEW.name = 'change_sequence' AND NEW.value > OLD.value) EXECUTE FUNCTION outpost_mark_history();
        """

    /// As `ServerSchema.version5`.
    private static let version5 = """
        CREATE TABLE server_settings (
            name TEXT PRIMARY KEY,
            value TEXT NOT NULL
        );
        INSERT INTO server_settings (name, value)
            SELECT 'member_id_salt', replace(gen_random_uuid()::text, '-', '') WHERE NOT EXISTS (SELECT 1 FROM users);
        """

    /// As `ServerSchema.version6`.
    private static let version6 = """
        ALTER TABLE media_uploads ADD COLUMN completed_sequence BIGINT;
        """

    /// When a token stops working (epoch milliseconds); NULL for one that does not expire.
    private static let version7 = """
        ALTER TABLE tokens ADD COLUMN expires_at BIGINT;
        """

    /// As the SQLite side's step 8: a token's last use, and the append-only admin log.
    private static let version8 = """
        ALTER TABLE tokens ADD COLUMN last_used_at BIGINT;
        CREATE TABLE admin_log (
            seq BIGSERIAL PRIMARY KEY,
            at BIGINT NOT NULL,
            actor TEXT NOT NULL,
            action TEXT NOT NULL,
            details TEXT NOT NULL
        );
        """

    /// As `ServerSchema.version9`: the projects an operator archived.
    private static let version9 = """
        CREATE TABLE archived_projects (
            project_id TEXT PRIMARY KEY,
            archived_at BIGINT NOT NULL
        );
        """

    /// As `ServerSchema.version10`: which tokens are the admin API's.
    private static let version10 = """
        ALTER TABLE tokens ADD COLUMN admin BOOLEAN NOT NULL DEFAULT FALSE;
        """

    /// As the SQLite step 11: what each key's change wrote, as its digest.
    private static let version11 = """
        ALTER TABLE applied_mutations ADD COLUMN change_digest TEXT;
        """

    /// Its index is built after the step commits (`concurrentIndexes`); the step itself only says so
    /// where an operator reading the schema looks.
    private static let version12 = """
        COMMENT ON COLUMN records.updated_at IS 'epoch ms of the change; records_by_project_time (step 12) indexes it by project for a bundle''s asOf';
        """

    /// As the SQLite step 13: who last wrote each record from a device, and the bytes each project's
    /// and each writer's records hold, kept by a trigger (its function on one line: steps are split at a
    /// semicolon that ends a line). The trigger comes before the counting: its lock on `records` holds
    /// off another instance's writes from then to the step's commit, and the count, in a transaction of
    /// READ COMMITTED (`applySteps`), sees every write committed before it, so none is missed or counted
    /// twice.
    private static let version13 = """
        ALTER TABLE records ADD COLUMN written_by TEXT;
        CREATE TABLE record_usage (
            holder TEXT NOT NULL,
            id TEXT NOT NULL,
            bytes BIGINT NOT NULL,
            PRIMARY KEY (holder, id)
        );
        CREATE FUNCTION outpost_count_record_bytes() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN IF TG_OP <> 'INSERT' THEN UPDATE record_usage SET bytes = bytes - (octet_length(OLD.fields)::bigint + octet_length(OLD.clocks)::bigint) WHERE (holder = 'project' AND id = OLD.project_id) OR (holder = 'writer' AND id = coalesce(OLD.written_by, OLD.owner_id)); END IF; IF TG_OP <> 'DELETE' THEN IF NEW.project_id IS NOT NULL THEN INSERT INTO record_usage (holder, id, bytes) VALUES ('project', NEW.project_id, octet_length(NEW.fields)::bigint + octet_length(NEW.clocks)::bigint) ON CONFLICT (holder, id) DO UPDATE SET bytes = record_usage.bytes + EXCLUDED.bytes; END IF; INSERT INTO record_usage (holder, id, bytes) VALUES ('writer', coalesce(NEW.written_by, NEW.owner_id), octet_length(NEW.fields)::bigint + octet_length(NEW.clocks)::bigint) ON CONFLICT (holder, id) DO UPDATE SET bytes = record_usage.bytes + EXCLUDED.bytes; END IF; RETURN NULL; END $$;
        CREATE TRIGGER record_usage_follows_records AFTER INSERT OR DELETE OR UPDATE OF fields, clocks, project_id, owner_id, written_by ON records
            FOR EACH ROW EXECUTE FUNCTION outpost_count_record_bytes();
        INSERT INTO record_usage (holder, id, bytes)
            SELECT 'project', project_id, sum(octet_length(fields)::bigint + octet_length(clocks)::bigint)
            FROM records WHERE project_id IS NOT NULL GROUP BY project_id;
        INSERT INTO record_usage (holder, id, bytes)
            SELECT 'writer', coalesce(written_by, owner_id), sum(octet_length(fields)::bigint + octet_length(clocks)::bigint)
            FROM records GROUP BY coalesce(written_by, owner_id);
        """

    /// As the SQLite step 14; its index is built after the step commits (`concurrentIndexes`).
    private static let version14 = """
        COMMENT ON COLUMN applied_mutations.applied_at IS 'epoch ms; applied_mutations_by_user_time (step 14) keeps a member''s newest answers';
        """
}

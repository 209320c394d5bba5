import OutpostMigrator
import OutpostSchema

/// An app's local database, as the app declares it: its schema, and the migration steps that create
/// and change its entity tables. The toolkit's own tables (queue, audit chain, field clocks, cursors,
/// conflicts, server-id map, media uploads, change journal) are not the app's to write: the toolkit's
/// steps make and upgrade them (`ToolkitSchema`), each history in its own ledger.
///
/// ```swift
/// let app = LocalApp(schema: jobsSchema, steps: [
///     MigrationStep(version: 1, name: "jobs and notes", sql:
///         LocalApp.syncedTable("jobs", columns: "site_id TEXT NOT NULL, title TEXT NOT NULL") + ...),
/// ])
/// let store = try LocalStore.open(at: path, app: app)
/// ```
public struct LocalApp: Sendable {
    /// The app's schema; opening a store installs it (`EntityCatalog.install`).
    public let schema: AppSchema
    /// The app's own steps, v1 to its latest: additive, checked by `Migrator` as any history is.
    public let steps: [MigrationStep]

    /// Declares an app's local database.
    public init(schema: AppSchema, steps: [MigrationStep]) {
        self.schema = schema
        self.steps = steps
    }

    /// The migrator of the app's history: its entity tables are the synced ones.
    var migrator: Migrator {
        Migrator(steps: steps, syncedTables: Set(schema.entities.map(\.table)), ledger: Migrator.ledgerTable)
    }

    /// The column (`TEXT`, no default) an app's step may add to an entity table for the store to keep
    /// there the clocks of a record that has one clock for every field, the server's the same (a record
    /// a pull stored whole over nothing held, or one this device made once the server took it), instead
    /// of in a `field_clocks` row of its own: that second row was a fifth of a pulled record's apply and
    /// some 72 bytes a record (issue 41). A `field_clocks` row of the record, which a change to other
    /// clocks writes, stands over it. A table without the column keeps every record's clocks in
    /// `field_clocks`; no field may be named for it (`syncClocks`). Added as any column is:
    /// `ALTER TABLE jobs ADD COLUMN sync_clocks TEXT`. A later step that adds a field to such a table
    /// must first move the clocks of its rows into `field_clocks` (Workspace.md, "How to add a migration
    /// step"): the clock stands for the fields the entity had when it was written.
    public static let rowClocksColumn = "sync_clocks"

    /// The SQL that creates an entity table: the sync columns every entity table starts with (id,
    /// server id, version, times, deletion, sync status, orphan flag), then `columns`, the app's fields
    /// as snake_case columns of their kinds' types. `WITHOUT ROWID`: rows are found by their id.
    public static func syncedTable(_ name: String, columns: String) -> String {
        """
        CREATE TABLE \(name) (
            id TEXT PRIMARY KEY NOT NULL,
            server_id TEXT,
            version INTEGER NOT NULL DEFAULT 0,
            created_at INTEGER NOT NULL,
            updated_at INTEGER NOT NULL,
            deleted_at INTEGER,
            sync_status TEXT NOT NULL DEFAULT 'pending',
            \(columns),
            is_orphaned INTEGER NOT NULL DEFAULT 0
        ) WITHOUT ROWID;
        """
    }
}

/// The toolkit's own history of its sync tables, apart from any app's. Its first step creates them as
/// the field-service history v1…v14 left them, and adopts them where that history already made them
/// (`IF NOT EXISTS`): a database from before apps declared their schemas upgrades with nothing lost.
public enum ToolkitSchema {
    /// The ledger of the toolkit's steps.
    public static let ledger = "outpost_ledger"
    /// The table naming the app a database belongs to (one row), written before any step runs.
    static let ownerTable = "outpost_app"
    /// Every bookkeeping table of a local database: left out of its schema's text.
    public static let bookkeepingTables: Set<String> = [Migrator.ledgerTable, ledger, ownerTable]

    /// The toolkit's steps.
    public static let steps: [MigrationStep] = [
        MigrationStep(version: 1, name: "toolkit 1: sync tables (adopted where an app's history made them)", sql: version1),
        MigrationStep(version: 2, name: "toolkit 2: versions an import wrote, until the server confirms them", sql: ImportedVersions.table),
        MigrationStep(version: 3, name: "toolkit 3: finished mutations leave the queue, their keys kept", sql: version3),
        MigrationStep(version: 4, name: "toolkit 4: the audit chain's head, kept beside it; short field clocks", sql: auditHeadSQL),
        MigrationStep(version: 5, name: "toolkit 5: finished mutations' keys in 16 bytes; compact field clocks", sql: version5),
        MigrationStep(version: 6, name: "toolkit 6: audit entries name their record in 16 bytes", sql: version6),
        MigrationStep(version: 7, name: "toolkit 7: queued changes whose answer went unheard", sql: version7),
        MigrationStep(version: 8, name: "toolkit 8: conflicts say what lost: a value, a delete or a restore", sql: version8),
        MigrationStep(version: 9, name: "toolkit 9: the last queued change from before the audit chain", sql: version9),
    ]

    /// The migrator of the toolkit's history.
    public static let migrator = Migrator(steps: steps, ledger: ledger)

    static let version1 = """
        CREATE TABLE IF NOT EXISTS sync_state ( key TEXT PRIMARY KEY NOT NULL, value TEXT NOT NULL );
        CREATE TABLE IF NOT EXISTS sync_cursors ( stream TEXT PRIMARY KEY NOT NULL, cursor TEXT NOT NULL, updated_at INTEGER NOT NULL ) WITHOUT ROWID;
        CREATE TABLE IF NOT EXISTS mutation_queue (
            seq INTEGER PRIMARY KEY AUTOINCREMENT, idempotency_key TEXT NOT NULL UNIQUE, entity TEXT NOT NULL,
            record_id TEXT NOT NULL, operation TEXT NOT NULL, payload TEXT NOT NULL, status TEXT NOT NULL DEFAULT 'pending',
            attempts INTEGER NOT NULL DEFAULT 0, created_at INTEGER NOT NULL, sync_class TEXT NOT NULL DEFAULT 'structured',
            base_version INTEGER NOT NULL DEFAULT 0, depends_on TEXT, next_attempt_at INTEGER NOT NULL DEFAULT 0,
            last_error TEXT, audit_seq INTEGER, sent INTEGER NOT NULL DEFAULT 0, claimed_by TEXT,
            claim_expires_at INTEGER NOT NULL DEFAULT 0
        );
        CREATE INDEX IF NOT EXISTS mutation_queue_by_record ON mutation_queue(record_id, status);
        CREATE INDEX IF NOT EXISTS mutation_queue_by_status_next ON mutation_queue(status, next_attempt_at);
        CREATE TABLE IF NOT EXISTS audit_log (
            seq INTEGER PRIMARY KEY, at INTEGER NOT NULL, entity TEXT NOT NULL, record_id TEXT NOT NULL,
            operation TEXT NOT NULL, payload BLOB NOT NULL, previous_hash BLOB NOT NULL, hash BLOB NOT NULL
        );
        CREATE TABLE IF NOT EXISTS change_journal ( seq INTEGER PRIMARY KEY AUTOINCREMENT, origin TEXT NOT NULL, changes TEXT NOT NULL );
        CREATE TABLE IF NOT EXISTS conflicts (
            id INTEGER PRIMARY KEY AUTOINCREMENT, entity TEXT NOT NULL, record_id TEXT NOT NULL, field TEXT,
            strategy TEXT NOT NULL, local_value TEXT, remote_value TEXT, local_clock TEXT, remote_clock TEXT,
            status TEXT NOT NULL DEFAULT 'open', resolution TEXT, created_at INTEGER NOT NULL, resolved_at INTEGER,
            losing_side TEXT CHECK (losing_side IN ('client', 'server'))
        );
        CREATE INDEX IF NOT EXISTS conflicts_by_status ON conflicts(status, entity, record_id);
        CREATE TABLE IF NOT EXISTS field_clocks (
            entity TEXT NOT NULL, record_id TEXT NOT NULL, clocks TEXT NOT NULL, PRIMARY KEY (entity, record_id)
        ) WITHOUT ROWID;
        CREATE TABLE IF NOT EXISTS known_deletions (
            entity TEXT NOT NULL, record_id TEXT NOT NULL, version INTEGER NOT NULL, deleted_at INTEGER NOT NULL,
            PRIMARY KEY (entity, record_id)
        ) WITHOUT ROWID;
        CREATE TABLE IF NOT EXISTS media_uploads (
            attachment_id TEXT PRIMARY KEY NOT NULL, file_name TEXT NOT NULL, byte_size INTEGER NOT NULL,
            sha256 TEXT NOT NULL, uploaded_bytes INTEGER NOT NULL DEFAULT 0, status TEXT NOT NULL DEFAULT 'pending',
            attempts INTEGER NOT NULL DEFAULT 0, last_error TEXT, created_at INTEGER NOT NULL
        ) WITHOUT ROWID;
        CREATE INDEX IF NOT EXISTS media_uploads_by_status ON media_uploads(status, created_at);
        CREATE TABLE IF NOT EXISTS server_id_map (
            entity TEXT NOT NULL, client_id TEXT NOT NULL, server_id TEXT NOT NULL, mapped_at INTEGER NOT NULL,
            PRIMARY KEY (entity, client_id)
        ) WITHOUT ROWID;
        CREATE INDEX IF NOT EXISTS server_id_map_by_server_id ON server_id_map(entity, server_id);
        """

    /// A mutation the server acknowledged (or a merge left nothing to send) stayed in the queue as
    /// `done` with its whole payload, for good: 420 of the 1,431 bytes a synced issue cost the device
    /// (issue 41). Now it leaves the queue, and only its idempotency key stays
    /// (`LocalStore.finishedMutationKeys()`, about 40 bytes): a late answer to a request already settled
    /// is still told from a stranger's, and a check of the server against the device still knows every
    /// key the device finished. Additive, as every step: the rows an older build left `done` move out
    /// when the store opens (`MutationQueue.finishLeftovers`), their writes kept in the audit chain.
    static let version3 = """
        CREATE TABLE finished_mutations ( idempotency_key TEXT PRIMARY KEY NOT NULL ) WITHOUT ROWID;
        """

    /// The keys of finished mutations as their 16 bytes: as text in `finished_mutations`, a key took 47
    /// of the 610 bytes a synced issue cost the device (issue 41), 25 more than its bytes do. The keys a
    /// file already holds stay where they are and are read from both tables (`MutationQueue.isFinished`),
    /// since a step only adds. Builds that know this step also write the compact form of `field_clocks`
    /// rows (`#` and the clock's bytes), which older builds, refusing a file past their last step, never meet.
    static let version5 = """
        CREATE TABLE finished_keys ( key BLOB PRIMARY KEY NOT NULL ) WITHOUT ROWID;
        """

    /// Audit entries name their record by its 16 bytes (`UUID.storageBytes`), not its 36 characters: 20
    /// of the ~510 bytes a synced issue costs the device once its file is packed (issue 41). The hash
    /// still covers the id's text, so entries of both forms verify alike and older entries stay as they
    /// are. The step changes no table: it marks the file as one builds before it, which read the
    /// column as text only, refuse.
    static let version6 = "SELECT 1;"

    /// Marks a queued change a request carried whose answer never came (`MutationQueue.mark(_:unheard:in:)`):
    /// the server may have taken it, and once the server keeps its answer no longer (a member's newest
    /// 20,000), nothing tells that from a change it never got. Merged as concurrent with a teammate's
    /// edit made on top of it, such a change won under client wins and was sent again over that edit,
    /// lost without a trace (attack 121, F1).
    static let version7 = """
        ALTER TABLE mutation_queue ADD COLUMN unheard INTEGER NOT NULL DEFAULT 0;
        """

    /// What a conflict lost (`OpenConflict.Kind`): a restore that a delete undid, with no value of its
    /// user's to offer, went unlisted under every strategy but append only (which listed each field it
    /// only carried), since a conflict without a field meant a delete that lost. Rows from before this
    /// step have none: a field names a value, no field a delete.
    static let version8 = """
        ALTER TABLE conflicts ADD COLUMN kind TEXT CHECK (kind IN ('value', 'delete', 'restore'));
        """

    /// The last queued change from before the file had an audit chain (`AuditTrail.queuedBeforeChainKey`):
    /// such a change names no entry, and `verifyAudit` names every later one that names none, a change
    /// written into the queue from outside, which the next sync sent as its user's (attack 134, F6).
    /// Kept if it is there: run again after its ledger row went, it would take in rows added since.
    static let version9 = """
        INSERT OR IGNORE INTO sync_state (key, value) VALUES ('\(AuditTrail.queuedBeforeChainKey)',
            (SELECT coalesce(max(seq), 0) FROM mutation_queue WHERE audit_seq IS NULL));
        """

    /// The audit chain's head (`AuditTrail.headKey`): its newest entry's sequence and hash, which each
    /// append rewrites in its transaction. Set here from the chain an older build wrote (the genesis,
    /// sequence 0, when it has none), so a removal from the end is named from this step on. Builds that
    /// know this step also write the short form of `field_clocks` rows (`@` and a clock), which older
    /// builds, refusing a file past their last step, never meet.
    ///
    /// Not for a chain a build past this step wrote (an entry with an empty previous hash, or a primed
    /// one): run again
    /// because its ledger row was removed, it would anchor a chain cut short where it now ends (attack
    /// 59, finding 8). That chain keeps the head it has, or none, which the walk names.
    static let auditHeadSQL = """
        INSERT OR REPLACE INTO sync_state (key, value) SELECT '\(AuditTrail.headKey)', coalesce(
            (SELECT seq || ':' || lower(hex(hash)) FROM audit_log ORDER BY seq DESC LIMIT 1),
            '0:' || lower(hex(zeroblob(32))))
        WHERE NOT EXISTS (SELECT 1 FROM audit_log WHERE length(previous_hash) = 0 OR substr(payload, 1, 1) = X'00');
        """
}

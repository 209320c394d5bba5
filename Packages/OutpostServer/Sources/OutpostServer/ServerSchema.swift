import OutpostMigrator

/// The server's own SQLite schema, as `OutpostMigrator` steps: additive and forward-only like the
/// device's, so a server upgraded in place keeps its data. Never edit a shipped step; append one.
///
/// One `records` table holds every entity (fields and clocks as JSON, in the wire's one-key form),
/// so no SQL identifier ever comes from a request: the entity is a value, not a table name.
enum ServerSchema {
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

    static let migrator = Migrator(steps: steps)

    private static let version1 = """
        CREATE TABLE records (
            entity TEXT NOT NULL,
            id TEXT NOT NULL,
            server_id INTEGER,
            project_id TEXT,
            owner_id TEXT NOT NULL,
            version INTEGER NOT NULL,
            sequence INTEGER NOT NULL,
            fields TEXT NOT NULL,
            clocks TEXT NOT NULL,
            deletion TEXT,
            created_at INTEGER NOT NULL,
            updated_at INTEGER NOT NULL,
            PRIMARY KEY (entity, id)
        ) WITHOUT ROWID;
        CREATE UNIQUE INDEX records_by_sequence ON records(sequence);
        CREATE INDEX records_by_project ON records(project_id, sequence);
        CREATE UNIQUE INDEX records_by_server_id ON records(entity, server_id) WHERE server_id IS NOT NULL;
        CREATE TABLE applied_mutations (
            idempotency_key TEXT PRIMARY KEY NOT NULL,
            user_id TEXT NOT NULL,
            entity TEXT NOT NULL,
            record_id TEXT NOT NULL,
            outcome TEXT NOT NULL,
            applied_at INTEGER NOT NULL
        ) WITHOUT ROWID;
        CREATE TABLE counters (
            name TEXT PRIMARY KEY NOT NULL,
            value INTEGER NOT NULL
        ) WITHOUT ROWID;
        INSERT INTO counters (name, value) VALUES ('change_sequence', 0), ('server_id', 0);
        CREATE TABLE users (
            id TEXT PRIMARY KEY NOT NULL,
            name TEXT NOT NULL
        ) WITHOUT ROWID;
        CREATE TABLE tokens (
            token_sha256 TEXT PRIMARY KEY NOT NULL,
            user_id TEXT NOT NULL,
            created_at INTEGER NOT NULL
        ) WITHOUT ROWID;
        CREATE TABLE memberships (
            project_id TEXT NOT NULL,
            user_id TEXT NOT NULL,
            PRIMARY KEY (project_id, user_id)
        ) WITHOUT ROWID;
        CREATE INDEX memberships_by_user ON memberships(user_id);
        CREATE TABLE media_uploads (
            attachment_id TEXT PRIMARY KEY NOT NULL,
            total_bytes INTEGER NOT NULL,
            received_bytes INTEGER NOT NULL,
            sha256 TEXT NOT NULL,
            complete INTEGER NOT NULL DEFAULT 0,
            updated_at INTEGER NOT NULL
        ) WITHOUT ROWID;
        """

    /// A bundle walks a project's records entity by entity in id order (parents first, a page at a
    /// time); a pull reads a user's unlinked opportunities in sequence order without scanning the rest.
    private static let version2 = """
        CREATE INDEX records_by_project_entity ON records(project_id, entity, id);
        CREATE INDEX records_unlinked_by_owner ON records(owner_id, sequence) WHERE project_id IS NULL;
        """

    /// When a membership began (`membership_starts`, epoch ms; none for those from before, read as 0): a
    /// record deleted earlier is one the member never could read, and its last values are not theirs. A
    /// table of its own: the migrator refuses a column added to `memberships`, whose key is a table
    /// constraint the new column would follow. `seeded_at` in `counters` once a seed
    /// loaded: a seed applies on the first start only, so a restart does not undo removals and
    /// revocations (a server seeded before this step counts as seeded once it has users).
    static let version3 = """
        CREATE TABLE membership_starts (
            project_id TEXT NOT NULL,
            user_id TEXT NOT NULL,
            added_at INTEGER NOT NULL,
            PRIMARY KEY (project_id, user_id)
        ) WITHOUT ROWID;
        INSERT INTO counters (name, value) SELECT 'seeded_at', 0 WHERE EXISTS (SELECT 1 FROM users);
        """

    /// A random mark for every value the change sequence takes (`history_marks`), written by a trigger
    /// so no write path can forget it: a device's checkpoint names a sequence and its mark, and a
    /// server restored from a backup taken before that change no longer holds the pair (the sequence is
    /// past its newest, or a new change took the number with another mark). One row per commit, about
    /// 30 bytes; never pruned, since an old device's checkpoint must still be told apart.
    static let version4 = """
        CREATE TABLE history_marks (
            sequence INTEGER PRIMARY KEY NOT NULL,
            mark TEXT NOT NULL
        );
        INSERT INTO history_marks (sequence, mark)
            SELECT value, lower(hex(randomblob(8))) FROM counters WHERE name = 'change_sequence' AND value > 0;
        CREATE TRIGGER history_marks_follow_changes AFTER UPDATE OF value ON counters
        WHEN NEW.name = 'change_sequence' AND NEW.value > OLD.value
        BEGIN
            INSERT OR REPLACE INTO history_marks (sequence, mark) VALUES (NEW.value, lower(hex(randomblob(8))));
        END;
        """

    /// This server's salt for member record ids (`Roles.memberRecordID`), made with a database that has
    /// no users yet; one that has them keeps the ids it gave (no salt).
    static let version5 = """
        CREATE TABLE server_settings (
            name TEXT PRIMARY KEY NOT NULL,
            value TEXT NOT NULL
        ) WITHOUT ROWID;
        INSERT INTO server_settings (name, value)
            SELECT 'member_id_salt', lower(hex(randomblob(16))) WHERE NOT EXISTS (SELECT 1 FROM users);
        """

    /// The change sequence a finished upload took (`setMediaUpload`): a file a server restored from a
    /// backup taken before it lacks must be told apart by the uploading device's checkpoint, and no
    /// record changes when an upload ends. Uploads finished before this step have none.
    static let version6 = """
        ALTER TABLE media_uploads ADD COLUMN completed_sequence INTEGER;
        """

    /// When a token stops working (epoch milliseconds); NULL for one that does not expire.
    static let version7 = """
        ALTER TABLE tokens ADD COLUMN expires_at INTEGER;
        """

    /// When each token was last used (noted at most once a minute), and the append-only log of what
    /// operators did: who, what, when. `seq` is the rowid: nothing deletes an entry, so no number is
    /// reused without AUTOINCREMENT's extra table.
    static let version8 = """
        ALTER TABLE tokens ADD COLUMN last_used_at INTEGER;
        CREATE TABLE admin_log (
            seq INTEGER PRIMARY KEY,
            at INTEGER NOT NULL,
            actor TEXT NOT NULL,
            action TEXT NOT NULL,
            details TEXT NOT NULL
        );
        """

    /// The projects an operator archived (`SyncServer.archiveProject`): they take no more changes, and
    /// their members still pull them.
    static let version9 = """
        CREATE TABLE archived_projects (
            project_id TEXT PRIMARY KEY,
            archived_at INTEGER NOT NULL
        );
        """

    /// Which tokens are the admin API's (`SyncServer.issueToken(admin:)`): an admin token reaches only
    /// `/admin` routes and a member's token only the sync routes, so a phone's token never administers
    /// the server and an operator's never syncs. Every earlier token stays a member's.
    static let version10 = """
        ALTER TABLE tokens ADD COLUMN admin INTEGER NOT NULL DEFAULT 0;
        """

    /// A digest of what each key's change wrote (`ChangeDigest`), so the key sent again with another
    /// change of its record is refused rather than answered as the first one's duplicate. A key kept
    /// before has none, and is answered as before.
    static let version11 = """
        ALTER TABLE applied_mutations ADD COLUMN change_digest TEXT;
        """

    /// A bundle's `asOf` is its project's newest `updated_at`, read before its first byte goes out:
    /// without an index that read every row of the project (44 ms for 50,000 records, 71 ms for a cold
    /// file, `sqlite3 .timer`), with it one index step. One more index entry per pushed record.
    static let version12 = """
        CREATE INDEX records_by_project_time ON records(project_id, updated_at);
        """

    /// Who last wrote each record from a device (`written_by`, the pushing member; NULL for the office's
    /// writes and every row from before this step, which count for their creator, `owner_id`), and the
    /// bytes of fields and clocks the records of each project (`holder` 'project') and of each writer
    /// (`holder` 'writer') hold, for the records quotas (`ServerConfiguration.maximumRecordBytesPerProject`).
    /// A record's bytes count for whoever wrote it last: counted for its creator, one member's edits of
    /// another's records filled the other's quota and blocked them in projects the first was not in
    /// (attack 119, F2). Kept by triggers, so no write path (a push, an operator's edit, a membership
    /// change, a move) can forget it; a deleted record keeps its last values, so it keeps its bytes. A
    /// row with `INSERT OR REPLACE` would delete the old row without its trigger: records are written by
    /// upsert (`StoredRecord.save(in:)`). Triggers first, then the counting of what is held, as on
    /// PostgreSQL (`PostgresSchema.version13`).
    static let version13 = """
        ALTER TABLE records ADD COLUMN written_by TEXT;
        CREATE TABLE record_usage (
            holder TEXT NOT NULL,
            id TEXT NOT NULL,
            bytes INTEGER NOT NULL,
            PRIMARY KEY (holder, id)
        ) WITHOUT ROWID;
        CREATE TRIGGER record_usage_on_insert AFTER INSERT ON records
        BEGIN
            INSERT INTO record_usage (holder, id, bytes)
                SELECT 'project', NEW.project_id, length(CAST(NEW.fields AS BLOB)) + length(CAST(NEW.clocks AS BLOB))
                WHERE NEW.project_id IS NOT NULL
                ON CONFLICT (holder, id) DO UPDATE SET bytes = bytes + excluded.bytes;
            INSERT INTO record_usage (holder, id, bytes)
                SELECT 'writer', coalesce(NEW.written_by, NEW.owner_id), length(CAST(NEW.fields AS BLOB)) + length(CAST(NEW.clocks AS BLOB))
                WHERE true
                ON CONFLICT (holder, id) DO UPDATE SET bytes = bytes + excluded.bytes;
        END;
        CREATE TRIGGER record_usage_on_update AFTER UPDATE OF fields, clocks, project_id, owner_id, written_by ON records
        BEGIN
            UPDATE record_usage SET bytes = bytes - (length(CAST(OLD.fields AS BLOB)) + length(CAST(OLD.clocks AS BLOB)))
                WHERE (holder = 'project' AND id = OLD.project_id) OR (holder = 'writer' AND id = coalesce(OLD.written_by, OLD.owner_id));
            INSERT INTO record_usage (holder, id, bytes)
                SELECT 'project', NEW.project_id, length(CAST(NEW.fields AS BLOB)) + length(CAST(NEW.clocks AS BLOB))
                WHERE NEW.project_id IS NOT NULL
                ON CONFLICT (holder, id) DO UPDATE SET bytes = bytes + excluded.bytes;
            INSERT INTO record_usage (holder, id, bytes)
                SELECT 'writer', coalesce(NEW.written_by, NEW.owner_id), length(CAST(NEW.fields AS BLOB)) + length(CAST(NEW.clocks AS BLOB))
                WHERE true
                ON CONFLICT (holder, id) DO UPDATE SET bytes = bytes + excluded.bytes;
        END;
        CREATE TRIGGER record_usage_on_delete AFTER DELETE ON records
        BEGIN
            UPDATE record_usage SET bytes = bytes - (length(CAST(OLD.fields AS BLOB)) + length(CAST(OLD.clocks AS BLOB)))
                WHERE (holder = 'project' AND id = OLD.project_id) OR (holder = 'writer' AND id = coalesce(OLD.written_by, OLD.owner_id));
        END;
        INSERT INTO record_usage (holder, id, bytes)
            SELECT 'project', project_id, sum(length(CAST(fields AS BLOB)) + length(CAST(clocks AS BLOB)))
            FROM records WHERE project_id IS NOT NULL GROUP BY project_id;
        INSERT INTO record_usage (holder, id, bytes)
            SELECT 'writer', coalesce(written_by, owner_id), sum(length(CAST(fields AS BLOB)) + length(CAST(clocks AS BLOB)))
            FROM records WHERE true GROUP BY coalesce(written_by, owner_id);
        """

    /// A member's idempotency answers newest first, so a push keeps only the newest
    /// (`PushRules.answersKeptPerUser`): kept for ever, one crew token's pushes of 500 edits that add no
    /// bytes grew a database by 85 MB a minute, 214 bytes an edit, past every records quota (attack 119, F1).
    static let version14 = """
        CREATE INDEX applied_mutations_by_user_time ON applied_mutations(user_id, applied_at);
        """
}

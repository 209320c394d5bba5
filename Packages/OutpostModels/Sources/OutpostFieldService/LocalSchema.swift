import OutpostMigrator
import OutpostModels
import OutpostSchema

/// The local database's history, one step per released version. Shipped steps are frozen (their
/// checksums are in `schemas/local/steps.txt`, their resulting schemas in `schemas/local/vN.sql`);
/// a change is always a new step. Entity tables have no foreign keys on purpose: a record whose
/// parent is missing is kept and flagged orphaned, never refused (see the package README).
public enum LocalSchema {
    /// The migrator for the local database; entity tables are the synced tables.
    public static let migrator = Migrator(steps: steps, syncedTables: Set(EntityCatalog.fieldService.entities.map(\.table)))

    /// The version a new or upgraded database ends at.
    public static var latestVersion: Int { migrator.latestVersion }

    /// Every step, v1 to the latest.
    public static let steps: [MigrationStep] = [
        MigrationStep(version: 1, name: "field app 1.0: time tracking, daily logs, issues", sql: version1),
        MigrationStep(version: 2, name: "1.1: assets with QR tags, photos, reference documents", sql: version2),
        MigrationStep(version: 3, name: "2.0: estimates, crew size on daily logs", sql: version3),
        MigrationStep(version: 4, name: "2.1: server ids, cursors, conflicts, field clocks, orphans, issue details", sql: version4),
        MigrationStep(version: 5, name: "2.2: audit trail and list indexes", sql: version5),
        MigrationStep(version: 6, name: "2.3: queue lookups by record", sql: version6),
        MigrationStep(version: 7, name: "2.4: remember which mutations were ever sent", sql: version7),
        MigrationStep(version: 8, name: "2.5: resumable media uploads", sql: version8),
        MigrationStep(
            version: 9, name: "2.6: drop indexes a longer index covers", sql: version9,
            droppingRedundantIndexes: ["issues_by_project", "time_entries_by_project", "mutation_queue_by_status"]),
        MigrationStep(
            version: 10, name: "2.7: a project's issue list read from one covering index", sql: version10,
            droppingRedundantIndexes: ["issues_by_project_status"]),
        MigrationStep(version: 11, name: "2.8: conflicts record which side lost", sql: version11),
        MigrationStep(
            version: 12, name: "2.9: a project's issue list in creation order from its index", sql: version12,
            droppingRedundantIndexes: ["issues_listing"]),
        MigrationStep(
            version: 13, name: "3.0: a mutation's claim names its owner and expires; a journal of changes for other processes",
            sql: version13),
        MigrationStep(version: 14, name: "3.1: deletes of records this device never held", sql: version14),
        MigrationStep(
            version: 15, name: "3.2: the issue list's index holds its keys, not a second copy of every row", sql: version15,
            droppingRedundantIndexes: ["issues_in_list_order"]),
        MigrationStep(version: 16, name: "3.3: an index on every parent column", sql: version16),
        MigrationStep(version: 17, name: "3.4: a record pulled whole keeps its clock in its row", sql: version17),
    ]

    /// The bookkeeping columns every entity table starts with. Instants are integer milliseconds since
    /// 1970 (compact, and they sort); ids are lowercase UUID text.
    /// The entity table as the field-service history's shipped steps wrote it (before v4's orphan flag).
    /// Frozen with those steps: `LocalApp.syncedTable` is the template for new steps.
    static func entityTable(_ name: String, _ columns: String) -> String {
        """
        CREATE TABLE \(name) (
            id TEXT PRIMARY KEY NOT NULL,
            server_id TEXT,
            version INTEGER NOT NULL DEFAULT 0,
            created_at INTEGER NOT NULL,
            updated_at INTEGER NOT NULL,
            deleted_at INTEGER,
            sync_status TEXT NOT NULL DEFAULT 'pending',
            \(columns)
        ) WITHOUT ROWID;
        """
    }

    static let version1 = [
        entityTable("projects", """
            name TEXT NOT NULL,
                number TEXT,
                address TEXT NOT NULL DEFAULT '',
                status TEXT NOT NULL DEFAULT 'planned'
            """),
        entityTable("members", """
            project_id TEXT NOT NULL,
                user_id TEXT NOT NULL,
                name TEXT NOT NULL,
                email TEXT NOT NULL DEFAULT '',
                role TEXT NOT NULL
            """),
        entityTable("time_entries", """
            project_id TEXT NOT NULL,
                member_id TEXT NOT NULL,
                kind TEXT NOT NULL,
                recorded_at INTEGER NOT NULL,
                clock_in_id TEXT,
                latitude REAL,
                longitude REAL,
                note TEXT NOT NULL DEFAULT ''
            """),
        entityTable("daily_logs", """
            project_id TEXT NOT NULL,
                author_id TEXT NOT NULL,
                day TEXT NOT NULL,
                notes TEXT NOT NULL DEFAULT '',
                weather TEXT NOT NULL DEFAULT '',
                crew TEXT NOT NULL DEFAULT '',
                hours REAL NOT NULL DEFAULT 0
            """),
        entityTable("issues", """
            project_id TEXT NOT NULL,
                title TEXT NOT NULL,
                description TEXT NOT NULL DEFAULT '',
                status TEXT NOT NULL DEFAULT 'open',
                priority TEXT NOT NULL DEFAULT 'medium',
                assignee_id TEXT,
                latitude REAL,
                longitude REAL
            """),
        entityTable("comments", """
            issue_id TEXT NOT NULL,
                author_id TEXT NOT NULL,
                body TEXT NOT NULL
            """),
        """
        CREATE TABLE mutation_queue (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            idempotency_key TEXT NOT NULL UNIQUE,
            entity TEXT NOT NULL,
            record_id TEXT NOT NULL,
            operation TEXT NOT NULL,
            payload TEXT NOT NULL,
            status TEXT NOT NULL DEFAULT 'pending',
            attempts INTEGER NOT NULL DEFAULT 0,
            created_at INTEGER NOT NULL
        );
        CREATE TABLE sync_state (
            key TEXT PRIMARY KEY NOT NULL,
            value TEXT NOT NULL
        );
        CREATE INDEX members_by_project ON members(project_id);
        CREATE INDEX time_entries_by_project ON time_entries(project_id);
        CREATE INDEX daily_logs_by_project_day ON daily_logs(project_id, day);
        CREATE INDEX issues_by_project ON issues(project_id);
        CREATE INDEX comments_by_issue ON comments(issue_id);
        CREATE INDEX mutation_queue_by_status ON mutation_queue(status);
        """,
    ].joined(separator: "\n")

    static let version2 = [
        entityTable("assets", """
            project_id TEXT NOT NULL,
                name TEXT NOT NULL,
                qr_code TEXT NOT NULL,
                category TEXT NOT NULL DEFAULT '',
                location TEXT NOT NULL DEFAULT ''
            """),
        entityTable("media_attachments", """
            issue_id TEXT,
                daily_log_id TEXT,
                kind TEXT NOT NULL,
                file_name TEXT NOT NULL,
                content_type TEXT NOT NULL,
                byte_size INTEGER NOT NULL,
                sha256 TEXT NOT NULL,
                thumbnail BLOB,
                captured_at INTEGER NOT NULL,
                duration_seconds REAL,
                local_path TEXT
            """),
        entityTable("reference_documents", """
            project_id TEXT NOT NULL,
                title TEXT NOT NULL,
                kind TEXT NOT NULL,
                revision TEXT NOT NULL DEFAULT '',
                file_name TEXT NOT NULL,
                byte_size INTEGER NOT NULL,
                sha256 TEXT NOT NULL
            """),
        """
        ALTER TABLE issues ADD COLUMN asset_id TEXT;
        ALTER TABLE issues ADD COLUMN model_element_id TEXT;
        ALTER TABLE mutation_queue ADD COLUMN sync_class TEXT NOT NULL DEFAULT 'structured';
        CREATE INDEX assets_by_qr_code ON assets(qr_code);
        CREATE INDEX media_attachments_by_issue ON media_attachments(issue_id);
        CREATE INDEX media_attachments_by_daily_log ON media_attachments(daily_log_id);
        CREATE INDEX reference_documents_by_project ON reference_documents(project_id);
        """,
    ].joined(separator: "\n")

    static let version3 = [
        entityTable("opportunities", """
            name TEXT NOT NULL,
                customer_name TEXT NOT NULL,
                address TEXT NOT NULL DEFAULT '',
                stage TEXT NOT NULL DEFAULT 'lead',
                estimated_value_cents INTEGER NOT NULL DEFAULT 0
            """),
        entityTable("scopes", """
            project_id TEXT NOT NULL,
                name TEXT NOT NULL,
                notes TEXT NOT NULL DEFAULT '',
                sort_order INTEGER NOT NULL DEFAULT 0
            """),
        entityTable("measure_sheets", """
            scope_id TEXT NOT NULL,
                name TEXT NOT NULL,
                notes TEXT NOT NULL DEFAULT ''
            """),
        entityTable("measures", """
            measure_sheet_id TEXT NOT NULL,
                label TEXT NOT NULL,
                quantity REAL NOT NULL,
                unit TEXT NOT NULL,
                sort_order INTEGER NOT NULL DEFAULT 0
            """),
        entityTable("scope_items", """
            scope_id TEXT NOT NULL,
                measure_id TEXT,
                name TEXT NOT NULL,
                quantity REAL NOT NULL,
                unit TEXT NOT NULL,
                unit_price_cents INTEGER NOT NULL,
                sort_order INTEGER NOT NULL DEFAULT 0
            """),
        entityTable("discounts", """
            project_id TEXT NOT NULL,
                name TEXT NOT NULL,
                kind TEXT NOT NULL,
                value INTEGER NOT NULL
            """),
        entityTable("finance_options", """
            project_id TEXT NOT NULL,
                lender TEXT NOT NULL,
                term_months INTEGER NOT NULL,
                apr_basis_points INTEGER NOT NULL,
                down_payment_cents INTEGER NOT NULL DEFAULT 0
            """),
        entityTable("fees", """
            project_id TEXT NOT NULL,
                name TEXT NOT NULL,
                amount_cents INTEGER NOT NULL,
                is_taxable INTEGER NOT NULL DEFAULT 0
            """),
        """
        ALTER TABLE projects ADD COLUMN opportunity_id TEXT;
        ALTER TABLE projects ADD COLUMN start_day TEXT;
        CREATE INDEX projects_by_opportunity ON projects(opportunity_id);
        CREATE INDEX scopes_by_project ON scopes(project_id);
        CREATE INDEX measure_sheets_by_scope ON measure_sheets(scope_id);
        CREATE INDEX measures_by_sheet ON measures(measure_sheet_id);
        CREATE INDEX scope_items_by_scope ON scope_items(scope_id);
        CREATE INDEX discounts_by_project ON discounts(project_id);
        CREATE INDEX finance_options_by_project ON finance_options(project_id);
        CREATE INDEX fees_by_project ON fees(project_id);
        -- Estimates price labour by crew size; 1.x only kept the crew's names, comma-separated.
        ALTER TABLE daily_logs ADD COLUMN crew_size INTEGER NOT NULL DEFAULT 0;
        UPDATE daily_logs SET crew_size =
            CASE WHEN trim(crew) = '' THEN 0 ELSE length(crew) - length(replace(crew, ',', '')) + 1 END;
        """,
    ].joined(separator: "\n")

    /// Every entity table, for the orphan flag that v4 adds to all of them.
    static let version4Tables = [
        "projects", "members", "time_entries", "daily_logs", "issues", "comments", "assets", "media_attachments",
        "reference_documents", "opportunities", "scopes", "measure_sheets", "measures", "scope_items", "discounts",
        "finance_options", "fees",
    ]

    static let version4 =
        version4Tables.map { "ALTER TABLE \($0) ADD COLUMN is_orphaned INTEGER NOT NULL DEFAULT 0;" }
        .joined(separator: "\n") + "\n" + """
        CREATE TABLE server_id_map (
            entity TEXT NOT NULL,
            client_id TEXT NOT NULL,
            server_id TEXT NOT NULL,
            mapped_at INTEGER NOT NULL,
            PRIMARY KEY (entity, client_id)
        ) WITHOUT ROWID;
        CREATE INDEX server_id_map_by_server_id ON server_id_map(entity, server_id);
        CREATE TABLE sync_cursors (
            stream TEXT PRIMARY KEY NOT NULL,
            cursor TEXT NOT NULL,
            updated_at INTEGER NOT NULL
        ) WITHOUT ROWID;
        -- 1.x kept one pull cursor in sync_state; it becomes the structured stream's cursor.
        INSERT INTO sync_cursors (stream, cursor, updated_at)
            SELECT 'structured', value, 0 FROM sync_state WHERE key = 'last_pull_cursor';
        CREATE TABLE conflicts (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            entity TEXT NOT NULL,
            record_id TEXT NOT NULL,
            field TEXT,
            strategy TEXT NOT NULL,
            local_value TEXT,
            remote_value TEXT,
            local_clock TEXT,
            remote_clock TEXT,
            status TEXT NOT NULL DEFAULT 'open',
            resolution TEXT,
            created_at INTEGER NOT NULL,
            resolved_at INTEGER
        );
        CREATE INDEX conflicts_by_status ON conflicts(status, entity, record_id);
        CREATE TABLE field_clocks (
            entity TEXT NOT NULL,
            record_id TEXT NOT NULL,
            clocks TEXT NOT NULL,
            PRIMARY KEY (entity, record_id)
        ) WITHOUT ROWID;
        ALTER TABLE mutation_queue ADD COLUMN base_version INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE mutation_queue ADD COLUMN depends_on TEXT;
        ALTER TABLE mutation_queue ADD COLUMN next_attempt_at INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE mutation_queue ADD COLUMN last_error TEXT;
        -- "description" becomes "details" the additive way: new column, backfill, old one left in place.
        ALTER TABLE issues ADD COLUMN details TEXT NOT NULL DEFAULT '';
        UPDATE issues SET details = description;
        """

    static let version5 = """
        CREATE TABLE audit_log (
            seq INTEGER PRIMARY KEY,
            at INTEGER NOT NULL,
            entity TEXT NOT NULL,
            record_id TEXT NOT NULL,
            operation TEXT NOT NULL,
            payload BLOB NOT NULL,
            previous_hash BLOB NOT NULL,
            hash BLOB NOT NULL
        );
        ALTER TABLE mutation_queue ADD COLUMN audit_seq INTEGER;
        CREATE INDEX issues_by_project_status ON issues(project_id, status);
        CREATE INDEX time_entries_by_project_time ON time_entries(project_id, recorded_at);
        CREATE INDEX mutation_queue_by_status_next ON mutation_queue(status, next_attempt_at);
        CREATE INDEX assets_by_project ON assets(project_id);
        """
}

extension LocalSchema {
    /// Folding an edit into its record's unsent mutation, and keeping one record's mutations in order,
    /// look mutations up by record; without this index each write scanned the whole queue.
    static let version6 = """
        CREATE INDEX mutation_queue_by_record ON mutation_queue(record_id, status);
        """
}

extension LocalSchema {
    /// A mutation that went out once may have been applied even if no answer came back; later edits
    /// must never be folded into it, whatever its status says now (pending again after a timeout,
    /// a crash or a paused run).
    static let version7 = """
        ALTER TABLE mutation_queue ADD COLUMN sent INTEGER NOT NULL DEFAULT 0;
        UPDATE mutation_queue SET sent = 1 WHERE status != 'pending' OR attempts > 0;
        """
}

extension LocalSchema {
    /// The original file of each photo or voice note, waiting to be uploaded: its own queue, because
    /// media never holds up structured data and resumes from the bytes already sent, not from zero.
    static let version8 = """
        CREATE TABLE media_uploads (
            attachment_id TEXT PRIMARY KEY NOT NULL,
            file_name TEXT NOT NULL,
            byte_size INTEGER NOT NULL,
            sha256 TEXT NOT NULL,
            uploaded_bytes INTEGER NOT NULL DEFAULT 0,
            status TEXT NOT NULL DEFAULT 'pending',
            attempts INTEGER NOT NULL DEFAULT 0,
            last_error TEXT,
            created_at INTEGER NOT NULL
        ) WITHOUT ROWID;
        CREATE INDEX media_uploads_by_status ON media_uploads(status, created_at);
        """

    /// Each of these is the first column of a longer index of its table (v5's list indexes), which
    /// serves every query it served; kept, they cost every write to their table a B-tree page more
    /// (a local write touched about eleven) for nothing.
    static let version9 = """
        DROP INDEX issues_by_project;
        DROP INDEX time_entries_by_project;
        DROP INDEX mutation_queue_by_status;
        """

    /// Issue rows are keyed by id, so a project's issues lie scattered among every other project's, and
    /// listing them read nearly every page of the table (a 100,000-record store: 25-40 ms). The additive
    /// migrator cannot re-key the table; this index is the project-ordered copy instead, holding every
    /// column so a list never visits the table. It begins with the columns of the index it replaces, so
    /// a write still updates the same number of B-trees.
    static let version10 = """
        CREATE INDEX issues_listing ON issues(
            project_id, status, deleted_at, created_at, id, server_id, version, updated_at, sync_status, title,
            description, priority, assignee_id, latitude, longitude, asset_id, model_element_id, is_orphaned, details);
        DROP INDEX issues_by_project_status;
        """

    /// A conflict's two values do not say which one lost, and the record's current value cannot tell
    /// once the record has moved on; `override` needs to know which value to bring back. 'client' or
    /// 'server'; NULL for conflicts recorded before this step.
    static let version11 = """
        ALTER TABLE conflicts ADD COLUMN losing_side TEXT CHECK (losing_side IN ('client', 'server'));
        """

    /// v10's index puts `status` before `created_at`, so a list (live issues of a project in creation
    /// order) came out of it unordered and SQLite sorted every row in a temporary B-tree: a third of
    /// the list's time in SQLite. Led by `project_id, deleted_at, created_at, id`, the list is a range
    /// read in order. Same columns, so the same bytes and B-trees per write; a lookup by project and
    /// status reads the project's entries and tests `status` in the index.
    static let version12 = """
        CREATE INDEX issues_in_list_order ON issues(
            project_id, deleted_at, created_at, id, status, server_id, version, updated_at, sync_status, title,
            description, priority, assignee_id, latitude, longitude, asset_id, model_element_id, is_orphaned, details);
        DROP INDEX issues_listing;
        """

    /// Who claimed an in-flight mutation (`pid:host:instance`) and until when (milliseconds): another
    /// process on the file leaves a live claim alone and takes one whose owner is gone or whose lease
    /// ran out. A mutation in flight from an older build has neither, so it counts as expired.
    ///
    /// `change_journal`: each committed write's records (`entity id operation` lines) and the store that
    /// wrote it, read by the other processes on the file so their `changes()` subscribers hear it
    /// (`ChangeJournal`); trimmed as it grows.
    static let version13 = """
        ALTER TABLE mutation_queue ADD COLUMN claimed_by TEXT;
        ALTER TABLE mutation_queue ADD COLUMN claim_expires_at INTEGER NOT NULL DEFAULT 0;
        CREATE TABLE change_journal (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            origin TEXT NOT NULL,
            changes TEXT NOT NULL
        );
        """

    /// A delete a pull brought for a record this device never held: nothing of the record is stored, so
    /// without this row an older copy (a bundle downloaded before the delete, a teammate's export made
    /// before they pulled it) would bring the record back for good, live and "synced" while the server
    /// holds it deleted, and every later export would carry it on. An import skips a record named here at
    /// the version noted or an older one; a newer version (the record brought back on the server) is
    /// stored, and so is one a pull brings, both removing the row.
    static let version14 = """
        CREATE TABLE known_deletions (
            entity TEXT NOT NULL,
            record_id TEXT NOT NULL,
            version INTEGER NOT NULL,
            deleted_at INTEGER NOT NULL,
            PRIMARY KEY (entity, record_id)
        ) WITHOUT ROWID;
        """

    /// v12's list index held every column of `issues`: a second copy of each row, about a fifth of what
    /// a device holds per synced issue, written again by every save, pull and import. The list apps
    /// show is a window (`RecordList`): every id in order, read from this index alone, then the rows in
    /// view by key. The same order and seek columns; a typed list of a whole project now looks each row
    /// up by key.
    static let version15 = """
        CREATE INDEX issues_by_list_order ON issues(project_id, deleted_at, created_at, id);
        DROP INDEX issues_in_list_order;
        """

    /// A record's children are found by the column naming their parent: a pulled page settles the
    /// orphans of the parents it brings, a delete flags a parent's children. These parent columns had
    /// no index, and each lookup read the whole child table (a pull of 100,000 issues into a store
    /// holding as many, an asset in most pages, ran 20 times slower). The store now refuses a parent
    /// column without one (`DeclaredColumns`). Optional parents index only the rows that name one:
    /// an issue with no asset and no assignee costs nothing more.
    static let version16 = """
        CREATE INDEX issues_by_assignee ON issues(assignee_id) WHERE assignee_id IS NOT NULL;
        CREATE INDEX issues_by_asset ON issues(asset_id) WHERE asset_id IS NOT NULL;
        CREATE INDEX comments_by_author ON comments(author_id);
        CREATE INDEX daily_logs_by_author ON daily_logs(author_id);
        CREATE INDEX time_entries_by_member ON time_entries(member_id);
        CREATE INDEX time_entries_by_clock_in ON time_entries(clock_in_id) WHERE clock_in_id IS NOT NULL;
        CREATE INDEX scope_items_by_measure ON scope_items(measure_id) WHERE measure_id IS NOT NULL;
        """

    /// The toolkit's row clocks column (`LocalApp.rowClocksColumn`) on every entity table: a record a
    /// pull stores whole over nothing held, one clock for all its fields, keeps that clock there instead
    /// of in a row of `field_clocks` of its own, which was a fifth of a pulled record's apply and some
    /// 75 bytes a record (issue 41). Rows written before keep their clocks where they are.
    static let version17 = """
        ALTER TABLE assets ADD COLUMN sync_clocks TEXT;
        ALTER TABLE comments ADD COLUMN sync_clocks TEXT;
        ALTER TABLE daily_logs ADD COLUMN sync_clocks TEXT;
        ALTER TABLE discounts ADD COLUMN sync_clocks TEXT;
        ALTER TABLE fees ADD COLUMN sync_clocks TEXT;
        ALTER TABLE finance_options ADD COLUMN sync_clocks TEXT;
        ALTER TABLE issues ADD COLUMN sync_clocks TEXT;
        ALTER TABLE measure_sheets ADD COLUMN sync_clocks TEXT;
        ALTER TABLE measures ADD COLUMN sync_clocks TEXT;
        ALTER TABLE media_attachments ADD COLUMN sync_clocks TEXT;
        ALTER TABLE members ADD COLUMN sync_clocks TEXT;
        ALTER TABLE opportunities ADD COLUMN sync_clocks TEXT;
        ALTER TABLE projects ADD COLUMN sync_clocks TEXT;
        ALTER TABLE reference_documents ADD COLUMN sync_clocks TEXT;
        ALTER TABLE scope_items ADD COLUMN sync_clocks TEXT;
        ALTER TABLE scopes ADD COLUMN sync_clocks TEXT;
        ALTER TABLE time_entries ADD COLUMN sync_clocks TEXT;
        """
}

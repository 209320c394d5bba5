import Foundation
import GRDB
import Testing
@testable import OutpostMigrator

/// A small schema a team might have: crews, their jobs, and a view, grown over three steps.
enum CrewSchema {
    static let v1 = MigrationStep(version: 1, name: "crews and jobs", sql: """
        CREATE TABLE crews (id TEXT PRIMARY KEY, name TEXT NOT NULL, size INTEGER);
        CREATE TABLE jobs (id TEXT PRIMARY KEY, crew_id TEXT REFERENCES crews(id), title TEXT NOT NULL, description TEXT);
        CREATE INDEX jobs_crew ON jobs(crew_id);
        CREATE VIEW big_crews AS SELECT * FROM crews WHERE size > 5;
        CREATE TRIGGER crews_touch AFTER UPDATE ON crews BEGIN SELECT 1; END;
        INSERT INTO crews VALUES ('c1', 'Framing', 6), ('c2', 'Électricité ⚡️', NULL);
        INSERT INTO jobs VALUES ('j1', 'c1', 'Walls', 'North side'), ('j2', 'c2', 'Panel', NULL);
        """)
    static let v2 = MigrationStep(version: 2, name: "job status", sql: """
        ALTER TABLE jobs ADD COLUMN status TEXT NOT NULL DEFAULT 'open';
        CREATE INDEX jobs_status ON jobs(status);
        """)
    static let v3 = MigrationStep(
        version: 3, name: "rename description to notes", fingerprint: "notes = description, v1"
    ) { db in
        try db.execute(sql: "ALTER TABLE jobs ADD COLUMN notes TEXT")
        try db.execute(sql: "UPDATE jobs SET notes = description")
    }
    static let migrator = Migrator(steps: [v1, v2, v3], syncedTables: ["crews", "jobs"])

    /// The rebuild SQLite's documentation describes for changes ALTER TABLE cannot make.
    static func rebuildCrews(
        _ columns: String, select: String = "*", view: String = "SELECT * FROM crews WHERE size > 5"
    ) -> String {
        """
        PRAGMA defer_foreign_keys = ON;
        DROP VIEW big_crews;
        CREATE TABLE crews_new (\(columns));
        INSERT INTO crews_new SELECT \(select) FROM crews;
        DROP TABLE crews;
        ALTER TABLE crews_new RENAME TO crews;
        CREATE VIEW big_crews AS \(view);
        CREATE TRIGGER crews_touch AFTER UPDATE ON crews BEGIN SELECT 1; END;
        """
    }

    static func with(_ step: MigrationStep) -> Migrator {
        Migrator(steps: [v1, v2, v3, step], syncedTables: ["crews", "jobs"])
    }
}

@Suite struct MigratorTests {
    @Test func appliesEveryStepOnceAndRecordsIt() throws {
        let database = try TemporaryDatabase()
        let outcome = try CrewSchema.migrator.migrate(database.queue)
        #expect(outcome == Migrator.Outcome(from: 0, to: 3, applied: [1, 2, 3]))
        #expect(try CrewSchema.migrator.appliedVersions(in: database.queue) == [1, 2, 3])
        #expect(try CrewSchema.migrator.pendingSteps(in: database.queue).isEmpty)
        let notes = try database.queue.read { try String.fetchAll($0, sql: "SELECT notes FROM jobs WHERE notes IS NOT NULL") }
        #expect(notes == ["North side"])
        let checksums = try database.queue.read { try String.fetchAll($0, sql: "SELECT checksum FROM migrator_ledger ORDER BY version") }
        #expect(checksums == CrewSchema.migrator.steps.map(\.checksum))

        let again = try CrewSchema.migrator.migrate(database.queue)
        #expect(again == Migrator.Outcome(from: 3, to: 3, applied: []))
    }

    @Test func migratesInStagesToATarget() throws {
        let database = try TemporaryDatabase()
        #expect(try CrewSchema.migrator.migrate(database.queue, to: 1).applied == [1])
        #expect(try CrewSchema.migrator.pendingSteps(in: database.queue).map(\.version) == [2, 3])
        #expect(try CrewSchema.migrator.migrate(database.queue).applied == [2, 3])
        #expect(throws: MigrationError.self) { try CrewSchema.migrator.migrate(database.queue, to: 2) }
        #expect(throws: MigrationError.self) { try CrewSchema.migrator.migrate(database.queue, to: 9) }
    }

    /// Each of these would lose data or break an older app; each is refused and changes nothing.
    @Test(arguments: [
        ("drop table", "DROP TABLE jobs", "removed table jobs"),
        ("drop column", "ALTER TABLE jobs DROP COLUMN description", "removed column jobs.description"),
        ("rename column", "ALTER TABLE jobs RENAME COLUMN title TO name", "removed column jobs.title"),
        ("rename table", "ALTER TABLE crews RENAME TO teams", "removed table crews"),
        ("rebuild losing a column", CrewSchema.rebuildCrews(
            "id TEXT PRIMARY KEY, name TEXT NOT NULL", select: "id, name", view: "SELECT * FROM crews"),
         "removed column crews.size"),
        ("rebuild changing a type", CrewSchema.rebuildCrews("id TEXT PRIMARY KEY, name TEXT NOT NULL, size TEXT"),
         "changed the declared type of crews.size from 'INTEGER' to 'TEXT'"),
        ("drop index", "DROP INDEX jobs_status", "removed index jobs_status"),
        ("redefine view", "DROP VIEW big_crews; CREATE VIEW big_crews AS SELECT * FROM crews", "redefined view big_crews"),
        ("drop trigger", "DROP TRIGGER crews_touch", "removed trigger crews_touch"),
        ("delete rows", "DELETE FROM jobs WHERE id = 'j2'", "deleted 1 row from jobs"),
        ("rebuild with a case-blind key", CrewSchema.rebuildCrews("id TEXT PRIMARY KEY COLLATE NOCASE, name TEXT NOT NULL, size INTEGER"),
         "redefined table crews"),
        ("rebuild with a tighter check", CrewSchema.rebuildCrews("id TEXT PRIMARY KEY, name TEXT NOT NULL, size INTEGER CHECK (size > 5)"),
         "redefined table crews"),
        ("rebuild with a cascading reference", """
            PRAGMA defer_foreign_keys = ON;
            CREATE TABLE jobs_new (id TEXT PRIMARY KEY, crew_id TEXT REFERENCES crews(id) ON DELETE CASCADE,
                title TEXT NOT NULL, description TEXT, status TEXT NOT NULL DEFAULT 'open', notes TEXT);
            INSERT INTO jobs_new SELECT * FROM jobs;
            DROP TABLE jobs;
            ALTER TABLE jobs_new RENAME TO jobs;
            CREATE INDEX jobs_crew ON jobs(crew_id);
            CREATE INDEX jobs_status ON jobs(status);
            """, "ON DELETE CASCADE"),
        ("a column added with a cascading reference", "ALTER TABLE jobs ADD COLUMN lead_crew TEXT REFERENCES crews(id) ON DELETE CASCADE",
         "ON DELETE CASCADE"),
        ("rewritten values", "UPDATE jobs SET title = upper(title)", "rewrote existing values in 2 rows of jobs (jobs.title)"),
        ("rows deleted and added back", "DELETE FROM jobs WHERE id = 'j2'; INSERT INTO jobs (id, title) VALUES ('j3', 'Roof')",
         "deleted 1 existing row of jobs"),
        ("a trigger that deletes children", "CREATE TRIGGER crews_purge AFTER INSERT ON crews BEGIN DELETE FROM jobs; END;",
         "trigger crews_purge writes to existing table jobs"),
        ("a trigger that drops writes", "CREATE TRIGGER jobs_ignore BEFORE INSERT ON jobs BEGIN SELECT RAISE(IGNORE); END;",
         "trigger jobs_ignore can refuse or drop writes to existing table jobs"),
        ("a ledger rewritten", "UPDATE migrator_ledger SET checksum = 'forged' WHERE version = 1", "migrator_ledger"),
        ("a ledger entry added", "INSERT INTO migrator_ledger VALUES (4, 'forged', 'x', '2026-01-01')", "migrator_ledger"),
    ])
    func destructiveStepsAreRefusedAndChangeNothing(name: String, sql: String, finding: String) throws {
        let database = try TemporaryDatabase()
        try CrewSchema.migrator.migrate(database.queue)
        let rows = try database.dump(), schema = try Migrator.schemaSQL(of: database.queue)

        let migrator = CrewSchema.with(MigrationStep(version: 4, name: name, sql: sql))
        do {
            try migrator.migrate(database.queue)
            Issue.record("\(name) was applied")
        } catch {
            #expect(error.code == .destructiveStep)
            #expect(error.version == 4)
            #expect(error.stepName == name)
            #expect(error.message.contains(finding), "\(error.message)")
            #expect(error.description.contains("step 4 (\(name))"))
        }
        #expect(try migrator.appliedVersions(in: database.queue) == [1, 2, 3])
        #expect(try database.dump() == rows)
        #expect(try Migrator.schemaSQL(of: database.queue) == schema)
    }

    @Test func aUniquePartialIndexRedefinedToCoverNothingIsRefused() throws {
        let database = try TemporaryDatabase()
        let settings = MigrationStep(version: 4, name: "settings", sql: """
            CREATE TABLE settings (key TEXT NOT NULL, device TEXT, value TEXT);
            CREATE UNIQUE INDEX settings_shared ON settings(key) WHERE device IS NULL;
            """)
        try CrewSchema.with(settings).migrate(database.queue)
        let emptied = MigrationStep(version: 5, name: "index covers nothing", sql: """
            DROP INDEX settings_shared;
            CREATE UNIQUE INDEX settings_shared ON settings(key) WHERE 0;
            """)
        let migrator = Migrator(steps: [CrewSchema.v1, CrewSchema.v2, CrewSchema.v3, settings, emptied], syncedTables: ["crews", "jobs"])
        #expect { try migrator.migrate(database.queue) } throws: { error in
            (error as? MigrationError)?.message.contains("redefined index settings_shared") == true
        }
        #expect(try migrator.appliedVersions(in: database.queue) == [1, 2, 3, 4])
    }

    @Test func aBackfillOfANewColumnAndANewTablesTriggerAreAllowed() throws {
        let database = try TemporaryDatabase()
        let step = MigrationStep(version: 4, name: "job history", sql: """
            ALTER TABLE jobs ADD COLUMN title_upper TEXT;
            UPDATE jobs SET title_upper = upper(title);
            CREATE TABLE job_history (job_id TEXT, title TEXT);
            CREATE TRIGGER jobs_history AFTER UPDATE OF title ON jobs BEGIN INSERT INTO job_history VALUES (new.id, old.title); END;
            """)
        #expect(try CrewSchema.with(step).migrate(database.queue).applied == [1, 2, 3, 4])
    }

    /// The one removal a step may make: an index another index of its table begins with, when the
    /// step declares it. Every query the dropped index served, the longer one serves.
    @Test func aStepMayDropAnIndexAnotherOneCoversWhenItSaysSo() throws {
        let database = try TemporaryDatabase()
        try CrewSchema.migrator.migrate(database.queue)
        let step = MigrationStep(
            version: 4, name: "jobs by crew and status", sql: """
                CREATE INDEX jobs_crew_status ON jobs(crew_id, status);
                DROP INDEX jobs_crew;
                """, droppingRedundantIndexes: ["jobs_crew"])
        #expect(try CrewSchema.with(step).migrate(database.queue).applied == [4])
        let indexes = try database.queue.read {
            try String.fetchAll($0, sql: "SELECT name FROM sqlite_schema WHERE type = 'index' AND tbl_name = 'jobs' ORDER BY name")
        }
        #expect(indexes.contains("jobs_crew_status"))
        #expect(!indexes.contains("jobs_crew"))
    }

    /// An index that begins with the dropped one's columns in another order after the same first column
    /// also covers it: a lookup still seeks on all of them (v12 re-orders the issue list's index this
    /// way, so its list comes sorted).
    @Test func aStepMayDropAnIndexALongerOneBeginsWithInAnotherOrder() throws {
        let database = try TemporaryDatabase()
        let byCrewAndStatus = MigrationStep(
            version: 4, name: "jobs by crew, status and title",
            sql: "CREATE INDEX jobs_crew_status ON jobs(crew_id, status, title)")
        let reordered = MigrationStep(
            version: 5, name: "jobs by crew in title order", sql: """
                CREATE INDEX jobs_crew_title ON jobs(crew_id, title, status, description);
                DROP INDEX jobs_crew_status;
                """, droppingRedundantIndexes: ["jobs_crew_status"])
        let migrator = Migrator(steps: CrewSchema.migrator.steps + [byCrewAndStatus, reordered], syncedTables: ["crews", "jobs"])
        #expect(try migrator.migrate(database.queue).applied == [1, 2, 3, 4, 5])
        let indexes = try database.queue.read {
            try String.fetchAll($0, sql: "SELECT name FROM sqlite_schema WHERE type = 'index' AND tbl_name = 'jobs' ORDER BY name")
        }
        #expect(indexes.contains("jobs_crew_title"))
        #expect(!indexes.contains("jobs_crew_status"))
    }

    /// Past the table's primary key an index's columns narrow no lookup (the key is unique), so an index
    /// may drop them: every lookup still seeks on the same columns, and only a read that took its values
    /// from the index visits the table (v15 narrows the issue list's index so). Dropping a column before
    /// the key is refused, as any other lookup column.
    @Test(arguments: [
        ("jobs_crew_keys", "crew_id, status, id", nil),
        ("jobs_crew_keys", "crew_id, id, status", nil),
        ("jobs_crew_keys", "crew_id, status, id, title", nil),
        ("jobs_crew_keys", "crew_id, status", "no index left on jobs begins with its columns, the first one first (crew_id, status, id)"),
        ("jobs_crew_keys", "crew_id, id", "no index left on jobs begins with its columns, the first one first (crew_id, status, id)"),
        ("jobs_crew_keys", "crew_id, title, id", "no index left on jobs begins with its columns, the first one first (crew_id, status, id)"),
    ] as [(String, String, String?)])
    func anIndexMayBeNarrowedToWhereItHoldsThePrimaryKey(name: String, columns: String, finding: String?) throws {
        let database = try TemporaryDatabase()
        let wide = MigrationStep(
            version: 4, name: "jobs by crew and status, with every column",
            sql: "CREATE INDEX jobs_crew_wide ON jobs(crew_id, status, id, title, description)")
        try Migrator(steps: CrewSchema.migrator.steps + [wide], syncedTables: ["crews", "jobs"]).migrate(database.queue)
        let narrowed = MigrationStep(
            version: 5, name: "jobs by crew, keys alone", sql: """
                CREATE INDEX \(name) ON jobs(\(columns));
                DROP INDEX jobs_crew_wide;
                """, droppingRedundantIndexes: ["jobs_crew_wide"])
        let migrator = Migrator(steps: CrewSchema.migrator.steps + [wide, narrowed], syncedTables: ["crews", "jobs"])
        let schema = try Migrator.schemaSQL(of: database.queue)
        do {
            #expect(try migrator.migrate(database.queue).applied == [5])
            #expect(finding == nil, "narrowed to (\(columns)) was applied")
        } catch {
            #expect(error.code == .destructiveStep)
            #expect(finding.map { error.message.contains($0) } == true, "\(error.message)")
            #expect(try Migrator.schemaSQL(of: database.queue) == schema)
        }
    }

    /// Holding the columns is not enough: with another column between them, a lookup on both would seek
    /// on the first alone and scan the rest.
    @Test func anIndexWhoseColumnsALongerOneHoldsApartIsNotRedundant() throws {
        let database = try TemporaryDatabase()
        let byCrewAndStatus = MigrationStep(
            version: 4, name: "jobs by crew and status", sql: "CREATE INDEX jobs_crew_status ON jobs(crew_id, status)")
        try Migrator(steps: CrewSchema.migrator.steps + [byCrewAndStatus], syncedTables: ["crews", "jobs"]).migrate(database.queue)
        let schema = try Migrator.schemaSQL(of: database.queue)
        let apart = MigrationStep(
            version: 5, name: "jobs by crew and title", sql: """
                CREATE INDEX jobs_crew_title ON jobs(crew_id, title, status);
                DROP INDEX jobs_crew_status;
                """, droppingRedundantIndexes: ["jobs_crew_status"])
        let migrator = Migrator(steps: CrewSchema.migrator.steps + [byCrewAndStatus, apart], syncedTables: ["crews", "jobs"])
        #expect {
            try migrator.migrate(database.queue)
        } throws: { error in
            (error as? MigrationError)?.code == .destructiveStep
                && (error as? MigrationError)?.message.contains(
                    "no index left on jobs begins with its columns, the first one first (crew_id, status)") == true
        }
        #expect(try Migrator.schemaSQL(of: database.queue) == schema)
    }

    /// A declared drop is checked, not trusted: each of these is refused and changes nothing.
    @Test(arguments: [
        ("nothing covers it", "DROP INDEX jobs_status", "no index left on jobs begins with its columns, the first one first (status)"),
        ("only a partial index covers it",
         "CREATE INDEX jobs_open ON jobs(status, title) WHERE status = 'open'; DROP INDEX jobs_status",
         "no index left on jobs begins with its columns, the first one first (status)"),
        ("the covering index goes too", "DROP INDEX jobs_status; DROP INDEX jobs_crew", "removed index jobs_crew"),
        ("an index holds its column, but not first",
         "CREATE INDEX jobs_crew_status ON jobs(crew_id, status); DROP INDEX jobs_status",
         "no index left on jobs begins with its columns, the first one first (status)"),
    ])
    func aDeclaredDropThatIsNotRedundantIsRefused(name: String, sql: String, finding: String) throws {
        let database = try TemporaryDatabase()
        try CrewSchema.migrator.migrate(database.queue)
        let schema = try Migrator.schemaSQL(of: database.queue)
        let migrator = CrewSchema.with(MigrationStep(version: 4, name: name, sql: sql, droppingRedundantIndexes: ["jobs_status"]))
        do {
            try migrator.migrate(database.queue)
            Issue.record("\(name) was applied")
        } catch {
            #expect(error.code == .destructiveStep)
            #expect(error.message.contains(finding), "\(error.message)")
        }
        #expect(try Migrator.schemaSQL(of: database.queue) == schema)
    }

    @Test func aUniqueIndexIsNeverRedundant() throws {
        let database = try TemporaryDatabase()
        let unique = MigrationStep(version: 4, name: "unique titles", sql: """
            CREATE UNIQUE INDEX jobs_title ON jobs(title);
            CREATE INDEX jobs_title_status ON jobs(title, status);
            """)
        try Migrator(steps: CrewSchema.migrator.steps + [unique], syncedTables: []).migrate(database.queue)
        let drop = MigrationStep(version: 5, name: "drop it", sql: "DROP INDEX jobs_title", droppingRedundantIndexes: ["jobs_title"])
        #expect {
            try Migrator(steps: CrewSchema.migrator.steps + [unique, drop], syncedTables: []).migrate(database.queue)
        } throws: { error in
            (error as? MigrationError)?.code == .destructiveStep
                && (error as? MigrationError)?.message.contains("enforces uniqueness") == true
        }
    }

    @Test func aClosureStepIsCheckedTheSameWay() throws {
        let database = try TemporaryDatabase()
        try CrewSchema.migrator.migrate(database.queue)
        let sneaky = MigrationStep(version: 4, name: "tidy", fingerprint: "tidy v1") { db in
            try db.execute(sql: "ALTER TABLE crews DROP COLUMN size")
        }
        #expect(throws: MigrationError.self) { try CrewSchema.with(sneaky).migrate(database.queue) }
        #expect(try database.queue.read { try $0.columns(in: "crews").map(\.name) } == ["id", "name", "size"])
    }

    /// SQLite writes an added column after the last column, which is before the table's constraints
    /// when it has any: such a table took no column (read as a rebuild), while a rebuild that adds only
    /// a constraint is still one.
    @Test func aColumnAddedBeforeATablesConstraintsIsAllowed() throws {
        let database = try TemporaryDatabase()
        let table = MigrationStep(version: 4, name: "assignments", sql: """
            CREATE TABLE assignments (
                crew_id TEXT NOT NULL,
                job_id TEXT NOT NULL,
                hours INTEGER,
                PRIMARY KEY (crew_id, job_id)
            ) WITHOUT ROWID;
            INSERT INTO assignments VALUES ('c1', 'j1', 3);
            """)
        try CrewSchema.with(table).migrate(database.queue)
        let added = MigrationStep(version: 5, name: "who assigned", sql: "ALTER TABLE assignments ADD COLUMN assigned_by TEXT; ALTER TABLE assignments ADD COLUMN note TEXT DEFAULT (',');")
        #expect(try Migrator(steps: [CrewSchema.v1, CrewSchema.v2, CrewSchema.v3, table, added]).migrate(database.queue).applied == [5])
        let constraint = MigrationStep(version: 6, name: "a check", sql: """
            CREATE TABLE assignments_new (crew_id TEXT NOT NULL, job_id TEXT NOT NULL, hours INTEGER, assigned_by TEXT,
                note TEXT DEFAULT (','), PRIMARY KEY (crew_id, job_id), CHECK (hours > 0)) WITHOUT ROWID;
            INSERT INTO assignments_new SELECT * FROM assignments;
            DROP TABLE assignments;
            ALTER TABLE assignments_new RENAME TO assignments;
            """)
        #expect { try Migrator(steps: [CrewSchema.v1, CrewSchema.v2, CrewSchema.v3, table, added, constraint]).migrate(database.queue) } throws: { error in
            (error as? MigrationError)?.message.contains("redefined table assignments") == true
        }
    }

    @Test func aNotNullColumnWithoutDefaultIsRefused() throws {
        let database = try TemporaryDatabase()
        try CrewSchema.migrator.migrate(database.queue)
        let step = MigrationStep(version: 4, name: "require a foreman", sql: CrewSchema.rebuildCrews(
            "id TEXT PRIMARY KEY, name TEXT NOT NULL, size INTEGER, foreman TEXT NOT NULL", select: "*, ''"))
        do {
            try CrewSchema.with(step).migrate(database.queue)
            Issue.record("applied")
        } catch {
            // A rebuild is refused as such (its definition changed); the column is named all the same.
            #expect(error.code == .destructiveStep)
            #expect(error.message.contains("redefined table crews"))
            #expect(error.message.contains("crews.foreman is NOT NULL without a default"))
        }
        let allowed = MigrationStep(version: 4, name: "foreman", sql: "ALTER TABLE crews ADD COLUMN foreman TEXT NOT NULL DEFAULT ''")
        #expect(try CrewSchema.with(allowed).migrate(database.queue).applied == [4])
    }

    @Test func aUniqueConstraintOnASyncedTableIsRefused() throws {
        let database = try TemporaryDatabase()
        try CrewSchema.migrator.migrate(database.queue)
        let unique = MigrationStep(version: 4, name: "unique titles", sql: "CREATE UNIQUE INDEX jobs_title ON jobs(title)")
        do {
            try CrewSchema.with(unique).migrate(database.queue)
            Issue.record("applied")
        } catch {
            #expect(error.code == .uniqueOnSyncedTable)
            #expect(error.message.contains("jobs_title makes (title) unique on synced table jobs"))
        }
        let local = MigrationStep(version: 4, name: "local settings", sql: "CREATE TABLE settings (key TEXT UNIQUE, value TEXT)")
        #expect(try CrewSchema.with(local).migrate(database.queue).applied == [4])
    }

    @Test func foreignKeysAreCheckedAfterEachStep() throws {
        let database = try TemporaryDatabase()
        try CrewSchema.migrator.migrate(database.queue)
        let orphan = MigrationStep(version: 4, name: "orphan job", sql: """
            PRAGMA defer_foreign_keys = ON;
            INSERT INTO jobs (id, crew_id, title) VALUES ('j3', 'nobody', 'Roof');
            """)
        do {
            try CrewSchema.with(orphan).migrate(database.queue)
            Issue.record("applied")
        } catch {
            #expect([MigrationError.Code.foreignKeyViolation, .stepFailed].contains(error.code))
        }
        #expect(try database.queue.read { try Int.fetchOne($0, sql: "SELECT count(*) FROM jobs") } == 2)
        #expect(try CrewSchema.migrator.appliedVersions(in: database.queue) == [1, 2, 3])
    }

    @Test func aFailingStepLeavesThePreviousVersion() throws {
        let database = try TemporaryDatabase()
        let broken = Migrator(steps: [CrewSchema.v1, MigrationStep(version: 2, name: "typo", sql: """
            ALTER TABLE jobs ADD COLUMN status TEXT;
            ALTER TABLE jobz ADD COLUMN priority INTEGER;
            """)])
        do {
            try broken.migrate(database.queue)
            Issue.record("applied")
        } catch {
            #expect(error.code == .stepFailed)
            #expect(error.message.contains("jobz"))
        }
        #expect(try broken.appliedVersions(in: database.queue) == [1])
        #expect(try database.queue.read { try $0.columns(in: "jobs").map(\.name) }.contains("status") == false)
    }

    @Test func aNewerDatabaseIsRefusedAndLeftUntouched() throws {
        let database = try TemporaryDatabase()
        try CrewSchema.migrator.migrate(database.queue)
        let bytes = try Data(contentsOf: URL(fileURLWithPath: database.path))
        let oldApp = Migrator(steps: [CrewSchema.v1, CrewSchema.v2])
        do {
            try oldApp.migrate(database.queue)
            Issue.record("an old app migrated a newer database")
        } catch {
            #expect(error.code == .databaseNewerThanCode)
            #expect(error.message.contains("version 3"))
        }
        #expect(throws: MigrationError.self) { try oldApp.pendingSteps(in: database.queue) }
        #expect(try Data(contentsOf: URL(fileURLWithPath: database.path)) == bytes)
    }

    /// Ledger rows removed from a database that ran their steps: the next step found again makes what
    /// the file already has. Refused as a damaged ledger naming that step, not as SQLite's raw complaint,
    /// and the file is left byte for byte as it was.
    @Test func aStepWhoseWorkTheDatabaseAlreadyHasIsAMissingLedgerRow() throws {
        let database = try TemporaryDatabase()
        try CrewSchema.migrator.migrate(database.queue)
        try database.queue.write { try $0.execute(sql: "DELETE FROM migrator_ledger WHERE version > 1") }
        let bytes = try Data(contentsOf: URL(fileURLWithPath: database.path))
        let error = try #require(throws: MigrationError.self) { try CrewSchema.migrator.migrate(database.queue) }
        #expect(error.code == .ledgerDamaged, "\(error)")
        #expect(error.version == 2 && error.stepName == "job status", "\(error)")
        #expect(error.message.contains("already has") && error.message.contains("duplicate column name: status"), "\(error)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: database.path)) == bytes)
    }

    @Test func anEditedShippedStepIsRefused() throws {
        let database = try TemporaryDatabase()
        try CrewSchema.migrator.migrate(database.queue, to: 2)
        let edited = Migrator(steps: [
            CrewSchema.v1,
            MigrationStep(version: 2, name: "job status", sql: "ALTER TABLE jobs ADD COLUMN status TEXT DEFAULT 'new'"),
            CrewSchema.v3,
        ])
        do {
            try edited.migrate(database.queue)
            Issue.record("applied")
        } catch {
            #expect(error.code == .checksumChanged)
            #expect(error.version == 2)
        }
        #expect(try CrewSchema.migrator.appliedVersions(in: database.queue) == [1, 2])
    }

    @Test func schemaSQLIsNormalizedAndPathIndependent() throws {
        let stepwise = try TemporaryDatabase(), direct = try TemporaryDatabase()
        for version in 1...3 { try CrewSchema.migrator.migrate(stepwise.queue, to: version) }
        try CrewSchema.migrator.migrate(direct.queue)
        let schema = try Migrator.schemaSQL(of: direct.queue)
        #expect(try Migrator.schemaSQL(of: stepwise.queue) == schema)
        #expect(!schema.contains("migrator_ledger"))
        #expect(!schema.contains("  "))
        #expect(schema.split(separator: "\n").first?.hasPrefix("CREATE TABLE crews") == true)
        #expect(schema.contains("CREATE VIEW big_crews"))
    }

    @Test func checksumsDependOnContent() {
        let a = MigrationStep(version: 1, name: "x", sql: "CREATE TABLE t (a)")
        let b = MigrationStep(version: 1, name: "x", sql: "  CREATE TABLE t (a)\n")
        let c = MigrationStep(version: 1, name: "x", sql: "CREATE TABLE t (b)")
        #expect(a.checksum == b.checksum)
        #expect(a.checksum != c.checksum)
        #expect(a.checksum.count == 64)
    }

    /// Two processes opening one new file (servers started together, an app and its extension) each read
    /// the version, then migrate in turn: the second found the first's tables, took its step for one run
    /// without its ledger row, and refused to open, "ledger damaged" (attack 74, finding 3). Here the
    /// other connection migrates the file at the moment this one begins its first step's transaction.
    @Test("Steps another connection ran after this one read the version are skipped, not taken for a damaged ledger")
    func stepsAnotherConnectionRanMeanwhileAreSkipped() throws {
        let database = try TemporaryDatabase()
        let migrator = Migrator(steps: [CrewSchema.v1, CrewSchema.v2])
        let other = try DatabaseQueue(path: database.path)
        final class Once: @unchecked Sendable {
            private let lock = NSLock()
            private var done = false
            func first() -> Bool { lock.withLock { defer { done = true }; return !done } }
        }
        let once = Once()
        var configuration = Configuration()
        configuration.prepareDatabase { db in
            db.trace { event in
                guard event.description.hasPrefix("BEGIN IMMEDIATE"), once.first() else { return }
                _ = try? migrator.migrate(other)
            }
        }
        let queue = try DatabaseQueue(path: database.path, configuration: configuration)
        let outcome = try migrator.migrate(queue)
        #expect(outcome.applied.isEmpty, "the other connection applied both steps")
        #expect(outcome.to == 2)
        #expect(try migrator.appliedVersions(in: queue) == [1, 2])
        #expect(try migrator.appliedVersions(in: other) == [1, 2])
    }
}

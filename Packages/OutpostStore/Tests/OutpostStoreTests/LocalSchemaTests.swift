@testable import OutpostStore
import Foundation
import GRDB
import OutpostFieldService
import OutpostFieldServiceTesting
import OutpostMigrationTesting
import OutpostMigrator
import OutpostModels
import OutpostSchema
import Testing

@Suite(.fieldService) struct LocalSchemaTests {
    /// A new database migrated to N has exactly the frozen schema of version N.
    @Test(arguments: 1...LocalSchema.latestVersion)
    func aNewDatabaseMatchesTheFrozenSchema(version: Int) throws {
        let database = try TemporaryDatabase()
        try LocalSchema.migrator.migrate(database.queue, to: version)
        let schema = try Migrator.schemaSQL(of: database.queue)
        let frozen = try FrozenSchemas.text("v\(version).sql", recording: schema)
        #expect(frozen != nil, "schemas/local/v\(version).sql did not exist and was recorded; commit it")
        #expect(schema == frozen, "v\(version) differs from schemas/local/v\(version).sql: shipped versions never change")
    }

    /// The field-service schema's path tests, by the product a team runs on its own steps: shipped steps
    /// never change (`schemas/local/steps.txt`; a new step is recorded there and fails once, to be
    /// committed), and every version filled with edge-case rows upgrades to the latest keeping every value.
    @Test func theMigrationPathCheckHolds() throws {
        let check = MigrationPathCheck(
            migrator: LocalSchema.migrator, checksums: FrozenSchemas.folder.appendingPathComponent("steps.txt"), rowsPerTable: 40)
        try check.run()
    }

    @Test func upgradingFromV1EqualsStartingFresh() throws {
        let fresh = try TemporaryDatabase(), upgraded = try TemporaryDatabase()
        try LocalSchema.migrator.migrate(fresh.queue)
        try LocalSchema.migrator.migrate(upgraded.queue, to: 1)
        try upgraded.queue.write { try Fixture.fill($0, rowsPerTable: 20, seed: 1) }
        try LocalSchema.migrator.migrate(upgraded.queue)
        #expect(try Migrator.schemaSQL(of: upgraded.queue) == Migrator.schemaSQL(of: fresh.queue))
    }

    /// Version 5 (and so every later one) stores every entity of the catalog: one table each, a column
    /// per field, sync columns.
    @Test func version5HoldsEveryEntityOfTheCatalog() throws {
        let database = try TemporaryDatabase()
        try LocalSchema.migrator.migrate(database.queue, to: 5)
        try database.queue.read { db in
            for entity in EntityCatalog.all {
                let columns = Set(try db.columns(in: entity.table).map(\.name))
                let expected = Set(entity.fields.map { ColumnName.forField($0.name) }).union([
                    "id", "server_id", "version", "created_at", "updated_at", "deleted_at", "sync_status", "is_orphaned",
                ])
                #expect(expected.subtracting(columns).isEmpty, "\(entity.table) lacks \(expected.subtracting(columns).sorted())")
            }
            for table in ["mutation_queue", "server_id_map", "sync_cursors", "conflicts", "field_clocks", "audit_log"] {
                #expect(try db.tableExists(table), "\(table) is missing")
            }
        }
    }

    @Test func fieldNamesMapToSnakeCaseColumns() {
        #expect(ColumnName.forField("projectID") == "project_id")
        #expect(ColumnName.forField("clockInID") == "clock_in_id")
        #expect(ColumnName.forField("aprBasisPoints") == "apr_basis_points")
        #expect(ColumnName.forField("sha256") == "sha256")
        #expect(ColumnName.forField("isTaxable") == "is_taxable")
    }

    /// Every upgrade path (the ten among v1…v5, and those to later versions): every row survives with
    /// every value, and backfills are right.
    @Test(arguments: (1...LocalSchema.latestVersion).flatMap { from in
        ((from + 1)...max(from + 1, LocalSchema.latestVersion)).filter { $0 <= LocalSchema.latestVersion }.map { (from, $0) }
    })
    func upgradePathKeepsEveryRowAndBackfills(from: Int, to: Int) throws {
        let database = try TemporaryDatabase()
        try LocalSchema.migrator.migrate(database.queue, to: from)
        try database.queue.write { try Fixture.fill($0, rowsPerTable: 300, seed: UInt64(from * 10 + to)) }
        let before = try database.queue.read { try Fixture.contents($0) }

        let outcome = try LocalSchema.migrator.migrate(database.queue, to: to)
        #expect(outcome.applied == Array((from + 1)...to))
        let after = try database.queue.read { try Fixture.contents($0) }
        let defaults = try database.queue.read { try columnDefaults($0) }

        for (table, rows) in before {
            let upgraded = try #require(after[table], "\(table) vanished")
            #expect(upgraded.count == rows.count, "\(table) lost rows")
            for (old, new) in zip(rows, upgraded) {
                for (column, value) in old {
                    #expect(new[column] == value, "\(table).\(column) changed")
                }
                for (column, value) in new where old[column] == nil {
                    #expect(value == expectedNewValue(table, column, old: old, defaults: defaults), "\(table).\(column) = \(value)")
                }
            }
        }
        if from < 4, to >= 4 {
            let cursor = before["sync_state"]?.first { $0["key"] == "last_pull_cursor".databaseValue }?["value"]
            let cursors = try #require(after["sync_cursors"])
            #expect(cursors.count == 1)
            #expect(cursors.first?["cursor"] == cursor)
        }
        let integrity = try database.queue.read { try String.fetchAll($0, sql: "PRAGMA integrity_check") }
        #expect(integrity == ["ok"])
    }

    /// A column a step added to an old table: its backfilled value, or its default.
    private func expectedNewValue(
        _ table: String, _ column: String, old: [String: DatabaseValue], defaults: [String: DatabaseValue]
    ) -> DatabaseValue {
        switch (table, column) {
        case ("daily_logs", "crew_size"):
            let crew = String.fromDatabaseValue(old["crew"]!)!
            let names = crew.trimmingCharacters(in: .whitespaces).isEmpty ? 0 : crew.split(separator: ",", omittingEmptySubsequences: false).count
            return Int64(names).databaseValue
        case ("issues", "details"):
            return old["description"]!
        case ("mutation_queue", "sent"):
            let status = String.fromDatabaseValue(old["status"]!)
            let attempts = Int64.fromDatabaseValue(old["attempts"]!) ?? 0
            return Int64(status != "pending" || attempts > 0 ? 1 : 0).databaseValue
        default:
            return defaults["\(table).\(column)"] ?? .null
        }
    }

    /// Every column's default value, evaluated by SQLite, keyed `table.column`.
    private func columnDefaults(_ db: Database) throws -> [String: DatabaseValue] {
        var defaults: [String: DatabaseValue] = [:]
        let tables = try String.fetchAll(db, sql: "SELECT name FROM sqlite_schema WHERE type = 'table'")
        for table in tables {
            for column in try Row.fetchAll(db, sql: "SELECT name, dflt_value FROM pragma_table_xinfo(?)", arguments: [table]) {
                guard let expression = column["dflt_value"] as String? else { continue }
                // The expression comes from the schema this test just migrated, not from input.
                defaults["\(table).\(column["name"] as String)"] = try DatabaseValue.fetchOne(db, sql: "SELECT \(expression)")
            }
        }
        return defaults
    }
}

/// Opening a store checks that every declared field has a column of its kind's type, naming what is missing.
@Suite(.fieldService) struct DeclaredColumnsTests {
    @Test(arguments: [
        ("ALTER TABLE comments DROP COLUMN body", "comment", "body", "has no column body"),
        ("ALTER TABLE scopes DROP COLUMN notes; ALTER TABLE scopes ADD COLUMN notes INTEGER", "scope", "notes", "is INTEGER, the field needs TEXT"),
        ("DROP TABLE fees", "fee", nil, "has no table fees"),
        ("DROP INDEX issues_by_asset", "issue", "assetID", "has no index on asset_id"),
        // Indexes SQLite cannot use for `asset_id = ?`: another collation, partial on another condition.
        ("DROP INDEX issues_by_asset; CREATE INDEX issues_by_asset ON issues(asset_id COLLATE NOCASE)", "issue", "assetID", "has no index on asset_id"),
        ("DROP INDEX issues_by_asset; CREATE INDEX issues_by_asset ON issues(asset_id) WHERE is_orphaned = 1", "issue", "assetID", "has no index on asset_id"),
    ])
    func aMissingOrMistypedColumnIsNamedWhenTheStoreOpens(_ change: String, entity: String, field: String?, says: String) throws {
        let database = try TemporaryDatabase()
        _ = try LocalStore.open(at: database.path)
        try database.queue.write { try $0.execute(sql: change) }
        let error = try #require(throws: StoreError.self) { _ = try LocalStore.open(at: database.path) }
        #expect(error.code == .schemaMismatch)
        #expect(error.modelError?.entity.rawValue == entity && error.modelError?.field == field, "\(error)")
        #expect(error.message.contains(says), "\(error)")
    }

    /// An index of another shape beside the parent's (an expression key, which has no column) leaves the
    /// store opening, and so does the parent's own index written another way: partial on the column being
    /// set, quoted and spaced as the app likes, or with its collation named.
    @Test(arguments: [
        "CREATE INDEX comments_by_lower_body ON comments(lower(body))",
        "DROP INDEX issues_by_asset; CREATE INDEX issues_by_asset ON issues(\"asset_id\", title)\n  WHERE \"asset_id\" IS NOT NULL",
        "DROP INDEX issues_by_asset; CREATE INDEX issues_by_asset ON issues(asset_id COLLATE BINARY)",
    ])
    func anIndexWrittenAnotherWayStillOpens(_ change: String) throws {
        let database = try TemporaryDatabase()
        _ = try LocalStore.open(at: database.path)
        try database.queue.write { try $0.execute(sql: change) }
        _ = try LocalStore.open(at: database.path)
    }

    /// Every statement that finds records by their parent (a pulled page settling the orphans of the
    /// parents it brings, a delete flagging a parent's children) probes an index, for every parent of
    /// every entity. Without one SQLite read the whole child table once per parent: a pull of 100,000
    /// records into a store holding as many, an asset in most pages, ran 20 times slower.
    @Test func everyLookupOfChildrenByTheirParentUsesAnIndex() throws {
        let database = try TemporaryDatabase()
        _ = try LocalStore.open(at: database.path)
        var relations = 0
        try database.queue.read { db in
            for parent in EntityCatalog.all {
                for (child, table, column) in EntityTables.childColumns(of: parent.type) {
                    relations += 1
                    for (sql, arguments) in [
                        (EntityTables.orphanedChildrenSQL(table: table, column: column), ["[]"]),
                        (EntityTables.flagChildrenSQL(table: table, column: column), [""]),
                    ] {
                        let plan = try Row.fetchAll(db, sql: "EXPLAIN QUERY PLAN " + sql, arguments: StatementArguments(arguments))
                            .map { $0["detail"] as String }
                        let scans = plan.filter { $0.hasPrefix("SCAN c") || $0.hasPrefix("SCAN \(child.table)") || $0.contains("AUTOMATIC") }
                        #expect(scans.isEmpty, "\(child.type.rawValue) by \(column): \(plan)")
                    }
                }
            }
        }
        #expect(relations >= 20)
    }

    /// Two fields stored in one column, or a field in a sync column, are refused before any read.
    @Test(arguments: [
        (["projectID", "projectId"], "projectId", "also field projectID's"),
        (["version"], "version", "also the sync metadata's"),
        // The column the store keeps a record's clocks in (review 140).
        (["syncClocks"], "syncClocks", "also the sync metadata's"),
    ])
    func fieldsThatShareAColumnAreRefused(_ names: [String], field: String, says: String) throws {
        let database = try TemporaryDatabase()
        _ = try LocalStore.open(at: database.path)
        let entity = EntityDescription(
            .issue, table: "issues", model: Issue.self, policy: .fieldMerge,
            fields: names.map { FieldDescription($0, .uuid) }, access: EntityAccess(writers: ["owner"]))
        let error = try #require(throws: StoreError.self) {
            try database.queue.read { db in try DeclaredColumns.check([entity], in: db, path: database.path) }
        }
        #expect(error.code == .schemaMismatch && error.modelError?.field == field, "\(error)")
        #expect(error.message.contains(says), "\(error)")
    }

    /// A database of today's field-service history (v1…v14, made before the toolkit had its own steps)
    /// opens with every row: the toolkit's steps adopt its sync tables, and the file is named as the
    /// field-service app's.
    @Test func aFileFromBeforeAppsDeclaredSchemasOpensWithNothingLost() throws {
        let database = try TemporaryDatabase()
        try LocalSchema.migrator.migrate(database.queue)
        try database.queue.write { try Fixture.fill($0, rowsPerTable: 10, seed: 7) }
        let before = try database.queue.read { db in
            try String.fetchAll(db, sql: "SELECT name FROM sqlite_schema WHERE type = 'table' ORDER BY name").map { table in
                (table, try Int.fetchOne(db, sql: "SELECT count(*) FROM \"\(table)\"") ?? 0)
            }
        }
        let schema = try Migrator.schemaSQL(of: database.queue)
        _ = try LocalStore.open(at: database.path)
        let (after, owner, toolkitVersion) = try database.queue.read { db in
            (
                try before.map { table, _ in (table, try Int.fetchOne(db, sql: "SELECT count(*) FROM \"\(table)\"") ?? -1) },
                try String.fetchOne(db, sql: "SELECT name FROM outpost_app"),
                try Int.fetchOne(db, sql: "SELECT max(version) FROM outpost_ledger")
            )
        }
        // Opening adds its own state (the device's node id) and takes nothing away.
        for ((table, count), (_, now)) in zip(before, after) {
            #expect(now == count || (table == "sync_state" && now > count), "\(table): \(count) rows, now \(now)")
        }
        #expect(owner == "field-service")
        #expect(toolkitVersion == ToolkitSchema.migrator.latestVersion)
        // The toolkit adopted the tables as they were: the schema, bookkeeping aside, is v14's, plus
        // what the toolkit's later steps add (the versions imports wrote, step 2; the keys of finished
        // mutations, steps 3 and 5; the queue's `unheard` column, step 7; the conflicts' `kind`, step 8).
        let withColumn = try LocalDatabase.schemaSQL(at: database.path)
        let columns = [", unheard INTEGER NOT NULL DEFAULT 0", ", kind TEXT CHECK (kind IN ('value', 'delete', 'restore'))"]
        for column in columns { #expect(withColumn.contains(column), "\(column)") }
        let adopted = columns.reduce(withColumn) { $0.replacingOccurrences(of: $1, with: "") }
            .split(separator: "\n", omittingEmptySubsequences: false)
            .filter { !$0.contains("imported_versions") && !$0.contains("finished_mutations") && !$0.contains("finished_keys") }
            .joined(separator: "\n")
        #expect(adopted == schema)
        #expect(try LocalDatabase.schemaSQL(at: database.path).contains("CREATE TABLE imported_versions"))
    }

    /// A new file gets the same toolkit tables whichever history makes them: the toolkit's first step
    /// alone (as a new app's file) gives the columns the field-service history v1…v14 gave them.
    @Test func theToolkitsStepsMakeTheTablesTheLegacyHistoryMade() throws {
        let legacy = try TemporaryDatabase(), toolkit = try TemporaryDatabase()
        try LocalSchema.migrator.migrate(legacy.queue)
        try ToolkitSchema.migrator.migrate(toolkit.queue, to: 1)
        let tables = try toolkit.queue.read { db in
            try String.fetchAll(db, sql: "SELECT name FROM sqlite_schema WHERE type IN ('table', 'index') AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' AND name != 'outpost_ledger' ORDER BY name")
        }
        #expect(tables.count == 15, "\(tables)")
        for table in tables {
            let shape = { (queue: DatabaseQueue) in
                try queue.read { db in
                    try Row.fetchAll(db, sql: "SELECT name, type, \"notnull\", dflt_value, pk FROM pragma_table_xinfo(?)", arguments: [table])
                        .map { "\($0["name"] as String) \($0["type"] as String) \($0["notnull"] as Int) \($0["dflt_value"] as String? ?? "-") \($0["pk"] as Int)" }
                }
            }
            #expect(try shape(toolkit.queue) == shape(legacy.queue), "\(table)")
            let indexes = { (queue: DatabaseQueue) in
                try queue.read { db in try String.fetchAll(db, sql: "SELECT name FROM pragma_index_list(?) ORDER BY name", arguments: [table]) }
            }
            #expect(try indexes(toolkit.queue) == indexes(legacy.queue), "\(table)")
        }
    }

    /// A file of another app is refused before any step runs, naming both apps, and left as it was; so
    /// is a file no Outpost app made.
    @Test(arguments: [
        ("CREATE TABLE outpost_app (name TEXT NOT NULL); INSERT INTO outpost_app VALUES ('contractor-jobs');",
         "belongs to the app 'contractor-jobs', not to 'field-service'"),
        ("CREATE TABLE notes (id TEXT PRIMARY KEY, body TEXT);", "belongs to no Outpost app: it has tables (notes)"),
    ])
    func aFileOfAnotherAppIsRefusedUnchanged(_ setup: String, says: String) throws {
        let database = try TemporaryDatabase()
        try database.queue.write { try $0.execute(sql: setup) }
        let schema = try Migrator.schemaSQL(of: database.queue, ledgers: [])
        let error = try #require(throws: StoreError.self) { _ = try LocalStore.open(at: database.path) }
        #expect(error.code == .foreignDatabase, "\(error)")
        #expect(error.message.contains(says), "\(error)")
        #expect(try Migrator.schemaSQL(of: database.queue, ledgers: []) == schema, "the file was changed")
    }

    /// A file with tables and an empty migration ledger is not a new database: neither `outpost migrate`
    /// nor opening the store runs the app's steps on it or names it as the app's. Refused as a file of
    /// no Outpost app, byte for byte as it was.
    @Test func aFileWithTablesAndAnEmptyLedgerBelongsToNoOutpostApp() throws {
        try expectRefusedByteIdentical(
            setup: Self.emptyLedger + "CREATE TABLE notes (id TEXT PRIMARY KEY, body TEXT); INSERT INTO notes VALUES ('n1', 'keep me');",
            says: "belongs to no Outpost app: it has tables (notes) and an empty migration ledger")
    }

    /// A file whose ledger starts with another app's step 1 belongs to that app: refused as foreign
    /// before any check of the steps (not as an edited step), and no claim is written into it.
    @Test func aFileWhoseLedgerIsAnotherAppsIsRefusedAsForeignAndLeftByteIdentical() throws {
        try expectRefusedByteIdentical(
            setup: Self.emptyLedger + """
                INSERT INTO migrator_ledger VALUES (1, '1.0: jobs, crew and notes', '\(String(repeating: "ab", count: 32))', '2026-01-01T00:00:00Z');
                CREATE TABLE jobs (id TEXT PRIMARY KEY, name TEXT); INSERT INTO jobs VALUES ('j1', 'Roof');
                """,
            says: "belongs to another app: its migration ledger starts with step 1 '1.0: jobs, crew and notes'")
    }

    /// An app claim that names no app, or more than one, is damaged: refused, never relabelled.
    @Test(arguments: [
        ("CREATE TABLE outpost_app (name TEXT NOT NULL);", "this database's app claim (outpost_app) names no app"),
        ("CREATE TABLE outpost_app (name TEXT NOT NULL); INSERT INTO outpost_app VALUES ('field-service'), ('contractor-jobs');",
         "this database's app claim (outpost_app) names 2 apps"),
        ("CREATE TABLE outpost_app (name TEXT NOT NULL); INSERT INTO outpost_app VALUES ('field-service'), ('field-service');",
         "this database's app claim (outpost_app) names 2 apps"),
    ])
    func aDamagedAppClaimIsRefusedUnchanged(_ setup: String, says: String) throws {
        try expectRefusedByteIdentical(setup: setup, says: says)
    }

    /// The claim is written in the transaction of the first step: a new file whose first step fails is
    /// left without one (and so without any table).
    @Test func aNewFileWhoseFirstStepFailsIsLeftUnclaimed() throws {
        let database = try TemporaryDatabase()
        let failing = LocalApp(schema: LocalApp.fieldService.schema, steps: [
            MigrationStep(version: 1, name: "fails", sql: "CREATE TABLE jobs (id TEXT PRIMARY KEY); SELECT * FROM no_such_table;"),
        ])
        let error = try #require(throws: StoreError.self) { try LocalDatabase.migrate(at: database.path, app: failing) }
        #expect(error.code == .migrationRefused, "\(error)")
        let tables = try database.queue.read { db in
            try String.fetchAll(db, sql: "SELECT name FROM sqlite_schema WHERE type = 'table'")
        }
        #expect(tables.isEmpty, "\(tables)")
    }

    /// A file that lost ledger rows above v3: the migrator names the step whose work the file already
    /// has as a damaged ledger (not SQLite's raw "duplicate column name"), and the file stays as it was.
    @Test func ledgerRowsRemovedAboveV3AreADamagedLedgerNamingTheStep() throws {
        let database = try TemporaryDatabase()
        try LocalDatabase.migrate(at: database.path, app: .fieldService)
        try database.queue.write { try $0.execute(sql: "DELETE FROM migrator_ledger WHERE version > 3") }
        let bytes = try Data(contentsOf: URL(fileURLWithPath: database.path))
        let error = try #require(throws: StoreError.self) { try LocalDatabase.migrate(at: database.path, app: .fieldService) }
        #expect(error.code == .migrationRefused && error.migrationError?.code == .ledgerDamaged, "\(error)")
        #expect(error.migrationError?.version == 4 && error.migrationError?.stepName == LocalSchema.steps[3].name, "\(error)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: database.path)) == bytes, "the file was changed")
    }

    static let emptyLedger = """
        CREATE TABLE migrator_ledger (version INTEGER PRIMARY KEY, name TEXT NOT NULL, checksum TEXT NOT NULL, applied_at TEXT NOT NULL);
        """

    /// Runs `setup` on a new file, then `outpost migrate`'s path and the store's open on it: both refused
    /// as a foreign database saying `says`, the file byte for byte as it was.
    /// An attack found a store whose claim was dropped named again as the field-service app's without a
    /// word, while an empty claim was refused: both are damage. The claim is written with the toolkit's
    /// first step, so a toolkit ledger with steps and no claim cannot come from any Outpost.
    @Test func aDroppedAppClaimIsRefusedUnchanged() throws {
        try expectRefusedByteIdentical(
            setup: nil, says: "has the toolkit's ledger (outpost_ledger) but no app claim (outpost_app): it is damaged")
    }

    /// `setup` runs on an empty file; with nil, on a field-service store migrated to the latest version
    /// whose app claim is then dropped.
    private func expectRefusedByteIdentical(setup: String?, says: String) throws {
        let database = try TemporaryDatabase()
        if let setup {
            try database.queue.write { try $0.execute(sql: setup) }
        } else {
            try database.queue.close()
            try LocalDatabase.migrate(at: database.path, app: .fieldService)
            let queue = try DatabaseQueue(path: database.path)
            try queue.writeWithoutTransaction { db in
                try db.execute(sql: "DROP TABLE outpost_app")
                try db.execute(sql: "PRAGMA journal_mode = DELETE")
            }
            try queue.close()
        }
        let bytes = try Data(contentsOf: URL(fileURLWithPath: database.path))
        let migrating = try #require(throws: StoreError.self) { try LocalDatabase.migrate(at: database.path, app: .fieldService) }
        let opening = try #require(throws: StoreError.self) { _ = try LocalStore.open(at: database.path) }
        for error in [migrating, opening] {
            #expect(error.code == .foreignDatabase, "\(error)")
            #expect(error.message.contains(says), "\(error)")
        }
        #expect(try Data(contentsOf: URL(fileURLWithPath: database.path)) == bytes, "the file was changed")
        #expect(!FileManager.default.fileExists(atPath: database.path + "-wal"), "the file was opened for writing")
    }
}

import Foundation
import GRDB
import OutpostMigrator
import OutpostSchema

/// Maintenance of a local database file: upgrading it and describing it. Used by `outpost migrate`
/// and `outpost info`, and by the store when it opens a file.
public enum LocalDatabase {
    /// Upgrades (or creates) the database at `path` to `version` of `app`'s steps, or to its latest
    /// when nil, and then the toolkit's tables to theirs. Installs the app's schema for the process.
    ///
    /// Refused, with the database unchanged: a file that belongs to another app (`foreignDatabase`,
    /// naming both, or saying its ledger is another app's history), or to no Outpost app (tables and
    /// no ledger, or an empty one), or whose app claim is damaged; a schema other than the one the
    /// process runs on (`schemaMismatch`); a step edited after the file ran it (`migrationRefused`).
    @discardableResult
    public static func migrate(at path: String, app: LocalApp, to version: Int? = nil) throws(StoreError)
        -> Migrator.Outcome
    {
        do {
            try EntityCatalog.install(app.schema)
        } catch {
            throw StoreError(.schemaMismatch, path: path, message: error.message, modelError: error, underlying: error)
        }
        let queue = try open(path, mustExist: false)
        // Whose file it is, told from what it holds before anything is written; a file still to be
        // named is named in the transaction of the first step that runs (or, when none is pending, once
        // every check passed), never by a refused or read-only open.
        var claim = try ownership(of: queue, for: app, path: path)
        let migrator = app.migrator
        let outcome: Migrator.Outcome
        do {
            outcome = try migrator.migrate(queue, to: version ?? migrator.latestVersion, alongsideFirstStep: claim)
            if !outcome.applied.isEmpty { claim = nil }
            // The toolkit's steps run once the app's history is complete: a legacy history still on its
            // way creates the toolkit's tables in its own later steps.
            if outcome.to == migrator.latestVersion {
                let toolkit = ToolkitSchema.migrator
                if try !toolkit.migrate(queue, to: toolkit.latestVersion, alongsideFirstStep: claim).applied.isEmpty { claim = nil }
            }
        } catch {
            throw StoreError(.migrationRefused, path: path, message: error.message, migrationError: error, underlying: error)
        }
        // At the latest version every declared field has its column: a step the schema needs and
        // nobody wrote is named now, not found by a failing write.
        if outcome.to == migrator.latestVersion {
            do {
                try queue.read { db in try DeclaredColumns.check(app.schema.entities, in: db, path: path) }
            } catch let error as StoreError {
                throw error
            } catch {
                throw StoreError(failure: error, path: path)
            }
        }
        // An adopted file every step had already run on; a new file nothing ran on stays unnamed.
        if let claim, outcome.to > 0 {
            try StoreError.mapping(path: path) { try queue.write { try claim($0) } }
        }
        return outcome
    }

    /// Whether the file at `path` is `app`'s, read without writing anything: nil when its claim names
    /// `app`; the write that names it `app`'s when it is new (no table at all) or a database Outpost made
    /// before apps named their schemas that `app` adopts. Any other file is refused (`foreignDatabase`):
    /// a claim naming another app, or no app, or several, or a claim gone while the toolkit's ledger
    /// is there (a damaged claim is never relabelled); a ledger
    /// whose first step is not `app`'s (another app's history: its checksums would otherwise read as
    /// edited steps); tables with an empty ledger or none (no Outpost app's file: a ledger with no step
    /// recorded does not make a file new).
    private static func ownership(of queue: DatabaseQueue, for app: LocalApp, path: String) throws(StoreError)
        -> (@Sendable (Database) throws -> Void)?
    {
        let name = app.schema.name
        let owner = ToolkitSchema.ownerTable
        let unclaimed: Bool = try StoreError.mapping(path: path) {
            try queue.read { db -> Bool in
                func refuse(_ message: String) -> StoreError { StoreError(.foreignDatabase, path: path, message: message) }
                if try db.tableExists(owner) {
                    let recorded = try String.fetchAll(db, sql: "SELECT name FROM \(owner)")
                    guard let only = recorded.first else {
                        throw refuse("this database's app claim (\(owner)) names no app: it is damaged, and is not relabelled as '\(name)'")
                    }
                    guard recorded.count == 1 else {
                        let apps = recorded.map { "'\($0)'" }.joined(separator: ", ")
                        throw refuse("this database's app claim (\(owner)) names \(recorded.count) apps (\(apps)): it is damaged; one app owns a file")
                    }
                    guard only == name else {
                        throw refuse("this database belongs to the app '\(only)', not to '\(name)'; open it with that app's schema")
                    }
                    return false
                }
                // The claim is written in the transaction of the toolkit's first step (both came in one
                // release): a toolkit ledger with a step and no claim is a claim someone dropped.
                if try db.tableExists(ToolkitSchema.ledger),
                    try Bool.fetchOne(db, sql: "SELECT EXISTS (SELECT 1 FROM \(ToolkitSchema.ledger))") == true
                {
                    throw refuse("this database has the toolkit's ledger (\(ToolkitSchema.ledger)) but no app claim (\(owner)): it is damaged, and is not relabelled as '\(name)'")
                }
                let history = try app.migrator.history(in: db)
                switch history {
                case .new:
                    return true
                case .unrecorded(let tables) where !tables.contains(Migrator.ledgerTable):
                    throw refuse("this database belongs to no Outpost app: it has tables (\(tables[0])) and no migration ledger")
                case .unrecorded(let tables):
                    let shown = tables.first { !ToolkitSchema.bookkeepingTables.contains($0) } ?? tables[0]
                    throw refuse("this database belongs to no Outpost app: it has tables (\(shown)) and an empty migration ledger")
                case .foreign, .ours:
                    // Made before apps named their schemas: the app that served alone then says so.
                    guard app.schema.adoptsUnnamedDatabases else {
                        throw refuse("this database was made by Outpost before apps named their schemas, for the app that adopts such databases (AppSchema.adoptsUnnamedDatabases), not for '\(name)'")
                    }
                }
                // And of that app's history: a ledger another app's steps began is that app's file.
                if case .foreign(let first) = history {
                    throw refuse("this database belongs to another app: its migration ledger starts with step \(first.version) '\(first.name)', not with '\(name)''s step 1 '\(app.steps.first?.name ?? "none")'")
                }
                return true
            }
        }
        guard unclaimed else { return nil }
        return { db in
            try db.execute(sql: "CREATE TABLE IF NOT EXISTS \(owner) (name TEXT NOT NULL)")
            try db.execute(sql: "INSERT INTO \(owner) (name) SELECT ? WHERE NOT EXISTS (SELECT 1 FROM \(owner))", arguments: [name])
        }
    }

    /// Describes the database at `path` without changing it: the version of `app`'s steps, those
    /// applied, rows per table.
    public static func inspect(at path: String, app: LocalApp) throws(StoreError) -> DatabaseSummary {
        let queue = try open(path, mustExist: true)
        do {
            let versions = try app.migrator.appliedVersions(in: queue)
            let counts = try queue.read { db in
                let tables = try String.fetchAll(db, sql: """
                    SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\'
                    ORDER BY name
                    """)
                return try tables.map { table in
                    // Table names come from the file's own schema and are quoted, never spliced raw.
                    (table, try Int.fetchOne(db, sql: "SELECT count(*) FROM \(table.quotedDatabaseIdentifier)") ?? 0)
                }
            }
            return DatabaseSummary(
                schemaVersion: versions.last ?? 0,
                latestKnownVersion: app.steps.count,
                steps: versions.map { version in
                    DatabaseSummary.Step(
                        version: version,
                        name: version <= app.steps.count
                            ? app.steps[version - 1].name : "unknown to this version of the app")
                },
                tables: Dictionary(uniqueKeysWithValues: counts))
        } catch let error as MigrationError {
            throw StoreError(.migrationRefused, path: path, message: error.message, migrationError: error, underlying: error)
        } catch {
            throw StoreError(.databaseFailure, path: path, message: "\(error)", underlying: error)
        }
    }

    /// The normalized schema of the database at `path` (see `Migrator.schemaSQL(of:)`).
    public static func schemaSQL(at path: String) throws(StoreError) -> String {
        let queue = try open(path, mustExist: true)
        do {
            return try Migrator.schemaSQL(of: queue, ledgers: ToolkitSchema.bookkeepingTables)
        } catch {
            throw StoreError(.databaseFailure, path: path, message: error.message, migrationError: error, underlying: error)
        }
    }

    /// Opens the file; with `mustExist`, a missing file is an error instead of a new database. Reads
    /// open read-write all the same: after a crash SQLite must be able to roll back the interrupted
    /// transaction's journal before anyone reads, and a read-only connection cannot.
    /// How long a connection to a local database waits for another connection's write transaction
    /// (a pre-sync import, another process's sync, a migration) before its own write fails as busy.
    /// SQLite's default is not to wait at all: a save during an import failed at once with "database is
    /// locked". A minute covers an import of a large project on a slow phone; a write still refused
    /// after it fails with the store's error and changes nothing.
    public static let busyTimeout: TimeInterval = 60

    /// A GRDB configuration for a local database connection: it waits `busyTimeout` for other writers.
    /// Every connection to the file (the store's, the importer's, the migrator's) starts from it.
    public static func configuration(busyTimeout: TimeInterval = busyTimeout) -> Configuration {
        var configuration = Configuration()
        configuration.busyMode = .timeout(busyTimeout)
        return configuration
    }

    static func open(_ path: String, mustExist: Bool) throws(StoreError) -> DatabaseQueue {
        if mustExist, !FileManager.default.fileExists(atPath: path) {
            throw StoreError(.databaseNotFound, path: path, message: "no database file here")
        }
        // A store's connections all open after this one: before it, SQLite's allocation statistics go
        // off, whose mutex the writer and the readers would queue on (the package README).
        SQLiteProcessSettings.apply()
        do {
            return try DatabaseQueue(path: path, configuration: configuration())
        } catch {
            throw StoreError(.databaseFailure, path: path, message: "\(error)", underlying: error)
        }
    }
}

/// What `LocalDatabase.inspect(at:)` reports; its JSON form is what `outpost info --json` prints.
public struct DatabaseSummary: Sendable, Hashable, Codable {
    /// One applied step.
    public struct Step: Sendable, Hashable, Codable {
        /// The step's version.
        public let version: Int
        /// The step's name, or a note that this build does not know it.
        public let name: String
    }

    /// The version the database is at.
    public let schemaVersion: Int
    /// The newest version this build of Outpost knows.
    public let latestKnownVersion: Int
    /// Applied steps, in order.
    public let steps: [Step]
    /// Row count of every table, by name.
    public let tables: [String: Int]
}

import Foundation
import GRDB
import OutpostMigrator
import OutpostModels

/// Maintenance of a local database file: upgrading it and describing it. Used by `outpost migrate`
/// and `outpost info`, and by the store when it opens a file.
public enum LocalDatabase {
    /// Upgrades (or creates) the database at `path` to `version`, or to the latest when nil.
    @discardableResult
    public static func migrate(at path: String, to version: Int? = nil) throws(StoreError) -> Migrator.Outcome {
        let queue = try open(path, mustExist: false)
        let outcome: Migrator.Outcome
        do {
            outcome = try LocalSchema.migrator.migrate(queue, to: version ?? LocalSchema.latestVersion)
        } catch {
            throw StoreError(.migrationRefused, path: path, message: error.message, migrationError: error, underlying: error)
        }
        // At the latest version every declared field has its column: a step the schema needs and
        // nobody wrote is named now, not found by a failing write.
        if outcome.to == LocalSchema.latestVersion {
            do {
                try queue.read { db in try DeclaredColumns.check(EntityCatalog.all, in: db, path: path) }
            } catch let error as StoreError {
                throw error
            } catch {
                throw StoreError(failure: error, path: path)
            }
        }
        return outcome
    }

    /// Describes the database at `path` without changing it: version, applied steps, rows per table.
    public static func inspect(at path: String) throws(StoreError) -> DatabaseSummary {
        let queue = try open(path, mustExist: true)
        do {
            let versions = try LocalSchema.migrator.appliedVersions(in: queue)
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
                latestKnownVersion: LocalSchema.latestVersion,
                steps: versions.map { version in
                    DatabaseSummary.Step(
                        version: version,
                        name: version <= LocalSchema.steps.count
                            ? LocalSchema.steps[version - 1].name : "unknown to this version of Outpost")
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
            return try Migrator.schemaSQL(of: queue)
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

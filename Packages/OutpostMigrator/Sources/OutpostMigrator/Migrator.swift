import Foundation
import GRDB

/// Applies numbered steps to a SQLite database, forward only, refusing any step that would remove or
/// redefine what an older app version relies on.
///
/// Each step runs in its own immediate transaction together with its ledger entry, so a process
/// killed mid-step leaves the database at the last completed version and the next run completes it.
///
/// ## Topics
/// - ``migrate(_:)``, ``migrate(_:to:alongsideFirstStep:)``
/// - ``pendingSteps(in:)``, ``appliedVersions(in:)``, ``recordedSteps(in:)``, ``schemaSQL(of:)``
public struct Migrator: Sendable {
    /// The table that records each applied step with its checksum and time, unless a migrator names
    /// its own (`ledger`).
    public static let ledgerTable = "migrator_ledger"

    /// This migrator's ledger table. Two histories can share one file, each with its ledger (the
    /// toolkit's sync tables and an app's entity tables): each checks only its own steps.
    public let ledger: String

    /// Every step, in version order.
    public let steps: [MigrationStep]
    /// Tables whose rows are synced: a new UNIQUE constraint on them is refused, since a replayed
    /// or merged record would then fail to insert.
    public let syncedTables: Set<String>

    /// The versions a migration went from and to, and the steps it applied.
    public struct Outcome: Sendable, Hashable {
        /// The version before.
        public let from: Int
        /// The version after.
        public let to: Int
        /// The versions applied by this call, in order; empty when there was nothing to do.
        public let applied: [Int]
    }

    /// Creates a migrator. Steps must be numbered 1, 2, 3… without gaps: that is a programming error.
    /// `ledger` names the table its history is kept in.
    public init(steps: [MigrationStep], syncedTables: Set<String> = [], ledger: String = Migrator.ledgerTable) {
        for (offset, step) in steps.enumerated() {
            precondition(step.version == offset + 1, "Migration steps must be numbered 1…N in order; found \(step.version) at position \(offset + 1)")
        }
        self.steps = steps
        self.syncedTables = syncedTables
        self.ledger = ledger
    }

    /// The version the last step brings a database to.
    public var latestVersion: Int { steps.count }

    /// Applies every pending step.
    @discardableResult
    public func migrate(_ writer: any DatabaseWriter) throws(MigrationError) -> Outcome {
        try migrate(writer, to: latestVersion)
    }

    /// One applied step as the ledger records it.
    public struct RecordedStep: Sendable, Hashable {
        /// The step's version.
        public let version: Int
        /// The name the step had when it ran.
        public let name: String
        /// The checksum of the step as it ran (`MigrationStep.checksum`).
        public let checksum: String
    }

    /// Applies pending steps up to and including `target` (for tests and staged rollouts).
    ///
    /// `alongsideFirstStep` runs inside the transaction of the first step this call applies, before the
    /// step, after the ledger was checked: what it writes commits with that step or not at all. It does
    /// not run when no step is pending.
    @discardableResult
    public func migrate(
        _ writer: any DatabaseWriter, to target: Int, alongsideFirstStep: (@Sendable (Database) throws -> Void)? = nil
    ) throws(MigrationError) -> Outcome {
        guard (0...latestVersion).contains(target) else {
            throw MigrationError(
                .targetOutOfRange, path: writer.path, message: "version \(target) does not exist; the last step is \(latestVersion)")
        }
        return try attempt(path: writer.path) {
            try writer.writeWithoutTransaction { db in
                let current = try checkedVersion(db, path: writer.path)
                guard target >= current else {
                    throw MigrationError(
                        .targetOutOfRange, path: writer.path,
                        message: "the database is at version \(current); migrations only go forward, not to \(target)")
                }
                var applied: [Int] = []
                for step in steps[current..<target] {
                    if try apply(step, db, path: writer.path, before: applied.isEmpty ? alongsideFirstStep : nil) {
                        applied.append(step.version)
                    }
                }
                return Outcome(from: current, to: target, applied: applied)
            }
        }
    }

    /// Steps not applied yet, after checking the ledger against the code.
    public func pendingSteps(in reader: any DatabaseReader) throws(MigrationError) -> [MigrationStep] {
        let current = try attempt(path: reader.path) { try reader.read { try checkedVersion($0, path: reader.path) } }
        return Array(steps[current...])
    }

    /// Versions recorded in the ledger, in order (they may run past the code's last step).
    public func appliedVersions(in reader: any DatabaseReader) throws(MigrationError) -> [Int] {
        try attempt(path: reader.path) { try reader.read { try Ledger.entries($0, table: ledger).map(\.version) } }
    }

    /// The steps this migrator's ledger records in `db`, in version order, unchecked: empty when the
    /// ledger is empty or absent. Tells whose history a database holds before anything is written.
    public func recordedSteps(in db: Database) throws -> [RecordedStep] {
        try Ledger.entries(db, table: ledger).map { RecordedStep(version: $0.version, name: $0.name, checksum: $0.checksum) }
    }

    /// Whose history a database holds, read without writing anything: the one reading behind every
    /// refusal of a file that is not the caller's (device stores and servers alike).
    public enum History: Sendable, Hashable {
        /// No table at all: a new file.
        case new
        /// Tables (sorted by name) and no record of any step: no migrator's file, or its ledger emptied.
        case unrecorded(tables: [String])
        /// A ledger that another history began: its first step is not this migrator's step 1.
        case foreign(first: RecordedStep)
        /// A ledger this migrator's step 1 began.
        case ours(steps: [RecordedStep])
    }

    /// Reads `db`'s history as this migrator sees it (`History`).
    public func history(in db: Database) throws -> History {
        let tables = try String.fetchAll(db, sql: """
            SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY name
            """)
        if tables.isEmpty { return .new }
        let recorded = try recordedSteps(in: db)
        guard let first = recorded.first else { return .unrecorded(tables: tables) }
        guard first.version == 1, let ours = steps.first, first.checksum == ours.checksum else { return .foreign(first: first) }
        return .ours(steps: recorded)
    }

    /// The schema as normalized SQL: every table, index, view and trigger, sorted by kind and name, one
    /// statement per line with white space collapsed, without SQLite's and the migrator's own tables.
    /// Two databases with the same schema print the same text, whatever path brought them there.
    /// `ledgers` are left out too (every history's ledger in the file).
    public static func schemaSQL(of reader: any DatabaseReader, ledgers: Set<String> = [ledgerTable]) throws(MigrationError) -> String {
        try attempt(path: reader.path) {
            try reader.read { db in
                let excluded = ledgers.sorted()
                let statements = try String.fetchAll(db, sql: """
                    SELECT sql FROM sqlite_schema
                    WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\'
                      AND tbl_name NOT IN (\(excluded.map { _ in "?" }.joined(separator: ", ")))
                    ORDER BY CASE type WHEN 'table' THEN 0 WHEN 'index' THEN 1 WHEN 'view' THEN 2 ELSE 3 END, name
                    """, arguments: StatementArguments(excluded))
                return statements.map { normalize($0) + ";\n" }.joined()
            }
        }
    }

    // MARK: - Internals

    /// The database's version, after refusing a ledger the code cannot vouch for.
    func checkedVersion(_ db: Database, path: String) throws -> Int {
        let entries = try Ledger.entries(db, table: ledger)
        if let newest = entries.last?.version, newest > latestVersion {
            throw MigrationError(
                .databaseNewerThanCode, version: newest, stepName: entries.last?.name, path: path,
                message: "the database is at version \(newest) but this code knows steps up to \(latestVersion); update the app, the database was left untouched")
        }
        for (offset, entry) in entries.enumerated() {
            guard entry.version == offset + 1 else {
                throw MigrationError(
                    .ledgerDamaged, version: entry.version, path: path,
                    message: "the ledger skips from version \(offset) to \(entry.version)")
            }
            let step = steps[offset]
            guard entry.checksum == step.checksum else {
                throw MigrationError(
                    .checksumChanged, version: step.version, stepName: step.name, path: path,
                    message: "this step was edited after the database ran it (checksum \(entry.checksum.prefix(12))… is now \(step.checksum.prefix(12))…); shipped steps must never change, add a new step instead")
            }
        }
        return entries.count
    }

    /// Runs `step` in a transaction of its own; returns false when the ledger records it already. Another
    /// connection may have run it since this one read the version: a second process opening the same new
    /// file (servers started together, an app and its extension). Taken for a step run without its
    /// ledger row, that step failed as a damaged ledger and the process refused to start (attack 74,
    /// finding 3).
    private func apply(
        _ step: MigrationStep, _ db: Database, path: String, before prelude: (@Sendable (Database) throws -> Void)?
    ) throws -> Bool {
        var ran = false
        func refuse(
            _ code: MigrationError.Code, _ findings: [String], underlying: (any Error & Sendable)? = nil
        ) -> MigrationError {
            MigrationError(
                code, version: step.version, stepName: step.name, path: path, message: findings.joined(separator: "; "),
                underlying: underlying)
        }
        try db.inTransaction(.immediate) {
            try Ledger.create(db, table: ledger)
            let ledgerBefore = try Ledger.entries(db, table: ledger)
            if let recorded = ledgerBefore.first(where: { $0.version == step.version }) {
                guard recorded.checksum == step.checksum else {
                    throw refuse(.checksumChanged, [
                        "another connection ran a step \(step.version) that differs from this code's (checksum \(recorded.checksum.prefix(12))… against \(step.checksum.prefix(12))…)",
                    ])
                }
                return .rollback
            }
            try prelude?(db)
            let ignored: Set<String> = [ledger]
            let before = try SchemaSnapshot.capture(db, excluding: ignored)
            let writes = StepWrites(existing: before.tables, ledger: ledger)
            db.add(transactionObserver: writes, extent: .observerLifetime)
            do {
                try step.run(db)
                db.remove(transactionObserver: writes)
            } catch {
                db.remove(transactionObserver: writes)
                if let present = Self.alreadyPresent(error) {
                    throw refuse(.ledgerDamaged, [
                        "the database already has what this step makes (\(present)) though the ledger does not record the step: "
                            + "its ledger lost rows or its schema was changed outside the migrator; nothing was changed, "
                            + "restore the ledger or the file rather than edit the steps",
                    ], underlying: error)
                }
                throw refuse(.stepFailed, ["\(error)"], underlying: error)
            }
            let after = try SchemaSnapshot.capture(db, excluding: ignored)
            let check = SchemaChangeCheck(
                before: before, after: after, syncedTables: syncedTables, redundantIndexes: step.redundantIndexes)
            var destructive = check.destructiveChanges + writes.findings
            if try Ledger.entries(db, table: ledger) != ledgerBefore, !writes.findings.contains(where: { $0.contains(ledger) }) {
                destructive.append("changed the migrator's ledger \(ledger), which only the migrator writes")
            }
            if !destructive.isEmpty { throw refuse(.destructiveStep, destructive + check.unsafeNewColumns) }
            if !check.unsafeNewColumns.isEmpty { throw refuse(.unsafeColumn, check.unsafeNewColumns) }
            if !check.newUniqueConstraintsOnSyncedTables.isEmpty {
                throw refuse(.uniqueOnSyncedTable, check.newUniqueConstraintsOnSyncedTables)
            }
            let violations = try Row.fetchAll(db, sql: "SELECT * FROM pragma_foreign_key_check")
            if !violations.isEmpty {
                throw refuse(.foreignKeyViolation, violations.prefix(5).map { row in
                    "a row of \(row["table"] as String) (rowid \(row["rowid"] as Int64? ?? -1)) references a missing row of \(row["parent"] as String)"
                } + (violations.count > 5 ? ["and \(violations.count - 5) more"] : []))
            }
            try Ledger.record(step, db, table: ledger)
            ran = true
            return .commit
        }
        return ran
    }

    /// SQLite's message when a step failed making something the database already has (a table, index,
    /// view or trigger, or a column): the sign of a step that ran without its ledger row.
    private static func alreadyPresent(_ error: any Error) -> String? {
        guard let error = error as? DatabaseError, let message = error.message else { return nil }
        return message.hasPrefix("duplicate column name") || message.hasSuffix("already exists") ? message : nil
    }

    private static func normalize(_ sql: String) -> String {
        sql.split(whereSeparator: { $0.isWhitespace }).joined(separator: " ")
    }
}

/// Runs `body`, turning any failure that is not already a `MigrationError` into one.
func attempt<T>(path: String?, _ body: () throws -> T) throws(MigrationError) -> T {
    do {
        return try body()
    } catch let error as MigrationError {
        throw error
    } catch {
        throw MigrationError(.databaseUnreadable, path: path, message: "\(error)", underlying: error)
    }
}

/// The ledger: one row per applied step, written in the step's own transaction.
enum Ledger {
    struct Entry: Equatable {
        let version: Int
        let name: String
        let checksum: String
    }

    static func create(_ db: Database, table: String) throws {
        try db.execute(sql: """
            CREATE TABLE IF NOT EXISTS \(table) (
                version INTEGER PRIMARY KEY,
                name TEXT NOT NULL,
                checksum TEXT NOT NULL,
                applied_at TEXT NOT NULL
            )
            """)
    }

    static func entries(_ db: Database, table: String) throws -> [Entry] {
        guard try db.tableExists(table) else { return [] }
        return try Row.fetchAll(db, sql: "SELECT version, name, checksum FROM \(table) ORDER BY version")
            .map { Entry(version: $0["version"], name: $0["name"], checksum: $0["checksum"]) }
    }

    static func record(_ step: MigrationStep, _ db: Database, table: String) throws {
        try db.execute(
            sql: "INSERT INTO \(table) (version, name, checksum, applied_at) VALUES (?, ?, ?, ?)",
            arguments: [step.version, step.name, step.checksum, ISO8601DateFormatter().string(from: Date())])
    }
}

/// Watches a step's writes, row by row: an existing column's values rewritten (a backfill writes only
/// new columns), rows deleted from an existing table (even when as many are added back, so the count
/// alone would not tell), or the migrator's ledger written at all. SQLite reports the columns an UPDATE
/// (its triggers' and foreign keys' actions included) may write when it runs; the rows it did change
/// come one by one, so a statement that matched none is not held against the step.
final class StepWrites: TransactionObserver {
    private let existing: [String: Set<String>]
    private let ledger: String
    /// Per table, the existing columns the step's UPDATE statements write.
    private var rewrittenColumns: [String: Set<String>] = [:]
    private var updatedRows: [String: Int] = [:]
    private var deletedRows: [String: Int] = [:]
    private var ledgerWritten = false

    init(existing tables: [String: [SchemaSnapshot.Column]], ledger: String) {
        existing = Dictionary(uniqueKeysWithValues: tables.map { ($0.key.lowercased(), Set($0.value.map { $0.name.lowercased() })) })
        self.ledger = ledger.lowercased()
    }

    func observes(eventsOfKind eventKind: DatabaseEventKind) -> Bool {
        let table = eventKind.tableName.lowercased()
        if table == ledger { return true }
        guard let columns = existing[table] else { return false }
        switch eventKind {
        case .insert: return false
        case .delete: return true
        case .update(_, let written):
            let old = Set(written.map { $0.lowercased() }).intersection(columns)
            guard !old.isEmpty else { return false }
            rewrittenColumns[table, default: []].formUnion(old)
            return true
        }
    }

    func databaseDidChange(with event: DatabaseEvent) {
        let table = event.tableName.lowercased()
        if table == ledger {
            ledgerWritten = true
            return
        }
        switch event.kind {
        case .update: updatedRows[table, default: 0] += 1
        case .delete: deletedRows[table, default: 0] += 1
        case .insert: break
        }
    }

    func databaseDidCommit(_ db: Database) {}
    func databaseDidRollback(_ db: Database) {}

    /// What the step did to existing data, each naming the table (and columns).
    var findings: [String] {
        var found: [String] = []
        for (table, count) in updatedRows.sorted(by: { $0.key < $1.key }) {
            let columns = (rewrittenColumns[table] ?? []).sorted().map { "\(table).\($0)" }.joined(separator: ", ")
            found.append("rewrote existing values in \(count) row\(count == 1 ? "" : "s") of \(table) (\(columns)); a backfill may write only new columns")
        }
        for (table, count) in deletedRows.sorted(by: { $0.key < $1.key }) {
            found.append("deleted \(count) existing row\(count == 1 ? "" : "s") of \(table)")
        }
        if ledgerWritten { found.append("wrote the migrator's ledger \(ledger), which only the migrator writes") }
        return found
    }
}

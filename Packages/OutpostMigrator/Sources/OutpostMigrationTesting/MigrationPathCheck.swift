import Foundation
import GRDB
import OutpostMigrator
import OutpostTesting

/// Migration path tests for a team's own steps, in one call from the team's test target:
///
/// 1. **Shipped steps never change.** Each step's checksum is held in a file the team commits (a line
///    `version checksum name` per step, as `schemas/local/steps.txt`). A step whose checksum differs
///    from its line fails the check, naming the step; steps past the file are recorded into it and the
///    check fails once, saying to commit it.
/// 2. **Every path keeps every value.** For every shipped version k below the latest, a fresh database
///    migrated to k is filled with generated edge-case rows: NULLs where a column allows them, empty and
///    very long text, non-ASCII and emoji, the extremes of 64-bit integers and of reals, blobs; a
///    column's `CHECK (column IN (…))` list is honoured, and a column with a foreign key names a row of
///    its parent table (parents filled first). It is then upgraded to the latest version, and every row
///    of every table must still be there with every value it had.
///
/// Returns nothing when the path holds; throws `MigrationPathFailure` with every problem otherwise.
public struct MigrationPathCheck: Sendable {
    /// The team's migrator (its steps, in order).
    public var migrator: Migrator
    /// The file of shipped steps' checksums.
    public var checksums: URL
    /// Rows generated per table at each version.
    public var rowsPerTable: Int
    /// The generator's seed: a failure replays from it.
    public var seed: UInt64

    /// A check of `migrator`'s steps, with their checksums in the file at `checksums`.
    public init(migrator: Migrator, checksums: URL, rowsPerTable: Int = 60, seed: UInt64 = 1) {
        self.migrator = migrator
        self.checksums = checksums
        self.rowsPerTable = rowsPerTable
        self.seed = seed
    }

    /// Runs both checks; throws every problem found.
    public func run() throws {
        var problems = try checkShippedSteps()
        for version in 1..<max(1, migrator.latestVersion) {
            problems += try checkPath(from: version)
        }
        if !problems.isEmpty { throw MigrationPathFailure(problems: problems) }
    }

    /// Compares the steps with the checksum file; records steps past its end.
    func checkShippedSteps() throws -> [String] {
        let shipped = (try? String(contentsOf: checksums, encoding: .utf8))?.split(separator: "\n").map(String.init) ?? []
        var problems: [String] = []
        for line in shipped {
            let parts = line.split(separator: " ", maxSplits: 2).map(String.init)
            guard parts.count >= 2, let version = Int(parts[0]) else {
                problems.append("\(checksums.lastPathComponent): '\(line)' is not 'version checksum name'")
                continue
            }
            guard let step = migrator.steps.first(where: { $0.version == version }) else {
                problems.append("step \(version) is in \(checksums.lastPathComponent) but no longer among the steps: a shipped step was removed")
                continue
            }
            if step.checksum != parts[1] {
                problems.append("step \(version) ('\(step.name)') was edited after it shipped: add a new step instead")
            }
        }
        let recorded = Set(shipped.compactMap { Int($0.split(separator: " ").first ?? "") })
        let new = migrator.steps.filter { !recorded.contains($0.version) }
        if !new.isEmpty {
            let lines = new.map { "\($0.version) \($0.checksum) \($0.name)\n" }.joined()
            let text = shipped.map { $0 + "\n" }.joined() + lines
            try text.write(to: checksums, atomically: true, encoding: .utf8)
            // A failure, so a step never reaches a build whose file does not hold it.
            problems.append("recorded \(new.count) new step(s) in \(checksums.lastPathComponent); commit it")
        }
        return problems
    }

    /// Builds version `version`, fills it, upgrades it to the latest, and compares.
    func checkPath(from version: Int) throws -> [String] {
        // A real file, as an app's database is (WAL, page sizes and the migrator's checks as on a device).
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("outpost-paths-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let queue = try DatabaseQueue(path: folder.appendingPathComponent("v\(version).sqlite").path)
        _ = try migrator.migrate(queue, to: version)
        var random = SeededGenerator(seed: seed &+ UInt64(version))
        try queue.write { db in try EdgeCaseRows.fill(db, rowsPerTable: rowsPerTable, using: &random) }
        let before = try queue.read { try EdgeCaseRows.contents($0) }
        _ = try migrator.migrate(queue)
        let after = try queue.read { try EdgeCaseRows.contents($0) }
        var problems: [String] = []
        for (table, rows) in before.sorted(by: { $0.key < $1.key }) {
            guard let upgraded = after[table] else {
                problems.append("v\(version) → v\(migrator.latestVersion): table \(table) is gone")
                continue
            }
            if upgraded.count != rows.count {
                problems.append("v\(version) → v\(migrator.latestVersion): \(table) had \(rows.count) rows, has \(upgraded.count)")
                continue
            }
            for (index, (old, new)) in zip(rows, upgraded).enumerated() {
                for (column, value) in old.sorted(by: { $0.key < $1.key }) where new[column] != value {
                    problems.append(
                        "v\(version) → v\(migrator.latestVersion): \(table) row \(index + 1), \(column): \(value) became \(new[column].map { "\($0)" } ?? "no column")")
                }
            }
        }
        return problems
    }
}

/// What a migration path check found.
public struct MigrationPathFailure: Error, CustomStringConvertible {
    /// Each problem, with the versions, table, row and column it concerns.
    public var problems: [String]

    public var description: String {
        "migration path check: \(problems.count) problem(s)\n" + problems.prefix(50).map { "  - " + $0 }.joined(separator: "\n")
    }
}

/// Generated rows with the values migrations most often mishandle, honouring the schema SQLite reports.
enum EdgeCaseRows {
    static let texts = [
        "", "Poured footings", "Zoë's kitchen — 2nd floor", "检查屋顶", "🚧 Gate code 4411", "O'Brien \"Bob\"",
        "line one\nline two", "  padded  ", String(repeating: "long ", count: 2_000),
    ]

    static func fill(_ db: Database, rowsPerTable: Int, using random: inout SeededGenerator) throws {
        let tables = try userTables(db)
        // Parents before children, so a foreign key names a row that exists.
        var ordered: [String] = []
        var remaining = tables
        while !remaining.isEmpty {
            let ready = try remaining.filter { table in
                try db.foreignKeys(on: table).allSatisfy { $0.destinationTable == table || ordered.contains($0.destinationTable) || !tables.contains($0.destinationTable) }
            }
            guard !ready.isEmpty else { ordered += remaining; break }
            ordered += ready
            remaining.removeAll { ready.contains($0) }
        }
        for table in ordered {
            let sql = try String.fetchOne(db, sql: "SELECT sql FROM sqlite_schema WHERE type = 'table' AND name = ?", arguments: [table]) ?? ""
            let columns = try Row.fetchAll(db, sql: "SELECT * FROM pragma_table_xinfo(?)", arguments: [table])
                .filter { !($0["pk"] as Int == 1 && ($0["type"] as String).uppercased() == "INTEGER") && ($0["hidden"] as Int) == 0 }
            var references: [String: [DatabaseValue]] = [:]
            for key in try db.foreignKeys(on: table) where key.destinationTable != table {
                for mapping in key.mapping {
                    references[mapping.origin] = try DatabaseValue.fetchAll(
                        db, sql: "SELECT \(mapping.destination.quotedDatabaseIdentifier) FROM \(key.destinationTable.quotedDatabaseIdentifier)")
                }
            }
            // Columns a unique index covers get a value unique to the row, as primary keys do.
            var unique: Set<String> = []
            for index in try db.indexes(on: table) where index.isUnique { unique.formUnion(index.columns) }
            let names = columns.map { ($0["name"] as String).quotedDatabaseIdentifier }.joined(separator: ", ")
            let marks = Array(repeating: "?", count: columns.count).joined(separator: ", ")
            let insert = try db.makeStatement(sql: "INSERT INTO \(table.quotedDatabaseIdentifier) (\(names)) VALUES (\(marks))")
            for row in 0..<rowsPerTable {
                let values: [DatabaseValue] = columns.map { column in
                    let name: String = column["name"]
                    if let parents = references[name] {
                        // A nullable reference is sometimes NULL too: steps that join on it must keep those rows.
                        if !(column["notnull"] as Bool), row % 5 == 4 { return .null }
                        return parents.isEmpty ? .null : parents[row % parents.count]
                    }
                    return value(
                        column: column, row: row, unique: unique.contains(name), choices: choices(of: name, in: sql), using: &random)
                }
                try insert.execute(arguments: StatementArguments(values))
            }
        }
    }

    /// The values a `CHECK (column IN ('a', 'b'))` in the table's SQL allows, if it has one.
    static func choices(of column: String, in sql: String) -> [String]? {
        // The column's own name, not one ending with it (`status` is not `sync_status`).
        let pattern = "(?<![A-Za-z0-9_])\"?\(NSRegularExpression.escapedPattern(for: column))\"?\\s+IN\\s*\\(([^)]*)\\)"
        guard let expression = try? NSRegularExpression(pattern: pattern, options: [.caseInsensitive]),
            let match = expression.firstMatch(in: sql, range: NSRange(sql.startIndex..., in: sql)),
            let list = Range(match.range(at: 1), in: sql)
        else { return nil }
        return sql[list].split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces).trimmingCharacters(in: CharacterSet(charactersIn: "'")) }
    }

    static func value(column: Row, row: Int, unique: Bool, choices: [String]?, using random: inout SeededGenerator) -> DatabaseValue {
        let type = (column["type"] as String).uppercased()
        let nullable = !(column["notnull"] as Bool) && (column["pk"] as Int) == 0
        if nullable, Int.random(in: 0..<5, using: &random) == 0 { return .null }
        if let choices, !choices.isEmpty { return choices[row % choices.count].databaseValue }
        // Key-like columns get a value unique to the row, so primary keys and unique indexes hold.
        let unique = unique || (column["pk"] as Int) > 0
        if type.contains("INT") {
            if unique { return Int64(row + 1).databaseValue }
            return [Int64.max, Int64.min, 0, -1, 1_795_373_177_123, Int64.random(in: -1_000_000...1_000_000, using: &random)]
                .randomElement(using: &random)!.databaseValue
        }
        if type.contains("REAL") || type.contains("FLOA") || type.contains("DOUB") {
            return [1e300, -1e-300, -0.0, 47.6062, Double.random(in: -1e6...1e6, using: &random)].randomElement(using: &random)!.databaseValue
        }
        if type.contains("BLOB") {
            return Data((0..<Int.random(in: 0...64, using: &random)).map { _ in UInt8.random(in: 0...255, using: &random) }).databaseValue
        }
        let text = texts.randomElement(using: &random)!
        return (unique ? "\(text) #\(row)" : text).databaseValue
    }

    static func userTables(_ db: Database) throws -> [String] {
        try String.fetchAll(db, sql: """
            SELECT name FROM sqlite_schema WHERE type = 'table'
            AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' AND name != ? ORDER BY name
            """, arguments: [Migrator.ledgerTable])
    }

    /// Every row of every table (the ledger aside), in primary key (or rowid) order.
    static func contents(_ db: Database) throws -> [String: [[String: DatabaseValue]]] {
        var contents: [String: [[String: DatabaseValue]]] = [:]
        for table in try userTables(db) {
            let key = try db.primaryKey(table).columns.map(\.quotedDatabaseIdentifier).joined(separator: ", ")
            contents[table] = try Row.fetchAll(db, sql: "SELECT * FROM \(table.quotedDatabaseIdentifier) ORDER BY \(key)")
                .map { row in Dictionary(uniqueKeysWithValues: row.columnNames.map { ($0, row[$0] as DatabaseValue) }) }
        }
        return contents
    }
}

import Foundation
import GRDB
import OutpostTesting

/// Fills every table a database has at its current version with realistic rows: hundreds per table,
/// NULLs where a column allows them, unicode text, large and negative numbers, blobs. It reads the
/// columns from SQLite, so it serves every version without knowing the schema's history.
enum Fixture {
    static let names = ["Ana", "Bo", "Chidi", "Dörte", "Émile", "Fatima", "Gu Wei", "Hiroshi", "Ïsa", "José"]
    static let texts = [
        "", "Poured footings", "Zoë's kitchen — 2nd floor", "检查屋顶", "🚧 Gate code 4411", "O'Brien \"Bob\"",
        "line one\nline two", "  padded  ", String(repeating: "long ", count: 200),
    ]

    static func fill(_ db: Database, rowsPerTable: Int, seed: UInt64) throws {
        var random = SeededGenerator(seed: seed)
        let tables = try String.fetchAll(db, sql: """
            SELECT name FROM sqlite_schema WHERE type = 'table'
            AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' AND name != 'migrator_ledger' ORDER BY name
            """)
        for table in tables {
            let columns = try Row.fetchAll(db, sql: "SELECT * FROM pragma_table_xinfo(?)", arguments: [table])
            let generated = columns.filter { !($0["pk"] as Int == 1 && ($0["type"] as String) == "INTEGER") }
            let names = generated.map { ($0["name"] as String).quotedDatabaseIdentifier }.joined(separator: ", ")
            let marks = Array(repeating: "?", count: generated.count).joined(separator: ", ")
            let insert = try db.makeStatement(sql: "INSERT INTO \(table.quotedDatabaseIdentifier) (\(names)) VALUES (\(marks))")
            for row in 0..<rowsPerTable {
                let values = generated.map { column in
                    value(table: table, column: column, row: row, using: &random)
                }
                try insert.execute(arguments: StatementArguments(values))
            }
        }
    }

    static func value(table: String, column: Row, row: Int, using random: inout SeededGenerator) -> (any DatabaseValueConvertible)? {
        let name: String = column["name"], type: String = column["type"]
        let nullable = !(column["notnull"] as Bool)
        if nullable, Int.random(in: 0..<5, using: &random) == 0 { return nil }
        switch (table, name) {
        case ("sync_state", "key"): return row == 0 ? "last_pull_cursor" : "key-\(row)"
        case ("daily_logs", "crew"):
            let count = Int.random(in: 0...5, using: &random)
            return (0..<count).map { _ in names.randomElement(using: &random)! }.joined(separator: ", ")
        case (_, "day"), (_, "start_day"): return String(format: "2026-%02d-%02d", row % 12 + 1, row % 28 + 1)
        // v11's CHECK allows only these (or NULL); the first fixture filled at v11 is v11 → v12's.
        case ("conflicts", "losing_side"): return ["client", "server"].randomElement(using: &random)!
        default: break
        }
        if name == "id" || name.hasSuffix("_id") || ["idempotency_key", "key", "stream"].contains(name) {
            return UUID(uuid: (0..<16).reduce(into: [UInt8]()) { bytes, _ in bytes.append(UInt8.random(in: 0...255, using: &random)) }
                .withUnsafeBytes { $0.load(as: uuid_t.self) }).uuidString.lowercased() + "-\(row)"
        }
        switch type {
        case "INTEGER":
            return [Int64.max, Int64.min + 1, 0, -1, 1_795_373_177_123, Int64.random(in: -1_000_000...1_000_000, using: &random)]
                .randomElement(using: &random)!
        case "REAL":
            return [1e300, -0.0, 47.6062, -122.3321, Double.random(in: -1e6...1e6, using: &random)].randomElement(using: &random)!
        case "BLOB":
            return Data((0..<Int.random(in: 0...64, using: &random)).map { _ in UInt8.random(in: 0...255, using: &random) })
        default:
            return texts.randomElement(using: &random)! + (Bool.random(using: &random) ? "" : " #\(row)")
        }
    }

    /// Every row of every table (ledger aside), keyed by table, each row as column → value, in primary key order.
    static func contents(_ db: Database) throws -> [String: [[String: DatabaseValue]]] {
        let tables = try String.fetchAll(db, sql: """
            SELECT name FROM sqlite_schema WHERE type = 'table'
            AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' AND name != 'migrator_ledger'
            """)
        var contents: [String: [[String: DatabaseValue]]] = [:]
        for table in tables {
            let key = try db.primaryKey(table).columns.map(\.quotedDatabaseIdentifier).joined(separator: ", ")
            contents[table] = try Row.fetchAll(db, sql: "SELECT * FROM \(table.quotedDatabaseIdentifier) ORDER BY \(key)")
                .map { row in Dictionary(uniqueKeysWithValues: row.columnNames.map { ($0, row[$0] as DatabaseValue) }) }
        }
        return contents
    }
}

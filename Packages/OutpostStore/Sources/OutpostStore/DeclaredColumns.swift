import GRDB
import OutpostSchema

/// Checks that a database's tables hold every declared field, each in a column of a type its kind
/// is stored as, and an index on each parent column: the app's entity tables come from its own
/// migration steps, and a step the schema needs but nobody wrote is found when the store opens, named,
/// rather than by a failing write (or a pull that reads whole tables).
enum DeclaredColumns {
    /// The SQLite type each field kind is stored with (the sync columns are the toolkit's own).
    static func columnType(of kind: FieldKind) -> String {
        switch kind {
        case .text, .day, .sha256, .choice, .uuid: "TEXT"
        case .integer, .money, .count, .bool, .date: "INTEGER"
        case .real, .quantity: "REAL"
        case .blob: "BLOB"
        }
    }

    /// Throws `schemaMismatch` for the first declared table, sync column or field the database lacks or
    /// holds with another type, or parent column without an index starting with it, naming the entity,
    /// the field and the step to write.
    static func check(_ entities: [EntityDescription], in db: Database, path: String) throws(StoreError) {
        for description in entities {
            let columns: [String: String]
            do {
                columns = Dictionary(
                    try Row.fetchAll(db, sql: "SELECT name, type FROM pragma_table_info(?)", arguments: [description.table])
                        .map { (($0["name"] as String), ($0["type"] as String).uppercased()) },
                    uniquingKeysWith: { first, _ in first })
            } catch {
                throw StoreError(failure: error, path: path)
            }
            func mismatch(_ field: String?, _ message: String) -> StoreError {
                let cause = ModelError(.invalidSchema, entity: description.type, field: field, message: message)
                return StoreError(.schemaMismatch, path: path, message: "\(cause)", modelError: cause, underlying: cause)
            }
            guard !columns.isEmpty else {
                throw mismatch(nil, "the database has no table \(description.table); a migration step that creates it is missing")
            }
            for column in TableLayout.syncColumns where columns[column] == nil {
                throw mismatch(nil, "table \(description.table) has no sync column \(column); create it as the toolkit's tables are")
            }
            // Each field its own column, none of them one the toolkit keeps the sync metadata in.
            // Nor the row clocks column: a write of the record's clocks would overwrite the field's value.
            var taken: [String: String] = Dictionary(
                uniqueKeysWithValues: (TableLayout.syncColumns + [LocalApp.rowClocksColumn]).map { ($0, "the sync metadata") })
            for field in description.fields {
                let name = ColumnName.forField(field.name)
                if let other = taken.updateValue(field.name, forKey: name) {
                    throw mismatch(field.name, "its column \(name) is also \(other == "the sync metadata" ? other : "field \(other)")'s; rename one")
                }
            }
            for field in description.fields {
                let name = ColumnName.forField(field.name), wanted = columnType(of: field.kind)
                guard let type = columns[name] else {
                    throw mismatch(field.name, "table \(description.table) has no column \(name) (\(wanted)); a migration step that adds it is missing")
                }
                guard type == wanted else {
                    throw mismatch(field.name, "column \(description.table).\(name) is \(type.isEmpty ? "untyped" : type), the field needs \(wanted)")
                }
            }
            guard !description.parents.isEmpty else { continue }
            let leading: Set<String>
            do {
                leading = try usableLeadingColumns(of: description.table, in: db)
            } catch {
                throw StoreError(failure: error, path: path)
            }
            // A record's children are found by their parent's column (the orphans of a parent a pull
            // brings, the children a delete flags): without an index, each lookup read the whole child
            // table, and a pull into a store of 100,000 issues ran 20 times slower.
            for relation in description.parents where !leading.contains(ColumnName.forField(relation.field)) {
                let column = ColumnName.forField(relation.field)
                let partial = relation.isRequired ? "" : " WHERE \(column) IS NOT NULL"
                throw mismatch(
                    relation.field,
                    "table \(description.table) has no index on \(column), the column naming its parent \(relation.entity.rawValue): "
                        + "finding a parent's children would read the whole table; a migration step that creates one is missing "
                        + "(CREATE INDEX \(description.table)_by_\(column) ON \(description.table)(\(column))\(partial))")
            }
        }
    }

    /// The columns of `table` an index starts with that a lookup by that column's value can use: compared
    /// as stored (`BINARY`), on every row or on every row where the column is set (`WHERE column IS NOT
    /// NULL`). An expression key has no column; an index of another collation, or partial on another
    /// condition, does not serve an equality on the plain column, and SQLite read the whole table.
    private static func usableLeadingColumns(of table: String, in db: Database) throws -> Set<String> {
        let rows = try Row.fetchAll(db, sql: """
            SELECT x.name AS column, x.coll AS collation, i.partial AS partial, m.sql AS sql
            FROM pragma_index_list(?) AS i JOIN pragma_index_xinfo(i.name) AS x ON x.seqno = 0
            LEFT JOIN sqlite_schema AS m ON m.type = 'index' AND m.name = i.name
            WHERE x.name IS NOT NULL
            """, arguments: [table])
        var usable: Set<String> = []
        for row in rows {
            let column: String = row["column"]
            guard (row["collation"] as String?)?.uppercased() == "BINARY" else { continue }
            if row["partial"] as Int == 1 {
                // Only `WHERE <column> IS NOT NULL`, however spaced, cased or quoted.
                guard let sql = (row["sql"] as String?)?.lowercased(), let clause = sql.range(of: "where", options: .backwards)
                else { continue }
                let condition = sql[clause.upperBound...]
                    .filter { !"\"`[] \n\t;".contains($0) }
                guard condition == column.lowercased() + "isnotnull" else { continue }
            }
            usable.insert(column)
        }
        return usable
    }
}

import GRDB

/// SQLite's own view of a schema at one moment: every table's columns (`pragma table_xinfo`), every
/// index (including those behind UNIQUE constraints), views, triggers, and row counts. Comparing the
/// snapshots taken before and after a step, inside its transaction, tells what the step removed or
/// changed, whatever SQL or Swift code it ran. (GRDB owns the connection's authorizer, so the
/// migrator never installs its own; see Workspace.md.)
struct SchemaSnapshot: Equatable {
    struct Column: Equatable {
        let name: String
        let declaredType: String
        let notNull: Bool
        let defaultSQL: String?
        let primaryKeyPosition: Int
        let hidden: Int
    }

    struct Index: Equatable {
        let table: String
        let isUnique: Bool
        /// `c` for CREATE INDEX, `u` for a UNIQUE constraint, `pk` for a PRIMARY KEY.
        let origin: String
        let isPartial: Bool
        let columns: [String]
    }

    var tables: [String: [Column]] = [:]
    var indexes: [String: Index] = [:]
    var views: [String: String] = [:]
    var triggers: [String: String] = [:]
    var rowCounts: [String: Int] = [:]

    /// Reads the snapshot; `excluding` names tables the migrator itself owns.
    static func capture(_ db: Database, excluding ignored: Set<String>) throws -> SchemaSnapshot {
        var snapshot = SchemaSnapshot()
        let objects = try Row.fetchAll(db, sql: """
            SELECT type, name, sql FROM sqlite_schema
            WHERE name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY type, name
            """)
        for object in objects {
            let type: String = object["type"], name: String = object["name"]
            guard !ignored.contains(name) else { continue }
            switch type {
            case "table":
                snapshot.tables[name] = try Row.fetchAll(db, sql: "SELECT * FROM pragma_table_xinfo(?)", arguments: [name])
                    .map { row in
                        Column(
                            name: row["name"], declaredType: row["type"], notNull: row["notnull"],
                            defaultSQL: row["dflt_value"], primaryKeyPosition: row["pk"], hidden: row["hidden"])
                    }
                for index in try Row.fetchAll(db, sql: "SELECT * FROM pragma_index_list(?)", arguments: [name]) {
                    let indexName: String = index["name"]
                    let columns = try String.fetchAll(
                        db, sql: "SELECT coalesce(name, '<expression>') FROM pragma_index_info(?) ORDER BY seqno",
                        arguments: [indexName])
                    snapshot.indexes[indexName] = Index(
                        table: name, isUnique: index["unique"], origin: index["origin"], isPartial: index["partial"],
                        columns: columns)
                }
                snapshot.rowCounts[name] = try Int.fetchOne(db, sql: "SELECT count(*) FROM \(name.quotedDatabaseIdentifier)")
            case "view":
                snapshot.views[name] = object["sql"]
            case "trigger":
                snapshot.triggers[name] = object["sql"]
            default:
                continue  // indexes are read per table above, with their columns
            }
        }
        return snapshot
    }
}

/// What a step may not do, found by comparing the snapshots around it.
struct SchemaChangeCheck {
    let before: SchemaSnapshot
    let after: SchemaSnapshot
    let syncedTables: Set<String>
    /// Indexes the step declares it drops as redundant (see `MigrationStep.redundantIndexes`).
    var redundantIndexes: Set<String> = []

    /// Destructive changes: anything of `before` that `after` lacks or defines differently, and lost rows.
    var destructiveChanges: [String] {
        var found: [String] = []
        for (table, columns) in before.tables.sorted(by: { $0.key < $1.key }) {
            guard let newColumns = after.tables[table] else {
                found.append("removed table \(table) (dropped or renamed)")
                continue
            }
            for column in columns {
                guard let new = newColumns.first(where: { $0.name == column.name }) else {
                    found.append("removed column \(table).\(column.name) (dropped or renamed)")
                    continue
                }
                if new.declaredType != column.declaredType {
                    found.append(
                        "changed the declared type of \(table).\(column.name) from '\(column.declaredType)' to '\(new.declaredType)'")
                } else if new != column {
                    found.append("changed the constraints of \(table).\(column.name)")
                }
            }
            if let lost = before.rowCounts[table].map({ $0 - (after.rowCounts[table] ?? 0) }), lost > 0 {
                found.append("deleted \(lost) row\(lost == 1 ? "" : "s") from \(table)")
            }
        }
        for (name, index) in before.indexes.sorted(by: { $0.key < $1.key }) where after.tables[index.table] != nil {
            guard let new = after.indexes[name] else {
                if redundantIndexes.contains(name) {
                    if let problem = notRedundant(name, index) { found.append(problem) }
                } else {
                    found.append("removed index \(name) on \(index.table)")
                }
                continue
            }
            if new != index { found.append("redefined index \(name) on \(index.table)") }
        }
        found += removedOrChanged("view", before.views, after.views)
        found += removedOrChanged("trigger", before.triggers, after.triggers)
        return found
    }

    /// Why the dropped index `name` was not redundant, or nil when an index the step leaves on the same
    /// table (a whole one, not partial) begins with its columns: the same first column, then the others
    /// in any order. A lookup it served still seeks on the same columns, none skipped over. A UNIQUE or
    /// PRIMARY KEY index is never redundant: dropping it drops a constraint.
    private func notRedundant(_ name: String, _ index: SchemaSnapshot.Index) -> String? {
        let columns = index.columns.joined(separator: ", ")
        guard index.origin == "c", !index.isUnique else {
            return "removed index \(name) on \(index.table): it enforces uniqueness, so it is never redundant"
        }
        guard !index.columns.contains("<expression>") else {
            return "removed index \(name) on \(index.table): an index on expressions is never taken as redundant"
        }
        let covered = after.indexes.contains { other, candidate in
            other != name && candidate.table == index.table && !candidate.isPartial
                && candidate.columns.first == index.columns.first
                && Set(candidate.columns.prefix(index.columns.count)) == Set(index.columns)
        }
        return covered
            ? nil
            : "removed index \(name) on \(index.table): declared redundant, but no index left on \(index.table) "
                + "begins with its columns, the first one first (\(columns))"
    }

    /// NOT NULL columns without a default added to tables that already existed: old rows could not hold them.
    var unsafeNewColumns: [String] {
        after.tables.sorted(by: { $0.key < $1.key }).flatMap { table, columns -> [String] in
            guard let old = before.tables[table] else { return [] }
            return columns.filter { column in
                column.notNull && column.defaultSQL == nil && !old.contains { $0.name == column.name }
            }.map { "\(table).\($0.name) is NOT NULL without a default" }
        }
    }

    /// New UNIQUE indexes or constraints (primary keys aside) on synced tables.
    var newUniqueConstraintsOnSyncedTables: [String] {
        after.indexes.sorted(by: { $0.key < $1.key }).compactMap { name, index in
            guard index.isUnique, index.origin != "pk", syncedTables.contains(index.table), before.indexes[name] == nil
            else { return nil }
            return "\(name) makes (\(index.columns.joined(separator: ", "))) unique on synced table \(index.table)"
        }
    }

    private func removedOrChanged(_ kind: String, _ old: [String: String], _ new: [String: String]) -> [String] {
        old.keys.sorted().compactMap { name in
            guard let definition = new[name] else { return "removed \(kind) \(name)" }
            return definition == old[name] ? nil : "redefined \(kind) \(name)"
        }
    }
}

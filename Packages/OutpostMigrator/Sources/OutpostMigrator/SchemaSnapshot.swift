import Foundation
import GRDB

/// SQLite's own view of a schema at one moment: every table's columns (`pragma table_xinfo`), every
/// index (including those behind UNIQUE constraints), views, triggers, and row counts. Comparing the
/// snapshots taken before and after a step, inside its transaction, tells what the step removed or
/// changed, whatever SQL or Swift code it ran. (GRDB owns the connection's authorizer, so the
/// migrator never installs its own; see the package README.)
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
        /// Each key column's collation (`pragma_index_xinfo`): a key turned NOCASE merges rows that were distinct.
        let collations: [String]
        /// The CREATE INDEX text, nil for an index behind a constraint: a partial index's WHERE lives here.
        let sql: String?
    }

    /// A foreign key of a table, as `pragma_foreign_key_list` gives it.
    struct ForeignKey: Hashable {
        let table: String
        let parent: String
        let from: String
        let onDelete: String
        let onUpdate: String
    }

    var tables: [String: [Column]] = [:]
    /// Each table's CREATE TABLE text, whitespace folded.
    var tableSQL: [String: String] = [:]
    var foreignKeys: Set<ForeignKey> = []
    var indexes: [String: Index] = [:]
    var views: [String: String] = [:]
    var triggers: [String: String] = [:]
    var rowCounts: [String: Int] = [:]

    /// Reads the snapshot; `excluding` names tables the migrator itself owns.
    ///
    /// Each pragma is read for every table at once (a join of `sqlite_schema` with the pragma's table
    /// function), and the row counts by one statement: read table by table, a fresh store's fifteen
    /// steps compiled some 3,500 statements for their thirty snapshots, 0.3 s of its first open in a
    /// release build and 0.6 s in a debug one (`perf`, issue 41).
    static func capture(_ db: Database, excluding ignored: Set<String>) throws -> SchemaSnapshot {
        var snapshot = SchemaSnapshot()
        let objects = try Row.fetchAll(db, sql: """
            SELECT type, name, sql FROM sqlite_schema
            WHERE name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY type, name
            """)
        var tables: [String] = []
        for object in objects {
            let type: String = object["type"], name: String = object["name"]
            guard !ignored.contains(name) else { continue }
            switch type {
            case "table":
                tables.append(name)
                snapshot.tableSQL[name] = Self.folded(object["sql"] as String? ?? "")
                snapshot.tables[name] = []
            case "view":
                snapshot.views[name] = object["sql"]
            case "trigger":
                snapshot.triggers[name] = object["sql"]
            default:
                continue  // indexes are read per table below, with their columns
            }
        }
        guard !tables.isEmpty else { return snapshot }
        // The tables read, as the joins' filter: SQLite's own and the ignored ones are left out above, and
        // no pragma runs on them (an ignored virtual table whose module is not loaded would fail it).
        let readList = StatementArguments([String(decoding: try JSONEncoder().encode(tables), as: UTF8.self)])
        let ofRead = "m.type = 'table' AND m.name IN (SELECT value FROM json_each(?))"
        for key in try Row.fetchAll(db, sql: """
            SELECT m.name AS owner, f."table" AS parent, f."from" AS "from", f.on_delete, f.on_update
            FROM sqlite_schema AS m, pragma_foreign_key_list(m.name) AS f WHERE \(ofRead)
            """, arguments: readList) {
            snapshot.foreignKeys.insert(ForeignKey(
                table: key["owner"], parent: key["parent"], from: key["from"], onDelete: key["on_delete"], onUpdate: key["on_update"]))
        }
        for row in try Row.fetchAll(db, sql: """
            SELECT m.name AS owner, c.* FROM sqlite_schema AS m, pragma_table_xinfo(m.name) AS c
            WHERE \(ofRead) ORDER BY m.name, c.cid
            """, arguments: readList) {
            snapshot.tables[row["owner"], default: []].append(Column(
                name: row["name"], declaredType: row["type"], notNull: row["notnull"], defaultSQL: row["dflt_value"],
                primaryKeyPosition: row["pk"], hidden: row["hidden"]))
        }
        // Each index's key columns and collations in key order, and its CREATE INDEX text.
        var keys: [String: [(name: String, collation: String)]] = [:]
        for row in try Row.fetchAll(db, sql: """
            SELECT i.name AS index_name, coalesce(x.name, '<expression>') AS name, x.coll
            FROM sqlite_schema AS m, pragma_index_list(m.name) AS i, pragma_index_xinfo(i.name) AS x
            WHERE \(ofRead) AND x.key ORDER BY i.name, x.seqno
            """, arguments: readList) {
            keys[row["index_name"], default: []].append((row["name"], (row["coll"] as String?)?.uppercased() ?? "BINARY"))
        }
        var indexSQL: [String: String] = [:]
        for row in try Row.fetchAll(db, sql: "SELECT name, sql FROM sqlite_schema WHERE type = 'index' AND sql IS NOT NULL") {
            indexSQL[row["name"]] = row["sql"]
        }
        for index in try Row.fetchAll(db, sql: """
            SELECT m.name AS owner, i.name, i."unique", i.origin, i.partial
            FROM sqlite_schema AS m, pragma_index_list(m.name) AS i WHERE \(ofRead)
            """, arguments: readList) {
            let indexName: String = index["name"]
            let columns = keys[indexName] ?? []
            snapshot.indexes[indexName] = Index(
                table: index["owner"], isUnique: index["unique"], origin: index["origin"], isPartial: index["partial"],
                columns: columns.map(\.name), collations: columns.map(\.collation), sql: indexSQL[indexName].map(Self.folded))
        }
        // Table names come from sqlite_schema, quoted as identifiers; each row names its table by argument.
        // In groups: SQLite takes at most 500 terms in one compound SELECT.
        for start in stride(from: 0, to: tables.count, by: 400) {
            let group = Array(tables[start..<min(start + 400, tables.count)])
            let counts = group.map { "SELECT ?, count(*) FROM \($0.quotedDatabaseIdentifier)" }
            for row in try Row.fetchAll(
                db, sql: counts.joined(separator: " UNION ALL "), arguments: StatementArguments(group))
            {
                snapshot.rowCounts[row[0]] = row[1]
            }
        }
        return snapshot
    }

    /// SQL with runs of white space folded to one space, for comparing definitions.
    static func folded(_ sql: String) -> String {
        // ASCII text (all SQL the steps write) folds byte by byte, as `isWhitespace` would: by
        // characters, the fold was a tenth of a snapshot.
        let utf8 = Array(sql.utf8)
        guard utf8.allSatisfy({ $0 < 0x80 }) else {
            return sql.split(whereSeparator: { $0.isWhitespace }).joined(separator: " ")
        }
        var folded: [UInt8] = []
        folded.reserveCapacity(utf8.count)
        var pendingSpace = false
        for byte in utf8 {
            if byte == 0x20 || (0x09...0x0D).contains(byte) {
                pendingSpace = !folded.isEmpty
            } else {
                if pendingSpace { folded.append(0x20) }
                pendingSpace = false
                folded.append(byte)
            }
        }
        return String(decoding: folded, as: UTF8.self)
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
            if let old = before.tableSQL[table], let new = after.tableSQL[table],
                !Self.onlyAddsColumns(old, new, added: newColumns.count - columns.count)
            {
                found.append(
                    "redefined table \(table) (its definition changed beyond columns added at its end: a rebuild may "
                        + "change collations, checks or references that older rows and apps rely on)")
            }
        }
        for key in after.foreignKeys.subtracting(before.foreignKeys).sorted(by: { ($0.table, $0.from) < ($1.table, $1.from) })
        where before.tables[key.table] != nil || before.tables[key.parent] != nil {
            let actions = [("ON DELETE", key.onDelete), ("ON UPDATE", key.onUpdate)]
                .filter { !["NO ACTION", "RESTRICT"].contains($0.1.uppercased()) }
            if !actions.isEmpty {
                found.append(
                    "added a reference \(key.table).\(key.from) → \(key.parent) with \(actions.map { "\($0.0) \($0.1)" }.joined(separator: ", ")), "
                        + "which changes or removes existing rows when another changes")
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
        for (name, sql) in after.triggers.sorted(by: { $0.key < $1.key }) where before.triggers[name] == nil {
            if let problem = Self.writesExistingData(trigger: name, sql: sql, existing: Set(before.tables.keys)) {
                found.append(problem)
            }
        }
        return found
    }

    /// Whether `new` is `old` with `added` column definitions spliced in as ALTER TABLE ADD COLUMN writes
    /// them: one run of text, starting or ending with its comma, inserted at a comma of the definition
    /// before its closing parenthesis. SQLite puts it after the last column, which is before the table's
    /// constraints when it has any (`PRIMARY KEY (entity, id)`): read as "at the very end", a column
    /// added to such a table was refused as a rebuild. A run that adds no column (a constraint) is not
    /// one.
    static func onlyAddsColumns(_ old: String, _ new: String, added: Int) -> Bool {
        guard old != new else { return true }
        guard added > 0, new.count > old.count, let close = old.lastIndex(of: ")") else { return false }
        let before = Array(old), after = Array(new)
        var prefix = 0
        while prefix < before.count, before[prefix] == after[prefix] { prefix += 1 }
        var suffix = 0
        while suffix < before.count - prefix, before[before.count - 1 - suffix] == after[after.count - 1 - suffix] { suffix += 1 }
        // All of `old` kept around one insertion, inside the definition's parentheses.
        guard prefix + suffix == before.count, prefix <= old.distance(from: old.startIndex, to: close) else { return false }
        let inserted = String(after[prefix..<(after.count - suffix)]).trimmingCharacters(in: .whitespaces)
        let kept = String(before[..<prefix]).trimmingCharacters(in: .whitespaces)
        return inserted.hasPrefix(",") || (kept.hasSuffix(",") && inserted.hasSuffix(","))
    }

    /// Why a trigger a step adds writes to or hides existing data, or nil: it may write only tables the
    /// step created, and may not drop writes to existing tables with RAISE. Read from its text (string
    /// literals left out), which is what SQLite runs.
    static func writesExistingData(trigger name: String, sql: String, existing: Set<String>) -> String? {
        let words = Self.words(ofSQLWithoutLiterals: sql)
        let lowered = Set(existing.map { $0.lowercased() })
        var targets: [String] = []
        for (index, word) in words.enumerated() {
            let next = index + 1 < words.count ? words[index + 1] : ""
            let afterNext = index + 2 < words.count ? words[index + 2] : ""
            switch word {
            case "update" where next != "of": targets.append(next == "or" && index + 3 < words.count ? words[index + 3] : next)
            case "delete" where next == "from": targets.append(afterNext)
            case "into": targets.append(next)
            default: continue
            }
        }
        if let target = targets.first(where: { lowered.contains($0) }) {
            return "trigger \(name) writes to existing table \(target); a step's triggers may write only tables it creates"
        }
        if words.contains("raise"), let table = onTable(words), lowered.contains(table) {
            return "trigger \(name) can refuse or drop writes to existing table \(table) (RAISE)"
        }
        return nil
    }

    /// The table after the trigger's ON.
    private static func onTable(_ words: [String]) -> String? {
        guard let on = words.firstIndex(of: "on"), on + 1 < words.count else { return nil }
        return words[on + 1]
    }

    /// The SQL's words, lower-cased, identifiers unquoted, string literals and punctuation left out.
    private static func words(ofSQLWithoutLiterals sql: String) -> [String] {
        var words: [String] = []
        var current = ""
        var inString = false
        for character in sql {
            if inString {
                if character == "'" { inString = false }
                continue
            }
            if character == "'" {
                inString = true
            } else if character.isLetter || character.isNumber || character == "_" {
                current.append(character)
                continue
            }
            if !current.isEmpty { words.append(current.lowercased()) }
            current = ""
        }
        if !current.isEmpty { words.append(current.lowercased()) }
        return words
    }

    /// Why the dropped index `name` was not redundant, or nil when an index the step leaves on the same
    /// table (a whole one, not partial) begins with its seek columns: the same first column, then the
    /// others in any order. A lookup it served still seeks on the same columns, none skipped over. Its
    /// seek columns are all of them, or those up to where it holds the table's whole primary key: the
    /// key is unique, so a column after it narrows no lookup and only lets a read skip the table (time,
    /// never a result; v15 narrows the issue list's index so). A UNIQUE or PRIMARY KEY index is never
    /// redundant: dropping it drops a constraint.
    private func notRedundant(_ name: String, _ index: SchemaSnapshot.Index) -> String? {
        let primaryKey = Set((before.tables[index.table] ?? []).filter { $0.primaryKeyPosition > 0 }.map(\.name))
        let seekCount = primaryKey.isEmpty
            ? index.columns.count
            : (1...max(1, index.columns.count)).first { primaryKey.isSubset(of: index.columns.prefix($0)) } ?? index.columns.count
        let seek = Array(index.columns.prefix(seekCount))
        let columns = seek.joined(separator: ", ")
        guard index.origin == "c", !index.isUnique else {
            return "removed index \(name) on \(index.table): it enforces uniqueness, so it is never redundant"
        }
        guard !index.columns.contains("<expression>") else {
            return "removed index \(name) on \(index.table): an index on expressions is never taken as redundant"
        }
        let covered = after.indexes.contains { other, candidate in
            other != name && candidate.table == index.table && !candidate.isPartial
                && candidate.columns.first == seek.first
                && Set(candidate.columns.prefix(seek.count)) == Set(seek)
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

import Foundation
import GRDB
import OutpostBundles
import OutpostSchema

/// One entity table as an import writes it: new records go to a temporary staging table as they are read,
/// and move into the real table at the end with one `INSERT … SELECT … ORDER BY id`.
///
/// Why staging: ids are random UUIDs, so writing each record straight into its table lands every insert on
/// a random page of the table's B-tree (and of each index). Once the table outgrows the page cache, each
/// insert reads a page back and spills another, and the import spends most of its time there. Appending
/// to a staging table is sequential, and SQLite's external sorter then hands the rows over in key order,
/// so the real table and its indexes grow at their right edges. The staging table lives in SQLite's temp
/// database, kept in a file (`temp_store = FILE`), so memory stays bounded however large the bundle.
///
/// A table that started empty takes records straight in while their ids keep ascending: a server's
/// bundle lists each entity's records by id, so they already land at the right edge, and staging only
/// wrote them twice more (into the staging file, then sorted). The first id out of order sends it and
/// every later record to staging. Every record in such a table is then this import's, so versions and
/// orphans are read from the table itself.
///
/// Every identifier comes from the entity catalog (table and column names) or is fixed here; values are
/// always bound, by the same `TableLayout` that writes the entity's rows.
final class StagedTable {
    let description: EntityDescription
    /// Whether the real table held no row when the import started: every record of the entity is then new,
    /// and no per-record lookup is needed.
    let startedEmpty: Bool
    /// New records so far, written straight in or staged.
    private(set) var stagedCount = 0
    /// Records in the staging table.
    private var inStage = 0
    /// The last id written straight in; nil before the first (once one comes out of order it is no
    /// longer read: `writesDirectly` is false for good).
    private var lastDirectID: String?
    /// Whether records still go straight in: the table started empty and no id came out of order.
    private var writesDirectly: Bool
    /// The most value bytes one staged record held (`EntityRecord.valueBytes`).
    private var largestStaged = 0
    /// Whether the last `flush` read the staged rows through an index of their ids (see `flush`).
    private(set) var flushedThroughIndex = false

    /// Staged records above this many value bytes are moved through an index of their ids, not sorted.
    static let sortedRowLimit = 64 * 1024

    private let db: Database
    private let table: String
    private let stage: String
    private let layout: TableLayout
    private var columns: [String] { layout.columns }
    private var insertStatement: Statement?
    private var directStatement: Statement?
    private var existsStatement: Statement?

    /// Where each staged record came from, so a duplicate found at the end is reported where it stands.
    private static let locationColumns = ["import_line", "import_column", "import_path"]

    init(_ description: EntityDescription, in db: Database) throws {
        self.description = description
        self.db = db
        table = description.table.quotedDatabaseIdentifier
        stage = "outpost_import_\(description.table)".quotedDatabaseIdentifier
        layout = TableLayout.of(description.type)
        startedEmpty = try !(Bool.fetchOne(db, sql: "SELECT EXISTS (SELECT 1 FROM main.\(table))") ?? false)
        writesDirectly = startedEmpty
    }

    /// Whether the real table has the row `id` (only asked when it did not start empty).
    func contains(_ id: UUID) throws -> Bool {
        if startedEmpty { return false }
        let statement = try existsStatement ?? db.makeStatement(sql: "SELECT 1 FROM main.\(table) WHERE id = ?")
        existsStatement = statement
        return try Row.fetchOne(statement, arguments: [id.storageText]) != nil
    }

    /// Writes a new record, not orphaned (orphans are flagged in `flagOrphans`): straight into the table
    /// while ids ascend in a table that started empty, else into the staging table.
    func stage(_ record: EntityRecord, at location: SourceLocation) throws {
        if writesDirectly {
            let id = record.id.storageText
            // Binary order, as SQLite compares the text key.
            if lastDirectID.map({ id.utf8.lexicographicallyPrecedes($0.utf8) || id == $0 }) != true {
                let statement = try directStatement ?? db.makeStatement(sql: layout.insert)
                directStatement = statement
                try statement.execute { layout.bind(record, to: &$0) }
                lastDirectID = id
                stagedCount += 1
                return
            }
            writesDirectly = false
            directStatement = nil
        }
        let statement = try insertStatement ?? makeStage()
        insertStatement = statement
        largestStaged = max(largestStaged, record.valueBytes)
        try statement.execute { binder in
            layout.bind(record, to: &binder)
            binder.bind(location.line.map(Int64.init))
            binder.bind(location.column.map(Int64.init))
            binder.bind(location.jsonPath)
        }
        stagedCount += 1
        inStage += 1
    }

    /// Moves the staged records into the real table in key order. A second record with an id already
    /// staged makes the insert fail; the error then names that record and where it stands.
    ///
    /// SQLite sorts whole rows for `ORDER BY id`, and its merge holds a row of each run it spilled: with
    /// records of three 1 MB values that was 1.6 MB of memory per record, 480 MiB for 300 (attack 68,
    /// finding 7). When a staged record is larger than `sortedRowLimit`, the ids alone are sorted (an
    /// index on the staging table) and the rows read through it; smaller rows sort faster whole.
    func flush(location: SourceLocation) throws {
        guard inStage > 0 else { return }
        let list = columns.map(\.quotedDatabaseIdentifier).joined(separator: ", ")
        flushedThroughIndex = largestStaged > Self.sortedRowLimit
        if flushedThroughIndex {
            try db.execute(sql: "CREATE INDEX temp.\(byIDIndex) ON \(stage) (id)")
        }
        do {
            try db.execute(sql: "INSERT INTO main.\(table) (\(list)) SELECT \(list) FROM temp.\(stage) ORDER BY id")
        } catch let error as DatabaseError where error.resultCode == .SQLITE_CONSTRAINT {
            throw try duplicateError(location: location) ?? error
        }
    }

    /// Notes the versions of the staged records, once flushed, as an import's (`ImportedVersions`).
    func noteImportedVersions() throws {
        guard stagedCount > 0 else { return }
        try ImportedVersions.noteStaged(description.type, staged: source, in: db)
    }

    /// Flags the staged records whose parents are neither in the bundle nor in the store, once every
    /// staged table is flushed (so a child listed before its parent, in any table, finds it). Returns how
    /// many were flagged.
    func flagOrphans() throws -> Int {
        guard stagedCount > 0, !description.parents.isEmpty else { return 0 }
        let missing = description.parents.map { relation -> String in
            let column = EntityTables.column(for: relation.field).quotedDatabaseIdentifier
            let parentTable = relation.entity.description.table.quotedDatabaseIdentifier
            return "(s.\(column) IS NOT NULL AND NOT EXISTS (SELECT 1 FROM main.\(parentTable) p WHERE p.id = s.\(column)))"
        }.joined(separator: " OR ")
        try db.execute(sql: """
            UPDATE main.\(table) SET is_orphaned = 1
            WHERE id IN (SELECT s.id FROM \(source) s WHERE \(missing))
            """)
        return db.changesCount
    }

    /// Where this import's new records are, once flushed: the table itself when it started empty (every
    /// row is this import's), else the staging table.
    private var source: String { startedEmpty ? "main.\(table)" : "temp.\(stage)" }

    /// Drops the staging table (the statements go first, as they hold it open).
    func drop() throws {
        insertStatement = nil
        directStatement = nil
        existsStatement = nil
        try db.execute(sql: "DROP TABLE IF EXISTS temp.\(stage)")
    }

    /// The staging table's index of ids, made for a flush of large rows or a duplicate's search.
    private var byIDIndex: String { "\(stage.dropFirst().dropLast())_by_id".quotedDatabaseIdentifier }

    private func makeStage() throws -> Statement {
        // No types, keys or constraints: rows are appended as bound and read back once, sorted.
        let all = (columns + Self.locationColumns).map(\.quotedDatabaseIdentifier).joined(separator: ", ")
        try db.execute(sql: "CREATE TEMP TABLE \(stage) (\(all))")
        let marks = Array(repeating: "?", count: columns.count + Self.locationColumns.count).joined(separator: ", ")
        return try db.makeStatement(sql: "INSERT INTO temp.\(stage) (\(all)) VALUES (\(marks))")
    }

    /// The later of two staged records sharing an id, as a located error (an index is built for this
    /// search only: it runs once, on a failing import).
    private func duplicateError(location: SourceLocation) throws -> BundleError? {
        try db.execute(sql: "CREATE INDEX IF NOT EXISTS temp.\(byIDIndex) ON \(stage) (id)")
        guard let row = try Row.fetchOne(db, sql: """
            SELECT s.id, s.import_line, s.import_column, s.import_path FROM temp.\(stage) s
            WHERE EXISTS (SELECT 1 FROM temp.\(stage) t WHERE t.id = s.id AND t.rowid < s.rowid)
                OR (? AND EXISTS (SELECT 1 FROM main.\(table) m WHERE m.id = s.id))
            ORDER BY s.rowid LIMIT 1
            """, arguments: [startedEmpty])
        else { return nil }
        var place = location
        place.line = row[1]
        place.column = row[2]
        place.jsonPath = row[3]
        return BundleError(.duplicateRecord, message: "a second record with this id", entity: description.type,
            id: UUID(uuidString: row[0] as String)).located(place)
    }
}

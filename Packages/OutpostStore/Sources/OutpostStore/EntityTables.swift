import Foundation
import GRDB
import OutpostSchema

/// Records as rows of the entity tables, driven by the catalog: the one place that knows how a
/// `EntityRecord` is laid out in SQL. The store, the bundle importer and the sync engine all go through it,
/// inside transactions they own. Table and column names come from the catalog, never from input.
/// Its statements bind and step through SQLite's C API, so a GRDB `ValueObservation` does not see them.
enum EntityTables {
    /// Every media record's `id`, `version` and `deleted_at`, over the tables of the schema's media
    /// entities, as a subquery to join (uploads name their record by id alone).
    static var mediaRecords: String {
        let tables = EntityCatalog.all.filter { $0.syncClass == .media }.map(\.table)
        guard !tables.isEmpty else { return "(SELECT NULL AS id, 0 AS version, NULL AS deleted_at WHERE 0)" }
        return "(" + tables.map { "SELECT id, version, deleted_at FROM \"\($0)\"" }.joined(separator: " UNION ALL ") + ")"
    }

    /// The record `id` of `entity`, or nil when the table has no such row (tombstones included).
    static func fetchRecord(_ entity: EntityType, id: UUID, in db: Database) throws -> EntityRecord? {
        let layout = TableLayout.of(entity)
        let statement = try db.cachedStatement(sql: layout.selectByID)
        return try statement.firstRow(arguments: [id.storageText]) { try layout.record(from: $0) }
    }

    /// The version stored for `entity` `id`, nil when the store does not hold it.
    static func storedVersion(_ entity: EntityType, id: UUID, in db: Database) throws -> Int64? {
        try Int64.fetchOne(
            db.cachedStatement(sql: "SELECT version FROM \(entity.description.table.quotedDatabaseIdentifier) WHERE id = ?"),
            arguments: [id.storageText])
    }

    /// Every record of `entity` in primary-key order, tombstones included.
    static func fetchAll(_ entity: EntityType, in db: Database) throws -> [EntityRecord] {
        var records: [EntityRecord] = []
        try forEach(entity, in: db) { records.append($0) }
        return records
    }

    /// Hands every record of `entity` to `body`, one at a time, holding none after it (an export of a
    /// project larger than memory).
    static func forEach(_ entity: EntityType, in db: Database, _ body: (EntityRecord) throws -> Void) throws {
        let layout = TableLayout.of(entity)
        try db.cachedStatement(sql: layout.selectAll).forEachRow { try body(try layout.record(from: $0)) }
    }

    /// Live (not deleted) records of `entity` whose `field` holds `value`, in creation order.
    static func fetchLive(
        _ entity: EntityType, where field: String, equals value: FieldValue, in db: Database
    ) throws -> [EntityRecord] {
        let layout = TableLayout.of(entity)
        precondition(layout.description.field(named: field) != nil, "\(field) is not a field of \(entity)")
        let sql = layout.selectLive(where: ColumnName.forField(field))
        var records: [EntityRecord] = []
        try db.cachedStatement(sql: sql).forEachRow(arguments: [value.databaseValue]) {
            records.append(try layout.record(from: $0))
        }
        return records
    }

    /// The typed form of `fetchLive`, decoded from the rows directly (see `RowDecoder`).
    static func fetchLiveModels<Model: Syncable>(
        _ type: Model.Type, where field: String, equals value: FieldValue, in db: Database
    ) throws -> [Model] {
        let layout = TableLayout.of(Model.entityType)
        precondition(layout.description.field(named: field) != nil, "\(field) is not a field of \(Model.entityType)")
        let statement = try db.cachedStatement(sql: layout.selectLive(where: ColumnName.forField(field)))
        return try RowDecoder.decodeAll(Model.self, from: statement, arguments: [value.databaseValue], layout: layout)
    }

    /// The typed form of `fetchRecord`.
    static func fetchModel<Model: Syncable>(_ type: Model.Type, id: UUID, in db: Database) throws -> Model? {
        let layout = TableLayout.of(Model.entityType)
        let statement = try db.cachedStatement(sql: layout.selectByID)
        return try RowDecoder.decodeAll(Model.self, from: statement, arguments: [id.storageText], layout: layout).first
    }

    /// Whether the table of `entity` has a row `id` (tombstones included): the cheap existence check a
    /// bundle import makes for every parent reference, with no row to decode.
    static func containsRecord(_ entity: EntityType, id: UUID, in db: Database) throws -> Bool {
        let statement = try db.cachedStatement(sql: TableLayout.of(entity).selectExists)
        return try Row.fetchOne(statement, arguments: [id.storageText]) != nil
    }

    /// Inserts the record, or replaces every column of the row with the same id.
    static func save(_ record: EntityRecord, in db: Database) throws {
        try save(record, with: db.cachedStatement(sql: TableLayout.of(record.entity).upsert))
    }

    /// `save` through `upsert`, the entity's `TableLayout.upsert` statement looked up once for many records.
    static func save(_ record: EntityRecord, with upsert: Statement) throws {
        let layout = TableLayout.of(record.entity)
        try upsert.execute { layout.bind(record, to: &$0) }
    }

    /// `save` of a record that keeps its clocks in its row (`rowClock`, `LocalApp.rowClocksColumn`),
    /// through the entity's `TableLayout.upsertWithRowClocks` statement.
    static func save(_ record: EntityRecord, rowClock: String, with upsert: Statement) throws {
        let layout = TableLayout.of(record.entity)
        try upsert.execute {
            layout.bind(record, to: &$0)
            $0.bind(rowClock)
        }
    }

    /// The column holding `field` of any entity (`projectID` → `project_id`).
    static func column(for field: String) -> String {
        ColumnName.forField(field)
    }
}

/// The SQL and value conversions of one entity table, built once from the catalog. A class: a pulled
/// page looks its layout up for every record, and a copy of the struct retained and released a dozen
/// arrays and strings each time.
final class TableLayout: Sendable {
    static let syncColumns = [
        "id", "server_id", "version", "created_at", "updated_at", "deleted_at", "sync_status", "is_orphaned",
    ]

    let description: EntityDescription
    let columns: [String]
    /// How each field's column is read back, in catalog order.
    let columnKinds: [ColumnKind]
    let selectByID: String
    /// The rows whose ids are in a JSON array bound as the one argument (see `PulledPageReads`).
    let selectByIDList: String
    let selectAll: String
    let selectExists: String
    let upsert: String
    /// A plain insert of a new row (an import into a table that started empty).
    let insert: String
    /// `upsert` with the row clocks column (`LocalApp.rowClocksColumn`) as the last value.
    let upsertWithRowClocks: String
    /// `selectByIDList` with the row clocks column after `columns`.
    let selectByIDListWithRowClocks: String
    /// The row clocks column of one row.
    let selectRowClocks: String
    /// Sets the row clocks column of one row (the clocks, then the id).
    let updateRowClocks: String

    private static let layouts: [EntityType: TableLayout] = Dictionary(
        uniqueKeysWithValues: EntityCatalog.all.map { ($0.type, TableLayout($0)) })

    static func of(_ entity: EntityType) -> TableLayout {
        guard let layout = layouts[entity] else { preconditionFailure("no table layout for \(entity)") }
        return layout
    }

    private init(_ description: EntityDescription) {
        self.description = description
        let table = description.table.quotedDatabaseIdentifier
        columns = Self.syncColumns + description.fields.map { ColumnName.forField($0.name) }
        columnKinds = description.fields.map { ColumnKind($0.kind) }
        let list = columns.map(\.quotedDatabaseIdentifier).joined(separator: ", ")
        selectByID = "SELECT \(list) FROM \(table) WHERE id = ?"
        // Qualified: json_each has an `id` column of its own.
        let qualified = columns.map { "\(table).\($0.quotedDatabaseIdentifier)" }.joined(separator: ", ")
        selectByIDList = "SELECT \(qualified) FROM json_each(?) AS page CROSS JOIN \(table) ON \(table).id = page.value"
        selectAll = "SELECT \(list) FROM \(table) ORDER BY id"
        selectExists = "SELECT 1 FROM \(table) WHERE id = ?"
        let marks = Array(repeating: "?", count: columns.count).joined(separator: ", ")
        let updates = columns.dropFirst().map { "\($0.quotedDatabaseIdentifier) = excluded.\($0.quotedDatabaseIdentifier)" }
            .joined(separator: ", ")
        upsert = "INSERT INTO \(table) (\(list)) VALUES (\(marks)) ON CONFLICT(id) DO UPDATE SET \(updates)"
        insert = "INSERT INTO main.\(table) (\(list)) VALUES (\(marks))"
        let rowClocks = LocalApp.rowClocksColumn.quotedDatabaseIdentifier
        upsertWithRowClocks = "INSERT INTO \(table) (\(list), \(rowClocks)) VALUES (\(marks), ?) ON CONFLICT(id) DO UPDATE SET \(updates), \(rowClocks) = excluded.\(rowClocks)"
        selectByIDListWithRowClocks = "SELECT \(qualified), \(table).\(rowClocks) FROM json_each(?) AS page CROSS JOIN \(table) ON \(table).id = page.value"
        selectRowClocks = "SELECT \(rowClocks) FROM \(table) WHERE id = ?"
        updateRowClocks = "UPDATE \(table) SET \(rowClocks) = ? WHERE id = ?"
    }

    /// Whether this file's table of the entity has the row clocks column (`LocalApp.rowClocksColumn`):
    /// an app's step adds it, so the file, not the catalog, says. Asked of SQLite each time, whose schema
    /// follows the file: GRDB's cache of a table's columns is cleared on a writer for its own changes
    /// only, so a store open while an update of the app added the column (another process) read the
    /// records it keeps in rows as having no clocks at all (review 140, F1). A few microseconds, once a
    /// page or a write.
    func keepsClocksInRow(in db: Database) throws -> Bool {
        try Row.fetchOne(
            db.cachedStatement(sql: "SELECT 1 FROM pragma_table_info(?) WHERE name = ?"),
            arguments: [description.table, LocalApp.rowClocksColumn]) != nil
    }

    /// Live rows whose `column` (a catalog column, never input) equals a bound value.
    func selectLive(where column: String) -> String {
        let list = columns.map(\.quotedDatabaseIdentifier).joined(separator: ", ")
        return "SELECT \(list) FROM \(description.table.quotedDatabaseIdentifier) WHERE \(column.quotedDatabaseIdentifier) = ? AND deleted_at IS NULL ORDER BY created_at, id"
    }

    /// The ids alone of `selectLive`'s rows, in its order: a `RecordList`'s read, which a covering index
    /// (issues' list index) answers without visiting the table.
    func selectLiveIDs(where column: String) -> String {
        "SELECT id FROM \(description.table.quotedDatabaseIdentifier) WHERE \(column.quotedDatabaseIdentifier) = ? AND deleted_at IS NULL ORDER BY created_at, id"
    }

    /// The rows of a JSON array of ids (the first argument) that are still live and still hold the
    /// second argument in `column`: a `RecordList`'s window, which puts each at its position itself
    /// (an `ORDER BY` would sort the rows in a temporary B-tree).
    func selectLiveByIDList(where column: String) -> String {
        let table = description.table.quotedDatabaseIdentifier
        let qualified = columns.map { "\(table).\($0.quotedDatabaseIdentifier)" }.joined(separator: ", ")
        return """
            SELECT \(qualified) FROM json_each(?) AS page CROSS JOIN \(table) ON \(table).id = page.value
            WHERE \(table).\(column.quotedDatabaseIdentifier) = ? AND \(table).deleted_at IS NULL
            """
    }

    /// The upsert's values, in `columns` order.
    func bind(_ record: EntityRecord, to binder: inout StatementBinder) {
        let sync = record.sync
        binder.bind(record.id.storageText)
        binder.bind(sync.serverID)
        binder.bind(sync.version)
        binder.bind(sync.createdAt.storageMilliseconds)
        binder.bind(sync.updatedAt.storageMilliseconds)
        binder.bind(sync.deletedAt?.storageMilliseconds)
        binder.bind(sync.syncStatus.rawValue)
        binder.bind(sync.isOrphaned)
        for field in description.fields {
            binder.bind(record.fields[field.name])
        }
    }

    /// The record in the current row of a stepped statement selecting `columns`.
    func record(from columns: StatementColumns) throws -> EntityRecord {
        let (id, sync) = try RowDecoder.identity(from: columns, layout: self)
        var fields: [String: FieldValue] = [:]
        fields.reserveCapacity(description.fields.count)
        for (offset, field) in description.fields.enumerated() {
            fields[field.name] = columns.value(at: offset + Self.syncColumns.count, as: columnKinds[offset])
        }
        return EntityRecord(entity: description.type, id: id, fields: fields, sync: sync)
    }
}

extension FieldValue {
    /// The SQLite value: booleans as 0/1, instants as integer milliseconds, UUIDs as lowercase text.
    var databaseValue: DatabaseValue {
        switch self {
        case .null: .null
        case .bool(let value): value.databaseValue
        case .integer(let value): value.databaseValue
        case .real(let value): value.databaseValue
        case .text(let value): value.databaseValue
        case .date(let value): value.storageMilliseconds.databaseValue
        case .uuid(let value): value.storageText.databaseValue
        case .blob(let value): value.databaseValue
        }
    }
}

extension UUID {
    /// The stored form of an id: lowercase, as UUIDs are written on the wire and in bundles.
    var storageText: String { lowercasedText }

    /// The id's 16 bytes: the stored form of a key no one reads as text (`finished_keys`), 20 bytes
    /// shorter than `storageText`.
    var storageBytes: Data { withUnsafeBytes(of: uuid) { Data($0) } }

    /// The id whose `storageBytes` are `bytes`; nil unless they are 16.
    init?(storageBytes bytes: Data) {
        guard bytes.count == 16 else { return nil }
        var value: uuid_t = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        withUnsafeMutableBytes(of: &value) { $0.copyBytes(from: bytes) }
        self.init(uuid: value)
    }
}

extension Date {
    /// Milliseconds since 1970, the stored form of an instant.
    var storageMilliseconds: Int64 { Int64((timeIntervalSince1970 * 1000).rounded()) }

    init(storageMilliseconds: Int64) {
        self.init(timeIntervalSince1970: Double(storageMilliseconds) / 1000)
    }
}

import Foundation
import GRDB
import GRDBSQLite
import OutpostSchema

/// Typed models straight from rows of their table: the list screens' path. Each column is read by
/// position with SQLite's C API from the stepped statement, as the `FieldValue` its catalog kind calls
/// for, and written in place at its slot in the model (`FieldTable`): no `Codable`, no GRDB `Row` value,
/// no key path and no dictionary per row. (`Codable` cost 15–20 µs a row; GRDB's generic column
/// decoding, run unspecialized here, about 2 µs.) The rows were written through the catalog, so a value
/// that still does not fit (a status a newer app version added) is a thrown `ModelError`, never a crash.
enum RowDecoder {
    /// Every row `statement` yields with `arguments`, decoded.
    static func decodeAll<Model: Syncable>(
        _ type: Model.Type, from statement: Statement, arguments: StatementArguments, layout: TableLayout
    ) throws -> [Model] {
        var models: [Model] = []
        try statement.forEachRow(arguments: arguments) { models.append(try decode(Model.self, from: $0, layout: layout)) }
        return models
    }

    /// The current row of a stepped statement, decoded.
    static func decode<Model: Syncable>(_ type: Model.Type, from columns: StatementColumns, layout: TableLayout) throws
        -> Model
    {
        let (id, sync) = try identity(from: columns, layout: layout)
        let kinds = layout.columnKinds
        do {
            return try Model(id: id, sync: sync) { columns.value(at: $0 + TableLayout.syncColumns.count, as: kinds[$0]) }
        } catch let error as ModelError {
            throw error
        } catch {
            throw ModelError(
                .typeMismatch, entity: layout.description.type, id: id,
                message: "a stored \(layout.description.type.rawValue) does not fit its model: \(error)", underlying: error)
        }
    }

    /// The id and sync bookkeeping, from the columns every entity table starts with.
    static func identity(from columns: StatementColumns, layout: TableLayout) throws -> (UUID, SyncMetadata) {
        guard let id = columns.uuid(at: 0), let status = columns.text(at: 6).flatMap(SyncStatus.init(rawValue:)) else {
            throw ModelError(
                .typeMismatch, entity: layout.description.type, id: nil,
                message: "a stored \(layout.description.type.rawValue) has an unreadable id or sync status")
        }
        let sync = SyncMetadata(
            serverID: columns.text(at: 1), version: columns.integer(at: 2) ?? 0,
            createdAt: Date(storageMilliseconds: columns.integer(at: 3) ?? 0),
            updatedAt: Date(storageMilliseconds: columns.integer(at: 4) ?? 0),
            deletedAt: columns.integer(at: 5).map(Date.init(storageMilliseconds:)),
            syncStatus: status, isOrphaned: (columns.integer(at: 7) ?? 0) != 0)
        return (id, sync)
    }
}

extension Statement {
    /// Runs `body` on each row's columns in turn (see `StatementColumns` for how long they are valid).
    ///
    /// Rows are stepped with SQLite's C API after GRDB binds the arguments: a GRDB row cursor built a
    /// `Row` with a dictionary of column names each time, a tenth of every local write (which reads
    /// its record and the audit chain's last entry first). GRDB is not told the statement ran, so a
    /// `ValueObservation` would not track these reads; the store publishes its own changes instead.
    func forEachRow(arguments: StatementArguments = [], _ body: (StatementColumns) throws -> Void) throws {
        try setArguments(arguments)
        let handle = sqliteStatement
        defer { sqlite3_reset(handle) }
        let columns = StatementColumns(handle)
        while true {
            switch sqlite3_step(handle) {
            case SQLITE_ROW: try body(columns)
            case SQLITE_DONE: return
            case let code: throw stepFailure(code)
            }
        }
    }

    /// The first row's columns through `body`, nil when there is none: the single-row reads of every
    /// local write.
    func firstRow<T>(arguments: StatementArguments = [], _ body: (StatementColumns) throws -> T) throws -> T? {
        try setArguments(arguments)
        let handle = sqliteStatement
        defer { sqlite3_reset(handle) }
        switch sqlite3_step(handle) {
        case SQLITE_ROW: return try body(StatementColumns(handle))
        case SQLITE_DONE: return nil
        case let code: throw stepFailure(code)
        }
    }

    /// The error of a failed step, with SQLite's message and the statement's SQL.
    func stepFailure(_ code: Int32) -> DatabaseError {
        let message = sqlite3_errmsg(sqlite3_db_handle(sqliteStatement)).map { String(cString: $0) }
        return DatabaseError(resultCode: ResultCode(rawValue: code), message: message, sql: sql)
    }
}

/// The columns of a statement's current row, read with SQLite's C API. Valid only between a step and
/// the next one; the decoder copies every value out before stepping again.
struct StatementColumns {
    let statement: SQLiteStatement

    init(_ statement: SQLiteStatement) {
        self.statement = statement
    }

    func isNull(at index: Int) -> Bool {
        sqlite3_column_type(statement, Int32(index)) == SQLITE_NULL
    }

    func integer(at index: Int) -> Int64? {
        isNull(at: index) ? nil : sqlite3_column_int64(statement, Int32(index))
    }

    func text(at index: Int) -> String? {
        withUTF8(at: index) { String(decoding: $0, as: UTF8.self) }
    }

    /// A blob column's bytes (an empty blob reads as empty `Data`).
    func data(at index: Int) -> Data? {
        guard !isNull(at: index) else { return nil }
        let count = Int(sqlite3_column_bytes(statement, Int32(index)))
        guard count > 0, let bytes = sqlite3_column_blob(statement, Int32(index)) else { return Data() }
        return Data(bytes: bytes, count: count)
    }

    /// A UUID stored as its hyphenated text, parsed from SQLite's bytes.
    func uuid(at index: Int) -> UUID? {
        withUTF8(at: index) { UUID(hyphenatedUTF8: $0) } ?? nil
    }

    private func withUTF8<T>(at index: Int, _ body: (UnsafeBufferPointer<UInt8>) -> T) -> T? {
        guard let bytes = sqlite3_column_text(statement, Int32(index)) else { return nil }
        return body(UnsafeBufferPointer(start: bytes, count: Int(sqlite3_column_bytes(statement, Int32(index)))))
    }

    /// The value as the catalog kind of its column reads it (as `FieldValue(_:column:)` does a `DatabaseValue`).
    func value(at index: Int, as column: ColumnKind) -> FieldValue {
        let position = Int32(index)
        switch sqlite3_column_type(statement, position) {
        case SQLITE_INTEGER:
            let number = sqlite3_column_int64(statement, position)
            return switch column {
            case .bool: .bool(number != 0)
            case .date: .date(Date(storageMilliseconds: number))
            case .real: .real(Double(number))
            default: .integer(number)
            }
        case SQLITE_FLOAT:
            return .real(sqlite3_column_double(statement, position))
        case SQLITE_TEXT:
            if column == .uuid, let id = uuid(at: index) { return .uuid(id) }
            return text(at: index).map(FieldValue.text) ?? .null
        case SQLITE_BLOB:
            return .blob(data(at: index) ?? Data())
        default:
            return .null
        }
    }
}

/// How a field's column is read back: the catalog kind reduced to what the stored value needs.
enum ColumnKind: Sendable {
    case bool, date, real, uuid, other

    init(_ kind: FieldKind) {
        self =
            switch kind {
            case .bool: .bool
            case .date: .date
            case .real, .quantity: .real
            case .uuid: .uuid
            default: .other
            }
    }
}


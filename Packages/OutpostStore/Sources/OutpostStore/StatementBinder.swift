import Foundation
import GRDB
import GRDBSQLite
import OutpostSchema

extension Statement {
    /// Binds values by position with SQLite's C API and runs the statement to completion: the path of
    /// the entity upsert, 28 values for an issue, which GRDB's `StatementArguments` boxed and mapped
    /// unspecialized at a third of a pulled record's apply. Only for statements that always run this
    /// way, inside a write transaction. GRDB is not told the statement ran: its checks for an aborted
    /// transaction or an interrupted database, and the tracking `ValueObservation` relies on, are
    /// skipped (the store publishes its own changes, and the transaction's own statements fail if it
    /// was aborted).
    func execute(binding bind: (inout StatementBinder) -> Void) throws {
        let handle = sqliteStatement
        sqlite3_reset(handle)
        sqlite3_clear_bindings(handle)
        defer {
            sqlite3_reset(handle)
            sqlite3_clear_bindings(handle)
        }
        var binder = StatementBinder(handle)
        bind(&binder)
        precondition(binder.next - 1 == sqlite3_bind_parameter_count(handle), "every parameter of \(sql) needs a value")
        if let failure = binder.failure {
            throw DatabaseError(
                resultCode: ResultCode(rawValue: failure), message: "a value could not be bound (too large?)", sql: sql)
        }
        var code = sqlite3_step(handle)
        while code == SQLITE_ROW { code = sqlite3_step(handle) }
        guard code == SQLITE_DONE else { throw stepFailure(code) }
    }
}

/// Binds the next parameter of a statement each call, in order. SQLite copies text and blobs
/// (`SQLITE_TRANSIENT`), so nothing bound has to outlive the call.
struct StatementBinder {
    private let statement: SQLiteStatement
    private(set) var next: Int32 = 1
    /// The first bind that SQLite refused (a text or blob over its length limit): the statement is not run.
    private(set) var failure: Int32?

    init(_ statement: SQLiteStatement) {
        self.statement = statement
    }

    private static let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

    mutating func bindNull() {
        advance(sqlite3_bind_null(statement, next))
    }

    mutating func bind(_ value: Int64) {
        advance(sqlite3_bind_int64(statement, next, value))
    }

    mutating func bind(_ value: Double) {
        advance(sqlite3_bind_double(statement, next, value))
    }

    mutating func bind(_ value: Bool) {
        bind(Int64(value ? 1 : 0))
    }

    mutating func bind(_ value: String) {
        var text = value
        let code = text.withUTF8 { bytes -> Int32 in
            guard bytes.count <= Int32.max else { return SQLITE_TOOBIG }
            // An empty buffer may have no address, which SQLite would take for NULL.
            return sqlite3_bind_text(statement, next, bytes.baseAddress ?? Self.empty.utf8Start, Int32(bytes.count), Self.transient)
        }
        advance(code)
    }

    mutating func bind(_ value: Data) {
        let code = value.withUnsafeBytes { bytes -> Int32 in
            guard bytes.count <= Int32.max else { return SQLITE_TOOBIG }
            guard let base = bytes.baseAddress, !bytes.isEmpty else { return sqlite3_bind_zeroblob(statement, next, 0) }
            return sqlite3_bind_blob(statement, next, base, Int32(bytes.count), Self.transient)
        }
        advance(code)
    }

    private mutating func advance(_ code: Int32) {
        if code != SQLITE_OK, failure == nil { failure = code }
        next += 1
    }

    private static let empty: StaticString = ""

    mutating func bind(_ value: String?) {
        if let value { bind(value) } else { bindNull() }
    }

    mutating func bind(_ value: Int64?) {
        if let value { bind(value) } else { bindNull() }
    }

    /// A field value as its column stores it: `FieldValue.databaseValue` holds the one mapping.
    mutating func bind(_ value: FieldValue?) {
        switch value?.databaseValue.storage ?? .null {
        case .null: bindNull()
        case .int64(let number): bind(number)
        case .double(let number): bind(number)
        case .string(let text): bind(text)
        case .blob(let data): bind(data)
        }
    }
}

import Foundation
import GRDB
import OutpostModels

/// A record's values as the store keeps them in SQLite, for the rows an import stages: booleans as 0/1,
/// instants as integer milliseconds since 1970, ids as lowercase UUID text, in the table's column order.
///
/// The store's own conversion (`OutpostStore.TableLayout`) is internal to it; this one must give the very
/// same values, and `StorageFormTests` checks a staged row against the row `EntityTables.save` writes.
enum StorageForm {
    /// Binds the sync columns (`StagedTable.syncColumns`) and then every field of `fields`, in order.
    static func bind(_ record: EntityRecord, fields: [FieldDescription], to binder: inout ValueBinder) {
        let sync = record.sync
        binder.bind(text(of: record.id))
        binder.bind(sync.serverID)
        binder.bind(Int64(sync.version))
        binder.bind(milliseconds(sync.createdAt))
        binder.bind(milliseconds(sync.updatedAt))
        binder.bind(sync.deletedAt.map(milliseconds))
        binder.bind(sync.syncStatus.rawValue)
        binder.bind(Int64(sync.isOrphaned ? 1 : 0))
        for field in fields {
            switch record.fields[field.name] ?? .null {
            case .null: binder.bind(nil as Int64?)
            case .bool(let flag): binder.bind(Int64(flag ? 1 : 0))
            case .integer(let number): binder.bind(number)
            case .real(let number): binder.bind(number)
            case .text(let text): binder.bind(text)
            case .date(let date): binder.bind(milliseconds(date))
            case .uuid(let id): binder.bind(text(of: id))
            case .blob(let data): binder.bind(data)
            }
        }
    }

    static func milliseconds(_ date: Date) -> Int64 {
        Int64((date.timeIntervalSince1970 * 1000).rounded())
    }

    /// The lowercase text of an id, written byte by byte: `uuidString.lowercased()` formats and then
    /// copies, and this runs several times per record.
    static func text(of id: UUID) -> String {
        let hex: StaticString = "0123456789abcdef"
        return withUnsafeBytes(of: id.uuid) { bytes in
            String(unsafeUninitializedCapacity: 36) { buffer in
                var out = 0
                hex.withUTF8Buffer { digits in
                    for (index, byte) in bytes.enumerated() {
                        if index == 4 || index == 6 || index == 8 || index == 10 {
                            buffer[out] = 0x2D
                            out += 1
                        }
                        buffer[out] = digits[Int(byte >> 4)]
                        buffer[out + 1] = digits[Int(byte & 0x0F)]
                        out += 2
                    }
                }
                return out
            }
        }
    }
}

/// Binds values straight to a prepared statement's parameters, in order.
///
/// Why not `StatementArguments`: building one goes through GRDB's generic initializers, which are not
/// specialized across modules, and cost a tenth of an import's time. The statement is reset (and its
/// bindings cleared) with `setUncheckedArguments` and empty arguments first, then every parameter is bound
/// here, and `execute()` runs it as bound (GRDB only resets a statement whose arguments it considers set).
struct ValueBinder {
    private let statement: Statement
    private let expected: Int
    private var index: CInt = 1
    /// Set when SQLite refused a binding (a GRDB or SQLite misuse, never the data's fault).
    private(set) var failed = false

    /// A binder for `statement`, which takes `parameters` values.
    init(_ statement: Statement, parameters: Int) {
        statement.setUncheckedArguments(StatementArguments())
        self.statement = statement
        expected = parameters
    }

    /// How many parameters have been bound.
    var count: Int { Int(index) - 1 }

    mutating func bind(_ value: (some StatementBinding)?) {
        let code = value.map { $0.bind(to: statement.sqliteStatement, at: index) }
            ?? DatabaseValue.null.bind(to: statement.sqliteStatement, at: index)
        if code != 0 { failed = true }
        index += 1
    }

    /// Runs the statement with the values bound.
    func execute() throws {
        guard !failed, count == expected else {
            throw BundleError(.databaseFailure, message: "SQLite refused the values of one staged row")
        }
        try statement.execute()
    }
}

import Foundation
import GRDB
import OutpostModels

/// Typed models straight from rows of their table: the list screens' path. Each column is read by
/// position as the `FieldValue` its catalog kind calls for and set through the model's `FieldTable`
/// (key paths), with no `Codable` and no dictionary per row: `Codable` cost 15–20 µs a row in generic
/// containers and dynamic casts. The rows were written through the catalog, so a value that still does
/// not fit (a status a newer app version added) is a thrown `ModelError`, never a crash.
enum RowDecoder {
    static func decode<Model: Syncable>(_ type: Model.Type, from row: Row, layout: TableLayout) throws -> Model {
        let (id, sync) = try identity(from: row, layout: layout)
        let kinds = layout.columnKinds
        do {
            return try Model(id: id, sync: sync) { FieldValue(row[$0 + TableLayout.syncColumns.count], column: kinds[$0]) }
        } catch let error as ModelError {
            throw error
        } catch {
            throw ModelError(
                .typeMismatch, entity: layout.description.type, id: id,
                message: "a stored \(layout.description.type.rawValue) does not fit its model: \(error)")
        }
    }

    /// The id and sync bookkeeping, from the columns every entity table starts with.
    static func identity(from row: Row, layout: TableLayout) throws -> (UUID, SyncMetadata) {
        guard let id = (row[0] as String?).flatMap(UUID.init(hyphenatedText:)),
            let status = (row[6] as String?).flatMap(SyncStatus.init(rawValue:))
        else {
            throw ModelError(
                .typeMismatch, entity: layout.description.type, id: nil,
                message: "a stored \(layout.description.type.rawValue) has an unreadable id or sync status")
        }
        let sync = SyncMetadata(
            serverID: row[1], version: row[2], createdAt: Date(storageMilliseconds: row[3]),
            updatedAt: Date(storageMilliseconds: row[4]), deletedAt: (row[5] as Int64?).map(Date.init(storageMilliseconds:)),
            syncStatus: status, isOrphaned: row[7])
        return (id, sync)
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

extension FieldValue {
    /// Reads a stored value back as the kind the catalog declares for its field.
    init(_ value: DatabaseValue, kind: FieldKind) {
        self.init(value, column: ColumnKind(kind))
    }

    init(_ value: DatabaseValue, column: ColumnKind) {
        switch (value.storage, column) {
        case (.null, _): self = .null
        case (.int64(let number), .bool): self = .bool(number != 0)
        case (.int64(let number), .date): self = .date(Date(storageMilliseconds: number))
        case (.int64(let number), .real): self = .real(Double(number))
        case (.int64(let number), _): self = .integer(number)
        case (.double(let number), _): self = .real(number)
        case (.string(let text), .uuid): self = UUID(hyphenatedText: text).map(FieldValue.uuid) ?? .text(text)
        case (.string(let text), _): self = .text(text)
        case (.blob(let data), _): self = .blob(data)
        }
    }
}

import Foundation
import GRDB
import OutpostSchema

/// Live records of one entity whose field holds a value, in creation order, read a window at a time.
/// A screen of a 10,000-issue project shows a few dozen of them: it needs the order of all of them
/// (to size and scroll the list) and the contents of the ones in view.
///
/// `LocalStore.list(_:where:equals:)` reads the ids, in order, from the list's index; `fetch(_:)`
/// reads the records at the positions asked for. A list is the store as it was when it was made: a
/// window has nil for a record deleted since, or whose field no longer holds the value, and a record
/// created since is not in it. The app makes a new list when `LocalStore.changes()` says so, as it
/// would fetch an eager list again.
public struct RecordList<Model: Syncable>: Sendable {
    /// The records' ids in list order (creation order, then id), one per position.
    public let ids: [UUID]
    private let store: LocalStore
    private let column: String
    private let value: FieldValue

    init(ids: [UUID], store: LocalStore, column: String, value: FieldValue) {
        self.ids = ids
        self.store = store
        self.column = column
        self.value = value
    }

    /// How many records the list holds.
    public var count: Int { ids.count }

    /// The records at `positions` (within `0..<count`), one per position in order, read in one query:
    /// nil at a position whose record was deleted, or moved out of the list, since the list was made, so
    /// a row of a table view keeps showing the record it showed.
    public func fetch(_ positions: Range<Int>) throws(StoreError) -> [Model?] {
        precondition(
            positions.lowerBound >= 0 && positions.upperBound <= ids.count,
            "positions \(positions) are outside a list of \(ids.count)")
        guard !positions.isEmpty else { return [] }
        let layout = TableLayout.of(Model.entityType)
        let sql = layout.selectLiveByIDList(where: column)
        let arguments: StatementArguments = [PulledPageReads.jsonArray(ids[positions]), value.databaseValue]
        let found = try store.read { db in
            try RowDecoder.decodeAll(Model.self, from: db.cachedStatement(sql: sql), arguments: arguments, layout: layout)
        }
        var offsets: [UUID: Int] = Dictionary(minimumCapacity: positions.count)
        for (offset, id) in ids[positions].enumerated() { offsets[id] = offset }
        var records = [Model?](repeating: nil, count: positions.count)
        for record in found {
            if let offset = offsets[record.id] { records[offset] = record }
        }
        return records
    }
}

extension LocalStore {
    /// The list of live values whose `field` holds `value`, in creation order, as `fetchAll` returns
    /// them but read a window at a time (`RecordList.fetch`): what a screen of a long list needs first.
    /// `field` must be one of the model's catalog fields.
    public func list<Model: Syncable>(
        _ type: Model.Type, where field: String, equals value: FieldValue
    ) throws(StoreError) -> RecordList<Model> {
        let layout = TableLayout.of(Model.entityType)
        precondition(layout.description.field(named: field) != nil, "\(field) is not a field of \(Model.entityType)")
        let column = ColumnName.forField(field)
        let ids = try read { db in
            var ids: [UUID] = []
            try db.cachedStatement(sql: layout.selectLiveIDs(where: column)).forEachRow(arguments: [value.databaseValue]) {
                guard let id = $0.uuid(at: 0) else {
                    throw ModelError(
                        .typeMismatch, entity: Model.entityType, id: nil,
                        message: "a stored \(Model.entityType.rawValue) has an unreadable id")
                }
                ids.append(id)
            }
            return ids
        }
        return RecordList(ids: ids, store: self, column: column, value: value)
    }
}

import Foundation
import GRDB
import OutpostModels

/// Typed models straight from rows of their table: the list screens' path. Going through the generic
/// `EntityRecord` (a dictionary per row, a shape check, then a decoder over the dictionary) cost ~30 µs
/// a row; reading each property from its column by position costs a fraction of that. The rows were
/// written through the catalog, so a value that still does not fit (a status a newer app version added)
/// is a thrown `ModelError`, never a crash.
struct RowDecoder: Decoder {
    let row: Row
    let layout: TableLayout
    var codingPath: [any CodingKey] { [] }
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    static func decode<Model: Syncable>(_ type: Model.Type, from row: Row, layout: TableLayout) throws -> Model {
        do {
            return try Model(from: RowDecoder(row: row, layout: layout))
        } catch let error as ModelError {
            throw error
        } catch {
            throw ModelError(
                .typeMismatch, entity: layout.description.type, id: UUID(hyphenatedText: row[0] as String? ?? ""),
                message: "a stored \(layout.description.type.rawValue) does not fit its model: \(error)")
        }
    }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        KeyedDecodingContainer(Columns<Key>(row: row, layout: layout, cursor: ColumnCursor()))
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        throw DecodingError.typeMismatch([Any].self, .init(codingPath: [], debugDescription: "A row is keyed"))
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer {
        throw DecodingError.typeMismatch(Any.self, .init(codingPath: [], debugDescription: "A row is keyed"))
    }

    /// The sync bookkeeping, from the columns every entity table starts with.
    static func syncMetadata(from row: Row) throws -> SyncMetadata {
        guard let status = SyncStatus(rawValue: row[6] as String) else {
            throw DecodingError.dataCorrupted(.init(codingPath: [], debugDescription: "unknown sync status"))
        }
        return SyncMetadata(
            serverID: row[1], version: row[2], createdAt: Date(storageMilliseconds: row[3]),
            updatedAt: Date(storageMilliseconds: row[4]), deletedAt: (row[5] as Int64?).map(Date.init(storageMilliseconds:)),
            syncStatus: status, isOrphaned: row[7])
    }
}

/// Models declare their properties in catalog order, so the next column asked for is almost always
/// the one after the last: checking that first skips a dictionary lookup per property.
private final class ColumnCursor {
    var next = 0
}

private struct Columns<Key: CodingKey>: KeyedDecodingContainerProtocol {
    let row: Row
    let layout: TableLayout
    let cursor: ColumnCursor
    var codingPath: [any CodingKey] { [] }

    private func column(_ key: Key) -> Int? {
        let name = key.stringValue
        let guess = cursor.next
        let fields = layout.description.fields
        if guess < fields.count, fields[guess].name == name {
            cursor.next = guess + 1
            return guess + TableLayout.syncColumns.count
        }
        guard let index = layout.fieldColumns[name] else { return nil }
        cursor.next = index - TableLayout.syncColumns.count + 1
        return index
    }

    private func value(_ key: Key) throws -> DatabaseValue {
        guard let index = column(key) else {
            throw DecodingError.keyNotFound(key, .init(codingPath: [key], debugDescription: "no such column"))
        }
        return row[index]
    }

    private func mismatch(_ type: Any.Type, _ key: Key, _ value: DatabaseValue) -> DecodingError {
        .typeMismatch(type, .init(codingPath: [key], debugDescription: "the column holds \(value)"))
    }

    // The plain types, without the generic path's dynamic casts.
    func decode(_ type: String.Type, forKey key: Key) throws -> String {
        let value = try value(key)
        guard case .string(let text) = value.storage else { throw mismatch(type, key, value) }
        return text
    }

    func decode(_ type: Double.Type, forKey key: Key) throws -> Double {
        let value = try value(key)
        switch value.storage {
        case .double(let number): return number
        case .int64(let number): return Double(number)
        default: throw mismatch(type, key, value)
        }
    }

    func decode(_ type: Int64.Type, forKey key: Key) throws -> Int64 {
        let value = try value(key)
        guard case .int64(let number) = value.storage else { throw mismatch(type, key, value) }
        return number
    }

    func decode(_ type: Int.Type, forKey key: Key) throws -> Int {
        let value = try value(key)
        guard case .int64(let number) = value.storage, let int = Int(exactly: number) else { throw mismatch(type, key, value) }
        return int
    }

    func decode(_ type: Bool.Type, forKey key: Key) throws -> Bool {
        let value = try value(key)
        guard case .int64(let number) = value.storage else { throw mismatch(type, key, value) }
        return number != 0
    }

    func decodeIfPresent(_ type: String.Type, forKey key: Key) throws -> String? {
        let value = try value(key)
        if value.isNull { return nil }
        guard case .string(let text) = value.storage else { throw mismatch(type, key, value) }
        return text
    }

    func decodeIfPresent(_ type: Double.Type, forKey key: Key) throws -> Double? {
        let value = try value(key)
        switch value.storage {
        case .null: return nil
        case .double(let number): return number
        case .int64(let number): return Double(number)
        default: throw mismatch(type, key, value)
        }
    }

    func decodeIfPresent<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T? {
        guard layout.fieldColumns[key.stringValue] != nil || key.stringValue == "id" || key.stringValue == "sync" else {
            return nil
        }
        if key.stringValue != "id", key.stringValue != "sync" {
            let value = try value(key)
            if value.isNull { return nil }
            return try ColumnValue(value: value, codingPath: [key]).decode(T.self)
        }
        return try decode(type, forKey: key)
    }
    var allKeys: [Key] { (["id", "sync"] + layout.description.fields.map(\.name)).compactMap(Key.init(stringValue:)) }

    func contains(_ key: Key) -> Bool {
        key.stringValue == "id" || key.stringValue == "sync" || layout.fieldColumns[key.stringValue] != nil
    }

    func decodeNil(forKey key: Key) throws -> Bool {
        guard let index = layout.fieldColumns[key.stringValue] else { return false }
        return row.hasNull(atIndex: index)
    }

    func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T {
        switch key.stringValue {
        case "id":
            if let id = UUID(hyphenatedText: row[0] as String) as? T { return id }
        case "sync":
            if let sync = try RowDecoder.syncMetadata(from: row) as? T { return sync }
        default:
            return try ColumnValue(value: value(key), codingPath: [key]).decode(T.self)
        }
        throw DecodingError.typeMismatch(T.self, .init(codingPath: [key], debugDescription: "unreadable \(key.stringValue)"))
    }

    func nestedContainer<NestedKey: CodingKey>(
        keyedBy type: NestedKey.Type, forKey key: Key
    ) throws -> KeyedDecodingContainer<NestedKey> {
        throw DecodingError.typeMismatch(type, .init(codingPath: [key], debugDescription: "Rows are flat"))
    }

    func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
        throw DecodingError.typeMismatch([Any].self, .init(codingPath: [key], debugDescription: "Rows are flat"))
    }

    func superDecoder() throws -> any Decoder { RowDecoder(row: row, layout: layout) }
    func superDecoder(forKey key: Key) throws -> any Decoder { RowDecoder(row: row, layout: layout) }
}

/// One column's value as the property's type: plain types directly, enums through their raw value.
private struct ColumnValue: Decoder, SingleValueDecodingContainer {
    let value: DatabaseValue
    let codingPath: [any CodingKey]
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        throw mismatch(type)
    }
    func unkeyedContainer() throws -> any UnkeyedDecodingContainer { throw mismatch([Any].self) }
    func singleValueContainer() throws -> any SingleValueDecodingContainer { self }

    func decodeNil() -> Bool { value.isNull }

    func decode<T: Decodable>(_ type: T.Type) throws -> T { try read(type) }

    private func read<T: Decodable>(_ type: T.Type) throws -> T {
        let plain: Any? =
            switch value.storage {
            case .string(let text) where T.self == String.self: text
            case .string(let text) where T.self == UUID.self: UUID(hyphenatedText: text)
            case .int64(let number) where T.self == Int64.self: number
            case .int64(let number) where T.self == Int.self: Int(exactly: number)
            case .int64(let number) where T.self == Bool.self: number != 0
            case .int64(let number) where T.self == Date.self: Date(storageMilliseconds: number)
            case .int64(let number) where T.self == Double.self: Double(number)
            case .double(let number) where T.self == Double.self: number
            case .blob(let data) where T.self == Data.self: data
            default: nil
            }
        if let plain = plain as? T { return plain }
        if case .string = value.storage { return try T(from: self) }  // an enum, read from its raw value
        throw mismatch(T.self)
    }

    func decode(_ type: String.Type) throws -> String {
        guard case .string(let text) = value.storage else { throw mismatch(type) }
        return text
    }

    func decode(_ type: Bool.Type) throws -> Bool { try read(type) }
    func decode(_ type: Int.Type) throws -> Int { try read(type) }
    func decode(_ type: Int64.Type) throws -> Int64 { try read(type) }
    func decode(_ type: Double.Type) throws -> Double { try read(type) }

    private func mismatch(_ type: Any.Type) -> DecodingError {
        .typeMismatch(type, .init(codingPath: codingPath, debugDescription: "the column holds \(value)"))
    }
}

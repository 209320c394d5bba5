import Foundation

/// EntityRecord → typed model, through the model's own `Decodable` conformance. The record's shape has
/// been checked against the catalog before this runs, so a failure here is a programming error
/// surfaced as a thrown `DecodingError`, never a crash.
struct RecordDecoder: Decoder {
    let record: EntityRecord
    var codingPath: [any CodingKey] { [] }
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        KeyedDecodingContainer(FieldsContainer<Key>(record: record))
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        throw DecodingError.typeMismatch([Any].self, .init(codingPath: [], debugDescription: "A record is keyed"))
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer {
        throw DecodingError.typeMismatch(Any.self, .init(codingPath: [], debugDescription: "A record is keyed"))
    }
}

private struct FieldsContainer<Key: CodingKey>: KeyedDecodingContainerProtocol {
    let record: EntityRecord
    var codingPath: [any CodingKey] { [] }
    var allKeys: [Key] { (Array(record.fields.keys) + ["id", "sync"]).compactMap(Key.init(stringValue:)) }

    func contains(_ key: Key) -> Bool {
        ["id", "sync"].contains(key.stringValue) || record.fields[key.stringValue] != nil
    }

    func decodeNil(forKey key: Key) throws -> Bool {
        !["id", "sync"].contains(key.stringValue) && record[key.stringValue].isNull
    }

    func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T {
        switch key.stringValue {
        case "id":
            if let id = record.id as? T { return id }
        case "sync":
            if let sync = record.sync as? T { return sync }
        default:
            return try FieldDecoder(value: record[key.stringValue], codingPath: [key]).decode(T.self)
        }
        throw DecodingError.typeMismatch(T.self, .init(codingPath: [key], debugDescription: "Reserved property"))
    }

    func decode(_ type: Bool.Type, forKey key: Key) throws -> Bool { try decodeField(type, key) }
    func decode(_ type: String.Type, forKey key: Key) throws -> String { try decodeField(type, key) }
    func decode(_ type: Double.Type, forKey key: Key) throws -> Double { try decodeField(type, key) }
    func decode(_ type: Int.Type, forKey key: Key) throws -> Int { try decodeField(type, key) }
    func decode(_ type: Int64.Type, forKey key: Key) throws -> Int64 { try decodeField(type, key) }

    func nestedContainer<NestedKey: CodingKey>(
        keyedBy type: NestedKey.Type, forKey key: Key
    ) throws -> KeyedDecodingContainer<NestedKey> {
        throw DecodingError.typeMismatch(type, .init(codingPath: [key], debugDescription: "Records are flat"))
    }

    func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
        throw DecodingError.typeMismatch([Any].self, .init(codingPath: [key], debugDescription: "Records are flat"))
    }

    func superDecoder() throws -> any Decoder { RecordDecoder(record: record) }
    func superDecoder(forKey key: Key) throws -> any Decoder { RecordDecoder(record: record) }

    private func decodeField<T: Decodable>(_ type: T.Type, _ key: Key) throws -> T {
        try FieldDecoder(value: record[key.stringValue], codingPath: [key]).decode(T.self)
    }
}

/// Decodes one field value: plain types directly, enums through their raw value.
private struct FieldDecoder: Decoder, SingleValueDecodingContainer {
    let value: FieldValue
    let codingPath: [any CodingKey]
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        throw mismatch(type)
    }
    func unkeyedContainer() throws -> any UnkeyedDecodingContainer { throw mismatch([Any].self) }
    func singleValueContainer() throws -> any SingleValueDecodingContainer { self }

    func decodeNil() -> Bool { value.isNull }

    func decode<T: Decodable>(_ type: T.Type) throws -> T {
        let plain: Any? =
            switch value {
            case .text(let text) where T.self == String.self: text
            case .bool(let flag) where T.self == Bool.self: flag
            case .integer(let number) where T.self == Int64.self: number
            case .integer(let number) where T.self == Int.self: Int(exactly: number)
            case .real(let number) where T.self == Double.self: number
            case .date(let date) where T.self == Date.self: date
            case .uuid(let uuid) where T.self == UUID.self: uuid
            case .blob(let data) where T.self == Data.self: data
            default: nil
            }
        if let plain = plain as? T { return plain }
        if case .text = value, T.self != String.self {
            return try T(from: self)  // a String-backed enum asks this decoder for its raw value
        }
        throw mismatch(type)
    }

    private func mismatch(_ type: Any.Type) -> DecodingError {
        .typeMismatch(type, .init(codingPath: codingPath, debugDescription: "Field holds \(value.kindName)"))
    }
}

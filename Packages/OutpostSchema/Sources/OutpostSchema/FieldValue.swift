import Foundation

/// One field's value in the generic record form that the sync engine, the store and the
/// conflict strategies share; the cases mirror what SQLite and the wire can carry without loss.
public enum FieldValue: Sendable, Hashable {
    case null
    case bool(Bool)
    case integer(Int64)
    case real(Double)
    case text(String)
    case date(Date)
    case uuid(UUID)
    case blob(Data)

    /// Whether the value is `.null`.
    public var isNull: Bool { self == .null }

    /// The storage kind's name, as used in error messages and the JSON form.
    public var kindName: String {
        switch self {
        case .null: "null"
        case .bool: "bool"
        case .integer: "integer"
        case .real: "real"
        case .text: "text"
        case .date: "date"
        case .uuid: "uuid"
        case .blob: "blob"
        }
    }
}

extension FieldValue {
    /// The blob `base64` stands for, when it has `xs:base64Binary`'s standard form (RFC 4648): groups of
    /// four, padding only at the end, and zero the bits the padding leaves out; nil for any other text.
    /// Foundation's decoder takes more (`"//=/"` became FF 3F, `"===="` a zero byte), and a bundle or a
    /// wire answer stored bytes its text never stood for (attack 124, F2): the bytes must write back as
    /// the very text. Every reader of a blob's text goes through here.
    public static func blob(fromBase64 base64: Data) -> FieldValue? {
        guard let bytes = Data(base64Encoded: base64), bytes.base64EncodedData() == base64 else { return nil }
        return .blob(bytes)
    }
}

extension FieldValue: Codable {
    // JSON has one number type, so every non-null value travels as a one-key object naming its kind:
    // {"integer": 3} and {"real": 3} stay distinct, and a date keeps millisecond precision.
    private enum Kind: String, CodingKey {
        case bool, integer, real, text, date, uuid, blob
    }

    public init(from decoder: any Decoder) throws {
        if let single = try? decoder.singleValueContainer(), single.decodeNil() {
            self = .null
            return
        }
        let container = try decoder.container(keyedBy: Kind.self)
        guard container.allKeys.count == 1, let kind = container.allKeys.first else {
            throw DecodingError.dataCorrupted(.init(
                codingPath: decoder.codingPath,
                debugDescription: "A field value is null or an object with exactly one of the keys bool, integer, real, text, date, uuid, blob."))
        }
        switch kind {
        case .bool: self = .bool(try container.decode(Bool.self, forKey: kind))
        case .integer: self = .integer(try container.decode(Int64.self, forKey: kind))
        case .real: self = .real(try container.decode(Double.self, forKey: kind))
        case .text: self = .text(try container.decode(String.self, forKey: kind))
        case .uuid: self = .uuid(try container.decode(UUID.self, forKey: kind))
        case .blob:
            let text = try container.decode(String.self, forKey: kind)
            guard let blob = FieldValue.blob(fromBase64: Data(text.utf8)) else {
                throw DecodingError.dataCorruptedError(forKey: kind, in: container, debugDescription: "A blob is not valid base64.")
            }
            self = blob
        case .date:
            let text = try container.decode(String.self, forKey: kind)
            guard let date = Timestamp.date(from: text) else {
                throw DecodingError.dataCorruptedError(
                    forKey: kind, in: container, debugDescription: "'\(text)' is not an ISO 8601 timestamp.")
            }
            self = .date(date)
        }
    }

    public func encode(to encoder: any Encoder) throws {
        if case .null = self {
            var single = encoder.singleValueContainer()
            try single.encodeNil()
            return
        }
        var container = encoder.container(keyedBy: Kind.self)
        switch self {
        case .null: break
        case .bool(let value): try container.encode(value, forKey: .bool)
        case .integer(let value): try container.encode(value, forKey: .integer)
        case .real(let value): try container.encode(value, forKey: .real)
        case .text(let value): try container.encode(value, forKey: .text)
        case .date(let value): try container.encode(Timestamp.string(from: value), forKey: .date)
        case .uuid(let value): try container.encode(value, forKey: .uuid)
        case .blob(let value): try container.encode(value, forKey: .blob)
        }
    }
}

import Foundation
import OutpostSchema

/// The text form of field values, shared by both encodings: XML carries every value as text, and JSON
/// carries text for instants, ids and blobs. One place, so the two encodings cannot drift apart.
enum FieldText {
    /// The value `text` stands for as a field of `kind`, or nil when it is not one.
    static func value(_ text: String, kind: FieldKind) -> FieldValue? {
        switch kind {
        case .text, .day, .sha256, .choice: return .text(text)
        case .integer, .money, .count: return Int64(text).map(FieldValue.integer)
        case .real, .quantity:
            // Non-finite numbers parse here and are refused by the catalog's rules, with the field named.
            return Double(text).map(FieldValue.real)
        case .bool:
            switch text {
            case "true", "1": return .bool(true)
            case "false", "0": return .bool(false)
            default: return nil
            }
        case .date: return Timestamp.date(from: text).map(FieldValue.date)
        case .uuid: return UUID(hyphenatedText: text).map(FieldValue.uuid)
        case .blob: return Data(base64Encoded: text).map(FieldValue.blob)
        }
    }

    /// The text form of a non-null value, as both writers emit it.
    static func text(of value: FieldValue) -> String {
        switch value {
        case .null: ""
        case .bool(let flag): flag ? "true" : "false"
        case .integer(let number): String(number)
        case .real(let number): number.description
        case .text(let text): text
        case .date(let date): Timestamp.string(from: date)
        case .uuid(let id): id.lowercasedText
        case .blob(let data): data.base64EncodedString()
        }
    }
}

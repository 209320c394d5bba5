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
        case .blob: return .blob(fromBase64: Data(text.utf8))
        }
    }

    /// The value an XML element's `text` stands for as a field of `kind`, read as libxml2 validates
    /// `bundle.xsd` (the import's stream validates every value before it reaches here). Numbers and flags
    /// are `xs:double` and `xs:boolean`, whose whitespace the schema collapses, and blobs
    /// `xs:base64Binary`, which may break over lines: libxml2 takes `<latitude> 47.6 </latitude>`, as a
    /// producer validating against the published schema may write it, so the reader takes it too
    /// (attack 123, F4). Every other kind keeps its text: strings hold their whitespace, and libxml2 2.9
    /// refuses it around an `xs:long` (which the XSD standard collapses too: a validator other than
    /// libxml2 passes `<sortOrder> 5 </sortOrder>`, which an import refuses).
    static func value(ofXMLText text: String, kind: FieldKind) -> FieldValue? {
        switch kind {
        case .real, .quantity, .bool: value(trimmingXMLWhitespace(text), kind: kind)
        case .blob:
            // Decoded from the bytes left: a blob may be megabytes, not worth a String of its own.
            text.utf8.contains(where: isXMLWhitespace)
                ? .blob(fromBase64: Data(text.utf8.filter { !isXMLWhitespace($0) }))
                : value(text, kind: kind)
        default: value(text, kind: kind)
        }
    }

    /// XML's whitespace: space, tab, line feed, carriage return.
    private static func isXMLWhitespace(_ byte: UInt8) -> Bool {
        byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D
    }

    /// `text` without XML whitespace before or after it; itself, uncopied, when it has none there.
    static func trimmingXMLWhitespace(_ text: String) -> String {
        let bytes = text.utf8
        guard let first = bytes.first, let last = bytes.last, isXMLWhitespace(first) || isXMLWhitespace(last) else { return text }
        var start = bytes.startIndex, end = bytes.endIndex
        while start < end, isXMLWhitespace(bytes[start]) { start = bytes.index(after: start) }
        while end > start, isXMLWhitespace(bytes[bytes.index(before: end)]) { end = bytes.index(before: end) }
        return String(decoding: bytes[start..<end], as: UTF8.self)
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

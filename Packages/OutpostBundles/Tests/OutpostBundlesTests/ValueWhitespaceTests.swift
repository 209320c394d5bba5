@testable import OutpostBundles
import Foundation
import OutpostFieldService
import OutpostFieldServiceTesting
import OutpostSchema
import OutpostTesting
import Testing

/// `bundle.xsd` types some fields `xs:double`, `xs:boolean` or `xs:base64Binary`, whose whitespace the
/// schema collapses: libxml2 takes `<latitude> 47.6 </latitude>` and base64 broken over lines, as any
/// producer validating against the published schema may write them (attack 123, F4). Strings keep their
/// whitespace, and libxml2 refuses it around an `xs:long`. The law, walked over every field value of the
/// example bundle with a seeded space before, after, around or inside it (XML's whitespace, and spaces
/// that are not XML's): what the published schema refuses (as libxml2 validates it) is refused, by the
/// validator and by the import's stream; what it accepts is accepted, as the value it stands for (the
/// same number, flag or bytes; a string with its spaces).
@Suite(.fieldService) struct ValueWhitespaceTests {
    /// A field value in the example document: where its text stands, and whose field it is.
    private struct Slot {
        let range: Range<String.Index>
        let recordID: UUID
        let field: FieldDescription
    }

    private static let example: String = {
        let url = RepositorySchemas.folder.appendingPathComponent("examples/project-bundle.xml")
        return (try? String(contentsOf: url, encoding: .utf8)) ?? ""
    }()

    /// Every non-empty field element of the example, with its record's id and its catalog description.
    private static func slots(in text: String) throws -> [Slot] {
        let records = try NSRegularExpression(pattern: "\n    <(\\w+) id=\"([0-9a-f-]{36})\"")
        let fields = try NSRegularExpression(pattern: "\n      <(\\w+)>([^<]+)</\\1>")
        let whole = NSRange(text.startIndex..., in: text)
        let starts = records.matches(in: text, range: whole).compactMap { match -> (Int, EntityType, UUID)? in
            guard let entity = Range(match.range(at: 1), in: text).flatMap({ EntityType(rawValue: String(text[$0])) }),
                let id = Range(match.range(at: 2), in: text).flatMap({ UUID(hyphenatedText: String(text[$0])) })
            else { return nil }
            return (match.range.location, entity, id)
        }
        return fields.matches(in: text, range: whole).compactMap { match in
            guard let record = starts.last(where: { $0.0 < match.range.location }),
                let name = Range(match.range(at: 1), in: text).map({ String(text[$0]) }),
                let field = record.1.description.fields.first(where: { $0.name == name }),
                let range = Range(match.range(at: 2), in: text)
            else { return nil }
            return Slot(range: range, recordID: record.2, field: field)
        }
    }

    /// Whitespace as a document may hold it: literal, as character references, and a CR LF a parser
    /// reads as one line feed; and spaces that are not XML's (no-break, line separator, next line), which
    /// no reader may take for it.
    private static let spaces = [
        " ", "  ", "\t", "\n", "\r\n", "\n        ", "&#9;", "&#10;", "&#13;", "&#32;",
        "\u{A0}", "&#160;", "\u{2028}", "\u{85}",
    ]

    /// Whether `space` is XML's whitespace (space, tab, line feed, carriage return), literal or referenced.
    private static func isXMLWhitespace(_ space: String) -> Bool {
        spaces.prefix(10).contains(space)
    }

    /// `value` with a seeded space before it (`place` 0), after it (1), around it (2) or inside it (3),
    /// and whether every space put in is XML's.
    private static func edit(_ value: String, at place: Int, using random: inout SeededGenerator) -> (text: String, xmlSpaces: Bool) {
        var xmlSpaces = true
        func space() -> String {
            let space = spaces.randomElement(using: &random)!
            xmlSpaces = xmlSpaces && isXMLWhitespace(space)
            return space
        }
        switch place {
        case 0: return (space() + value, xmlSpaces)
        case 1: return (value + space(), xmlSpaces)
        case 2: return (space() + value + space(), xmlSpaces)
        default:
            var characters = Array(value)
            characters.insert(contentsOf: space(), at: Int.random(in: 0...characters.count, using: &random))
            return (String(characters), xmlSpaces)
        }
    }

    /// The text a parser gives for `edited`: a literal CR LF read as LF, then references resolved.
    private static func parsed(_ edited: String) throws -> String {
        let text = edited.replacingOccurrences(of: "\r\n", with: "\n")
        let references = try NSRegularExpression(pattern: "&(#[0-9]+|lt|gt|amp|quot|apos);")
        var result = "", last = text.startIndex
        for match in references.matches(in: text, range: NSRange(text.startIndex..., in: text)) {
            guard let range = Range(match.range, in: text), let name = Range(match.range(at: 1), in: text) else { continue }
            result += text[last..<range.lowerBound]
            switch text[name] {
            case "lt": result += "<"
            case "gt": result += ">"
            case "amp": result += "&"
            case "quot": result += "\""
            case "apos": result += "'"
            case let number: result.unicodeScalars.append(Unicode.Scalar(UInt32(number.dropFirst())!)!)
            }
            last = range.upperBound
        }
        return result + text[last...]
    }

    @Test("A field value is refused exactly when the published schema refuses it, and read as the value it stands for", arguments: [1, 2])
    func fieldValuesAreReadAsThePublishedSchemaReadsThem(seed: UInt64) throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("outpost-whitespace-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let text = Self.example
        let slots = try Self.slots(in: text)
        let kinds = Set(slots.map(\.field.kind.storageKind))
        #expect(slots.count > 60 && kinds.isSuperset(of: ["real", "bool", "blob", "integer", "text", "uuid"]), "\(kinds)")
        #expect(try LibXMLCheck.errors(validating: text, against: BundleSchema.xsd).isEmpty)
        var random = SeededGenerator(seed: seed)
        var refused = 0, collapsed = 0, blanks = 0
        // Every value, each way (a random pick of seventy values left the one flag and the two blobs out of
        // whole runs), with seeded spaces; and a blob of nothing but whitespace.
        let cases = slots.flatMap { slot in (0..<(slot.field.kind == .blob ? 5 : 4)).map { (slot, $0) } }
        for (round, (slot, place)) in cases.enumerated() {
            let original = String(text[slot.range])
            let blank = place == 4
            let (edited, xmlSpaces) = blank
                ? (Self.spaces.prefix(10).randomElement(using: &random)!, true)
                : Self.edit(original, at: place, using: &random)
            let document = text.replacingCharacters(in: slot.range, with: edited)
            let url = folder.appendingPathComponent("edited-\(round).xml")
            try Data(document.utf8).write(to: url)
            // libxml2 passes any character in a base64 value that is not of its alphabet, which the XSD
            // standard refuses: only XML's whitespace may stand between its characters. The reader holds
            // blobs to the standard.
            let published = try LibXMLCheck.errors(validating: document, against: BundleSchema.xsd).isEmpty
                && (slot.field.kind != .blob || xmlSpaces)
            let ours = BundleValidator().errors(inBundleAt: url)
            let streamed = Result { () throws -> [EntityRecord] in
                let stream = try BundleImporter().open(url)
                var records: [EntityRecord] = []
                while let batch = try stream.nextBatch() { records += batch.map(\.record) }
                return records
            }
            let context = "\(slot.field.name) (\(slot.field.kind.storageKind)) '\(original)' → '\(edited)'"
            if !published {
                refused += 1
                #expect(ours.contains { $0.code == .schemaViolation }, "\(context): \(ours)")
                #expect((try? streamed.get()) == nil, "\(context) was imported")
                continue
            }
            #expect(ours.isEmpty, "\(context): \(ours)")
            let record = (try? streamed.get())?.first { $0.id == slot.recordID }
            #expect(record != nil, "\(context) was refused: \(streamed)")
            guard let record else { continue }
            let expected: FieldValue?
            switch slot.field.kind {
            case .text, .choice: expected = .text(try Self.parsed(edited))
            case .blob where blank:
                // Nothing but whitespace: an empty blob, as `<thumbnail/>` is.
                blanks += 1
                expected = .blob(Data())
            default:
                collapsed += 1
                expected = FieldText.value(original, kind: slot.field.kind)
            }
            #expect(record[slot.field.name] == expected, "\(context)")
        }
        #expect(refused > 250 && collapsed > 20 && blanks > 0, "\(blanks) blobs of whitespace alone, \(refused) refused, \(collapsed) read through collapsed whitespace")
    }
}

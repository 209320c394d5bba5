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
/// example bundle with seeded whitespace before, after or inside it: what the published schema refuses is
/// refused, by the validator and by the import's stream; what it accepts is accepted, as the value it
/// stands for (the same number, flag or bytes; a string with its whitespace).
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
    /// reads as one line feed.
    private static let spaces = [" ", "  ", "\t", "\n", "\r\n", "\n        ", "&#9;", "&#10;", "&#13;", "&#32;"]

    /// `value` with seeded whitespace before it, after it, around it or inside it.
    private static func edit(_ value: String, using random: inout SeededGenerator) -> String {
        func space() -> String { spaces.randomElement(using: &random)! }
        switch Int.random(in: 0..<4, using: &random) {
        case 0: return space() + value
        case 1: return value + space()
        case 2: return space() + value + space()
        default:
            var characters = Array(value)
            characters.insert(contentsOf: space(), at: Int.random(in: 0...characters.count, using: &random))
            return String(characters)
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
        // Each storage kind as often as any other: the example holds one flag and two blobs among seventy values.
        let byKind = Dictionary(grouping: slots, by: \.field.kind.storageKind).sorted { $0.key < $1.key }.map(\.value)
        let kinds = Set(slots.map(\.field.kind.storageKind))
        #expect(slots.count > 60 && kinds.isSuperset(of: ["real", "bool", "blob", "integer", "text", "uuid"]), "\(kinds)")
        #expect(try LibXMLCheck.errors(validating: text, against: BundleSchema.xsd).isEmpty)
        var random = SeededGenerator(seed: seed)
        var refused = 0, collapsed = 0
        for round in 0..<200 {
            let slot = byKind.randomElement(using: &random)!.randomElement(using: &random)!
            let original = String(text[slot.range])
            let edited = Self.edit(original, using: &random)
            let document = text.replacingCharacters(in: slot.range, with: edited)
            let url = folder.appendingPathComponent("edited-\(round).xml")
            try Data(document.utf8).write(to: url)
            let published = try LibXMLCheck.errors(validating: document, against: BundleSchema.xsd).isEmpty
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
            default:
                collapsed += 1
                expected = FieldText.value(original, kind: slot.field.kind)
            }
            #expect(record[slot.field.name] == expected, "\(context)")
        }
        #expect(refused > 60 && collapsed > 40, "\(refused) refused, \(collapsed) read through collapsed whitespace")
    }
}

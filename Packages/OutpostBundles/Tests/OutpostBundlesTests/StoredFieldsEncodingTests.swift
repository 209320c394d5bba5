@testable import OutpostBundles
import Foundation
import OutpostFieldServiceTesting
import OutpostSchema
import OutpostWire
import OutpostTesting
import Testing

/// A server streams bundles from records whose fields are still the wire's JSON text as stored
/// (`BundleStreamEncoder.write(_:wireFields:)`), read in place rather than decoded into a record first.
/// The law: for any record, in either encoding, the bytes are the ones `write(_:)` gives the decoded
/// record, whatever form the stored text takes (the SQLite backend's sorted compact JSON, or the same
/// members reordered, spaced and escaped as another JSON writer, PostgreSQL's, may give them back).
@Suite(.fieldService) struct StoredFieldsEncodingTests {
    private static let project = UUID(uuidString: "5eed0000-0000-4000-8000-000000000041")!

    /// Text alphabets: plain ASCII (copied as it stands into JSON, and into XML but for its markup,
    /// `&`, `<` and `>`), and what needs escaping or is not ASCII.
    private static let plain: [Unicode.Scalar] = ["a", "Z", "7", " ", "/", "~", "'", "{", "}", ":", ",", "\u{7F}", "&", "<", ">"]
    private static let special: [Unicode.Scalar] = ["\"", "\\", "\n", "\t", "\u{0}", "\u{1F}", "é", "€", "\u{2028}", "😀"]

    private static func text(_ random: inout SeededGenerator) -> String {
        var text = ""
        let alphabet = Bool.random(using: &random) ? plain : plain + special
        for _ in 0..<Int.random(in: 0...24, using: &random) {
            text.unicodeScalars.append(alphabet.randomElement(using: &random)!)
        }
        return text
    }

    private static func value(of kind: FieldKind, _ random: inout SeededGenerator) -> FieldValue {
        if Int.random(in: 0..<5, using: &random) == 0 { return .null }
        switch kind {
        case .text, .day, .sha256, .choice: return .text(text(&random))
        case .integer, .money, .count:
            return .integer([Int64.min, Int64.max, 0, -1, Int64.random(in: -1_000_000...1_000_000, using: &random)]
                .randomElement(using: &random)!)
        case .real, .quantity:
            return .real([0.1, -0.0, 1e300, .leastNonzeroMagnitude, 47.6, Double.random(in: -1e6...1e6, using: &random)].randomElement(using: &random)!)
        case .bool: return .bool(Bool.random(using: &random))
        case .date: return .date(Date(timeIntervalSince1970: Double(Int64.random(in: 0...4_000_000_000_000, using: &random)) / 1000))
        case .uuid:
            let (high, low) = (random.next(), random.next())
            return .uuid(UUID(uuid: withUnsafeBytes(of: (high, low)) { $0.load(as: uuid_t.self) }))
        case .blob: return .blob(Data((0..<Int.random(in: 0...12, using: &random)).map { _ in UInt8.random(in: 0...255, using: &random) }))
        }
    }

    /// The stored text again as another writer gives it: members reversed, spaced, and every plain
    /// character of a string escaped one time in three.
    private static func restyled(_ wire: String, _ random: inout SeededGenerator) throws -> String {
        var reader = JSONReader(bytes: Array(wire.utf8))
        var members: [String] = []
        try reader.beginObject()
        while let name = try reader.nextKey() {
            let value = try reader.fieldValue()
            var writer = JSONWriter()
            try writer.value(value)
            var text = writer.text
            if case .text = value, Bool.random(using: &random) {
                // `"text":"…"`: escape plain letters inside the value as \u00XX.
                let body = Array(text.dropFirst(9).dropLast(2).unicodeScalars)
                var escaped = ""
                var index = 0
                while index < body.count {
                    let scalar = body[index]
                    if scalar == "\\" {
                        // An escape the writer made stays whole: `\n`, or `\u` and its four digits.
                        let length = body[index + 1] == "u" ? 6 : 2
                        escaped.unicodeScalars.append(contentsOf: body[index..<(index + length)])
                        index += length
                        continue
                    }
                    if scalar.isASCII, scalar.properties.isAlphabetic, Int.random(in: 0..<3, using: &random) == 0 {
                        escaped += String(format: "\\u%04X", scalar.value)
                    } else {
                        escaped.unicodeScalars.append(scalar)
                    }
                    index += 1
                }
                text = "{ \"text\" : \"\(escaped)\" }"
            }
            members.append("\"\(name)\" :  \(text)")
        }
        return "{ " + members.reversed().joined(separator: " ,\n ") + " }"
    }

    /// The bytes `write` gives, or its error (XML refuses text it cannot hold, in both paths alike).
    private static func encoded(_ format: BundleFormat, _ write: (BundleStreamEncoder) throws(BundleError) -> Void) throws -> Result<[UInt8], BundleError> {
        let encoder = try BundleStreamEncoder(project: project, asOf: nil, format: format)
        _ = encoder.take()
        do {
            try write(encoder)
        } catch {
            return .failure(error)
        }
        return .success(encoder.take())
    }

    @Test(arguments: 0..<6)
    func storedFieldsEncodeAsTheDecodedRecord(seed: UInt64) throws {
        var random = SeededGenerator(seed: seed)
        for _ in 0..<150 {
            let description = EntityCatalog.all.randomElement(using: &random)!
            var fields: [String: FieldValue] = [:]
            for field in description.fields where Int.random(in: 0..<6, using: &random) > 0 {
                fields[field.name] = Self.value(of: field.kind, &random)
            }
            // A name the catalog does not know is left out by both, as the decoded record's writer leaves it.
            if Int.random(in: 0..<8, using: &random) == 0 { fields["notInTheCatalog"] = .text("x") }
            let record = EntityRecord(
                entity: description.type, id: UUID(), fields: fields,
                sync: SyncMetadata(
                    serverID: Bool.random(using: &random) ? "s-\(Int.random(in: 0...99, using: &random))" : nil, version: 3,
                    createdAt: Date(timeIntervalSince1970: 1_790_000_000), updatedAt: Date(timeIntervalSince1970: 1_790_000_100),
                    deletedAt: nil, syncStatus: .synced))
            var writer = JSONWriter()
            try writer.fields(fields)
            var bare = record
            bare.fields = [:]
            for wire in [writer.text, try Self.restyled(writer.text, &random)] {
                for format in [BundleFormat.json, .xml] {
                    let expected = try Self.encoded(format) { encoder throws(BundleError) in try encoder.write(record) }
                    let streamed = try Self.encoded(format) { encoder throws(BundleError) in try encoder.write(bare, wireFields: wire) }
                    #expect(streamed == expected, "seed \(seed), \(format): \(wire)\n\(streamed)\n\(expected)")
                }
            }
        }
    }

    @Test(
        "Stored fields that do not read are refused naming the record, with the reader's error as the cause, and write nothing",
        arguments: [
            #"{"title":{"text":"a"},"title":{"text":"b"}}"#,
            #"{"title":{"text":"a","integer":1}}"#,
            #"{"title":{"text":"a"}"#,
            #"{"title":{"text":"a"}} x"#,
            #"{"title":{"colour":"a"}}"#,
            #"{"title":{}}"#,
            #"{"title":{"text":"a\x"}}"#,
            #"[]"#,
        ])
    func unreadableStoredFieldsAreRefused(wire: String) throws {
        let record = EntityRecord(
            entity: EntityCatalog.all.last!.type, id: UUID(), fields: [:],
            sync: SyncMetadata(
                serverID: nil, version: 1, createdAt: Date(timeIntervalSince1970: 0), updatedAt: Date(timeIntervalSince1970: 0),
                deletedAt: nil, syncStatus: .synced))
        for format in [BundleFormat.json, .xml] {
            let encoder = try BundleStreamEncoder(project: Self.project, asOf: nil, format: format)
            _ = encoder.take()
            let error = try #require(throws: BundleError.self) { try encoder.write(record, wireFields: wire) }
            #expect(error.code == .invalidRecord, "\(format): \(error)")
            #expect(error.entity == record.entity && error.id == record.id)
            #expect(error.underlying is JSONReaderError)
            #expect(encoder.take().isEmpty, "\(format): nothing of the refused record is written")
        }
    }
}

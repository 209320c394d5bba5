import Foundation
import OutpostSchema
import OutpostTesting
import Testing

@Suite("JSONWriter: the Codable shapes, written by hand")
struct JSONWriterTests {
    @Test("Every kind of field value, and awkward text, reads back through JSONDecoder unchanged")
    func fieldsRoundTrip() throws {
        let fields: [String: FieldValue] = [
            "none": .null, "flag": .bool(true), "count": .integer(-42), "small": .integer(7),
            "ratio": .real(0.1), "huge": .real(1e300), "when": .date(Date(timeIntervalSince1970: 1_790_000_000.123)),
            "id": .uuid(UUID()), "bytes": .blob(Data([0, 1, 2, 255])),
            "text": .text("quote \" backslash \\ slash / tab \t newline \n bell \u{07} é 🏗️"),
            "key \"odd\"": .text(""),
        ]
        var writer = JSONWriter()
        try writer.fields(fields)
        let decoded = try JSONDecoder().decode([String: FieldValue].self, from: Data(writer.bytes))
        #expect(decoded == fields)
        // Keys come out sorted, as JSONEncoder's .sortedKeys writes them.
        #expect(writer.text.hasPrefix(#"{"bytes":{"blob":"AAEC/w=="},"count":{"integer":-42}"#))
    }

    @Test("A number JSON cannot hold is refused")
    func nonFiniteRefused() {
        var writer = JSONWriter()
        #expect(throws: JSONWriterError.self) { try writer.value(.real(.infinity)) }
    }

    /// The store and the wire keep what this writer writes (the audit chain hashes it), and
    /// `JSONEncoder` is the reference for those bytes: every control character, quote and backslash
    /// escaped as it escapes them, slashes and non-ASCII left alone.
    @Test("Field values come out byte for byte as JSONEncoder writes them", arguments: [UInt64(1), 7, 2026])
    func bytesEqualJSONEncoders(seed: UInt64) throws {
        var random = SeededGenerator(seed: seed)
        let pieces = (0..<0x20).map { String(UnicodeScalar(UInt8($0))) } + ["\"", "\\", "/", "a", "é", "🏗️", " "]
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        for _ in 0..<200 {
            var fields: [String: FieldValue] = [:]
            for index in 0..<Int.random(in: 1...4, using: &random) {
                let text = (0..<Int.random(in: 0...12, using: &random)).map { _ in pieces.randomElement(using: &random)! }.joined()
                fields["f\(index)\(pieces.randomElement(using: &random)!)"] = Bool.random(using: &random) ? .text(text) : .integer(Int64(text.count))
            }
            var writer = JSONWriter()
            try writer.fields(fields)
            #expect(writer.text == String(decoding: try encoder.encode(fields), as: UTF8.self), "seed \(seed)")
        }
    }
}

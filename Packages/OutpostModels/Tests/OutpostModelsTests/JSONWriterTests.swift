import Foundation
import OutpostModels
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
}

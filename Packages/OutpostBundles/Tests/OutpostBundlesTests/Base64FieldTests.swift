@testable import OutpostBundles
import Foundation
import OutpostSchema
import OutpostTesting
import Testing

/// A blob travels as base64 in both encodings. Foundation's decoder takes texts the XSD's
/// `xs:base64Binary` refuses and makes bytes of them (`"//=/"` became FF 3F, `"===="` a zero byte): a JSON
/// bundle, which no libxml2 checks, stored bytes its text never stood for (attack 124, F2). The law, over
/// seeded texts of the base64 alphabet and its padding: a text reads as a blob exactly when it has the
/// standard's form (groups of four, padding only at the end, the bits padding leaves out zero), and then
/// as bytes that are written back as the same text; in a bundle's field and in a wire field value alike.
struct Base64FieldTests {
    /// XSD 1.0's `xs:base64Binary` without its optional spaces (the XML reader takes those out first).
    private static let standard = try! NSRegularExpression(
        pattern: "^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/][AQgw]==|[A-Za-z0-9+/]{2}[AEIMQUYcgkosw048]=)?$")

    private static func hasTheStandardForm(_ text: String) -> Bool {
        standard.firstMatch(in: text, range: NSRange(text.startIndex..., in: text)) != nil
    }

    @Test(arguments: [1, 2, 3])
    func aBlobIsReadExactlyWhenItsTextHasTheStandardForm(seed: UInt64) {
        var random = SeededGenerator(seed: seed)
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")
        var read = 0, refused = 0
        for _ in 0..<4_000 {
            var text: String
            if Bool.random(using: &random) {
                // The text of real bytes, then perhaps one character changed, dropped or added.
                let bytes = (0..<Int.random(in: 0...9, using: &random)).map { _ in UInt8.random(in: 0...255, using: &random) }
                var characters = Array(Data(bytes).base64EncodedString())
                if !characters.isEmpty, Bool.random(using: &random) {
                    let index = Int.random(in: 0..<characters.count, using: &random)
                    let piece = Bool.random(using: &random) ? "=" : alphabet.randomElement(using: &random)!
                    switch Int.random(in: 0..<3, using: &random) {
                    case 0: characters[index] = piece
                    case 1: characters.remove(at: index)
                    default: characters.insert(piece, at: index)
                    }
                }
                text = String(characters)
            } else {
                // Any text of the alphabet and its padding.
                text = String((0..<Int.random(in: 0...12, using: &random)).map { _ in
                    Int.random(in: 0..<5, using: &random) == 0 ? "=" : alphabet.randomElement(using: &random)!
                })
            }
            let value = FieldText.value(text, kind: .blob)
            #expect((value != nil) == Self.hasTheStandardForm(text), "'\(text)': \(String(describing: value))")
            // The wire's readers (a pull's and a push's field values) hold to the same law.
            let json = Array(#"{"blob":"\#(text)"}"#.utf8)
            var reader = JSONReader(bytes: json)
            #expect((try? reader.fieldValue()) == value, "'\(text)' on the wire")
            #expect((try? JSONDecoder().decode(FieldValue.self, from: Data(json))) == value, "'\(text)' through JSONDecoder")
            if case .blob(let bytes) = value {
                #expect(bytes.base64EncodedString() == text, "'\(text)' read as \(Array(bytes))")
                read += 1
            } else {
                refused += 1
            }
        }
        #expect(read > 1_000 && refused > 1_000, "\(read) read, \(refused) refused")
    }
}

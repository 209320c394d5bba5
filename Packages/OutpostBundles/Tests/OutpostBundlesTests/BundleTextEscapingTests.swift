@testable import OutpostBundles
import Foundation
import OutpostTesting
import Testing

/// The JSON writer escapes strings byte by byte (`OutputFile.appendQuoted`). The law: whatever the text
/// (quotes, backslashes, every control character, multi-byte UTF-8 beside them), a real JSON parser reads
/// back exactly the text written, and the bytes are those of the scalar-by-scalar escaping the bundle
/// format has always used (so exported bundles and `schemas/examples` stay byte for byte the same).
struct JSONQuoteTests {
    /// The escaping as the writer did it before, one scalar at a time: the reference.
    private static func reference(_ text: String) -> String {
        var quoted = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": quoted += "\\\""
            case "\\": quoted += "\\\\"
            case "\n": quoted += "\\n"
            case "\r": quoted += "\\r"
            case "\t": quoted += "\\t"
            case "\u{0}"..."\u{1F}": quoted += String(format: "\\u%04x", scalar.value)
            default: quoted.unicodeScalars.append(scalar)
            }
        }
        return quoted + "\""
    }

    private static let alphabet: [Unicode.Scalar] =
        (0...0x20).map { Unicode.Scalar(UInt8($0)) } + ["\"", "\\", "/", "a", "Z", "7", "\u{7F}", "é", "ß", "€", "\u{2028}", "😀", "\u{FFFD}", "\u{10FFFF}"]

    @Test(arguments: 0..<8)
    func quotedTextReadsBackAsWrittenAndMatchesTheReference(seed: UInt64) throws {
        var random = SeededGenerator(seed: seed)
        for _ in 0..<500 {
            var text = ""
            for _ in 0..<Int.random(in: 0...40, using: &random) {
                text.unicodeScalars.append(Self.alphabet.randomElement(using: &random)!)
            }
            let quoted = JSONBundleWriter.quote(text)
            #expect(quoted == Self.reference(text), "seed \(seed): \(text.debugDescription)")
            let parsed = try JSONSerialization.jsonObject(with: Data("[\(quoted)]".utf8)) as? [String]
            #expect(parsed == [text], "seed \(seed): \(text.debugDescription)")
        }
    }
}

/// The XML writer passes text with nothing to escape through as it is (a scan of its bytes) and escapes
/// the rest scalar by scalar: the same law, for both paths, against the escaping done for every scalar.
struct XMLEscapeTests {
    private static func reference(_ text: String, attribute: Bool) -> String? {
        var escaped = ""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "&": escaped += "&amp;"
            case "<": escaped += "&lt;"
            case ">": escaped += "&gt;"
            case "\"" where attribute: escaped += "&quot;"
            case "\r": escaped += "&#13;"
            case "\n" where attribute: escaped += "&#10;"
            case "\t" where attribute: escaped += "&#9;"
            case "\t", "\n", "\u{20}"..."\u{D7FF}", "\u{E000}"..."\u{FFFD}", "\u{10000}"..."\u{10FFFF}":
                escaped.unicodeScalars.append(scalar)
            default: return nil
            }
        }
        return escaped
    }

    private static let alphabet: [Unicode.Scalar] =
        ["\u{0}", "\u{1}", "\t", "\n", "\r", "\u{1F}", " ", "&", "<", ">", "\"", "'", "a", "é", "\u{E000}", "\u{EFFF}",
         "\u{FFFD}", "\u{FFFE}", "\u{FFFF}", "😀", "\u{10FFFF}"]

    @Test(arguments: 0..<8)
    func escapedTextMatchesTheReferenceAndRefusesWhatXMLCannotHold(seed: UInt64) throws {
        var random = SeededGenerator(seed: seed)
        for _ in 0..<500 {
            var text = ""
            // Mostly plain text, as records hold, so both paths are walked.
            let plainOnly = Bool.random(using: &random)
            for _ in 0..<Int.random(in: 0...30, using: &random) {
                text.unicodeScalars.append(plainOnly ? ["a", " ", "é", "😀", "'"].randomElement(using: &random)! : Self.alphabet.randomElement(using: &random)!)
            }
            for attribute in [false, true] {
                let expected = Self.reference(text, attribute: attribute)
                let escaped = try? XMLBundleWriter.escape(text, attribute: attribute, fileName: "f")
                #expect(escaped == expected, "seed \(seed), attribute \(attribute): \(text.debugDescription)")
            }
        }
    }
}

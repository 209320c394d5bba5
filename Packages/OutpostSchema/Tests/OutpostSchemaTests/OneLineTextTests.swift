import OutpostSchema
import Testing

/// How a listing prints text it did not check: on its one line, in its order, and with nothing hidden.
struct OneLineTextTests {
    /// Attack 85, F2: format characters (a zero-width space, tag characters, a byte-order mark, a soft
    /// hyphen), variation selectors, private-use, unassigned and noncharacter code points printed raw,
    /// so two member names or projects could look the same and differ, and hidden text travelled in the
    /// log.
    @Test func hiddenCharactersAreEscaped() {
        let hidden = "Bob\u{200B}zw\u{E0041}tag\u{00AD}shy\u{FEFF}bom\u{FE0F}vs\u{180E}mvs\u{E000}pua" + String(Character(Unicode.Scalar(0xFDD0)!)) + "nc\u{E0080}un"
        #expect(OneLineText.escaping(hidden)
            == #"Bob\u{200B}zw\u{E0041}tag\u{AD}shy\u{FEFF}bom\u{FE0F}vs\u{180E}mvs\u{E000}pua\u{FDD0}nc\u{E0080}un"#)
        #expect(OneLineText.escaping(#"copy\u{A}2"#) == #"copy\u{A}2"#, "text escaped once prints the same")
        #expect(OneLineText.escaping("Line\nbreak\u{202E}") == #"Line\u{A}break\u{202E}"#)
        // Every default-ignorable code point, not a list: a grapheme joiner, Khmer inherent vowels and a
        // Hangul filler printed as nothing, "Bo\u{34F}b" listed as Bob (attack 86, F4).
        #expect(OneLineText.escaping("Bo\u{34F}b \u{17B4}\u{17B5} \u{3164}") == #"Bo\u{34F}b \u{17B4}\u{17B5} \u{3164}"#)
        // What shows stays as it is: accents, combining marks on a letter, other scripts, an emoji. (An
        // emoji joined by U+200D prints its joiner escaped: exactness before looks, in an operator's listing.)
        for shown in ["José", "Jose\u{301}", "Øresund Bro", "王小明", "Zoë 👷"] {
            #expect(OneLineText.escaping(shown) == shown)
        }
    }
}

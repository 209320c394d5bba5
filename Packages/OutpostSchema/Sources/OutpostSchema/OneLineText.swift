/// Text shown on one line of a terminal or a log, in the order it was written: the one rule for what
/// an admin text may hold (the server refuses these characters in names) and for how a listing prints
/// text it did not check (a member's name, synced from any owner's device, is printed escaped).
public enum OneLineText {
    /// Whether `scalar` makes a text print as more than its one line, or backwards: C0 and C1 controls
    /// (U+0085 is a line break to many readers, U+009B starts a terminal sequence), the line and
    /// paragraph separators, and the direction marks, embeddings, overrides and isolates. A project
    /// name holding U+2028 forged a whole admin log entry to a reader that splits lines as Unicode does
    /// (attack 83); a member's name holding a line break and U+202E forged a row of `admin members`
    /// (attack 84).
    public static func isUnprintable(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x00..<0x20, 0x7f...0x9f, 0x061c, 0x200e, 0x200f, 0x2028, 0x2029, 0x202a...0x202e, 0x2066...0x2069: true
        default: false
        }
    }

    /// Whether a listing writes `scalar` as `\u{…}`: an unprintable one (`isUnprintable`), and one that
    /// prints as nothing or may look like another text: format characters (a zero-width space, tag
    /// characters, a soft hyphen, a byte-order mark), variation selectors, private-use, unassigned and
    /// noncharacter code points, and every default-ignorable code point (a grapheme joiner, a Hangul
    /// filler). Printed raw, two member names or projects looked the same and differed, and hidden text
    /// travelled in the admin log (attack 85, F2; "Bo\u{34F}b" was listed as Bob, attack 86, F4).
    public static func isHidden(_ scalar: Unicode.Scalar) -> Bool {
        let properties = scalar.properties
        if isUnprintable(scalar) || properties.isNoncharacterCodePoint || properties.isVariationSelector
            || properties.isDefaultIgnorableCodePoint
        {
            return true
        }
        switch scalar.properties.generalCategory {
        case .format, .privateUse, .unassigned, .surrogate: return true
        default: return false
        }
    }

    /// `text` with each hidden character (`isHidden`) written as `\u{…}`. A backslash stays as it is: the
    /// admin log stores text escaped so (a backup's path), and a listing prints it escaped once more
    /// unchanged.
    public static func escaping(_ text: String) -> String {
        guard text.unicodeScalars.contains(where: isHidden) else { return text }
        var written = ""
        for scalar in text.unicodeScalars {
            if isHidden(scalar) {
                written += "\\u{\(String(scalar.value, radix: 16, uppercase: true))}"
            } else {
                written.unicodeScalars.append(scalar)
            }
        }
        return written
    }
}

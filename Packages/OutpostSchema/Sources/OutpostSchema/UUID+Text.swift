import Foundation

extension UUID {
    /// Parses the 36-character hyphenated form (`8-4-4-4-12` hex digits, either case), as
    /// `UUID(uuidString:)` does but without its `sscanf`, which was the largest single cost of reading
    /// ids by the thousand (store lists, bundle imports).
    public init?(hyphenatedText text: String) {
        var copy = text
        guard let parsed = copy.withUTF8({ Self.parse($0) }) else { return nil }
        self = parsed
    }

    /// The same parse from UTF-8 bytes a database hands out, with no `String` made first.
    public init?(hyphenatedUTF8 bytes: UnsafeBufferPointer<UInt8>) {
        guard let parsed = Self.parse(bytes) else { return nil }
        self = parsed
    }

    private static func parse(_ bytes: UnsafeBufferPointer<UInt8>) -> UUID? {
        guard bytes.count == 36, let text = bytes.baseAddress,
            text[8] == 0x2D, text[13] == 0x2D, text[18] == 0x2D, text[23] == 0x2D
        else { return nil }
        var raw: uuid_t = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        // One table lookup per digit and one check per id: a store lists ids by the ten thousand, and
        // the per-digit branches and bounds checks made this a fifth of decoding a listed row.
        let valid = withUnsafeMutableBytes(of: &raw) { out -> Bool in
            hexDigitValues.withUnsafeBufferPointer { values in
                var invalid: UInt8 = 0
                var index = 0
                for byteIndex in 0..<16 {
                    if index == 8 || index == 13 || index == 18 || index == 23 { index += 1 }
                    let high = values[Int(text[index])]
                    let low = values[Int(text[index + 1])]
                    invalid |= high | low
                    out[byteIndex] = high << 4 | (low & 0x0F)
                    index += 2
                }
                return invalid & 0xF0 == 0
            }
        }
        return valid ? UUID(uuid: raw) : nil
    }

    /// Each byte's value as a hex digit, 0xFF for a byte that is not one.
    private static let hexDigitValues: [UInt8] = (0...255).map { byte in
        switch byte {
        case 0x30...0x39: UInt8(byte - 0x30)
        case 0x41...0x46: UInt8(byte - 0x41 + 10)
        case 0x61...0x66: UInt8(byte - 0x61 + 10)
        default: 0xFF
        }
    }
}

extension UUID {
    /// The 36-character hyphenated form in lowercase: how ids are stored, compared and named in
    /// messages. Formatted by hand: `uuidString` formats each byte with `snprintf` and `lowercased()`
    /// makes a second string, the largest single cost of a server's push once JSON was hand-written.
    public var lowercasedText: String { hyphenated(Self.lowercaseDigits) }

    /// `uuidString`'s form (uppercase digits), which `JSONEncoder` writes for a `UUID`, formatted by hand.
    public var uppercasedText: String { hyphenated(Self.uppercaseDigits) }

    private static let lowercaseDigits: StaticString = "0123456789abcdef"
    private static let uppercaseDigits: StaticString = "0123456789ABCDEF"

    private func hyphenated(_ digits: StaticString) -> String {
        withUnsafeBytes(of: uuid) { raw in
            String(unsafeUninitializedCapacity: 36) { out in
                var index = 0
                for position in 0..<16 {
                    if position == 4 || position == 6 || position == 8 || position == 10 {
                        out[index] = UInt8(ascii: "-")
                        index += 1
                    }
                    let byte = raw[position]
                    out[index] = digits.utf8Start[Int(byte >> 4)]
                    out[index + 1] = digits.utf8Start[Int(byte & 0x0F)]
                    index += 2
                }
                return index
            }
        }
    }
}

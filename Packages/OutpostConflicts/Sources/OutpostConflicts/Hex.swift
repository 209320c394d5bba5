/// Fixed-width lowercase hex, whose text order equals the numbers' order.
enum Hex {
    private static let digits = Array("0123456789abcdef".utf8)

    static func fixed(_ value: UInt64, digits count: Int) -> String {
        var bytes = [UInt8](repeating: 0, count: count)
        var rest = value
        for index in stride(from: count - 1, through: 0, by: -1) {
            bytes[index] = digits[Int(rest & 0xF)]
            rest >>= 4
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Writes `value` as `count` lowercase hex digits into `buffer` from `start`: building a clock's
    /// text in place, without a temporary string per part (pulls encode tens of clocks per record).
    static func write(_ value: UInt64, digits count: Int, into buffer: UnsafeMutableBufferPointer<UInt8>, at start: Int) {
        var rest = value
        for index in stride(from: start + count - 1, through: start, by: -1) {
            buffer[index] = digits[Int(rest & 0xF)]
            rest >>= 4
        }
    }

    /// Parses exactly `text` as lowercase hex; nil on any other character or an empty slice.
    static func parse(_ text: some Collection<UInt8>) -> UInt64? {
        guard !text.isEmpty, text.count <= 16 else { return nil }
        var value: UInt64 = 0
        for byte in text {
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            default: return nil
            }
            value = value << 4 | UInt64(digit)
        }
        return value
    }
}

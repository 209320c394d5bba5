import Foundation
import OutpostModels

/// The text form of field values, shared by both encodings: XML carries every value as text, and JSON
/// carries text for instants, ids and blobs. One place, so the two encodings cannot drift apart.
enum FieldText {
    /// The value `text` stands for as a field of `kind`, or nil when it is not one.
    static func value(_ text: String, kind: FieldKind) -> FieldValue? {
        switch kind {
        case .text, .day, .sha256, .choice: return .text(text)
        case .integer, .money, .count: return Int64(text).map(FieldValue.integer)
        case .real, .quantity:
            // Non-finite numbers parse here and are refused by the catalog's rules, with the field named.
            return Double(text).map(FieldValue.real)
        case .bool:
            switch text {
            case "true", "1": return .bool(true)
            case "false", "0": return .bool(false)
            default: return nil
            }
        case .date: return FastTimestamp.date(from: text).map(FieldValue.date)
        case .uuid: return UUID(hyphenatedText: text).map(FieldValue.uuid)
        case .blob: return Data(base64Encoded: text).map(FieldValue.blob)
        }
    }

    /// The text form of a non-null value, as both writers emit it.
    static func text(of value: FieldValue) -> String {
        switch value {
        case .null: ""
        case .bool(let flag): flag ? "true" : "false"
        case .integer(let number): String(number)
        case .real(let number): number.description
        case .text(let text): text
        case .date(let date): Timestamp.string(from: date)
        case .uuid(let id): id.lowercasedText
        case .blob(let data): data.base64EncodedString()
        }
    }
}

/// Parses the one instant form bundles use, `2026-11-22T18:46:17.123Z`, without a date formatter: two
/// per record, so this is on the import's hot path. Anything else falls back to `Timestamp.date(from:)`,
/// and both give the same `Date` for the same text.
enum FastTimestamp {
    static func date(from text: String) -> Date? {
        var copy = text
        let fast: Date?? = copy.withUTF8 { bytes -> Date?? in
            guard let milliseconds = milliseconds(bytes) else { return .none }
            return .some(Date(timeIntervalSince1970: Double(milliseconds) / 1000))
        }
        if let fast { return fast }
        return Timestamp.date(from: text)
    }

    /// Milliseconds since 1970 for `YYYY-MM-DDTHH:MM:SS[.f{1,9}]Z`, or nil for any other shape.
    static func milliseconds(_ bytes: UnsafeBufferPointer<UInt8>) -> Int64? {
        guard bytes.count >= 20, bytes[4] == 0x2D, bytes[7] == 0x2D, bytes[10] == 0x54, bytes[13] == 0x3A,
            bytes[16] == 0x3A, bytes[bytes.count - 1] == 0x5A
        else { return nil }
        func digits(_ start: Int, _ count: Int) -> Int64? {
            var value: Int64 = 0
            for index in start..<(start + count) {
                let digit = bytes[index] &- 0x30
                guard digit < 10 else { return nil }
                value = value * 10 + Int64(digit)
            }
            return value
        }
        guard let year = digits(0, 4), let month = digits(5, 2), let day = digits(8, 2), let hour = digits(11, 2),
            let minute = digits(14, 2), let second = digits(17, 2),
            (1...12).contains(month), day >= 1, day <= daysIn(month: month, year: year), hour < 24, minute < 60,
            second < 60
        else { return nil }
        var fractionMilliseconds: Int64 = 0
        if bytes.count > 20 {
            let count = bytes.count - 21
            guard bytes[19] == 0x2E, (1...9).contains(count), let fraction = digits(20, count) else { return nil }
            var scale: Int64 = 1
            for _ in 0..<count { scale *= 10 }
            fractionMilliseconds = Int64((Double(fraction) / Double(scale) * 1000).rounded())
        } else if bytes.count != 20 {
            return nil
        }
        let days = daysSince1970(year: year, month: month, day: day)
        return ((days * 24 + hour) * 60 + minute) * 60_000 + second * 1000 + fractionMilliseconds
    }

    private static func daysIn(month: Int64, year: Int64) -> Int64 {
        switch month {
        case 2: (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }

    /// Days from 1970-01-01 to the civil date (Howard Hinnant's algorithm).
    private static func daysSince1970(year: Int64, month: Int64, day: Int64) -> Int64 {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }
}

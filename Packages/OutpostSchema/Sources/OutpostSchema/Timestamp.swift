import Foundation

/// ISO 8601 with milliseconds in UTC: the one text form of an instant across records, bundles and the wire.
///
/// Instants are kept at millisecond precision; formatting rounds to the nearest millisecond and parsing
/// rebuilds the same `Date` that `Date(timeIntervalSince1970: ms / 1000)` gives, so text round-trips exactly.
public enum Timestamp {
    /// Formats `date` as `2026-11-22T18:46:17.123Z`.
    public static func string(from date: Date) -> String {
        let milliseconds = Int64((date.timeIntervalSince1970 * 1000).rounded())
        return fastString(milliseconds: milliseconds) ?? formattedString(milliseconds: milliseconds)
    }

    /// Parses an ISO 8601 UTC timestamp, `YYYY-MM-DDTHH:MM:SS` with 0 to 9 fraction digits and `Z`;
    /// nil when it is not one, or names no real instant (February 30th, 24:00, a leap second): such a
    /// text is refused, never moved to a neighbouring instant. Fractions finer than a millisecond are
    /// rounded to it, the precision every instant keeps.
    public static func date(from text: String) -> Date? {
        milliseconds(fromText: text).map { Date(timeIntervalSince1970: Double($0) / 1000) }
    }

    // Every pulled record carries two instants and every stored row is read with them, so the form is
    // handled by hand for years 0000–9999, in the proleptic Gregorian calendar ISO 8601 itself uses
    // (days from 1970-01-01 by H. Hinnant's civil-date arithmetic). Foundation only formats instants
    // outside those years; its calendar is Julian before October 1582, so a date of 1500 read by
    // hand and written by Foundation came back ten days off, every round trip. Tests hold the hand path
    // to Foundation where their calendars agree.

    /// `milliseconds` since 1970 as the 24-byte form, or nil outside years 0000–9999.
    static func fastString(milliseconds: Int64) -> String? {
        let (days, dayMilliseconds) = floorDivision(milliseconds, 86_400_000)
        let (year, month, day) = civil(fromDays: days)
        guard (0...9999).contains(year) else { return nil }
        return String(unsafeUninitializedCapacity: 24) { buffer in
            func put(_ value: Int64, _ digits: Int, at offset: Int) {
                var rest = value
                for index in stride(from: offset + digits - 1, through: offset, by: -1) {
                    buffer[index] = UInt8(0x30 + rest % 10)
                    rest /= 10
                }
            }
            put(year, 4, at: 0)
            buffer[4] = UInt8(ascii: "-")
            put(month, 2, at: 5)
            buffer[7] = UInt8(ascii: "-")
            put(day, 2, at: 8)
            buffer[10] = UInt8(ascii: "T")
            put(dayMilliseconds / 3_600_000, 2, at: 11)
            buffer[13] = UInt8(ascii: ":")
            put(dayMilliseconds / 60_000 % 60, 2, at: 14)
            buffer[16] = UInt8(ascii: ":")
            put(dayMilliseconds / 1000 % 60, 2, at: 17)
            buffer[19] = UInt8(ascii: ".")
            put(dayMilliseconds % 1000, 3, at: 20)
            buffer[23] = UInt8(ascii: "Z")
            return 24
        }
    }

    /// The milliseconds of `YYYY-MM-DDTHH:MM:SS[.f{1,9}]Z` (a real date and time, years 0000–9999), or
    /// nil otherwise.
    static func milliseconds(fromText text: String) -> Int64? {
        var text = text
        return text.withUTF8 { bytes -> Int64? in
            guard bytes.count >= 20, bytes.count != 21, bytes.count <= 30, bytes[4] == UInt8(ascii: "-"),
                bytes[7] == UInt8(ascii: "-"), bytes[10] == UInt8(ascii: "T"), bytes[13] == UInt8(ascii: ":"),
                bytes[16] == UInt8(ascii: ":"), bytes[bytes.count - 1] == UInt8(ascii: "Z")
            else { return nil }
            func number(_ offset: Int, _ digits: Int) -> Int64? {
                var value: Int64 = 0
                for index in offset..<offset + digits {
                    let digit = bytes[index] &- 0x30
                    guard digit < 10 else { return nil }
                    value = value * 10 + Int64(digit)
                }
                return value
            }
            guard let year = number(0, 4), let month = number(5, 2), let day = number(8, 2), let hour = number(11, 2),
                let minute = number(14, 2), let second = number(17, 2), (1...12).contains(month), day >= 1,
                day <= daysIn(month: month, year: year), hour < 24, minute < 60, second < 60
            else { return nil }
            var fraction: Int64 = 0
            if bytes.count > 20 {
                // `.` and one to nine digits, rounded to the millisecond (half up, as formatting rounds).
                let digits = bytes.count - 21
                guard bytes[19] == UInt8(ascii: "."), let value = number(20, digits) else { return nil }
                var scale: Int64 = 1
                for _ in 0..<digits { scale *= 10 }
                fraction = (value * 1000 * 2 + scale) / (scale * 2)
            }
            let days = days(fromCivilYear: year, month: month, day: day)
            let milliseconds = ((days * 24 + hour) * 60 + minute) * 60_000 + second * 1000 + fraction
            // Rounding up may cross into year 10000, which no text of this form names: refused, so that an
            // instant read can always be written back and read again (an import is always exportable).
            return milliseconds <= lastMilliseconds ? milliseconds : nil
        }
    }

    /// 9999-12-31T23:59:59.999Z, the last instant the form names.
    static let lastMilliseconds: Int64 = 253_402_300_799_999

    private static func floorDivision(_ value: Int64, _ divisor: Int64) -> (Int64, Int64) {
        let (quotient, remainder) = value.quotientAndRemainder(dividingBy: divisor)
        return remainder < 0 ? (quotient - 1, remainder + divisor) : (quotient, remainder)
    }

    private static func days(fromCivilYear year: Int64, month: Int64, day: Int64) -> Int64 {
        let shiftedYear = month <= 2 ? year - 1 : year
        let era = floorDivision(shiftedYear, 400).0
        let yearOfEra = shiftedYear - era * 400
        let dayOfYear = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    private static func civil(fromDays days: Int64) -> (year: Int64, month: Int64, day: Int64) {
        let shifted = days + 719_468
        let era = floorDivision(shifted, 146_097).0
        let dayOfEra = shifted - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let monthIndex = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * monthIndex + 2) / 5 + 1
        let month = monthIndex < 10 ? monthIndex + 3 : monthIndex - 9
        return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }

    private static func daysIn(month: Int64, year: Int64) -> Int64 {
        switch month {
        case 2: (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }

    /// The general formatter, for instants outside years 0000–9999.
    static func formattedString(milliseconds: Int64) -> String {
        let (seconds, fraction) = milliseconds.quotientAndRemainder(dividingBy: 1000)
        let whole = seconds - (fraction < 0 ? 1 : 0)
        let text = Date(timeIntervalSince1970: Double(whole)).formatted(wholeSeconds)
        let digits = String((fraction + 1000) % 1000 + 1000).dropFirst()
        return text.dropLast() + "." + digits + "Z"
    }

    /// Rounds `date` to the nearest millisecond, the precision every stored and sent instant keeps.
    /// (Rounding down would let binary floating point land some instants one millisecond low.)
    static func roundedToMilliseconds(_ date: Date) -> Date {
        Date(timeIntervalSince1970: (date.timeIntervalSince1970 * 1000).rounded() / 1000)
    }

    /// The current instant at millisecond precision.
    public static func now() -> Date { roundedToMilliseconds(Date()) }

    private static let wholeSeconds = Date.ISO8601FormatStyle(timeZone: .gmt)
}

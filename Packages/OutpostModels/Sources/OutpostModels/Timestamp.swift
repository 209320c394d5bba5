import Foundation

/// ISO 8601 with milliseconds in UTC: the one text form of an instant across records, bundles and the wire.
///
/// Instants are kept at millisecond precision; formatting rounds to the nearest millisecond and parsing
/// rebuilds the same `Date` that `Date(timeIntervalSince1970: ms / 1000)` gives, so text round-trips exactly.
public enum Timestamp {
    /// Formats `date` as `2026-11-22T18:46:17.123Z`.
    public static func string(from date: Date) -> String {
        let milliseconds = Int64((date.timeIntervalSince1970 * 1000).rounded())
        let (seconds, fraction) = milliseconds.quotientAndRemainder(dividingBy: 1000)
        let whole = seconds - (fraction < 0 ? 1 : 0)
        let text = Date(timeIntervalSince1970: Double(whole)).formatted(wholeSeconds)
        let digits = String((fraction + 1000) % 1000 + 1000).dropFirst()
        return text.dropLast() + "." + digits + "Z"
    }

    /// Parses an ISO 8601 UTC timestamp with or without fractional seconds; nil when it is not one.
    public static func date(from text: String) -> Date? {
        guard text.hasSuffix("Z") else { return nil }
        var main = text.dropLast()
        var milliseconds: Int64 = 0
        if let dot = main.lastIndex(of: ".") {
            let fraction = main[main.index(after: dot)...]
            guard (1...9).contains(fraction.count), fraction.allSatisfy(\.isASCII), let value = Int64(fraction)
            else { return nil }
            let scaled = Double(value) / pow(10, Double(fraction.count)) * 1000
            milliseconds = Int64(scaled.rounded())
            main = main[..<dot]
        }
        guard let seconds = try? wholeSeconds.parse(main + "Z") else { return nil }
        return Date(timeIntervalSince1970: Double(Int64(seconds.timeIntervalSince1970) * 1000 + milliseconds) / 1000)
    }

    /// Rounds `date` to the nearest millisecond, the precision every stored and sent instant keeps.
    /// (Rounding down would let binary floating point land some instants one millisecond low.)
    public static func roundedToMilliseconds(_ date: Date) -> Date {
        Date(timeIntervalSince1970: (date.timeIntervalSince1970 * 1000).rounded() / 1000)
    }

    /// The current instant at millisecond precision.
    public static func now() -> Date { roundedToMilliseconds(Date()) }

    private static let wholeSeconds = Date.ISO8601FormatStyle(timeZone: .gmt)
}

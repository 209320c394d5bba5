/// Change sequences as sorted, disjoint ranges, in text `<first>-<last>` or `<n>`: what a device sends
/// as `PullRequest.ownSequences` (the changes its own pushes made, from `MutationResult.sequence`). A
/// batch of creates takes consecutive sequences, so one range stands for all of it.
public struct SequenceRanges: Sendable, Hashable {
    /// The ranges, sorted, neither overlapping nor touching.
    public private(set) var ranges: [ClosedRange<Int64>] = []

    /// The most ranges kept and sent: past it the lowest go (their records then come whole, as before).
    public static let maximumCount = 256

    /// None.
    public init() {}

    /// Reads ranges as `texts` writes them (one written high to low reads as the same range, as the API
    /// document's pattern admits it); nil for any other text, or more than `maximumCount`.
    public init?(texts: [String]) {
        guard texts.count <= Self.maximumCount else { return nil }
        for text in texts {
            let parts = text.split(separator: "-", omittingEmptySubsequences: false)
            guard (1...2).contains(parts.count), let first = Self.number(parts[0]), let last = Self.number(parts.last!)
            else { return nil }
            insert(min(first, last)...max(first, last))
        }
    }

    /// A sequence as the text writes it: 1 to 18 digits, no sign, no leading zero.
    private static func number(_ digits: Substring) -> Int64? {
        guard (1...18).contains(digits.count), digits.first != "0", digits.allSatisfy({ ("0"..."9").contains($0) }) else {
            return nil
        }
        return Int64(digits)
    }

    /// The text form, one string per range.
    public var texts: [String] {
        ranges.map { $0.lowerBound == $0.upperBound ? String($0.lowerBound) : "\($0.lowerBound)-\($0.upperBound)" }
    }

    /// Whether `sequence` is in one of the ranges.
    public func contains(_ sequence: Int64) -> Bool {
        var low = 0, high = ranges.count
        while low < high {
            let middle = (low + high) / 2
            if ranges[middle].upperBound < sequence { low = middle + 1 } else { high = middle }
        }
        return low < ranges.count && ranges[low].contains(sequence)
    }

    /// Adds `range`, merging it with the ranges it overlaps or touches; past `maximumCount`, the lowest go.
    public mutating func insert(_ range: ClosedRange<Int64>) {
        var merged = range
        var kept: [ClosedRange<Int64>] = []
        kept.reserveCapacity(ranges.count + 1)
        for existing in ranges {
            // Apart unless they overlap or touch; 1 is added or taken only on the side that cannot
            // overflow. `merged.upperBound + 1` trapped on a sequence of Int64.max in a hostile server's
            // push answer, and the device crashed on every run against it (attack 73, finding 2).
            let below = existing.upperBound < merged.lowerBound && existing.upperBound != merged.lowerBound - 1
            let above = existing.lowerBound > merged.upperBound && existing.lowerBound != merged.upperBound + 1
            if below || above {
                kept.append(existing)
            } else {
                merged = min(existing.lowerBound, merged.lowerBound)...max(existing.upperBound, merged.upperBound)
            }
        }
        kept.append(merged)
        kept.sort { $0.lowerBound < $1.lowerBound }
        ranges = Array(kept.suffix(Self.maximumCount))
    }

    /// Forgets every sequence up to `last`.
    public mutating func removeAll(through last: Int64) {
        ranges = ranges.compactMap { range in
            if range.upperBound <= last { return nil }
            return range.lowerBound > last ? range : (last + 1)...range.upperBound
        }
    }

    /// Forgets every sequence past `last`.
    public mutating func removeAll(after last: Int64) {
        ranges = ranges.compactMap { range in
            if range.lowerBound > last { return nil }
            return range.upperBound <= last ? range : range.lowerBound...last
        }
    }

    /// The highest sequence held, nil when none.
    public var last: Int64? { ranges.last?.upperBound }
}

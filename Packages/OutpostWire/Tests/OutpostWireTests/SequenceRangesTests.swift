@testable import OutpostWire
import OutpostTesting
import Testing

/// `SequenceRanges` against the plain set of sequences it stands for, over seeded inserts and forgets.
@Suite struct SequenceRangesTests {
    @Test(arguments: 0..<40 as Range<UInt64>)
    func actsAsTheSetItStandsFor(seed: UInt64) throws {
        var random = SeededGenerator(seed: seed)
        var ranges = SequenceRanges()
        var model = Set<Int64>()
        for _ in 0..<60 {
            if Int.random(in: 0..<8, using: &random) == 0 {
                let last = Int64.random(in: 1...400, using: &random)
                ranges.removeAll(through: last)
                model = model.filter { $0 > last }
            } else {
                let first = Int64.random(in: 1...400, using: &random)
                let last = first + Int64.random(in: 0...6, using: &random)
                ranges.insert(first...last)
                model.formUnion(first...last)
            }
            // Sorted, disjoint, never touching: one text per run of sequences.
            for (a, b) in zip(ranges.ranges, ranges.ranges.dropFirst()) { #expect(a.upperBound + 1 < b.lowerBound) }
            for sequence in Int64(0)...410 { #expect(ranges.contains(sequence) == model.contains(sequence)) }
            // The text reads back as the same ranges, also written high to low.
            #expect(SequenceRanges(texts: ranges.texts) == ranges)
            let reversed = ranges.ranges.map { "\($0.upperBound)-\($0.lowerBound)" }
            #expect(SequenceRanges(texts: reversed) == ranges)
            #expect(ranges.last == model.max())
        }
    }

    @Test func refusesWhatThePatternDoesNot() {
        for bad in [["0"], ["-1"], ["1-"], ["01"], ["1-2-3"], ["x"], ["1234567890123456789"]] {
            #expect(SequenceRanges(texts: bad) == nil, "\(bad)")
        }
        #expect(SequenceRanges(texts: Array(repeating: "7", count: SequenceRanges.maximumCount + 1)) == nil)
        var many = SequenceRanges()
        for index in 0..<Int64(SequenceRanges.maximumCount + 10) { many.insert((index * 3 + 1)...(index * 3 + 1)) }
        #expect(many.ranges.count == SequenceRanges.maximumCount && many.ranges.first == 31...31, "the lowest went")
    }

    /// Attack 73, finding 2: a push answer naming sequence Int64.max crashed the device (arithmetic
    /// overflow merging it with the ranges held), on every run against that server.
    @Test func rangesAtTheEdgesOfInt64MergeWithoutOverflow() {
        var ranges = SequenceRanges()
        ranges.insert(5...5)
        ranges.insert(Int64.max...Int64.max)
        ranges.insert(Int64.min...Int64.min)
        ranges.insert((Int64.max - 1)...(Int64.max - 1))
        ranges.insert((Int64.min + 1)...(Int64.min + 1))
        #expect(ranges.contains(Int64.max) && ranges.contains(Int64.max - 1) && ranges.contains(5))
        #expect(ranges.contains(Int64.min) && !ranges.contains(6) && !ranges.contains(Int64.max - 2))
        #expect(ranges.last == Int64.max)
        ranges.removeAll(through: Int64.max - 1)
        #expect(ranges.contains(Int64.max) && !ranges.contains(5) && !ranges.contains(Int64.min))
    }
}

import Foundation
import OutpostConflicts
import OutpostFieldService
import OutpostFieldServiceTesting
import OutpostTesting
import Testing

@Suite(.fieldService) struct HybridLogicalClockTests {
    let start = Fixtures.epoch

    @Test func ticksStayMonotonicWhenTheWallClockJumpsBack() {
        var clock = HybridLogicalClock(node: Fixtures.deviceA)
        let first = clock.tick(now: Fixtures.date(start + 1_000))
        let second = clock.tick(now: Fixtures.date(start))  // wall clock jumped back a second
        let third = clock.tick(now: Fixtures.date(start - 240_000))  // and four minutes, within the drift allowance
        #expect(first < second && second < third)
        #expect(third.physicalMilliseconds == start + 1_000 && third.counter == 2)
        let later = clock.tick(now: Fixtures.date(start + 2_000))
        #expect(later.physicalMilliseconds == start + 2_000 && later.counter == 0)
    }

    @Test func aClockOnceFarAheadStartsAgainFromWallTimeInsteadOfStampingEveryWriteAhead() {
        // The phone ran a day ahead, stamped a write, and was corrected; the app restarts from the saved stamp.
        let dayAhead = HybridTimestamp(physicalMilliseconds: start + 86_400_000, counter: 3, node: Fixtures.deviceA)
        var clock = HybridLogicalClock(node: Fixtures.deviceA, last: dayAhead)
        let next = clock.tick(now: Fixtures.date(start))
        #expect(next.physicalMilliseconds == start && next.counter == 0)
        #expect(clock.tick(now: Fixtures.date(start)) > next, "monotonic again from there")
        // A stamp of this node's that far ahead is not followed either, unless told to by the caller.
        let edit = clock.tick(now: Fixtures.date(start + 10), after: nil)
        #expect(edit.physicalMilliseconds == start + 10)
    }

    @Test func aFullCounterMovesToTheNextMillisecond() {
        let full = HybridTimestamp(physicalMilliseconds: start, counter: .max, node: Fixtures.deviceA)
        var clock = HybridLogicalClock(node: Fixtures.deviceA, last: full)
        let next = clock.tick(now: Fixtures.date(start))
        #expect(next > full && next.physicalMilliseconds == start + 1 && next.counter == 0)
    }

    @Test func receiveOrdersTheNextLocalWriteAfterTheRemoteOne() throws {
        var clock = HybridLogicalClock(node: Fixtures.deviceA)
        _ = clock.tick(now: Fixtures.date(start))
        let remote = HybridTimestamp(physicalMilliseconds: start + 60_000, counter: 7, node: Fixtures.deviceB)
        let received = try clock.receive(remote, now: Fixtures.date(start + 10))
        #expect(received > remote && received.physicalMilliseconds == remote.physicalMilliseconds && received.counter == 8)
        #expect(clock.tick(now: Fixtures.date(start + 20)) > remote)

        let older = HybridTimestamp(physicalMilliseconds: start, counter: 3, node: Fixtures.deviceB)
        let afterOlder = try clock.receive(older, now: Fixtures.date(start + 30))
        #expect(afterOlder > received, "an older remote clock never moves the local clock back")
    }

    @Test func receiveWithEqualPhysicalTimesTakesTheLargerCounter() throws {
        var clock = HybridLogicalClock(
            node: Fixtures.deviceA, last: HybridTimestamp(physicalMilliseconds: start, counter: 2, node: Fixtures.deviceA))
        let remote = HybridTimestamp(physicalMilliseconds: start, counter: 5, node: Fixtures.deviceB)
        let received = try clock.receive(remote, now: Fixtures.date(start - 5))
        #expect(received.physicalMilliseconds == start && received.counter == 6 && received.node == Fixtures.deviceA)
    }

    @Test func aClockTooFarAheadIsRefusedAndLeavesTheLocalClockAlone() throws {
        var clock = HybridLogicalClock(node: Fixtures.server)
        let before = clock.tick(now: Fixtures.date(start))
        let yearAhead = HybridTimestamp(
            physicalMilliseconds: start + 365 * 86_400_000, counter: 0, node: Fixtures.deviceB)
        let error = #expect(throws: ConflictError.self) { try clock.receive(yearAhead, now: Fixtures.date(start)) }
        #expect(error?.code == .clockDrift)
        #expect(error?.description.contains("365.0 days ahead") == true, "\(String(describing: error))")
        #expect(clock.last == before)
        #expect(clock.tick(now: Fixtures.date(start + 1)).physicalMilliseconds == start + 1)
    }

    @Test func aWriteOverASeenValueIsStampedAfterItWithoutDraggingTheClock() throws {
        var clock = HybridLogicalClock(node: Fixtures.deviceA)
        let now = Fixtures.date(start)
        let older = HybridTimestamp(physicalMilliseconds: start - 60_000, counter: 3, node: Fixtures.deviceB)
        #expect(clock.tick(now: now, after: older).physicalMilliseconds == start, "an older value changes nothing")

        let near = HybridTimestamp(physicalMilliseconds: start + 60_000, counter: 4, node: Fixtures.deviceB)
        let overNear = clock.tick(now: now, after: near)
        #expect(overNear > near && clock.last == overNear, "within the drift the clock follows, as receive does")

        let far = HybridTimestamp(physicalMilliseconds: start + 3_600_000, counter: .max, node: Fixtures.deviceB)
        let overFar = clock.tick(now: now, after: far)
        #expect(overFar > far && overFar.node == Fixtures.deviceA)
        #expect(clock.last != overFar && clock.last! < far, "a value an hour ahead does not move the clock an hour")
        #expect(clock.tick(now: now).physicalMilliseconds < start + 3_600_000)
    }

    @Test func theDriftBoundIsInclusive() throws {
        let bound: Int64 = 5 * 60 * 1000
        var clock = HybridLogicalClock(node: Fixtures.server)
        #expect(HybridLogicalClock.defaultMaximumDrift == .seconds(300))
        let atBound = HybridTimestamp(physicalMilliseconds: start + bound, counter: 9, node: Fixtures.deviceB)
        #expect(try clock.receive(atBound, now: Fixtures.date(start)) > atBound)
        var fresh = HybridLogicalClock(node: Fixtures.server, maximumDrift: .seconds(1))
        let past = HybridTimestamp(physicalMilliseconds: start + 1_001, counter: 0, node: Fixtures.deviceB)
        #expect(throws: ConflictError.self) { try fresh.receive(past, now: Fixtures.date(start)) }
    }

    /// Attack 61, finding 1: no stamp follows the last instant the encoding holds. A write over a value a
    /// hostile server stamped there trapped (every save of the record, every sync after); it is stamped
    /// there too now, without dragging the clock, and a clock whose last stamp is there goes on ticking.
    @Test func aSeenStampAtTheEndOfTheEncodingIsNotSteppedPast() throws {
        let endOfTime = HybridTimestamp.maximumPhysicalMilliseconds
        let end = HybridTimestamp(physicalMilliseconds: endOfTime, counter: .max, node: Fixtures.deviceB)
        var clock = HybridLogicalClock(node: Fixtures.deviceA)
        let edit = clock.tick(now: Fixtures.date(start), after: end)
        #expect(edit.physicalMilliseconds == endOfTime && edit.counter == .max && edit.node == Fixtures.deviceA)
        #expect(clock.tick(now: Fixtures.date(start)).physicalMilliseconds == start, "the clock is not dragged along")
        let wallAtTheEnd = Fixtures.date(endOfTime)
        var there = HybridLogicalClock(node: Fixtures.deviceA, last: end)
        #expect(there.tick(now: wallAtTheEnd).physicalMilliseconds == endOfTime)
        #expect(try there.receive(end, now: wallAtTheEnd).physicalMilliseconds == endOfTime)
    }

    /// The family of finding 1: every operation of the clock, over stamps and wall times drawn towards the
    /// edges of the encoding (the first and last millisecond, a full counter, a clock far ahead or far
    /// behind), keeps its law and never traps. `tick(now:)` follows the clock's last stamp unless that
    /// ran more than the drift ahead of the wall (then it starts again from the wall); `tick(now:after:)`
    /// follows `seen` too; `receive` follows both or refuses. At the last instant the encoding holds,
    /// "follows" can only mean "is there".
    @Test(arguments: 0..<4)
    func everyOperationKeepsItsLawAtTheEdgesOfTheEncoding(seed: UInt64) throws {
        var random = SeededGenerator(seed: seed)
        let end = HybridTimestamp.maximumPhysicalMilliseconds
        let drift: Int64 = 300_000
        func milliseconds() -> Int64 {
            switch Int.random(in: 0..<6, using: &random) {
            case 0: 0
            case 1: end - Int64.random(in: 0...2, using: &random)
            case 2: Int64.random(in: 0...end, using: &random)
            default: start + Int64.random(in: -2 * drift...2 * drift, using: &random)
            }
        }
        func stamp() -> HybridTimestamp {
            let counter: UInt16 = Bool.random(using: &random) ? .max - UInt16.random(in: 0...1, using: &random) : .random(in: 0...3, using: &random)
            return HybridTimestamp(
                physicalMilliseconds: milliseconds(), counter: counter,
                node: Bool.random(using: &random) ? Fixtures.deviceA : Fixtures.deviceB)
        }
        func follows(_ later: HybridTimestamp, _ earlier: HybridTimestamp) -> Bool {
            later > earlier || (earlier.physicalMilliseconds == end && earlier.counter == .max
                && later.physicalMilliseconds == end && later.counter == .max)
        }
        for _ in 0..<2_000 {
            let last = Bool.random(using: &random) ? stamp() : nil
            var clock = HybridLogicalClock(node: Fixtures.deviceA, last: last)
            let wall = milliseconds()
            let now = Fixtures.date(wall)
            let ticked = clock.tick(now: now)
            if let last, last.physicalMilliseconds >= wall, last.physicalMilliseconds - wall <= drift {
                #expect(follows(ticked, last), "tick after \(last) at \(wall): \(ticked)")
            } else {
                #expect(ticked.physicalMilliseconds == wall && ticked.counter == 0, "tick from the wall at \(wall): \(ticked)")
            }
            let seen = stamp()
            let edit = clock.tick(now: now, after: seen)
            #expect(follows(edit, seen) && follows(edit, ticked), "edit after \(seen) and \(ticked): \(edit)")
            let remote = stamp()
            var receiving = clock
            if let received = try? receiving.receive(remote, now: now) {
                #expect(remote.physicalMilliseconds - wall <= drift)
                #expect(follows(received, remote) && follows(received, clock.last ?? received), "receive \(remote): \(received)")
            } else {
                #expect(remote.physicalMilliseconds - wall > drift)
                #expect(receiving == clock, "a refused stamp leaves the clock alone")
            }
        }
    }

    @Test func aClockRestoredFromItsLastStampCarriesOn() {
        var clock = HybridLogicalClock(node: Fixtures.deviceA)
        let stamp = clock.tick(now: Fixtures.date(start + 500))
        var restored = HybridLogicalClock(node: Fixtures.deviceA, last: clock.last)
        #expect(restored.tick(now: Fixtures.date(start)) > stamp)
    }
}

@Suite(.fieldService) struct HybridTimestampTests {
    @Test func encodingIsFixedWidthAndParsesBackExactly() throws {
        let stamp = HybridTimestamp(physicalMilliseconds: 1_795_000_000_123, counter: 42, node: NodeID(0xBEEF))
        #expect(stamp.encoded == "01a1ee565e7b-002a-000000000000beef")
        #expect(try HybridTimestamp(encoded: stamp.encoded) == stamp)
        let json = try JSONEncoder().encode([stamp])
        #expect(String(decoding: json, as: UTF8.self) == "[\"01a1ee565e7b-002a-000000000000beef\"]")
        #expect(try JSONDecoder().decode([HybridTimestamp].self, from: json) == [stamp])
    }

    @Test func encodingOrderEqualsClockOrder() throws {
        for seed in UInt64(0)..<1_000 {
            var random = SeededGenerator(seed: seed)
            func stamp() -> HybridTimestamp {
                HybridTimestamp(
                    physicalMilliseconds: [0, 1, Int64.random(in: 0...HybridTimestamp.maximumPhysicalMilliseconds, using: &random)]
                        .randomElement(using: &random)!,
                    counter: [0, .max, UInt16.random(in: 0...UInt16.max, using: &random)].randomElement(using: &random)!,
                    node: NodeID([0, .max, UInt64.random(in: 0...UInt64.max, using: &random)].randomElement(using: &random)!))
            }
            let (a, b) = (stamp(), stamp())
            #expect((a < b) == (a.encoded < b.encoded), "seed \(seed): \(a) vs \(b)")
            #expect((a == b) == (a.encoded == b.encoded), "seed \(seed)")
            #expect(try HybridTimestamp(encoded: a.encoded) == a, "seed \(seed)")
        }
    }

    @Test func equalTimesOrderByNode() {
        let a = HybridTimestamp(physicalMilliseconds: 10, counter: 1, node: NodeID(1))
        let b = HybridTimestamp(physicalMilliseconds: 10, counter: 1, node: NodeID(2))
        #expect(a < b && !(b < a))
    }

    @Test(arguments: [
        "", "01a1ee565e7b-002a-000000000000beef0", "01A1F0B7D67B-002A-000000000000BEEF",
        "01a1f0b7d67b_002a-000000000000beef", "01a1f0b7d67b-002g-000000000000beef", "01a1ee565e7b-002a-00000000000 beef",
        "ünicode-text-that-is-thirty4bytes",
    ])
    func invalidTextIsATypedError(_ text: String) {
        let error = #expect(throws: ConflictError.self) { try HybridTimestamp(encoded: text) }
        #expect(error?.code == .invalidClockEncoding)
    }

    @Test func nodeFromUUIDTakesItsFirst64Bits() {
        let node = NodeID(uuid: UUID(uuidString: "01234567-89AB-CDEF-0000-000000000000")!)
        #expect(node == NodeID(0x0123_4567_89AB_CDEF))
        #expect(node.description == "0123456789abcdef")
    }
}

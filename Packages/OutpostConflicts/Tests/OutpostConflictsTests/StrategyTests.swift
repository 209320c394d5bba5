import Foundation
import OutpostConflicts
import OutpostFieldService
import OutpostFieldServiceTesting
import OutpostModels
import OutpostSchema
import OutpostTesting
import Testing

/// Each strategy's rule and tie-breaks, on small hand-made versions of one daily log.
@Suite(.fieldService) struct StrategyTests {
    typealias F = Fixtures
    let base: [String: FieldValue] = ["notes": .text("Poured footings"), "weather": .text("Rain"), "crewSize": .integer(3)]

    @Test func fieldMergeTakesEachFieldsNewestWriteAndSurfacesTheOlder() throws {
        let server = F.version(base, at: F.clock(0)).updating(["notes": .text("office")], at: F.clock(5, node: F.server))
        let client = F.version(base, at: F.clock(0))
            .updating(["notes": .text("device"), "weather": .text("Sun")], at: F.clock(3, node: F.deviceA))
        let result = try ConflictStrategy.fieldMerge.resolve(client: client, server: server)
        #expect(result.merged.record["notes"] == .text("office"))
        #expect(result.merged.record["weather"] == .text("Sun"), "changed on one side only: no conflict")
        #expect(result.merged.record["crewSize"] == .integer(3))
        #expect(result.sources == ["notes": .server, "weather": .client, "crewSize": .server])
        #expect(result.losingValues.map(\.field) == ["notes", "weather"])
        #expect(result.losingValues.first == LosingValue(field: "notes", value: .text("device"), clock: F.clock(3), side: .client))
        let swapped = try ConflictStrategy.fieldMerge.resolve(client: server, server: client)
        #expect(swapped.merged == result.merged, "the same whichever side merges")
    }

    @Test func fieldMergeOnlySurfacesWhatAChangeWrote() throws {
        let stored = F.version(base, at: F.clock(0)).updating(["notes": .text("office")], at: F.clock(5, node: F.server))
        let local = F.version(base, at: F.clock(0)).updating(["weather": .text("Sun")], at: F.clock(3))
        let result = try ConflictStrategy.fieldMerge.resolve(client: local.change(of: ["weather"]), server: stored)
        #expect(result.losingValues.map(\.field) == ["weather"], "only the replaced server value, nothing stale")
        #expect(result.losingValues.first?.side == .server)
        #expect(result.merged.record["notes"] == .text("office") && result.merged.record["weather"] == .text("Sun"))
    }

    @Test(arguments: [ConflictStrategy.fieldMerge, .lastWriteWins])
    func equalTimesResolveByNodeIDWhicheverSideMerges(_ strategy: ConflictStrategy) throws {
        let low = F.version(["notes": .text("from node 1")], at: F.clock(7, 2, node: NodeID(1)))
        let high = F.version(["notes": .text("from node 2")], at: F.clock(7, 2, node: NodeID(2)))
        for (client, server) in [(low, high), (high, low)] {
            let result = try strategy.resolve(client: client, server: server)
            #expect(result.merged.record["notes"] == .text("from node 2"))
            #expect(result.losingValues.map(\.value) == [.text("from node 1")])
        }
    }

    @Test(arguments: [ConflictStrategy.fieldMerge, .lastWriteWins])
    func identicalClocksWithDifferentValuesStillResolveOneWay(_ strategy: ConflictStrategy) throws {
        let clock = F.clock(7)
        for (x, y) in [(FieldValue.text("a"), FieldValue.text("b")), (.integer(2), .text("2")), (.null, .bool(false))] {
            let a = F.version(["notes": x], at: clock)
            let b = F.version(["notes": y], at: clock)
            #expect(strategy.merge(a, b) == strategy.merge(b, a))
            #expect(strategy.merge(a, b).record["notes"] == y, "the larger value in the tie order wins")
        }
    }

    @Test func lastWriteWinsTakesTheWholeNewerVersion() throws {
        let older = F.version(base, at: F.clock(0)).updating(["notes": .text("older"), "weather": .text("Sun")], at: F.clock(4))
        let newer = F.version(base, at: F.clock(0)).updating(["crewSize": .integer(5)], at: F.clock(6, node: F.deviceB))
        let result = try ConflictStrategy.lastWriteWins.resolve(client: older, server: newer)
        #expect(result.merged.record.fields == newer.record.fields, "unlike fieldMerge, the older version's fields lose too")
        #expect(Set(result.losingValues.map(\.field)) == ["notes", "weather", "crewSize"])
        #expect(result.losingValues.allSatisfy { $0.side == .client || $0.field == "crewSize" })
        #expect(try ConflictStrategy.lastWriteWins.resolve(client: newer, server: older).merged == result.merged)
    }

    @Test func serverWinsAppliesASequentialChangeAndKeepsTheServerOnAConcurrentOne() throws {
        let server = F.version(["value": .integer(1_000)], at: F.clock(0, node: F.server), version: 4)
        let sequential = F.version(["value": .integer(1_500)], at: F.clock(9), version: 4)
        let applied = try ConflictStrategy.serverWins.resolve(client: sequential, server: server)
        #expect(applied.merged.record["value"] == .integer(1_500) && applied.conflict == nil)

        let concurrent = F.version(["value": .integer(1_500)], at: F.clock(9), version: 3)
        let kept = try ConflictStrategy.serverWins.resolve(client: concurrent, server: server)
        #expect(kept.merged.record["value"] == .integer(1_000), "even though the client's clock is newer")
        #expect(kept.losingValues == [LosingValue(field: "value", value: .integer(1_500), clock: F.clock(9), side: .client)])
        #expect(!kept.isOpenConflict && !kept.isRefusal)
    }

    @Test func clientWinsAppliesTheDevicesFactAndSurfacesTheOfficeEdit() throws {
        let server = F.version(["note": .text("office fix")], at: F.clock(8, node: F.server), version: 2)
        let client = F.version(["note": .text("gate code 4411")], at: F.clock(1), version: 1)
        let result = try ConflictStrategy.clientWins.resolve(client: client, server: server)
        #expect(result.merged.record["note"] == .text("gate code 4411"))
        #expect(result.sources["note"] == .client)
        #expect(result.losingValues.map(\.side) == [.server])
    }

    @Test func manualAppliesNothingAndOpensAConflict() throws {
        let server = F.version(["notes": .text("theirs")], at: F.clock(2, node: F.server), version: 2)
        let client = F.version(["notes": .text("mine")], at: F.clock(3), version: 1)
        let result = try ConflictStrategy.manual.resolve(client: client, server: server)
        #expect(result.isOpenConflict)
        #expect(result.merged.record.fields == server.record.fields)
        #expect(result.losingValues.map(\.value) == [.text("mine")])
        let same = F.version(["notes": .text("theirs")], at: F.clock(3), version: 1)
        #expect(try !ConflictStrategy.manual.resolve(client: same, server: server).isOpenConflict)
    }

    @Test func appendOnlyAcceptsARepeatedCreateAndRefusesAnEdit() throws {
        let comment = F.version(["body": .text("Ordered a replacement.")], at: F.clock(1), entity: .comment)
        let resent = try ConflictStrategy.appendOnly.resolve(client: comment, server: comment)
        #expect(resent.merged == comment && resent.conflict == nil && !resent.isRefusal)
        let edit = comment.updating(["body": .text("Ordered two.")], at: F.clock(5))
        let refused = try ConflictStrategy.appendOnly.resolve(client: edit, server: comment)
        #expect(refused.isRefusal)
        #expect(refused.merged.record["body"] == .text("Ordered a replacement."))
        #expect(refused.losingValues.map(\.value) == [.text("Ordered two.")])
    }

    @Test func versionsOfDifferentRecordsAreATypedError() {
        let a = F.version(base, at: F.clock(0))
        let other = try! VersionedRecord(
            record: EntityRecord(entity: .dailyLog, id: UUID(), fields: [:], sync: F.sync()), clocks: [:])
        let error = #expect(throws: ConflictError.self) { try ConflictStrategy.fieldMerge.resolve(client: other, server: a) }
        #expect(error?.code == .mismatchedRecords && error?.id == F.id && error?.entity == .dailyLog)
        #expect(error?.description.hasPrefix("dailyLog 0c0f11c7-0000-4000-8000-000000000005: cannot merge") == true)
    }

    @Test func aValueWithoutAClockIsATypedError() {
        let record = EntityRecord(entity: .dailyLog, id: F.id, fields: ["notes": .text("x")], sync: F.sync())
        let error = #expect(throws: ConflictError.self) { try VersionedRecord(record: record, clocks: [:]) }
        #expect(error?.code == .missingClock && error?.field == "notes")
        let orphanClock = #expect(throws: ConflictError.self) {
            try VersionedRecord(record: record, clocks: ["notes": F.clock(0), "hours": F.clock(0)])
        }
        #expect(orphanClock?.field == "hours")
        // As many clocks as values, but not for the same fields.
        let swapped = #expect(throws: ConflictError.self) { try VersionedRecord(record: record, clocks: ["hours": F.clock(0)]) }
        #expect(swapped?.code == .missingClock && swapped?.field == "notes")
    }

    /// The law the pairing check keeps, whichever way the two tables were built: a version is made
    /// exactly when the values and the clocks name the same fields. Clocks mapped from the values (a
    /// pulled record's shared clock) are compared in table order, any other pair name by name; seeded
    /// cases of both, of equal and unequal counts, with names swapped, dropped or added.
    @Test(arguments: 0..<8) func aVersionIsMadeExactlyWhenValuesAndClocksNameTheSameFields(seed: UInt64) {
        var random = SeededGenerator(seed: 4_100 + seed)
        let names = (0..<24).map { "field\($0)" }
        for _ in 0..<300 {
            let fieldNames = Set(names.shuffled(using: &random).prefix(Int.random(in: 0...12, using: &random)))
            let fields = Dictionary(uniqueKeysWithValues: fieldNames.map { ($0, FieldValue.integer(1)) })
            var clocks: [String: HybridTimestamp]
            switch Int.random(in: 0..<4, using: &random) {
            case 0:  // mapped from the values: the same table layout
                clocks = fields.mapValues { _ in F.clock(0) }
            case 1:  // the same names, inserted one by one in another order
                clocks = [:]
                for name in fieldNames.shuffled(using: &random) { clocks[name] = F.clock(0) }
            case 2:  // mapped, then one name swapped for another: as many clocks, not the same fields
                clocks = fields.mapValues { _ in F.clock(0) }
                if let dropped = fieldNames.randomElement(using: &random), let added = names.first(where: { !fieldNames.contains($0) }) {
                    clocks[dropped] = nil
                    clocks[added] = F.clock(0)
                }
            default:  // any other names
                let other = names.shuffled(using: &random).prefix(max(0, fieldNames.count + Int.random(in: -1...1, using: &random)))
                clocks = Dictionary(uniqueKeysWithValues: other.map { ($0, F.clock(0)) })
            }
            let record = EntityRecord(entity: .dailyLog, id: F.id, fields: fields, sync: F.sync())
            let made = try? VersionedRecord(record: record, clocks: clocks)
            #expect((made != nil) == (Set(fields.keys) == Set(clocks.keys)), "values \(fields.keys.sorted()), clocks \(clocks.keys.sorted())")
        }
    }
}

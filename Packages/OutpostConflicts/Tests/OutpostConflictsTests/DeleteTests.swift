import Foundation
import OutpostConflicts
import OutpostFieldService
import OutpostFieldServiceTesting
import OutpostModels
import OutpostSchema
import Testing

/// A delete against a concurrent update, per strategy, and a record deleted and re-created with the same id.
@Suite(.fieldService) struct DeleteTests {
    typealias F = Fixtures
    let fields: [String: FieldValue] = ["notes": .text("first"), "weather": .text("Rain")]

    @Test(arguments: [ConflictStrategy.fieldMerge, .lastWriteWins])
    func aDeleteNewerThanTheUpdateWinsAndTheUpdateIsSurfaced(_ strategy: ConflictStrategy) throws {
        let start = F.version(fields, at: F.clock(0))
        let updated = start.updating(["notes": .text("edited")], at: F.clock(3))
        let deleted = start.deleted(at: F.clock(5, node: F.deviceB))
        for (client, server) in [(updated, deleted), (deleted, updated)] {
            let result = try strategy.resolve(client: client, server: server)
            #expect(result.merged.isDeleted && result.merged.record.sync.deletedAt == F.clock(5).date)
            #expect(result.losingValues.contains { $0.field == "notes" && $0.value == .text("edited") })
        }
    }

    @Test(arguments: [ConflictStrategy.fieldMerge, .lastWriteWins])
    func anUpdateNewerThanTheDeleteResurrectsAndTheDeleteIsSurfaced(_ strategy: ConflictStrategy) throws {
        let start = F.version(fields, at: F.clock(0))
        let deleted = start.deleted(at: F.clock(3, node: F.deviceB))
        let updated = start.updating(["notes": .text("edited")], at: F.clock(5))
        for (client, server) in [(updated, deleted), (deleted, updated)] {
            let result = try strategy.resolve(client: client, server: server)
            #expect(!result.merged.isDeleted && result.merged.record.sync.deletedAt == nil)
            #expect(result.merged.record["notes"] == .text("edited") && result.merged.record["weather"] == .text("Rain"))
            #expect(result.losingDeletion == LosingDeletion(clock: F.clock(3, node: F.deviceB), side: client == deleted ? .client : .server))
        }
    }

    @Test(arguments: ConflictStrategy.all)
    func aRecordDeletedAndRecreatedWithTheSameIDNeverLosesTheNewData(_ strategy: ConflictStrategy) throws {
        let original = F.version(fields, at: F.clock(0, node: F.server), version: 1)
        let deletedOnServer = original.deleted(at: F.clock(2, node: F.server))
        // The device saw the delete (its base is the server's version), then created the record again.
        let recreated = deletedOnServer.updating(["notes": .text("second"), "weather": .text("Sun")], at: F.clock(4))
        let result = try strategy.resolve(client: recreated, server: deletedOnServer)
        let kept = result.merged.record["notes"] == .text("second") && !result.merged.isDeleted
        let surfaced = result.losingValues.contains { $0.value == .text("second") }
        #expect(kept || surfaced, "\(strategy): the new data is either kept or surfaced, never dropped")
        if strategy != .appendOnly { #expect(kept, "\(strategy)") }
        if strategy == .fieldMerge || strategy == .lastWriteWins {
            // A replica that still holds the old tombstone takes the new record too, in either role.
            #expect(!strategy.merge(deletedOnServer, result.merged).isDeleted, "\(strategy)")
            #expect(!strategy.merge(result.merged, deletedOnServer).isDeleted, "\(strategy)")
        }
    }

    @Test func serverWinsKeepsTheServersDeleteAndSurfacesTheConcurrentUpdate() throws {
        let server = F.version(fields, at: F.clock(0, node: F.server), version: 2).deleted(at: F.clock(1, node: F.server))
        let client = F.version(["notes": .text("edited")], at: F.clock(5), version: 1)
        let result = try ConflictStrategy.serverWins.resolve(client: client, server: server)
        #expect(result.merged.isDeleted)
        #expect(result.losingValues.map(\.value) == [.text("edited")])
    }

    @Test func serverWinsKeepsTheRecordWhenTheClientDeletedConcurrently() throws {
        let server = F.version(fields, at: F.clock(4, node: F.server), version: 2)
        let client = F.version([:], at: F.clock(0), version: 1).deleted(at: F.clock(5))
        let result = try ConflictStrategy.serverWins.resolve(client: client, server: server)
        #expect(!result.merged.isDeleted)
        #expect(result.losingDeletion == LosingDeletion(clock: F.clock(5), side: .client))
    }

    @Test func clientWinsUndoesAConcurrentServerDelete() throws {
        let server = F.version(fields, at: F.clock(0, node: F.server), version: 2).deleted(at: F.clock(9, node: F.server))
        let client = F.version(["notes": .text("clock-out note")], at: F.clock(1), version: 1)
        let result = try ConflictStrategy.clientWins.resolve(client: client, server: server)
        #expect(!result.merged.isDeleted && result.merged.record["notes"] == .text("clock-out note"))
        #expect(result.losingDeletion?.side == .server)
    }

    @Test func clientWinsDeleteSurfacesEveryServerValueItHidesBeforeOrAfterIt() throws {
        // A note added a moment before the delete is lost to it as much as one added after: every value
        // the delete hides is offered, and the device leaves out the ones it had already seen.
        let server = F.version(fields, at: F.clock(0, node: F.server), version: 2)
            .updating(["weather": .text("Snow")], at: F.clock(3, node: F.server))
        let client = F.version([:], at: F.clock(0), version: 1).deleted(at: F.clock(5))
        let result = try ConflictStrategy.clientWins.resolve(client: client, server: server)
        #expect(result.merged.isDeleted)
        #expect(result.losingValues.map(\.field) == ["notes", "weather"])
        #expect(result.losingValues.allSatisfy { $0.side == .server })
    }

    @Test func lastWriteWinsDeleteSurfacesTheValuesOfTheOlderLiveVersion() throws {
        let server = F.version(fields, at: F.clock(0, node: F.server), version: 2)
            .updating(["weather": .text("Snow")], at: F.clock(3, node: F.server))
        let client = F.version([:], at: F.clock(0), version: 1).deleted(at: F.clock(5))
        let result = try ConflictStrategy.lastWriteWins.resolve(client: client, server: server)
        #expect(result.merged.isDeleted && result.merged.record["weather"] == .text("Snow"), "kept as its last values")
        #expect(result.losingValues.map(\.field) == ["notes", "weather"])
        #expect(result.losingValues.allSatisfy { $0.side == .server })
    }

    @Test func appendOnlyRefusesABringingBackOfADeletedRecordWhole() throws {
        let photo = F.version(["fileName": .text("IMG_1.jpg"), "kind": .text("photo")], at: F.clock(0), entity: .mediaAttachment)
        let deleted = photo.deleted(at: F.clock(3))
        let back = deleted.updating(["fileName": .text("IMG_1.jpg")], at: F.clock(6)).change(of: ["fileName"])
        let refused = try ConflictStrategy.appendOnly.resolve(client: back, server: deleted)
        #expect(refused.isRefusal && refused.merged.isDeleted)
        #expect(refused.losingValues.map(\.value) == [.text("IMG_1.jpg")], "offered, though equal to the last value")
    }

    @Test func serverWinsTakesAnOmittedOptionalFieldAsNull() throws {
        // A pusher that left an optional field out: null on both sides is no conflict.
        let server = F.version(["notes": .text("a")], at: F.clock(0, node: F.server), version: 2)
        let client = F.version(["notes": .text("a"), "weather": .null], at: F.clock(1), version: 1)
        let result = try ConflictStrategy.serverWins.resolve(client: client, server: server)
        #expect(result.losingValues.isEmpty)
    }

    @Test func appendOnlyAppliesADeleteAndRefusesAnEditOfADeletedRecord() throws {
        let photo = F.version(["fileName": .text("IMG_1.jpg")], at: F.clock(0), entity: .mediaAttachment)
        let deleted = try ConflictStrategy.appendOnly.resolve(client: photo.deleted(at: F.clock(3)), server: photo)
        #expect(deleted.merged.isDeleted && deleted.conflict == nil)
        let edit = photo.updating(["fileName": .text("IMG_2.jpg")], at: F.clock(6))
        let refused = try ConflictStrategy.appendOnly.resolve(client: edit, server: deleted.merged)
        #expect(refused.isRefusal && refused.merged.isDeleted)
    }
}

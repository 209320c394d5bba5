import Foundation
import OutpostConflicts
import OutpostFieldService
import OutpostFieldServiceTesting
import OutpostModels
import OutpostSchema
import Testing

@Suite(.fieldService) struct PolicyTests {
    typealias F = Fixtures

    @Test func defaultsFollowTheCatalog() {
        let policy = ConflictPolicy()
        for entity in EntityCatalog.all {
            #expect(policy[entity.type].name == entity.defaultPolicy, "\(entity.type)")
        }
        #expect(policy[.discount] == .serverWins && policy[.dailyLog] == .fieldMerge)
        #expect(policy[.timeEntry] == .clientWins && policy[.comment] == .appendOnly)
    }

    @Test func anAppOverridesOneEntity() throws {
        var policy = ConflictPolicy(overriding: [.issue: .lastWriteWins])
        policy[.dailyLog] = .manual
        #expect(policy[.issue] == .lastWriteWins && policy[.dailyLog] == .manual && policy[.project] == .fieldMerge)
        let server = F.version(["notes": .text("theirs")], at: F.clock(2, node: F.server), version: 2)
        let client = F.version(["notes": .text("mine")], at: F.clock(3), version: 1)
        #expect(try policy.resolve(client: client, server: server).isOpenConflict)
    }

    @Test func overrideMakesTheLosingVersionANewerChangeThatWinsEverywhere() throws {
        let server = F.version(["notes": .text("office"), "weather": .text("Rain")], at: F.clock(5, node: F.server))
        let change = F.version(["notes": .text("mine")], at: F.clock(3))
        let resolution = try ConflictStrategy.fieldMerge.resolve(client: change, server: server)
        let conflict = try #require(resolution.conflict)
        #expect(conflict.discard() == resolution.merged)

        var clock = HybridLogicalClock(node: F.deviceA, last: F.clock(3))
        let overridden = try conflict.override(clock: &clock, now: F.date(F.epoch + 4))
        #expect(overridden.record["notes"] == .text("mine") && overridden.record["weather"] == .text("Rain"))
        #expect(overridden.clocks["notes"]! > F.clock(5, node: F.server), "a fresh clock, newer than the winner's")
        // The server receiving the override takes it without a new conflict.
        let atServer = try ConflictStrategy.fieldMerge.resolve(client: overridden.change(of: ["notes"]), server: server)
        #expect(atServer.merged.record["notes"] == .text("mine"))
    }

    @Test func overridingALosingDeleteDeletesWithAFreshClock() throws {
        let server = F.version(["notes": .text("x")], at: F.clock(4, node: F.server), version: 2)
        let client = F.version([:], at: F.clock(0), version: 1).deleted(at: F.clock(5))
        let conflict = try #require(try ConflictStrategy.serverWins.resolve(client: client, server: server).conflict)
        var clock = HybridLogicalClock(node: F.deviceA)
        let overridden = try conflict.override(clock: &clock, now: F.date(F.epoch + 10))
        #expect(overridden.isDeleted && overridden.deletion! > F.clock(5))
        let atServer = try ConflictStrategy.serverWins.resolve(client: overridden.change(of: []), server: server)
        #expect(atServer.merged.isDeleted, "the override is based on the server's version, so it applies")
    }
}

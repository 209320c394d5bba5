@testable import OutpostStore
import Foundation
import GRDB
import OutpostConflicts
import OutpostFieldService
import OutpostFieldServiceTesting
import OutpostModels
import OutpostSchema
import Testing

/// The store as the sync engine drives it: claiming the queue in dependency order, acknowledging,
/// failing and retrying, applying pulled pages with the conflict policy, and surfacing conflicts.
@Suite(.fieldService) struct SyncSideTests {
    let now = Date(timeIntervalSince1970: 1_795_000_000)
    let server = NodeID(0xFEED)

    func remote(_ model: some Syncable, version: Int64, at milliseconds: Int64, deleted: Bool = false) -> VersionedRecord {
        var record = model.record
        record.sync.version = version
        record.sync.serverID = nil
        if deleted { record.sync.deletedAt = Date(timeIntervalSince1970: Double(milliseconds) / 1000) }
        return VersionedRecord(record: record, stampedAt: stamp(milliseconds))
    }

    func stamp(_ milliseconds: Int64) -> HybridTimestamp {
        HybridTimestamp(physicalMilliseconds: milliseconds, counter: 0, node: server)
    }

    /// Two pulls at once (an app and its extension): the page read first may be applied last.
    @Test func anOlderPageAppliedAfterANewerOneNeverMovesARecordBack() async throws {
        let folder = try TemporaryDatabase()
        let store = try LocalStore.open(at: folder.path)
        var issue = OutpostModels.Issue(projectID: UUID(), title: "Leak")
        let older = remote(issue, version: 1, at: 1_000)
        issue.title = "Leak, fixed"
        let newer = remote(issue, version: 2, at: 2_000)
        _ = try await store.applyPulledPage(PulledPage(changes: [newer], cursor: "2"), now: now)
        _ = try await store.applyPulledPage(PulledPage(changes: [older], cursor: "1"), now: now)
        let held = try #require(try store.record(.issue, id: issue.id))
        #expect(held.sync.version == 2)
        #expect(held["title"] == .text("Leak, fixed"))
    }

    @Test func anEstimateGraphIsClaimedParentsFirst() async throws {
        let folder = try TemporaryDatabase()
        let store = try LocalStore.open(at: folder.path)
        let opportunity = try await store.save(Opportunity(name: "Kitchen", customerName: "Zoë"), now: now)
        let project = try await store.save(Project(opportunityID: opportunity.id, name: "Müller kitchen"), now: now)
        let scope = try await store.save(Scope(projectID: project.id, name: "Cabinets"), now: now)
        try await store.save(ScopeItem(scopeID: scope.id, name: "Base 36\"", quantity: 4, unit: "ea", unitPriceCents: 48_900), now: now)
        try await store.save(Fee(projectID: project.id, name: "Permit", amountCents: 35_000), now: now)

        var rounds: [[EntityType]] = []
        while true {
            let batch = try store.claimMutations(limit: 50, now: now)
            if batch.isEmpty { break }
            rounds.append(batch.map(\.entity))
            for mutation in batch { try store.acknowledge(mutation, serverVersion: 1, serverID: nil, now: now) }
        }
        #expect(rounds == [[.opportunity], [.project], [.scope, .fee], [.scopeItem]])
        #expect(try store.fetch(Scope.self, id: scope.id)?.sync.syncStatus == .synced)
        #expect(try store.status().pendingChanges == 0)
    }

    @Test func aPoisonedMutationBlocksOnlyItsDependents() async throws {
        let folder = try TemporaryDatabase()
        let store = try LocalStore.open(at: folder.path)
        let project = try await store.save(Project(name: "Doomed"), now: now)
        let scope = try await store.save(Scope(projectID: project.id, name: "Roof"), now: now)
        let unrelated = try await store.save(Issue(projectID: UUID(), title: "Elsewhere"), now: now)

        let first = try store.claimMutations(limit: 10, now: now)
        #expect(Set(first.map(\.recordID)) == [project.id, unrelated.id])
        let poisoned = try #require(first.first { $0.recordID == project.id })
        let blocked = try store.fail(poisoned, reason: "422 invalid project")
        #expect(blocked.map(\.recordID) == [scope.id])
        #expect(try store.blockedMutations().map { $0.blockedBy } == [[poisoned.sequence]])
        #expect(try store.fetch(Project.self, id: project.id)?.sync.syncStatus == .failed)
        try store.acknowledge(try #require(first.first { $0.recordID == unrelated.id }), serverVersion: 1, serverID: nil, now: now)
        #expect(try store.claimMutations(limit: 10, now: now).isEmpty, "the scope waits on its failed parent")
        #expect(try store.status().failedChanges == 1)
    }

    @Test func retriesWaitTheirTurnAndInFlightWorkSurvivesACrash() async throws {
        let folder = try TemporaryDatabase()
        let store = try LocalStore.open(at: folder.path)
        try await store.save(Issue(projectID: UUID(), title: "Leak"), now: now)
        let mutation = try #require(try store.claimMutations(limit: 1, now: now).first)
        try store.scheduleRetry(mutation, reason: "503", retryAt: now.addingTimeInterval(4))
        #expect(try store.claimMutations(limit: 1, now: now.addingTimeInterval(3.9)).isEmpty)
        let retried = try #require(try store.claimMutations(limit: 1, now: now.addingTimeInterval(4)).first)
        #expect(retried.idempotencyKey == mutation.idempotencyKey)
        #expect(retried.attempts == 1)
        #expect(retried.lastError == "503")

        // The app dies with the mutation in flight; on the next start it is sent again, same key.
        let reopened = try LocalStore.open(at: folder.path)
        #expect(try reopened.claimMutations(limit: 1, now: now.addingTimeInterval(10)).isEmpty)
        #expect(try reopened.requeueInFlightMutations() == 1)
        #expect(try reopened.claimMutations(limit: 1, now: now.addingTimeInterval(10)).first?.idempotencyKey == mutation.idempotencyKey)
    }

    @Test func aServerAssignedIdIsRecorded() async throws {
        let folder = try TemporaryDatabase()
        let store = try LocalStore.open(at: folder.path)
        let clockIn = try await store.save(
            TimeEntry(projectID: UUID(), memberID: UUID(), kind: .clockIn, recordedAt: now), now: now)
        try await store.save(
            TimeEntry(projectID: clockIn.projectID, memberID: clockIn.memberID, kind: .clockOut,
                      recordedAt: now.addingTimeInterval(3600), clockInID: clockIn.id), now: now)
        let first = try store.claimMutations(limit: 10, now: now)
        #expect(first.map(\.recordID) == [clockIn.id], "the clock-out waits for its clock-in")
        try store.acknowledge(first[0], serverVersion: 1, serverID: "4711", now: now)
        #expect(try store.serverID(of: .timeEntry, clientID: clockIn.id) == "4711")
        #expect(try store.fetch(TimeEntry.self, id: clockIn.id)?.sync.serverID == "4711")
        #expect(try store.claimMutations(limit: 10, now: now).first?.fields["clockInID"] == .uuid(clockIn.id))
    }

    @Test func pulledPagesApplyWithTheirCursorOrNotAtAll() async throws {
        let folder = try TemporaryDatabase()
        let store = try LocalStore.open(at: folder.path)
        let project = Project(name: "Remote job")
        let issues = (0..<3).map { Issue(projectID: project.id, title: "Remote \($0)") }
        let report = try await store.applyPulledPage(PulledPage(
            changes: [remote(project, version: 1, at: 1_000)] + issues.map { remote($0, version: 1, at: 1_001) },
            cursor: "c-4"))
        #expect(report.applied == 4)
        #expect(report.orphaned == 0)
        #expect(try store.pullCursor() == "c-4")
        #expect(try store.fetch(Issue.self, id: issues[0].id)?.sync.syncStatus == .synced)

        // The next page fails half-way (a disk error, say): neither its records nor its cursor land.
        try await folder.queue.write { db in
            try db.execute(sql: """
                CREATE TRIGGER fail_fee BEFORE INSERT ON fees BEGIN SELECT RAISE(ABORT, 'injected'); END
                """)
        }
        let late = Issue(projectID: project.id, title: "Late")
        await #expect(throws: StoreError.self) {
            try await store.applyPulledPage(PulledPage(
                changes: [remote(late, version: 1, at: 2_000), remote(Fee(projectID: project.id, name: "Permit", amountCents: 1), version: 1, at: 2_001)],
                cursor: "c-6"))
        }
        #expect(try store.pullCursor() == "c-4")
        #expect(try store.fetch(Issue.self, id: late.id) == nil)
    }

    @Test func aLocalChangeMeetsTheServersByFieldAndTheLoserIsSurfaced() async throws {
        let folder = try TemporaryDatabase()
        let store = try LocalStore.open(at: folder.path)
        let log = DailyLog(projectID: UUID(), authorID: UUID(), day: "2026-11-22", notes: "Rain", weather: "Wet")
        try await store.applyPulledPage(
            PulledPage(changes: [remote(log, version: 1, at: 1_000)], cursor: "c-1"), now: Date(timeIntervalSince1970: 1))

        // Offline, this device edits notes and weather (its clock reads 2,000,000 ms).
        var mine = try #require(try store.fetch(DailyLog.self, id: log.id))
        mine.notes = "Rain until noon"
        mine.weather = "Clearing"
        try await store.save(mine, now: Date(timeIntervalSince1970: 2_000))
        // Meanwhile the office changed notes later, and hours.
        var theirs = log
        theirs.notes = "Rain all day, site closed at 3"
        theirs.hours = 12
        var office = remote(theirs, version: 2, at: 1_000)
        office = try VersionedRecord(
            record: office.record,
            clocks: office.clocks.merging(["notes": stamp(3_000_000), "hours": stamp(3_000_000)]) { _, new in new })
        let report = try await store.applyPulledPage(
            PulledPage(changes: [office], cursor: "c-2"), now: Date(timeIntervalSince1970: 3_001))
        #expect(report.merged == 1)

        let merged = try #require(try store.fetch(DailyLog.self, id: log.id))
        #expect(merged.notes == "Rain all day, site closed at 3", "the newer write wins the field")
        #expect(merged.weather == "Clearing", "a field changed on one side only never conflicts")
        #expect(merged.hours == 12)
        #expect(merged.sync.version == 2)
        #expect(merged.sync.syncStatus == .pending, "this device's weather still has to reach the server")

        let conflicts = try store.openConflicts()
        #expect(conflicts.count == 1)
        #expect(conflicts.first?.field == "notes")
        #expect(conflicts.first?.localValue == .text("Rain until noon"))
        #expect(conflicts.first?.remoteValue == .text("Rain all day, site closed at 3"))
        #expect(try store.status().openConflicts == 1)

        // The user overrides: their notes come back as a new change with a fresh clock.
        try await store.resolveConflict(try #require(conflicts.first?.id), choice: .override, now: Date(timeIntervalSince1970: 3_100))
        #expect(try store.fetch(DailyLog.self, id: log.id)?.notes == "Rain until noon")
        #expect(try store.openConflicts().isEmpty)
        #expect(try store.mutations(status: .pending).last?.fields["notes"] == .text("Rain until noon"))
    }

    /// A store where this device's status ("inProgress", at 2 s) lost to the office's newer one
    /// ("resolved", at 5 s): one open conflict, its losing side the client.
    func storeWithALostStatus() async throws -> (TemporaryDatabase, LocalStore, OutpostModels.Issue) {
        let folder = try TemporaryDatabase()
        let store = try LocalStore.open(at: folder.path)
        let issue = Issue(projectID: UUID(), title: "Leak", status: .open)
        try await store.applyPulledPage(
            PulledPage(changes: [remote(issue, version: 1, at: 1_000)], cursor: "c-1"), now: Date(timeIntervalSince1970: 1))
        var mine = issue
        mine.status = .inProgress
        try await store.save(mine, now: Date(timeIntervalSince1970: 2))
        var theirs = issue
        theirs.status = .resolved
        try await store.applyPulledPage(
            PulledPage(changes: [remote(theirs, version: 2, at: 5_000)], cursor: "c-2"), now: Date(timeIntervalSince1970: 5))
        return (folder, store, issue)
    }

    @Test func aDiscardedConflictKeepsTheWinner() async throws {
        let (database, store, issue) = try await storeWithALostStatus()
        defer { withExtendedLifetime(database) {} }
        let conflict = try #require(try store.openConflicts().first)
        try await store.resolveConflict(conflict.id, choice: .discard)
        #expect(try store.fetch(Issue.self, id: issue.id)?.status == .resolved)
        #expect(try store.openConflicts().isEmpty)
        await #expect(throws: StoreError.self) { try await store.resolveConflict(conflict.id, choice: .discard) }
    }

    /// A conflict whose record is no longer on the device (removed since: a rebuild after a server restore
    /// found the server without it): `override` cannot keep the losing value, and said "override" and
    /// closed the conflict with nothing queued, the user's choice gone without a word (attack 106, N2).
    /// It is refused, the conflict stays open, and discarding it still works.
    @Test func overridingAConflictWhoseRecordIsGoneIsRefusedAndKeepsItOpen() async throws {
        let (database, store, issue) = try await storeWithALostStatus()
        defer { withExtendedLifetime(database) {} }
        let conflict = try #require(try store.openConflicts().first)
        try store.write { db in try db.execute(sql: "DELETE FROM issues WHERE id = ?", arguments: [issue.id.storageText]) }
        let queued = try store.mutations().count
        await #expect(throws: StoreError.self) {
            try await store.resolveConflict(conflict.id, choice: .override, now: Date(timeIntervalSince1970: 7))
        }
        do {
            try await store.resolveConflict(conflict.id, choice: .override, now: Date(timeIntervalSince1970: 7))
        } catch {
            #expect(error.code == .recordNotHeld && error.message.contains(issue.id.storageText), "\(error)")
        }
        #expect(try store.openConflicts().map(\.id) == [conflict.id], "still open")
        #expect(try store.mutations().count == queued, "nothing queued")
        try await store.resolveConflict(conflict.id, choice: .discard)
        #expect(try store.openConflicts().isEmpty)
    }

    /// `override` brings back the value of the side that lost, as recorded, even after the record moved
    /// on: judging by the current value would write the winner when the loser already stands again.
    @Test func overrideBringsBackTheRecordedLoserAfterTheRecordMovedOn() async throws {
        // This device's status loses to the office's newer one, then the user sets it back by hand.
        let (database, store, issue) = try await storeWithALostStatus()
        defer { withExtendedLifetime(database) {} }
        let lost = try #require(try store.openConflicts().first)
        #expect(lost.losingSide == .client)
        #expect(lost.losingValue == .text("inProgress"))
        var again = try #require(try store.fetch(Issue.self, id: issue.id))
        again.status = .inProgress
        try await store.save(again, now: Date(timeIntervalSince1970: 6))
        let queued = try store.mutations().count
        try await store.resolveConflict(lost.id, choice: .override, now: Date(timeIntervalSince1970: 7))
        #expect(try store.fetch(Issue.self, id: issue.id)?.status == .inProgress, "the losing value already stands")
        #expect(try store.mutations().count == queued, "nothing new to send")

        // The office's status loses to this device's newer one; the user then picks a third status.
        var office = try #require(try store.fetch(Issue.self, id: issue.id))
        office.status = .closed
        try await store.applyPulledPage(
            PulledPage(changes: [remote(office, version: 3, at: 5_500)], cursor: "c-3"), now: Date(timeIntervalSince1970: 8))
        let won = try #require(try store.openConflicts().first { $0.id != lost.id })
        #expect(won.losingSide == .server)
        #expect(won.losingValue == .text("closed"))
        #expect(try store.fetch(Issue.self, id: issue.id)?.status == .inProgress)
        var third = try #require(try store.fetch(Issue.self, id: issue.id))
        third.status = .open
        try await store.save(third, now: Date(timeIntervalSince1970: 9))
        try await store.resolveConflict(won.id, choice: .override, now: Date(timeIntervalSince1970: 10))
        #expect(try store.fetch(Issue.self, id: issue.id)?.status == .closed, "the office's losing value is brought back")
    }

    /// A conflict recorded before v11 has no side; `override` then writes whichever value is not current.
    @Test func aConflictWithoutARecordedSideIsOverriddenByTheValueNotCurrent() async throws {
        let (database, store, issue) = try await storeWithALostStatus()
        defer { withExtendedLifetime(database) {} }
        try store.write { db in try db.execute(sql: "UPDATE conflicts SET losing_side = NULL") }
        let conflict = try #require(try store.openConflicts().first)
        #expect(conflict.losingSide == nil)
        #expect(conflict.losingValue == nil)
        try await store.resolveConflict(conflict.id, choice: .override, now: Date(timeIntervalSince1970: 6))
        #expect(try store.fetch(Issue.self, id: issue.id)?.status == .inProgress)
    }

    /// A conflict recorded before toolkit step 8 names no kind: one with a field is a value's, one without a
    /// delete's (the only kinds there were), and overriding it does what it did then.
    @Test func aConflictWithoutAKindReadsByItsField() async throws {
        let (database, store, _) = try await storeWithALostStatus()
        defer { withExtendedLifetime(database) {} }
        #expect(try store.openConflicts().map(\.kind) == [.value])
        try store.write { db in
            try db.execute(sql: "UPDATE conflicts SET kind = NULL")
            try db.execute(sql: """
                INSERT INTO conflicts (entity, record_id, field, strategy, losing_side, status, created_at)
                SELECT entity, record_id, NULL, strategy, 'client', 'open', created_at FROM conflicts
                """)
        }
        let conflicts = try store.openConflicts()
        #expect(conflicts.map(\.kind) == [.value, .delete] && conflicts.map(\.field) == ["status", nil])
        // So does JSON an earlier build wrote (`outpost conflicts list --json`), which has no kind.
        var objects = try #require(try JSONSerialization.jsonObject(with: JSONEncoder().encode(conflicts)) as? [[String: Any]])
        for index in objects.indices { objects[index]["kind"] = nil }
        let decoded = try JSONDecoder().decode([OpenConflict].self, from: JSONSerialization.data(withJSONObject: objects))
        #expect(decoded == conflicts)
    }

    /// A losing value that no longer reads is an error, and the conflict stays open for another try.
    @Test func anUnreadableLosingValueIsRefusedAndTheConflictStaysOpen() async throws {
        let (database, store, issue) = try await storeWithALostStatus()
        defer { withExtendedLifetime(database) {} }
        try store.write { db in try db.execute(sql: "UPDATE conflicts SET local_value = '{not json'") }
        let conflict = try #require(try store.openConflicts().first)
        let queued = try store.mutations().count
        await #expect(throws: StoreError.self) {
            try await store.resolveConflict(conflict.id, choice: .override, now: Date(timeIntervalSince1970: 6))
        }
        #expect(try store.openConflicts().map(\.id) == [conflict.id])
        #expect(try store.fetch(Issue.self, id: issue.id)?.status == .resolved)
        #expect(try store.mutations().count == queued)
    }

    @Test func childrenOfARemotelyDeletedParentAreKeptAndFlaggedOrphaned() async throws {
        let folder = try TemporaryDatabase()
        let store = try LocalStore.open(at: folder.path)
        let project = Project(name: "Cancelled job")
        try await store.applyPulledPage(PulledPage(changes: [remote(project, version: 1, at: 1_000)], cursor: "c-1"))
        let issue = try await store.save(Issue(projectID: project.id, title: "Raised offline"), now: now)
        let report = try await store.applyPulledPage(PulledPage(
            changes: [remote(project, version: 2, at: 9_000, deleted: true)], cursor: "c-2"))
        #expect(report.orphaned == 1)
        let kept = try #require(try store.fetch(Issue.self, id: issue.id))
        #expect(kept.isOrphaned)
        #expect(!kept.sync.isDeleted)

        let stray = Comment(issueID: UUID(), authorID: UUID(), body: "Parent never seen")
        let strayReport = try await store.applyPulledPage(PulledPage(changes: [remote(stray, version: 1, at: 9_500)], cursor: "c-3"))
        #expect(strayReport.orphaned == 1)
        #expect(try store.fetch(Comment.self, id: stray.id)?.sync.isOrphaned == true)
    }

    @Test func anEditIsNeverFoldedIntoAMutationThatWentOut() async throws {
        let folder = try TemporaryDatabase()
        let store = try LocalStore.open(at: folder.path)
        var issue = try await store.save(Issue(projectID: UUID(), title: "Leak"), now: now)
        // Sent, answer lost: back in line with its key, and the server may well have applied it.
        let sent = try #require(try store.claimMutations(limit: 1, now: now).first)
        try store.scheduleRetry(sent, reason: "timed out", retryAt: now)
        issue.title = "Leak under the sink"
        try await store.save(issue, now: now)
        let queued = try store.mutations(status: .pending)
        #expect(queued.map(\.operation) == [.create, .update])
        #expect(queued.first?.fields["title"] == .text("Leak"))
        #expect(queued.last?.fields == ["title": .text("Leak under the sink")])
    }

    @Test func aSecondRecordWithTheSameServerIDIsQuarantinedNotStored() async throws {
        let folder = try TemporaryDatabase()
        let store = try LocalStore.open(at: folder.path)
        var first = remote(Issue(projectID: UUID(), title: "One"), version: 1, at: 1_000)
        var second = remote(Issue(projectID: UUID(), title: "Two"), version: 1, at: 1_000)
        var firstRecord = first.record, secondRecord = second.record
        firstRecord.sync.serverID = "7"
        secondRecord.sync.serverID = "7"
        first = VersionedRecord(record: firstRecord, stampedAt: stamp(1_000))
        second = VersionedRecord(record: secondRecord, stampedAt: stamp(1_000))
        let report = try await store.applyPulledPage(PulledPage(changes: [first, second], cursor: "c-1"), now: now)
        #expect(report.quarantined == 1)
        #expect(try store.record(.issue, id: second.record.id) == nil)
        #expect(try store.quarantinedRecords().first?.reason.contains("server id 7") == true)
        // A later page naming the same id for yet another record is refused too.
        var third = remote(Issue(projectID: UUID(), title: "Three"), version: 1, at: 2_000).record
        third.sync.serverID = "7"
        let later = try await store.applyPulledPage(
            PulledPage(changes: [VersionedRecord(record: third, stampedAt: stamp(2_000))], cursor: "c-2"), now: now)
        #expect(later.quarantined == 1)
        #expect(try store.serverID(of: .issue, clientID: first.record.id) == "7")
        // No later build can store them either: reopened, the store does not try them again.
        let reopened = try LocalStore.open(at: folder.path)
        let next = try await reopened.applyPulledPage(PulledPage(changes: [], cursor: "c-3"), now: now)
        #expect(next.revived == 0 && next.quarantined == 0)
        #expect(try reopened.quarantinedRecords().count == 2)
    }

    @Test func aFoldedEditWaitsForItsNewParent() async throws {
        let folder = try TemporaryDatabase()
        let store = try LocalStore.open(at: folder.path)
        let project = try await store.save(Project(name: "Tower"), now: now)
        let roof = try await store.save(Scope(projectID: project.id, name: "Roof"), now: now)
        while let mutation = try store.claimMutations(limit: 1, now: now).first {
            try store.acknowledge(mutation, serverVersion: 1, serverID: nil, now: now)
        }
        #expect(try store.mutations(status: .pending).isEmpty && roof.projectID == project.id)
        var sheet = try await store.save(MeasureSheet(scopeID: roof.id, name: "Sheet 1"), now: now)
        let walls = try await store.save(Scope(projectID: project.id, name: "Walls"), now: now)
        // Moved under another scope of its project (a record never moves to another project).
        sheet.scopeID = walls.id
        try await store.save(sheet, now: now)
        // Not folded into the sheet's create, queued before the new parent's: that create would then wait
        // on a later one (a cycle when that one named the sheet). The move goes as its own update.
        #expect(try store.mutations(status: .pending).map(\.operation) == [.create, .create, .update])
        let batch = try store.claimMutations(limit: 10, now: now)
        #expect(batch.map(\.recordID) == [sheet.id, walls.id], "the move waits for its new parent's create")
        for mutation in batch { try store.acknowledge(mutation, serverVersion: 1, serverID: nil, now: now) }
        let move = try #require(try store.claimMutations(limit: 10, now: now).first)
        #expect(move.recordID == sheet.id && move.fields["scopeID"] == .uuid(walls.id))
    }

    @Test func aLosingChangeIsNotPushedOverTheWinner() async throws {
        let folder = try TemporaryDatabase()
        let store = try LocalStore.open(at: folder.path)
        let discount = Discount(projectID: UUID(), name: "Promo", kind: .percentage, value: 1_000)
        try await store.applyPulledPage(
            PulledPage(changes: [remote(discount, version: 1, at: 1_000)], cursor: "c-1"), now: Date(timeIntervalSince1970: 1))
        var mine = discount
        mine.value = 2_000
        mine.name = "Winter promo"
        try await store.save(mine, now: Date(timeIntervalSince1970: 2))
        // The office changed the amount meanwhile; money is server-wins.
        var office = discount
        office.value = 500
        try await store.applyPulledPage(
            PulledPage(changes: [remote(office, version: 2, at: 3_000)], cursor: "c-2"), now: Date(timeIntervalSince1970: 3))
        #expect(try store.fetch(Discount.self, id: discount.id)?.value == 500)
        #expect(try store.openConflicts().contains { $0.field == "value" && $0.localValue == .integer(2_000) })
        #expect(try store.openConflicts().contains { $0.field == "name" }, "server-wins keeps the office's whole version")
        #expect(try store.mutations(status: .pending).isEmpty, "nothing of the losing change is sent over the office's")
        #expect(try store.fetch(Discount.self, id: discount.id)?.sync.syncStatus == .synced)
    }

    @Test func clocksSeenInAPullSurviveARestart() async throws {
        let folder = try TemporaryDatabase()
        let wall = Date(timeIntervalSince1970: 1_000)
        let ahead: Int64 = 1_000_000 + 120_000  // two minutes ahead of this device
        try await LocalStore.open(at: folder.path).applyPulledPage(
            PulledPage(changes: [remote(Issue(projectID: UUID(), title: "Leak"), version: 1, at: ahead)], cursor: "c-1"), now: wall)
        let reopened = try LocalStore.open(at: folder.path)
        try await reopened.save(Issue(projectID: UUID(), title: "New"), now: wall)
        let stamp = try #require(try reopened.mutations().first?.clocks["title"])
        #expect(stamp.physicalMilliseconds >= ahead)
    }

    @Test func aWriteOverPulledValuesFollowsThemWhenThisDevicesTimeIsBehind() async throws {
        let folder = try TemporaryDatabase()
        let store = try LocalStore.open(at: folder.path)
        let wall = Date(timeIntervalSince1970: 1_000)
        let ahead: Int64 = 1_000_000 + 10 * 60_000  // ten minutes ahead: more than a pull lets the clock follow
        let issue = Issue(projectID: UUID(), title: "Leak", status: .open)
        let gone = Issue(projectID: issue.projectID, title: "Duplicate")
        try await store.applyPulledPage(
            PulledPage(changes: [remote(issue, version: 1, at: ahead), remote(gone, version: 1, at: ahead)], cursor: "c-1"),
            now: wall)

        var mine = try #require(try store.fetch(Issue.self, id: issue.id))
        mine.status = .resolved
        try await store.save(mine, now: wall)
        try await store.delete(.issue, id: gone.id, now: wall)
        try await store.save(Issue(projectID: issue.projectID, title: "Unrelated"), now: wall)

        let queued = try store.mutations()
        let edit = try #require(queued.first { $0.recordID == issue.id })
        #expect(try #require(edit.clocks["status"]) > stamp(ahead), "the edit must win over the value it replaced")
        let deletion = try #require(queued.first { $0.recordID == gone.id }?.deletion)
        #expect(deletion > stamp(ahead))
        // The clock itself was not dragged ten minutes ahead: a record nobody else wrote gets this device's time.
        let unrelated = try #require(queued.first { $0.recordID != issue.id && $0.recordID != gone.id })
        #expect(try #require(unrelated.clocks["title"]).physicalMilliseconds < ahead)
    }

    /// A text no bundle can carry (over the bundle's 1 MiB string limit) is refused at the save, with
    /// the field named, rather than pushed, refused by the server and failed on the device later.
    @Test func aTextLongerThanABundleCarriesIsRefusedAtTheSave() async throws {
        let folder = try TemporaryDatabase()
        let store = try LocalStore.open(at: folder.path)
        let issue = try await store.save(Issue(projectID: UUID(), title: "Leak"), now: now)
        var edited = issue
        edited.details = String(repeating: "x", count: EntityRecord.maximumTextBytes + 1)
        let error = await #expect(throws: StoreError.self) { try await store.save(edited, now: now) }
        #expect(error?.code == .invalidRecord && error?.modelError?.code == .valueTooLong)
        #expect(error?.modelError?.field == "details")
        #expect(try store.fetch(Issue.self, id: issue.id)?.details == "", "nothing of the refused write was stored")
        edited.details = String(repeating: "x", count: EntityRecord.maximumTextBytes)
        try await store.save(edited, now: now)
    }

    @Test func aValueStoredBeforeTheCharacterRuleKeepsItsRecordEditable() async throws {
        let folder = try TemporaryDatabase()
        let store = try LocalStore.open(at: folder.path)
        let legacy = Issue(projectID: UUID(), title: "Leak", details: "page\u{0C}break")
        try await store.applyPulledPage(PulledPage(changes: [remote(legacy, version: 1, at: 1_000)], cursor: "c-1"), now: now)

        var edited = try #require(try store.fetch(Issue.self, id: legacy.id))
        edited.status = .resolved
        try await store.save(edited, now: now)
        #expect(try store.fetch(Issue.self, id: legacy.id)?.status == .resolved)

        edited.title = "Leak\u{01}"
        let error = await #expect(throws: StoreError.self) { try await store.save(edited, now: now) }
        #expect(error?.code == .invalidRecord && error?.modelError?.code == .forbiddenCharacter)
        #expect(error?.modelError?.field == "title")
        #expect(try store.fetch(Issue.self, id: legacy.id)?.title == "Leak", "nothing of the refused write was stored")
        #expect(try await store.delete(.issue, id: legacy.id, now: now))
    }

    /// An issue whose create the server refused, and the edit that fixed its title, queued behind it.
    func storeWithARefusedCreateAndItsFix() async throws
        -> (TemporaryDatabase, LocalStore, OutpostModels.Issue, create: Mutation)
    {
        let folder = try TemporaryDatabase()
        let store = try LocalStore.open(at: folder.path)
        var issue = try await store.save(Issue(projectID: UUID(), title: "Refused title"), now: now)
        let create = try #require(try store.claimMutations(limit: 1, now: now).first)
        try store.fail(create, reason: "invalid_request: the server refused the title")
        issue.title = "Fixed title"
        try await store.save(issue, now: now.addingTimeInterval(1))
        return (folder, store, issue, create)
    }

    @Test func aRetriedChangeTakesTheEditsQueuedBehindIt() async throws {
        let (database, store, issue, create) = try await storeWithARefusedCreateAndItsFix()
        defer { withExtendedLifetime(database) {} }
        var fixed = issue
        fixed.priority = .high
        try await store.save(fixed, now: now.addingTimeInterval(2))
        #expect(try store.mutations().count == 2, "the fix waits behind the failed create, which went out")
        try await store.delete(.issue, id: issue.id, now: now.addingTimeInterval(3))

        #expect(try store.retryFailedMutations() == 1)
        let queued = try store.mutations()
        #expect(queued.map(\.operation) == [.create, .delete], "the updates went into the create; the delete stays behind it")
        let retried = try #require(queued.first)
        #expect(retried.status == .pending && retried.idempotencyKey != create.idempotencyKey)
        #expect(retried.fields["title"] == .text("Fixed title") && retried.fields["priority"] == .text("high"))
        #expect(try #require(retried.clocks["title"]) > create.clocks["title"]!)
        #expect(try #require(retried.clocks["status"]) == create.clocks["status"]!)
    }

    @Test func aRetryThatMeetsAnUnreadableUpdateFoldsNothingAndLosesNothing() async throws {
        let (folder, store, _, create) = try await storeWithARefusedCreateAndItsFix()
        let update = try #require(try store.mutations(status: .pending).first)
        try await folder.queue.write { db in
            try db.execute(sql: "UPDATE mutation_queue SET payload = 'damaged' WHERE seq = ?", arguments: [update.sequence])
        }

        #expect(try store.retryFailedMutations() == 1)
        let sequences = try await folder.queue.read { db in
            try Int64.fetchAll(db, sql: "SELECT seq FROM mutation_queue WHERE status = 'pending' ORDER BY seq")
        }
        #expect(sequences == [create.sequence, update.sequence], "both still queued, neither folded")
    }
}

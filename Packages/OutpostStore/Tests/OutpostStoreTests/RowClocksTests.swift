@testable import OutpostStore
import Foundation
import GRDB
import OutpostConflicts
import OutpostFieldService
import OutpostFieldServiceTesting
import OutpostModels
import OutpostSchema
import OutpostTesting
import Testing

/// A record a pull stores whole over nothing held, with one clock for every field (nearly every record
/// of a first pull), keeps that clock in its own row (`LocalApp.rowClocksColumn`), not in a row of
/// `field_clocks`: that second row was a fifth of a pulled record's apply (issue 41). The record's
/// clocks read the same either way, and a later change of it writes its `field_clocks` row, which
/// stands over the row's.
@Suite(.fieldService) struct RowClocksTests {
    let server = NodeID(0xC10C)
    let now = Date(timeIntervalSince1970: 1_800_000_000)

    func remote(_ model: some Syncable, version: Int64, at milliseconds: Int64) -> VersionedRecord {
        var record = model.record
        record.sync.version = version
        record.sync.serverID = nil
        record.sync.createdAt = Date(timeIntervalSince1970: 1)
        record.sync.updatedAt = Date(timeIntervalSince1970: Double(milliseconds) / 1000)
        return VersionedRecord(
            record: record, stampedAt: HybridTimestamp(physicalMilliseconds: milliseconds, counter: 0, node: server))
    }

    func clockRows(_ database: TemporaryDatabase, _ id: UUID) throws -> (field: String?, row: String?) {
        try database.queue.read { db in
            let field = try String.fetchOne(
                db, sql: "SELECT clocks FROM field_clocks WHERE entity = 'issue' AND record_id = ?", arguments: [id.storageText])
            let row = try String.fetchOne(
                db, sql: "SELECT \(LocalApp.rowClocksColumn) FROM issues WHERE id = ?", arguments: [id.storageText])
            return (field, row)
        }
    }

    func clocks(_ database: TemporaryDatabase, _ id: UUID) throws -> FieldClocks.Stored? {
        try database.queue.read { db in try FieldClocks.read(.issue, id, in: db) }
    }

    @Test(arguments: [false, true])
    func aRecordPulledWholeKeepsItsClockInItsRow(prepared: Bool) async throws {
        let database = try TemporaryDatabase()
        let store = try LocalStore.open(at: database.path)
        let project = Project(name: "Tower")
        let issue = OutpostModels.Issue(projectID: project.id, title: "Crack", status: .open)
        let changes = [remote(project, version: 1, at: 1_000), remote(issue, version: 1, at: 1_001)]
        let page = prepared
            ? PulledPage(prepared: changes.map(PreparedChange.init), cursor: "c-1") : PulledPage(changes: changes, cursor: "c-1")
        try await store.applyPulledPage(page, now: now)

        let stamp = HybridTimestamp(physicalMilliseconds: 1_001, counter: 0, node: server)
        let (field, row) = try clockRows(database, issue.id)
        #expect(field == nil, "no field_clocks row for a record pulled whole")
        #expect(row == FieldClocks.Stored.compactForm(of: stamp))
        let read = try #require(try clocks(database, issue.id))
        #expect(Set(read.fields.values) == [stamp])
        #expect(read.fields.count == FieldClocks.catalogNames(of: .issue).count)
        #expect(read.server == read.fields)

        // A local write of one field: its clocks row stands over the row's, and keeps the others' clock.
        var edited = try #require(try store.fetch(OutpostModels.Issue.self, id: issue.id))
        edited.title = "Crack, level 3"
        try await store.save(edited, now: now)
        #expect(try clockRows(database, issue.id).field != nil)
        let after = try #require(try clocks(database, issue.id))
        #expect(after.fields["title"] != stamp)
        #expect(after.fields["status"] == stamp)
        #expect(after.server?["title"] == stamp, "the server's clocks as pulled")
    }

    /// A record this device created, once the server took it, has one clock for every field, the
    /// server's the same: it keeps that clock in its row too, and its clocks row goes (72 of the ~500
    /// bytes a synced issue cost the device, issue 41). Its next write writes a clocks row again.
    @Test func anAcknowledgedCreateKeepsItsClockInItsRow() async throws {
        let database = try TemporaryDatabase()
        let store = try LocalStore.open(at: database.path)
        var issue = OutpostModels.Issue(projectID: UUID(), title: "Leak", status: .open)
        try await store.save(issue, now: now)
        let created = try #require(try clocks(database, issue.id))
        #expect(try clockRows(database, issue.id).field != nil)
        let sent = try store.claimMutations(limit: 10, now: now)
        for mutation in sent { try store.acknowledge(mutation, serverVersion: 1, serverID: nil, now: now) }

        let (field, row) = try clockRows(database, issue.id)
        #expect(field == nil, "the clocks row went")
        let stamp = try #require(created.fields["title"])
        #expect(row == FieldClocks.Stored.compactForm(of: stamp))
        let acknowledged = try #require(try clocks(database, issue.id))
        #expect(acknowledged.fields == created.fields)
        #expect(acknowledged.server == created.fields)
        #expect(try store.fetch(OutpostModels.Issue.self, id: issue.id)?.sync.version == 1)

        issue = try #require(try store.fetch(OutpostModels.Issue.self, id: issue.id))
        issue.status = .resolved
        try await store.save(issue, now: now.addingTimeInterval(1))
        #expect(try clockRows(database, issue.id).field != nil)
        let edited = try #require(try clocks(database, issue.id))
        #expect(edited.fields["title"] == stamp)
        #expect(edited.fields["status"] != stamp)
        #expect(edited.server == created.fields)
    }

    /// A `field_clocks` row left for a record the device does not hold (written by hand, or by a build
    /// that lost the row) would stand over the clock the pull keeps in the row: it is replaced, as the
    /// pull's own row replaced it before.
    @Test func aStrayClocksRowDoesNotStandOverAPulledRecord() async throws {
        let database = try TemporaryDatabase()
        let store = try LocalStore.open(at: database.path)
        let project = Project(name: "Tower")
        let issue = OutpostModels.Issue(projectID: project.id, title: "Crack", status: .open)
        let stray = HybridTimestamp(physicalMilliseconds: 9_999_999, counter: 0, node: NodeID(0xBAD))
        try await database.queue.write { db in
            try db.execute(
                sql: "INSERT INTO field_clocks (entity, record_id, clocks) VALUES ('issue', ?, ?)",
                arguments: [issue.id.storageText, FieldClocks.Stored.compactForm(of: stray)])
        }
        try await store.applyPulledPage(
            PulledPage(changes: [remote(project, version: 1, at: 1_000), remote(issue, version: 1, at: 1_001)], cursor: "c-1"), now: now)
        let read = try #require(try clocks(database, issue.id))
        #expect(Set(read.fields.values) == [HybridTimestamp(physicalMilliseconds: 1_001, counter: 0, node: server)])
    }

    /// A row clock that does not read holds back that record alone, as a `field_clocks` row that does
    /// not read: the next pull of the record replaces it, and the record reads again.
    @Test func aDamagedRowClockIsSettledByTheNextPull() async throws {
        let database = try TemporaryDatabase()
        let store = try LocalStore.open(at: database.path)
        let project = Project(name: "Tower")
        var issue = OutpostModels.Issue(projectID: project.id, title: "Crack", status: .open)
        try await store.applyPulledPage(
            PulledPage(changes: [remote(project, version: 1, at: 1_000), remote(issue, version: 1, at: 1_001)], cursor: "c-1"), now: now)
        let issueID = issue.id
        try await database.queue.write { db in
            try db.execute(
                sql: "UPDATE issues SET \(LocalApp.rowClocksColumn) = '#not a clock' WHERE id = ?", arguments: [issueID.storageText])
        }
        #expect(throws: FieldClocks.Unreadable.self) { try clocks(database, issue.id) }
        issue.title = "Crack, level 4"
        try await store.applyPulledPage(PulledPage(changes: [remote(issue, version: 2, at: 2_000)], cursor: "c-2"), now: now)
        let read = try #require(try clocks(database, issue.id))
        #expect(Set(read.fields.values) == [HybridTimestamp(physicalMilliseconds: 2_000, counter: 0, node: server)])
        #expect(try store.fetch(OutpostModels.Issue.self, id: issue.id)?.title == "Crack, level 4")
    }
}

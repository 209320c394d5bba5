@testable import OutpostStore
import Foundation
import GRDB
import OutpostConflicts
import OutpostFieldService
import OutpostFieldServiceTesting
import OutpostMigrator
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

    /// Two processes of the app on one file, the second an update that adds the row clocks column
    /// (v17) while the first has the file open: the first reads the clocks the second keeps in rows.
    /// Its writer connection had the table's columns cached from before (GRDB clears a writer's cache
    /// for its own changes only), so it read a record the second pulled whole as having no clocks at
    /// all, and stamped its edit without following the server's clock of the value it replaced
    /// (review 140, F1).
    @Test func aStoreOpenBeforeAnotherProcessAddedTheColumnReadsTheRowClock() async throws {
        let database = try TemporaryDatabase()
        let before = LocalApp(schema: EntityCatalog.fieldService, steps: Array(LocalSchema.steps.prefix(16)))
        let first = try LocalStore.open(at: database.path, app: before)
        let project = Project(name: "Tower")
        let early = OutpostModels.Issue(projectID: project.id, title: "Early")
        // The server's clock runs a minute ahead of this device's (well within the drift allowance).
        let ahead = now.storageMilliseconds + 60_000
        try await first.applyPulledPage(
            PulledPage(changes: [remote(project, version: 1, at: 1_000), remote(early, version: 1, at: 1_001)], cursor: "c-1"),
            now: now)

        let second = try LocalStore.open(at: database.path, app: .fieldService)
        let issue = OutpostModels.Issue(projectID: project.id, title: "Crack", status: .open)
        try await second.applyPulledPage(PulledPage(changes: [remote(issue, version: 1, at: ahead)], cursor: "c-2"), now: now)
        #expect(try clockRows(database, issue.id).row != nil)

        var edited = try #require(try first.fetch(OutpostModels.Issue.self, id: issue.id))
        edited.title = "Crack, level 3"
        try await first.save(edited, now: now)
        let after = try #require(try clocks(database, issue.id))
        let serverStamp = HybridTimestamp(physicalMilliseconds: ahead, counter: 0, node: server)
        #expect(after.fields.count == FieldClocks.catalogNames(of: .issue).count, "fields with a clock: \(after.fields.keys.sorted())")
        #expect(after.server?["status"] == serverStamp, "the server's clocks as pulled")
        #expect(try #require(after.fields["title"]) > serverStamp, "the edit follows the clock of the value it replaced")
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

    /// The law: where a record's clocks are kept changes nothing a store does. Two copies of one store
    /// (the same node), one whose tables have no row clocks column (an app that never added it: every
    /// record's clocks in `field_clocks`, as before v17), take the same seeded steps: pulls of new,
    /// changed, deleted and contentless records with shared and per-field clocks, local creates, edits
    /// and deletes, and the server's acknowledgements. After each step every record reads the same clocks
    /// from both, and every other table (less where the clocks are kept) holds the same.
    @Test(arguments: 0..<16)
    func clocksReadTheSameWhereverTheyAreKept(seed: Int) async throws {
        var random = SeededGenerator(seed: UInt64(seed) &* 6_151 &+ 7)
        let folder = try TemporaryDatabase()
        let rowPath = folder.directory.appendingPathComponent("row.sqlite").path
        let tablePath = folder.directory.appendingPathComponent("table.sqlite").path
        let setup = try LocalStore.open(at: rowPath)
        let project = Project(name: "Tower")
        try await setup.applyPulledPage(PulledPage(changes: [remote(project, version: 1, at: 500)], cursor: "c-0"), now: now)
        let copy = try DatabaseQueue(path: rowPath)
        try copy.backup(to: DatabaseQueue(path: tablePath))
        try await DatabaseQueue(path: tablePath).write { db in
            for entity in EntityCatalog.all {
                try db.execute(sql: "ALTER TABLE \(entity.table) DROP COLUMN \(LocalApp.rowClocksColumn)")
            }
        }
        let rowStore = try LocalStore.open(at: rowPath), tableStore = try LocalStore.open(at: tablePath)
        let stores = [rowStore, tableStore]

        var issues = (0..<8).map { OutpostModels.Issue(projectID: project.id, title: "Issue \($0)") }
        var versions: [UUID: Int64] = [:]
        var time: Int64 = 1_000
        for step in 0..<30 {
            time += 10
            let at = now.addingTimeInterval(Double(step))
            switch Int.random(in: 0..<10, using: &random) {
            case 0..<4:  // a page from the server
                var changes: [VersionedRecord] = []
                for _ in 0..<Int.random(in: 1...4, using: &random) {
                    let pick = Int.random(in: 0..<issues.count, using: &random)
                    var issue = issues[pick]
                    issue.title = "Issue \(pick), step \(step)"
                    issues[pick] = issue
                    let version = (versions[issue.id] ?? 0) + 1
                    versions[issue.id] = version
                    var change = remote(issue, version: version, at: time)
                    let stamp = HybridTimestamp(physicalMilliseconds: time, counter: 0, node: server)
                    switch Int.random(in: 0..<6, using: &random) {
                    case 0:  // deleted, with its last values
                        var record = change.record
                        record.sync.deletedAt = stamp.date
                        change = try VersionedRecord(record: record, clocks: change.clocks, deletion: stamp)
                    case 1:  // deleted, without contents
                        var sync = change.record.sync
                        sync.deletedAt = stamp.date
                        change = try VersionedRecord(
                            record: EntityRecord(entity: .issue, id: issue.id, fields: [:], sync: sync), clocks: [:], deletion: stamp)
                    case 2:  // a clock per field, older for some
                        var clocks = change.clocks
                        for name in clocks.keys where Bool.random(using: &random) {
                            clocks[name] = HybridTimestamp(physicalMilliseconds: time - 5, counter: 1, node: server)
                        }
                        change = try VersionedRecord(record: change.record, clocks: clocks, deletion: nil)
                    default:
                        break
                    }
                    changes.append(change)
                }
                let prepared = Bool.random(using: &random)
                var reports: [PullReport] = []
                for store in stores {
                    let page = prepared
                        ? PulledPage(prepared: changes.map(PreparedChange.init), cursor: "c-\(step)")
                        : PulledPage(changes: changes, cursor: "c-\(step)")
                    reports.append(try await store.applyPulledPage(page, now: at))
                }
                #expect(reports[0] == reports[1], "seed \(seed), step \(step)")
            case 4..<7:  // a local edit, where the record is held live
                let pick = Int.random(in: 0..<issues.count, using: &random)
                let details = "edit \(step)"
                for store in stores {
                    guard var held = try store.fetch(OutpostModels.Issue.self, id: issues[pick].id), !held.sync.isDeleted else { continue }
                    held.details = details
                    try await store.save(held, now: at)
                }
            case 7 where Bool.random(using: &random):  // a local create, then a record like any other
                let created = OutpostModels.Issue(projectID: project.id, title: "Made here \(step)")
                issues.append(created)
                for store in stores { try await store.save(created, now: at) }
            case 7:  // a local delete
                let pick = Int.random(in: 0..<issues.count, using: &random)
                for store in stores where try store.fetch(OutpostModels.Issue.self, id: issues[pick].id)?.sync.isDeleted == false {
                    try await store.delete(.issue, id: issues[pick].id, now: at)
                }
            default:  // the server takes what was sent
                for store in stores {
                    for mutation in try store.claimMutations(limit: 10, now: at) {
                        let version = (versions[mutation.recordID] ?? 0) + 1
                        _ = try store.acknowledge(mutation, serverVersion: version, serverID: nil, now: at)
                    }
                }
                // The server's versions move once, past both stores' acknowledgements of the same changes.
                for issue in issues { versions[issue.id] = (versions[issue.id] ?? 0) + 1 }
            }
            for issue in issues {
                let id = issue.id
                let row = try await DatabaseQueue(path: rowPath).read { db in try? FieldClocks.read(.issue, id, in: db) }
                let table = try await DatabaseQueue(path: tablePath).read { db in try? FieldClocks.read(.issue, id, in: db) }
                #expect(row?.fields == table?.fields && row?.server == table?.server && row?.deletion == table?.deletion
                    && row?.pulled == table?.pulled && row?.written == table?.written && row?.deferredTombstone == table?.deferredTombstone
                    && row?.heldVersion == table?.heldVersion, "seed \(seed), step \(step): clocks of \(id) differ")
            }
            let rowContents = try contents(rowPath), tableContents = try contents(tablePath)
            for name in Set(rowContents.keys).union(tableContents.keys) where rowContents[name] != tableContents[name] {
                Testing.Issue.record("seed \(seed), step \(step): \(name) differs:\n\(rowContents[name] ?? [])\n\(tableContents[name] ?? [])")
            }
        }
    }

    /// Every table as `PreparedPageTests` compares two stores, but where clocks are kept (`field_clocks`,
    /// the row clocks column) and the random idempotency keys of the changes (of which only how many
    /// were finished is kept).
    func contents(_ path: String) throws -> [String: [[String: DatabaseValue]]] {
        var tables = try PreparedPageTests().contents(path)
        tables["field_clocks"] = nil
        tables["finished_keys"] = tables["finished_keys"].map { [["count": $0.count.databaseValue]] }
        tables["mutation_queue"] = tables["mutation_queue"]?.map { $0.filter { $0.key != "idempotency_key" } }
        return tables.mapValues { rows in rows.map { $0.filter { $0.key != LocalApp.rowClocksColumn } } }
    }
}

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

/// The sync engine prepares each pulled record where it decodes its page (`PreparedChange`: the shape
/// and value checks, whether a parent is named by a server id, the shared clock), so the store's one
/// writer has less to do. The law: a page of prepared records stores exactly what the same records
/// store unprepared, checked by the writer itself. Two copies of one store (the same node, the same
/// local changes waiting) take the same seeded pages, one prepared and one plain; every table and
/// every report must match, whatever the pages hold: new, updated and deleted records, tombstones
/// without contents, records of the wrong shape, versions no server gives, parents named by server
/// ids with and without their mapping, clocks shared and per field, and records with local changes;
/// with records an earlier build quarantined revived ahead of the page's own (the writer's offset into
/// the prepared checks), and pages scoped to asked-for projects (`PulledPage.scoped`, which keeps the
/// checks beside the records it keeps). Review 137 found those two untested.
@Suite(.fieldService) struct PreparedPageTests {
    let server = NodeID(0x5EED)
    let now = Date(timeIntervalSince1970: 1_800_000_000)

    @Test(arguments: 0..<24)
    func aPreparedPageStoresWhatThePlainPageStores(seed: Int) async throws {
        var random = SeededGenerator(seed: UInt64(seed) &* 7_919 &+ 41)
        let folder = try TemporaryDatabase()
        let preparedPath = folder.directory.appendingPathComponent("prepared.sqlite").path
        let plainPath = folder.directory.appendingPathComponent("plain.sqlite").path
        let setup = try LocalStore.open(at: preparedPath)

        // What both stores hold before: projects (some named by the server), issues, local edits.
        let projects = (0..<3).map { Project(name: "Site \($0)") }
        var issues = (0..<12).map { OutpostModels.Issue(projectID: projects[$0 % 3].id, title: "Issue \($0)") }
        var versions: [UUID: Int64] = [:]
        var time: Int64 = 1_000
        func next() -> Int64 { time += 10; return time }
        var first: [VersionedRecord] = []
        for (index, project) in projects.enumerated() {
            first.append(record(project, version: 1, at: next(), serverID: index == 0 ? "srv-0" : nil))
        }
        for issue in issues { first.append(record(issue, version: 1, at: next())) }
        for change in first { versions[change.record.id] = 1 }
        try await setup.applyPulledPage(PulledPage(changes: first, cursor: "c-0"), now: now)
        for index in issues.indices where Bool.random(using: &random) && index % 3 == 0 {
            var edited = try #require(try setup.fetch(OutpostModels.Issue.self, id: issues[index].id))
            edited.details = "local edit \(index)"
            try await setup.save(edited, now: now)
        }
        // Records an earlier build quarantined and this one can store: applied ahead of the next page's
        // own records by a store opened since (one kept with a page that brings it again as well).
        let setupQueue = try DatabaseQueue(path: preparedPath)
        for index in 0..<Int.random(in: 0...3, using: &random) {
            let held = record(OutpostModels.Issue(projectID: projects[index % 3].id, title: "Held \(index)"), version: 1, at: next())
            try await setupQueue.write { db in
                try Quarantine.add(
                    QuarantinedRecord(entity: .issue, recordID: held.record.id, reason: "an earlier build's rule", quarantinedAt: now),
                    stream: "structured", held: held, in: db)
            }
        }
        try setupQueue.backup(to: DatabaseQueue(path: plainPath))
        let preparedStore = try LocalStore.open(at: preparedPath)
        let plainStore = try LocalStore.open(at: plainPath)
        // Some runs ask for some projects only: the others' records are quarantined by the page's scope.
        let asked: Set<UUID>? = Bool.random(using: &random) ? Set(projects.prefix(2).map(\.id)) : nil

        for page in 1...3 {
            var changes: [VersionedRecord] = []
            for _ in 0..<Int.random(in: 8...20, using: &random) {
                let pick = Int.random(in: 0..<issues.count, using: &random)
                var issue = issues[pick]
                let version = (versions[issue.id] ?? 0) + Int64.random(in: 0...2, using: &random)
                versions[issue.id] = version
                issue.title = "Issue \(pick), page \(page)"
                issues[pick] = issue
                changes.append(try variant(of: issue, version: version, at: next(), projects: projects, using: &random))
            }
            if Bool.random(using: &random) {
                let project = Project(name: "Late site \(page)")
                changes.append(record(project, version: 1, at: next(), serverID: "srv-\(page)"))
                changes.append(record(OutpostModels.Issue(projectID: project.id, title: "Late issue"), version: 1, at: next()))
            }
            let preparedReport = try await preparedStore.applyPulledPage(
                PulledPage(prepared: changes.map(PreparedChange.init), cursor: "c-\(page)", projects: asked), now: now)
            let plainReport = try await plainStore.applyPulledPage(
                PulledPage(changes: changes, cursor: "c-\(page)", projects: asked), now: now)
            #expect(preparedReport == plainReport, "seed \(seed), page \(page)")
            let prepared = try contents(preparedPath), plain = try contents(plainPath)
            for table in Set(prepared.keys).union(plain.keys) where prepared[table] != plain[table] {
                Testing.Issue.record("seed \(seed), page \(page): \(table) differs:\n\(prepared[table] ?? [])\n\(plain[table] ?? [])")
            }
        }
    }

    /// The server's version of `model` at `version`, every field stamped at `milliseconds`.
    func record(_ model: some Syncable, version: Int64, at milliseconds: Int64, serverID: String? = nil) -> VersionedRecord {
        var record = model.record
        record.sync.version = version
        record.sync.serverID = serverID
        record.sync.updatedAt = Date(timeIntervalSince1970: Double(milliseconds) / 1000)
        return VersionedRecord(record: record, stampedAt: HybridTimestamp(physicalMilliseconds: milliseconds, counter: 0, node: server))
    }

    /// One of the forms a pulled issue may take, at random.
    func variant(
        of issue: OutpostModels.Issue, version: Int64, at milliseconds: Int64, projects: [Project], using random: inout SeededGenerator
    ) throws -> VersionedRecord {
        let plain = record(issue, version: version, at: milliseconds)
        let stamp = HybridTimestamp(physicalMilliseconds: milliseconds, counter: 0, node: server)
        var fields = plain.record.fields, clocks = plain.clocks
        var sync = plain.record.sync
        var deletion: HybridTimestamp?
        switch Int.random(in: 0..<11, using: &random) {
        case 0:  // deleted, with its last values
            sync.deletedAt = stamp.date
            deletion = stamp
        case 1:  // deleted, without contents, as a server's pull sends it
            sync.deletedAt = stamp.date
            return try VersionedRecord(
                record: EntityRecord(entity: .issue, id: issue.id, fields: [:], sync: sync), clocks: [:], deletion: stamp)
        case 2:  // a field the catalog does not know
            fields["bogus"] = .text("x")
            clocks["bogus"] = stamp
        case 3:  // a value of the wrong kind, and a choice outside its list
            fields["title"] = .integer(5)
            fields["status"] = .text("weird")
        case 4:  // a version no server gives
            sync.version = [0, Int64.max][Int.random(in: 0...1, using: &random)]
        case 5:  // its project named by the server's id, mapped or not
            fields["projectID"] = .text(["srv-0", "srv-1", "srv-9"].randomElement(using: &random)!)
        case 6:  // a clock per field, older for some
            for name in clocks.keys where Bool.random(using: &random) {
                clocks[name] = HybridTimestamp(physicalMilliseconds: milliseconds - 5, counter: 1, node: server)
            }
        case 7:  // moved to another project
            fields["projectID"] = .uuid(projects.randomElement(using: &random)!.id)
        default:
            break
        }
        return try VersionedRecord(record: EntityRecord(entity: .issue, id: issue.id, fields: fields, sync: sync), clocks: clocks, deletion: deletion)
    }

    /// Every table of the store at `path` (`Fixture.contents`), JSON texts with their keys sorted (a
    /// dictionary's order is its own), less what names the store instance rather than what it holds:
    /// the change journal's origin and the clock's reserved window (`clock_last`).
    func contents(_ path: String) throws -> [String: [[String: DatabaseValue]]] {
        var tables = try DatabaseQueue(path: path).read { try Fixture.contents($0) }
        tables["change_journal"] = tables["change_journal"]?.map { $0.filter { $0.key != "origin" } }
        tables["sync_state"] = tables["sync_state"]?.filter { $0["key"] != "clock_last".databaseValue }
        return tables.mapValues { rows in
            rows.map { row in
                row.mapValues { value in
                    guard let text = String.fromDatabaseValue(value), text.hasPrefix("{") || text.hasPrefix("["),
                        let object = try? JSONSerialization.jsonObject(with: Data(text.utf8)),
                        let sorted = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])
                    else { return value }
                    return String(decoding: sorted, as: UTF8.self).databaseValue
                }
            }
        }
    }
}

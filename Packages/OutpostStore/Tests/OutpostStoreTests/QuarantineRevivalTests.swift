@testable import OutpostStore
import Foundation
import GRDB
import OutpostConflicts
import OutpostFieldService
import OutpostFieldServiceTesting
import OutpostModels
import OutpostSchema
import OutpostWire
import Testing

/// A pulled record this build cannot store is quarantined and the cursor moves past it, so no pull
/// brings it again. An update of the app that can store it (it learnt the field or the choice) must
/// still end with the record on the device, as a fresh device of the new build would have it.
@Suite(.fieldService) struct QuarantineRevivalTests {
    let server = NodeID(0xFEED)

    func remote(_ record: EntityRecord, version: Int64, at milliseconds: Int64) -> VersionedRecord {
        var record = record
        record.sync.version = version
        record.sync.serverID = nil
        record.sync.createdAt = Date(timeIntervalSince1970: 1)
        record.sync.updatedAt = Date(timeIntervalSince1970: Double(milliseconds) / 1000)
        return VersionedRecord(record: record, stampedAt: HybridTimestamp(physicalMilliseconds: milliseconds, counter: 0, node: server))
    }

    /// What an earlier build left: an entry for `record`, refused for a reason this build does not have.
    func quarantineAsAnEarlierBuild(_ record: VersionedRecord, in folder: TemporaryDatabase, at milliseconds: Int64) async throws {
        try await folder.queue.write { db in
            try Quarantine.add(
                QuarantinedRecord(
                    entity: record.record.entity, recordID: record.record.id,
                    reason: "status: 'blocked' is not one of the choices this version knows",
                    quarantinedAt: Date(timeIntervalSince1970: Double(milliseconds) / 1000)),
                stream: "structured", held: record, in: db)
        }
    }

    @Test func aRecordAnEarlierBuildQuarantinedIsAppliedOnceThisBuildCanStoreIt() async throws {
        let folder = try TemporaryDatabase()
        let project = Project(name: "Yard")
        let issue = Issue(projectID: project.id, title: "Fence", status: .inProgress)
        do {
            let store = try LocalStore.open(at: folder.path)
            try await store.applyPulledPage(PulledPage(changes: [remote(project.record, version: 1, at: 900)], cursor: "c-1"))
        }
        try await quarantineAsAnEarlierBuild(remote(issue.record, version: 1, at: 1_000), in: folder, at: 1_000)

        // The updated app opens the file and pulls: nothing new on the server.
        let store = try LocalStore.open(at: folder.path)
        let changes = store.changes()
        let heard = Task { () -> [StoreChange] in
            var heard: [StoreChange] = []
            for await change in changes {
                heard.append(change)
                if heard.count == 1 { break }
            }
            return heard
        }
        let report = try await store.applyPulledPage(PulledPage(changes: [], cursor: "c-2"))
        #expect(report.revived == 1)
        if report.revived != 1 { heard.cancel() }  // nothing to hear: end the wait instead of hanging
        #expect(try store.fetch(Issue.self, id: issue.id)?.title == "Fence")
        #expect(try store.fetch(Issue.self, id: issue.id)?.sync.version == 1)
        #expect(try store.fetch(Issue.self, id: issue.id)?.sync.syncStatus == .synced)
        #expect(try store.quarantinedRecords().isEmpty)
        #expect(try store.status().quarantinedRecords == 0)
        #expect(await heard.value.map(\.recordID) == [issue.id], "subscribers hear the record arrive")

        // Once is enough: the next page revives nothing more.
        #expect(try await store.applyPulledPage(PulledPage(changes: [], cursor: "c-3")).revived == 0)
    }

    @Test func aRecordThisBuildStillCannotStoreStaysQuarantinedAndUncounted() async throws {
        let folder = try TemporaryDatabase()
        let project = Project(name: "Yard")
        var broken = remote(Issue(projectID: project.id, title: "Gate").record, version: 1, at: 1_000).record
        broken["priority"] = .text("whenever")
        let bad = VersionedRecord(record: broken, stampedAt: HybridTimestamp(physicalMilliseconds: 1_000, counter: 0, node: server))
        do {
            let store = try LocalStore.open(at: folder.path)
            let report = try await store.applyPulledPage(
                PulledPage(changes: [remote(project.record, version: 1, at: 900), bad], cursor: "c-1"))
            #expect(report.quarantined == 1)
        }
        let store = try LocalStore.open(at: folder.path)
        let report = try await store.applyPulledPage(PulledPage(changes: [], cursor: "c-2"))
        #expect(report.revived == 0 && report.quarantined == 0)
        #expect(try store.quarantinedRecords().map(\.recordID) == [broken.id])
        #expect(try store.fetch(Issue.self, id: broken.id) == nil)
    }

    @Test func aNewerVersionInThePageSupersedesTheQuarantinedOne() async throws {
        let folder = try TemporaryDatabase()
        let project = Project(name: "Yard")
        var issue = Issue(projectID: project.id, title: "Fence")
        do {
            let store = try LocalStore.open(at: folder.path)
            try await store.applyPulledPage(PulledPage(changes: [remote(project.record, version: 1, at: 900)], cursor: "c-1"))
        }
        try await quarantineAsAnEarlierBuild(remote(issue.record, version: 1, at: 1_000), in: folder, at: 1_000)
        issue.title = "Fence, north side"
        let store = try LocalStore.open(at: folder.path)
        let report = try await store.applyPulledPage(PulledPage(changes: [remote(issue.record, version: 2, at: 2_000)], cursor: "c-2"))
        #expect(report.revived == 0)
        #expect(try store.fetch(Issue.self, id: issue.id)?.title == "Fence, north side")
        #expect(try store.fetch(Issue.self, id: issue.id)?.sync.version == 2)
        #expect(try store.quarantinedRecords().isEmpty)
    }

    @Test func aQuarantinedVersionOlderThanTheStoredOneNeverMovesTheRecordBack() async throws {
        let folder = try TemporaryDatabase()
        let project = Project(name: "Yard")
        var issue = Issue(projectID: project.id, title: "Fence")
        let old = remote(issue.record, version: 1, at: 1_000)
        issue.title = "Fence, north side"
        do {
            let store = try LocalStore.open(at: folder.path)
            try await store.applyPulledPage(PulledPage(
                changes: [remote(project.record, version: 1, at: 900), remote(issue.record, version: 2, at: 2_000)], cursor: "c-1"))
        }
        try await quarantineAsAnEarlierBuild(old, in: folder, at: 1_000)
        let store = try LocalStore.open(at: folder.path)
        try await store.applyPulledPage(PulledPage(changes: [], cursor: "c-2"))
        #expect(try store.fetch(Issue.self, id: issue.id)?.title == "Fence, north side")
        #expect(try store.fetch(Issue.self, id: issue.id)?.sync.version == 2)
    }
}

/// Attack 65 F4: records refused for their shape were held whole without limit (71,000 entries, 83 MB
/// in 30 s of a hostile server's pages), and every process's first page read them all again (8 s a
/// sync). Records are held for a later build only up to a count and a size; past them an entry keeps
/// its reason alone, as entries of builds before holding did, and waits for a newer version.
@Suite(.fieldService) struct QuarantineBoundsTests {
    func shapeRefused(_ extra: String = "x") -> VersionedRecord {
        var record = Issue(projectID: UUID(), title: "Fence").record
        record.sync.version = 1
        record.fields["zzzUnknown"] = .text(extra)
        return VersionedRecord(
            record: record, stampedAt: HybridTimestamp(physicalMilliseconds: 1_795_000_000_000, counter: 0, node: NodeID(0xFEED)))
    }

    @Test func heldRecordsStopAtTheirCountAndSizeAndEveryRefusalIsStillListed() async throws {
        let folder = try TemporaryDatabase()
        let store = try LocalStore.open(at: folder.path)
        let large = shapeRefused(String(repeating: "y", count: Quarantine.maximumHeldBytes))
        let many = (0..<(Quarantine.maximumHeldEntries + 5)).map { _ in shapeRefused() }
        try await store.applyPulledPage(PulledPage(changes: [large] + many, cursor: "c-1"))
        // The next process's first page reads the held records again: a bounded number of them.
        let second = try LocalStore.open(at: folder.path)
        try await second.applyPulledPage(PulledPage(changes: [], cursor: "c-2"))
        let (held, largest) = try await folder.queue.read { db in
            (try Int.fetchOne(db, sql: "SELECT count(*) FROM sync_state WHERE key LIKE 'quarantined%' AND value LIKE '%\"held\"%'") ?? 0,
             try Int.fetchOne(db, sql: "SELECT max(length(value)) FROM sync_state WHERE key LIKE 'quarantined%'") ?? 0)
        }
        // The large record took an entry without being held.
        #expect(held == Quarantine.maximumHeldEntries - 1)
        #expect(largest < Quarantine.maximumHeldBytes, "the large record was not held: \(largest) bytes")
        #expect(try second.quarantinedRecords().count == many.count + 1, "every refusal is listed")
    }

    /// Attack 66 F1: a record whose unknown field's name was 200 KB was refused with a reason quoting
    /// it, and every entry, held or not, kept 200 KB (the file grew 25 MB/s).
    @Test func aReasonQuotingAHugeNameIsBounded() async throws {
        let folder = try TemporaryDatabase()
        let store = try LocalStore.open(at: folder.path)
        var records: [VersionedRecord] = []
        for _ in 0..<3 {
            var record = shapeRefused().record
            record.fields[String(repeating: "n", count: 200_000)] = .text("x")
            records.append(VersionedRecord(record: record, stampedAt: HybridTimestamp(physicalMilliseconds: 1_795_000_000_000, counter: 0, node: NodeID(0xFEED))))
        }
        try await store.applyPulledPage(PulledPage(changes: records, cursor: "c-1"))
        let largest = try await folder.queue.read { db in
            try Int.fetchOne(db, sql: "SELECT max(length(value)) FROM sync_state WHERE key LIKE 'quarantined%'") ?? 0
        }
        #expect(largest < 8_192, "\(largest) bytes")
        #expect(try store.quarantinedRecords().count == 3)
    }

    /// Attack 66 F7: reason-only entries had no bound either (77,000 in a minute, every sync 2.4 s).
    /// Past `maximumEntries` a refusal is counted in the report, not logged.
    @Test func theQuarantineStopsGrowingAtItsBound() async throws {
        let folder = try TemporaryDatabase()
        let store = try LocalStore.open(at: folder.path)
        let records = (0..<(Quarantine.maximumEntries + 20)).map { _ in shapeRefused() }
        let report = try await store.applyPulledPage(PulledPage(changes: records, cursor: "c-1"))
        #expect(report.quarantined == records.count, "every refusal is counted")
        #expect(try store.quarantinedRecords().count == Quarantine.maximumEntries)
        #expect(try store.pullCursor() == "c-1")
    }
}

/// Round 67 F1: a page of records all refused told `changes()` subscribers (and the change journal, 50
/// KB a page) of a thousand updates to records the store never wrote.
@Suite(.fieldService) struct RefusedRecordsAreNotAnnouncedTests {
    @Test func subscribersHearOnlyOfRecordsThePageStored() async throws {
        let folder = try TemporaryDatabase()
        let store = try LocalStore.open(at: folder.path)
        let stamp = HybridTimestamp(physicalMilliseconds: 1_795_000_000_000, counter: 0, node: NodeID(0xFEED))
        var refused = Issue(projectID: UUID(), title: "Fence").record
        refused.sync.version = 1
        refused.fields["zzzUnknown"] = .text("x")
        var stored = Issue(projectID: UUID(), title: "Gate").record
        stored.sync.version = 1
        let changes = store.changes()
        let heard = Task { () -> [UUID] in
            var heard: [UUID] = []
            for await change in changes {
                heard.append(change.recordID)
                if change.recordID == stored.id { break }
            }
            return heard
        }
        try await store.applyPulledPage(PulledPage(
            changes: [VersionedRecord(record: refused, stampedAt: stamp), VersionedRecord(record: stored, stampedAt: stamp)], cursor: "c-1"))
        #expect(await heard.value == [stored.id])
        let journal = try await folder.queue.read { db in try String.fetchAll(db, sql: "SELECT changes FROM change_journal") }
        #expect(!journal.joined().contains(refused.id.storageText), "\(journal)")
    }
}

/// Round 66 F3's aftermath: a sync printed "pulled -1". The engine took every quarantined record off
/// the page's records, but a version the server sent as this device's own, not held here, is
/// quarantined without being one of the page's records. The report says how many of those there were.
@Suite(.fieldService) struct RefusedOwnVersionsTests {
    @Test func ownVersionsRefusedAreCountedApartFromThePagesRecords() async throws {
        let folder = try TemporaryDatabase()
        let store = try LocalStore.open(at: folder.path)
        let report = try await store.applyPulledPage(PulledPage(
            changes: [], cursor: "c-1", ownRecords: [OwnRecord(sequence: 1, entity: .issue, recordID: UUID(), version: 3)]))
        #expect(report.quarantined == 1)
        #expect(report.refusedOwnVersions == 1)
    }
}

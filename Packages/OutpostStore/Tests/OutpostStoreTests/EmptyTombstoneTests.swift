import Foundation
import OutpostConflicts
import OutpostModels
import Testing
@testable import OutpostStore

/// Servers send a tombstone as its id, version and deletion clock only: the device deletes its own
/// copy, keeping its last values (a user who brings the record back sends them), and stores nothing
/// for a record it never held.
@Suite struct EmptyTombstoneTests {
    let now = Date(timeIntervalSince1970: 1_795_000_000)
    let server = NodeID(0xFEED)

    func stamp(_ milliseconds: Int64) -> HybridTimestamp {
        HybridTimestamp(physicalMilliseconds: milliseconds, counter: 0, node: server)
    }

    /// The record as a server with its contents sends it.
    func whole(_ issue: OutpostModels.Issue, version: Int64, at milliseconds: Int64) -> VersionedRecord {
        var record = issue.record
        record.sync.version = version
        return VersionedRecord(record: record, stampedAt: stamp(milliseconds))
    }

    /// A tombstone as the server sends it: no fields, no clocks.
    func tombstone(of id: UUID, version: Int64, at milliseconds: Int64) throws -> VersionedRecord {
        let deletion = stamp(milliseconds)
        let sync = SyncMetadata(version: version, createdAt: now, updatedAt: now, deletedAt: deletion.date, syncStatus: .synced)
        return try VersionedRecord(
            record: EntityRecord(entity: .issue, id: id, fields: [:], sync: sync), clocks: [:], deletion: deletion)
    }

    @Test func aTombstoneWithoutContentsDeletesTheHeldCopyAndKeepsItsValues() async throws {
        let folder = try TemporaryDatabase()
        let store = try LocalStore.open(at: folder.path)
        let issue = OutpostModels.Issue(projectID: UUID(), title: "Gate code 4471")
        _ = try await store.applyPulledPage(PulledPage(changes: [whole(issue, version: 1, at: 1_000)], cursor: "1"), now: now)
        let report = try await store.applyPulledPage(
            PulledPage(changes: [try tombstone(of: issue.id, version: 2, at: 2_000)], cursor: "2"), now: now)
        #expect(report.quarantined == 0)
        let held = try #require(try store.record(.issue, id: issue.id))
        #expect(held.sync.isDeleted && held.sync.version == 2)
        #expect(held["title"] == .text("Gate code 4471"), "the device keeps its own last values")
        #expect(try store.pullCursor() == "2")
    }

    @Test func aTombstoneOfARecordNeverHeldStoresNothing() async throws {
        let folder = try TemporaryDatabase()
        let store = try LocalStore.open(at: folder.path)
        let id = UUID()
        let report = try await store.applyPulledPage(
            PulledPage(changes: [try tombstone(of: id, version: 3, at: 2_000)], cursor: "3"), now: now)
        #expect(report.quarantined == 0)
        #expect(try store.record(.issue, id: id) == nil)
        #expect(try store.pullCursor() == "3", "the page still applies")
    }

    @Test func aTombstoneMeetingAnUnsentEditSettlesAsADeleteWithContentsWould() async throws {
        let folder = try TemporaryDatabase()
        let store = try LocalStore.open(at: folder.path)
        let issue = OutpostModels.Issue(projectID: UUID(), title: "Loose rail")
        _ = try await store.applyPulledPage(PulledPage(changes: [whole(issue, version: 1, at: 1_000)], cursor: "1"), now: now)
        var edited = try #require(try store.fetch(OutpostModels.Issue.self, id: issue.id))
        edited.title = "Loose rail, stairs"
        try await store.save(edited, now: now)
        _ = try await store.applyPulledPage(
            PulledPage(changes: [try tombstone(of: issue.id, version: 2, at: 1_500)], cursor: "2"), now: now)
        let held = try #require(try store.record(.issue, id: issue.id))
        // Whichever side the issue's strategy keeps, nothing is blank: the edit survives as a value
        // (kept, or surfaced as a conflict the user can restore).
        #expect(held["title"] == .text("Loose rail, stairs"))
        if held.sync.isDeleted {
            #expect(try store.openConflicts().contains { $0.recordID == issue.id })
        } else {
            #expect(try store.status().pendingChanges == 1)
        }
    }
}

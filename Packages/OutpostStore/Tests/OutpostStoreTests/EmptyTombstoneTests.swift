@testable import OutpostStore
import Foundation
import OutpostConflicts
import OutpostFieldService
import OutpostFieldServiceTesting
import OutpostModels
import OutpostSchema
import Testing

/// A server's pull sends a tombstone as its id, version and deletion clock only: the device deletes its
/// own copy, keeping its last values and the version they are of, stores nothing for a record it never
/// held, and leaves a record with an unsent change to the push, whose conflict answer carries the
/// tombstone whole.
@Suite(.fieldService) struct EmptyTombstoneTests {
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

    /// An issue pulled at version 1, its title edited here and not yet sent, then its tombstone pulled
    /// without contents at `tombstoneVersion`: the delete waits aside for the edit's answer.
    func editedThenDeleted(tombstoneVersion: Int64, at milliseconds: Int64) async throws
        -> (TemporaryDatabase, LocalStore, OutpostModels.Issue, edited: OutpostModels.Issue)
    {
        let folder = try TemporaryDatabase()
        let store = try LocalStore.open(at: folder.path)
        let issue = OutpostModels.Issue(projectID: UUID(), title: "Loose rail")
        _ = try await store.applyPulledPage(PulledPage(changes: [whole(issue, version: 1, at: 1_000)], cursor: "1"), now: now)
        var edited = try #require(try store.fetch(OutpostModels.Issue.self, id: issue.id))
        edited.title = "Loose rail, stairs"
        try await store.save(edited, now: now)
        _ = try await store.applyPulledPage(
            PulledPage(changes: [try tombstone(of: issue.id, version: tombstoneVersion, at: milliseconds)], cursor: "\(tombstoneVersion)"),
            now: now)
        return (folder, store, issue, edited)
    }

    @Test func aTombstoneMeetingAnUnsentEditLeavesItToThePush() async throws {
        let (folder, store, issue, _) = try await editedThenDeleted(tombstoneVersion: 2, at: 1_500)
        defer { withExtendedLifetime(folder) {} }
        // Without the server's last values the device cannot tell which of its edits lost to a change
        // the delete hid: the edit goes out on the version it was made on and meets the whole tombstone.
        let held = try #require(try store.record(.issue, id: issue.id))
        #expect(held["title"] == .text("Loose rail, stairs") && !held.sync.isDeleted && held.sync.version == 1)
        #expect(try store.unsentChanges().map(\.baseVersion) == [1])
        #expect(try store.pullCursor() == "2")
    }

    @Test func aChangeAcknowledgedAfterItsRecordsTombstoneWasPulledLeavesTheRecordDeleted() async throws {
        // The server applied the edit (version 2) and then another device deleted the issue (version 3);
        // the answer to the edit was lost, so the device pulls the tombstone while the edit still waits,
        // and then meets the edit's acknowledgement, not a conflict.
        let (folder, store, issue, pulledAndEdited) = try await editedThenDeleted(tombstoneVersion: 3, at: 2_000)
        defer { withExtendedLifetime(folder) {} }
        var edited = pulledAndEdited
        let sent = try #require(try store.unsentChanges().first)
        try store.acknowledge(sent, serverVersion: 2, serverID: nil, now: now)
        let held = try #require(try store.record(.issue, id: issue.id))
        #expect(held.sync.isDeleted && held.sync.version == 3, "the pull that carried the delete has moved on")
        #expect(held["title"] == .text("Loose rail, stairs"))
        #expect(try store.unsentChanges().isEmpty)
        // The same copy saved again changes nothing its user wrote: the delete stands. Edited, it brings the
        // record back on version 2, whose values the device holds.
        try await store.save(edited, now: now)
        #expect(try store.unsentChanges().isEmpty)
        edited.details = "and the landing"
        try await store.save(edited, now: now)
        #expect(try store.unsentChanges().map(\.baseVersion) == [2])
    }

    /// A change the server refuses for good (a crew member's edit of a teammate's log, which the author
    /// deleted meanwhile) no longer goes out, so it no longer holds back the delete its pull set aside for
    /// its answer: the record is deleted at the tombstone's version, keeping its values, and the failed
    /// change stays listed for its user (attack 51: the device showed the log alive with the refused
    /// text for good, while the server and every other device held it deleted).
    @Test func aRefusedChangeLetsTheDeleteSetAsideForItsAnswerApply() async throws {
        let (folder, store, issue, _) = try await editedThenDeleted(tombstoneVersion: 2, at: 1_500)
        defer { withExtendedLifetime(folder) {} }
        let sent = try #require(try store.claimMutations(limit: 1, now: now).first)
        try store.fail(sent, reason: "forbidden: a crew changes only their own dailyLog records")
        let held = try #require(try store.record(.issue, id: issue.id))
        #expect(held.sync.isDeleted && held.sync.version == 2, "the server's delete applies: \(held.sync)")
        #expect(held["title"] == .text("Loose rail, stairs"), "the refused values stay, with the failed change")
        #expect(held.sync.syncStatus == .failed)
        #expect(try store.mutations().map(\.status) == [.failed], "the failed change stays listed for its user")
    }

    @Test func savingOverATombstoneWithoutContentsGoesOutOnTheVersionItsValuesAreOf() async throws {
        let folder = try TemporaryDatabase()
        let store = try LocalStore.open(at: folder.path)
        let issue = OutpostModels.Issue(projectID: UUID(), title: "Loose rail")
        _ = try await store.applyPulledPage(PulledPage(changes: [whole(issue, version: 1, at: 1_000)], cursor: "1"), now: now)
        _ = try await store.applyPulledPage(
            PulledPage(changes: [try tombstone(of: issue.id, version: 4, at: 2_000)], cursor: "4"), now: now)
        var restored = issue
        restored.title = "Loose rail, fixed"
        try await store.save(restored, now: now)
        // An update of version 4 would be applied over values this device never saw (the server's at
        // version 3, say) and leave it holding others than the server; on version 1 it meets the
        // tombstone whole in the conflict's answer, and the merge runs as with any stale change.
        let queued = try store.unsentChanges()
        #expect(queued.map(\.baseVersion) == [1] && queued.first?.operation == .update)
        // A tombstone pulled whole later (or a record brought back) settles it as usual.
        var back = issue
        back.title = "Loose rail, fixed by Bob"
        _ = try await store.applyPulledPage(PulledPage(changes: [whole(back, version: 5, at: 9_000)], cursor: "5"), now: now)
        #expect(try store.unsentChanges().allSatisfy { $0.baseVersion == 5 })
    }
}

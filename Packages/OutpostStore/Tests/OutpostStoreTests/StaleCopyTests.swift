@testable import OutpostStore
import Foundation
import OutpostConflicts
import OutpostFieldService
import OutpostFieldServiceTesting
import OutpostModels
import OutpostSchema
import Testing

/// An app that saves a copy it read before a pull changed the record: only what the user changed on
/// that copy is written; what the server changed meanwhile is never reverted.
@Suite(.fieldService) struct StaleCopyTests {
    let server = NodeID(0xFEED)

    func remote(_ model: some Syncable, version: Int64, at milliseconds: Int64) -> VersionedRecord {
        var record = model.record
        record.sync.version = version
        return VersionedRecord(
            record: record, stampedAt: HybridTimestamp(physicalMilliseconds: milliseconds, counter: 0, node: server))
    }

    @Test func savingAStaleCopyKeepsTheFieldsAPullChanged() async throws {
        let folder = try TemporaryDatabase()
        let store = try LocalStore.open(at: folder.path)
        let issue = Issue(projectID: UUID(), title: "Leak", status: .open)
        try await store.applyPulledPage(
            PulledPage(changes: [remote(issue, version: 1, at: 1_000)], cursor: "1"), now: Date(timeIntervalSince1970: 1))
        // The app reads the issue and shows it; the user starts typing a new title.
        var onScreen = try #require(try store.fetch(Issue.self, id: issue.id))
        // Meanwhile a pull brings the office's status change.
        var office = issue
        office.status = .resolved
        try await store.applyPulledPage(
            PulledPage(changes: [remote(office, version: 2, at: 5_000)], cursor: "2"), now: Date(timeIntervalSince1970: 5))
        onScreen.title = "Leak under the sink"
        let saved = try await store.save(onScreen, now: Date(timeIntervalSince1970: 6))

        let stored = try #require(try store.fetch(Issue.self, id: issue.id))
        #expect(stored.status == .resolved, "the office's newer status is not reverted")
        #expect(stored.title == "Leak under the sink")
        #expect(saved.status == .resolved, "the returned value is what the store holds")
        #expect(try store.mutations(status: .pending).map(\.fields) == [["title": .text("Leak under the sink")]])
        #expect(try store.openConflicts().isEmpty)
    }

    @Test func aFieldChangedOnBothTheStaleCopyAndTheServerIsWrittenAndTheServersValueSurfaced() async throws {
        let folder = try TemporaryDatabase()
        let store = try LocalStore.open(at: folder.path)
        let issue = Issue(projectID: UUID(), title: "Leak", status: .open)
        try await store.applyPulledPage(
            PulledPage(changes: [remote(issue, version: 1, at: 1_000)], cursor: "1"), now: Date(timeIntervalSince1970: 1))
        var onScreen = try #require(try store.fetch(Issue.self, id: issue.id))
        var office = issue
        office.status = .resolved
        try await store.applyPulledPage(
            PulledPage(changes: [remote(office, version: 2, at: 5_000)], cursor: "2"), now: Date(timeIntervalSince1970: 5))
        // The user, who never saw "resolved", sets the status themselves.
        onScreen.status = .inProgress
        try await store.save(onScreen, now: Date(timeIntervalSince1970: 6))
        #expect(try store.fetch(Issue.self, id: issue.id)?.status == .inProgress, "what the user chose is written")
        #expect(try store.mutations(status: .pending).map(\.fields) == [["status": .text("inProgress")]])
        let conflict = try #require(try store.openConflicts().first)
        #expect(conflict.field == "status")
        #expect(conflict.remoteValue == .text("resolved"), "the office's value it replaced is surfaced, not lost")
        #expect(conflict.losingSide == .server)
        try await store.resolveConflict(conflict.id, choice: .override, now: Date(timeIntervalSince1970: 7))
        #expect(try store.fetch(Issue.self, id: issue.id)?.status == .resolved, "override brings the office's value back")
    }

    @Test func savingARecordWithNothingChangedQueuesNothing() async throws {
        // A save whose copy changes nothing (the same record saved twice, a stale copy whose user touched
        // nothing) writes nothing: an empty update would move the server's version, and under server wins
        // and manual a teammate's change made on the version before would then be refused as concurrent.
        let folder = try TemporaryDatabase()
        let store = try LocalStore.open(at: folder.path)
        let issue = Issue(projectID: UUID(), title: "Leak", status: .open)
        try await store.applyPulledPage(
            PulledPage(changes: [remote(issue, version: 1, at: 1_000)], cursor: "1"), now: Date(timeIntervalSince1970: 1))
        let onScreen = try #require(try store.fetch(Issue.self, id: issue.id))
        var office = issue
        office.status = .resolved
        try await store.applyPulledPage(
            PulledPage(changes: [remote(office, version: 2, at: 5_000)], cursor: "2"), now: Date(timeIntervalSince1970: 5))
        let entriesBefore = try store.verifyAudit().entriesChecked
        try await store.save(onScreen, now: Date(timeIntervalSince1970: 6))
        try await store.save(try #require(try store.fetch(Issue.self, id: issue.id)), now: Date(timeIntervalSince1970: 7))
        #expect(try store.mutations().isEmpty)
        #expect(try store.verifyAudit().entriesChecked == entriesBefore)
        #expect(try store.fetch(Issue.self, id: issue.id)?.sync.syncStatus == .synced)
    }

    @Test func aCopyReadBeforeAnOwnEditThatAPullThenReplacedIsNotAnEdit() async throws {
        // Found by the conflict model: the screen read "Leak"; the device itself then wrote "Leak (d3)";
        // a pull replaced that with the office's "Leak (office)". The unchanged copy saved now holds what
        // it read, not an edit: nothing is written and nothing surfaced (it surfaced the office's title).
        let folder = try TemporaryDatabase()
        let store = try LocalStore.open(at: folder.path)
        let issue = Issue(projectID: UUID(), title: "Leak")
        try await store.applyPulledPage(
            PulledPage(changes: [remote(issue, version: 1, at: 1_000)], cursor: "1"), now: Date(timeIntervalSince1970: 1))
        let onScreen = try #require(try store.fetch(Issue.self, id: issue.id))
        var own = onScreen
        own.title = "Leak (d3)"
        try await store.save(own, now: Date(timeIntervalSince1970: 2))
        var office = issue
        office.title = "Leak (office)"
        try await store.applyPulledPage(
            PulledPage(changes: [remote(office, version: 2, at: 5_000)], cursor: "2"),
            now: Date(timeIntervalSince1970: 3))
        let conflictsBefore = try store.openConflicts().count
        try await store.save(onScreen, now: Date(timeIntervalSince1970: 4))
        #expect(try store.fetch(Issue.self, id: issue.id)?.title == "Leak (office)")
        let conflicts = try store.openConflicts()
        #expect(conflicts.count == conflictsBefore, "\(conflicts)")
    }

    @Test func aCopysEditOfAFieldAPullPutBackToWhatItReadSurfacesNothing() async throws {
        // Found by the conflict model: the screen read status open; the device wrote resolved; a merge put
        // open back (the office's newer version won whole). The screen's user now sets in progress: an
        // edit over the very value it read, written with nothing surfaced (it surfaced "open").
        let folder = try TemporaryDatabase()
        let store = try LocalStore.open(at: folder.path)
        let issue = Issue(projectID: UUID(), title: "Leak", status: .open)
        try await store.applyPulledPage(
            PulledPage(changes: [remote(issue, version: 1, at: 1_000)], cursor: "1"), now: Date(timeIntervalSince1970: 1))
        var onScreen = try #require(try store.fetch(Issue.self, id: issue.id))
        var own = onScreen
        own.status = .resolved
        try await store.save(own, now: Date(timeIntervalSince1970: 2))
        let lastWriteWins = ConflictPolicy(overriding: [.issue: .lastWriteWins])
        var office = issue
        office.title = "Leak, kitchen"
        try await store.applyPulledPage(
            PulledPage(changes: [remote(office, version: 2, at: 5_000)], cursor: "2"), policy: lastWriteWins,
            now: Date(timeIntervalSince1970: 3))
        #expect(try store.fetch(Issue.self, id: issue.id)?.status == .open, "the office's whole version stood")
        let conflictsBefore = try store.openConflicts().count
        onScreen.status = .inProgress
        try await store.save(onScreen, now: Date(timeIntervalSince1970: 4))
        let stored = try #require(try store.fetch(Issue.self, id: issue.id))
        #expect(stored.status == .inProgress && stored.title == "Leak, kitchen")
        let conflicts = try store.openConflicts()
        #expect(conflicts.count == conflictsBefore, "\(conflicts)")
    }

    @Test func theSameScreenSavedTwiceAfterAPullSurfacesNeitherSaveAgainstTheOther() async throws {
        // Seed 71: a screen read before a pull saved its notes twice; the second save surfaced the first
        // save's value as "the server's" it replaced. The later save of one field wins, as two saves do.
        let folder = try TemporaryDatabase()
        let store = try LocalStore.open(at: folder.path)
        let issue = Issue(projectID: UUID(), title: "Leak", details: "")
        try await store.applyPulledPage(
            PulledPage(changes: [remote(issue, version: 1, at: 1_000)], cursor: "1"), now: Date(timeIntervalSince1970: 1))
        var onScreen = try #require(try store.fetch(Issue.self, id: issue.id))
        var office = issue
        office.details = "office's note"
        try await store.applyPulledPage(
            PulledPage(changes: [remote(office, version: 2, at: 2_000)], cursor: "2"), now: Date(timeIntervalSince1970: 2))
        onScreen.details = "first"
        try await store.save(onScreen, now: Date(timeIntervalSince1970: 3))
        let afterFirst = try store.openConflicts()
        #expect(afterFirst.map(\.losingValue) == [.text("office's note")], "the office's value the first save replaced")
        onScreen.details = "second"
        try await store.save(onScreen, now: Date(timeIntervalSince1970: 4))
        #expect(try store.fetch(Issue.self, id: issue.id)?.details == "second")
        #expect(try store.openConflicts() == afterFirst, "the first save is this device's own, not the server's")
    }

    @Test func aCopyReadBeforeADeleteSavedAgainKeepsWhatItsFirstSaveBroughtBack() async throws {
        // Seed 35: a screen read before a pulled delete saved its notes (bringing the record back), then its
        // title: the second save put the notes back to what the screen had read, since the first save over
        // the tombstone noted nothing of what it replaced.
        let folder = try TemporaryDatabase()
        let store = try LocalStore.open(at: folder.path)
        let issue = Issue(projectID: UUID(), title: "Leak", details: "as read")
        try await store.applyPulledPage(
            PulledPage(changes: [remote(issue, version: 1, at: 1_000)], cursor: "1"), now: Date(timeIntervalSince1970: 1))
        var onScreen = try #require(try store.fetch(Issue.self, id: issue.id))
        let tombstone = try VersionedRecord(
            record: EntityRecord(entity: .issue, id: issue.id, fields: [:],
                sync: SyncMetadata(version: 2, createdAt: Date(timeIntervalSince1970: 1), updatedAt: Date(timeIntervalSince1970: 2),
                    deletedAt: Date(timeIntervalSince1970: 2))),
            clocks: [:], deletion: HybridTimestamp(physicalMilliseconds: 2_000, counter: 0, node: server))
        try await store.applyPulledPage(PulledPage(changes: [tombstone], cursor: "2"), now: Date(timeIntervalSince1970: 2))
        onScreen.details = "two more posts"
        try await store.save(onScreen, now: Date(timeIntervalSince1970: 3))
        onScreen.details = "as read"
        onScreen.title = "Leak, stairs"
        try await store.save(onScreen, now: Date(timeIntervalSince1970: 4))
        let stored = try #require(try store.fetch(Issue.self, id: issue.id))
        #expect(!stored.sync.isDeleted && stored.title == "Leak, stairs")
        #expect(stored.details == "two more posts", "the screen's first save stands")
    }

    @Test func aPullStampedByAServerBehindThisDeviceDoesNotLetAnOldCopyRevertItsOwnWrite() async throws {
        // Seed 319: the device's time ran ahead of the server's. It made a record (200 s) and a screen read
        // it; the device then changed it (201 s). The pull of that change, stamped by the server's time
        // (160 s), set the row's `updatedAt` back below the copy's, so the unchanged copy no longer looked
        // older than the device's write, and saving it wrote the old status back.
        let folder = try TemporaryDatabase()
        let store = try LocalStore.open(at: folder.path)
        let created = try await store.save(Issue(projectID: UUID(), title: "Leak", status: .open), now: Date(timeIntervalSince1970: 200))
        try store.acknowledge(try #require(try store.unsentChanges().first), serverVersion: 1, serverID: nil, now: Date(timeIntervalSince1970: 200))
        let onScreen = try #require(try store.fetch(Issue.self, id: created.id))
        var own = onScreen
        own.status = .resolved
        try await store.save(own, now: Date(timeIntervalSince1970: 201))
        let sent = try #require(try store.unsentChanges().first)
        try store.acknowledge(sent, serverVersion: 2, serverID: nil, now: Date(timeIntervalSince1970: 202))
        // The pull brings the change back as the server applied it, at the server's time.
        var taken = try #require(try store.record(.issue, id: created.id))
        taken.sync.updatedAt = Date(timeIntervalSince1970: 160)
        taken.sync.syncStatus = .synced
        let clocks = Dictionary(uniqueKeysWithValues: taken.fields.keys.map { ($0, sent.clocks["status"]!) })
        try await store.applyPulledPage(
            PulledPage(changes: [try VersionedRecord(record: taken, clocks: clocks)], cursor: "2"), now: Date(timeIntervalSince1970: 203))
        try await store.save(onScreen, now: Date(timeIntervalSince1970: 300))
        #expect(try store.fetch(Issue.self, id: created.id)?.status == .resolved, "the device's own write stands")
        #expect(try store.unsentChanges().isEmpty)
    }

    @Test func aCopyOlderThanTheKeptHistoryKeepsTheStoredValueAndSurfacesTheCopys() async throws {
        let folder = try TemporaryDatabase()
        let store = try LocalStore.open(at: folder.path)
        let issue = Issue(projectID: UUID(), title: "Leak", status: .open)
        try await store.applyPulledPage(
            PulledPage(changes: [remote(issue, version: 1, at: 1_000)], cursor: "1"), now: Date(timeIntervalSince1970: 1))
        var onScreen = try #require(try store.fetch(Issue.self, id: issue.id))
        var office = issue
        for (version, status) in zip(Int64(2)...7, [Issue.Status.inProgress, .resolved, .open, .inProgress, .resolved, .open]) {
            office.status = status
            try await store.applyPulledPage(
                PulledPage(changes: [remote(office, version: version, at: 1_000 * version)], cursor: "\(version)"),
                now: Date(timeIntervalSince1970: Double(version)))
        }
        office.status = .inProgress
        try await store.applyPulledPage(
            PulledPage(changes: [remote(office, version: 8, at: 8_000)], cursor: "8"), now: Date(timeIntervalSince1970: 8))
        // The status the copy holds (open) cannot be told apart from a choice of the user's any more.
        onScreen.title = "Leak under the sink"
        try await store.save(onScreen, now: Date(timeIntervalSince1970: 9))
        let stored = try #require(try store.fetch(Issue.self, id: issue.id))
        #expect(stored.status == .inProgress, "the newer stored value stays")
        #expect(stored.title == "Leak under the sink")
        #expect(try store.openConflicts().map(\.localValue) == [.text("open")], "the copy's value is kept for the user")
        let conflict = try #require(try store.openConflicts().first)
        #expect(conflict.losingSide == .client)
        try await store.resolveConflict(conflict.id, choice: .override, now: Date(timeIntervalSince1970: 10))
        #expect(try store.fetch(Issue.self, id: issue.id)?.status == .open, "override brings the copy's value back")
    }

    @Test func aCurrentCopyIsWrittenAsBefore() async throws {
        let folder = try TemporaryDatabase()
        let store = try LocalStore.open(at: folder.path)
        let issue = Issue(projectID: UUID(), title: "Leak", status: .open)
        try await store.applyPulledPage(
            PulledPage(changes: [remote(issue, version: 1, at: 1_000)], cursor: "1"), now: Date(timeIntervalSince1970: 1))
        var office = issue
        office.status = .resolved
        try await store.applyPulledPage(
            PulledPage(changes: [remote(office, version: 2, at: 5_000)], cursor: "2"), now: Date(timeIntervalSince1970: 5))
        var current = try #require(try store.fetch(Issue.self, id: issue.id))
        current.status = .open
        try await store.save(current, now: Date(timeIntervalSince1970: 6))
        #expect(try store.fetch(Issue.self, id: issue.id)?.status == .open, "a copy of the current version writes what it holds")
        #expect(try store.openConflicts().isEmpty)
    }

    @Test func aCopyReadBeforeAnotherLocalWriteChangesOnlyWhatItsUserChanged() async throws {
        // A detail screen reads an issue; a widget (another task, or another process of the app) then
        // resolves it; the screen saves an edit of the details. Every write lands in one millisecond.
        let folder = try TemporaryDatabase()
        let store = try LocalStore.open(at: folder.path)
        let now = Date(timeIntervalSince1970: 1_795_000_000)
        let issue = Issue(projectID: UUID(), title: "Leak", status: .open)
        try await store.save(issue, now: now)
        let detailScreen = try #require(try store.fetch(Issue.self, id: issue.id))
        var widget = try #require(try store.fetch(Issue.self, id: issue.id))
        widget.status = .resolved
        try await store.save(widget, now: now)
        var edited = detailScreen
        edited.details = "Under the sink"
        try await store.save(edited, now: now)
        var stored = try #require(try store.fetch(Issue.self, id: issue.id))
        #expect(stored.status == .resolved, "the widget's write is not reverted")
        #expect(stored.details == "Under the sink")
        #expect(try store.mutations().allSatisfy { $0.fields["status"] != .text("open") }, "nothing sends the old status")

        // The same once the widget's write is acknowledged by the server.
        for mutation in try store.claimMutations(limit: 10, now: now) {
            try store.acknowledge(mutation, serverVersion: 1, serverID: nil, now: now)
        }
        var late = detailScreen
        late.title = "Leak under the sink"
        try await store.save(late, now: now)
        stored = try #require(try store.fetch(Issue.self, id: issue.id))
        #expect(stored.status == .resolved && stored.details == "Under the sink" && stored.title == "Leak under the sink")
        #expect(try store.mutations(status: .pending).map(\.fields) == [["title": .text("Leak under the sink")]])
        #expect(try store.openConflicts().isEmpty)
    }

    @Test func twoCopiesEditingTheSameFieldKeepTheLaterSave() async throws {
        let folder = try TemporaryDatabase()
        let store = try LocalStore.open(at: folder.path)
        let now = Date(timeIntervalSince1970: 1_795_000_000)
        let issue = Issue(projectID: UUID(), title: "Leak", status: .open)
        try await store.save(issue, now: now)
        var first = try #require(try store.fetch(Issue.self, id: issue.id))
        var second = first
        first.status = .inProgress
        try await store.save(first, now: now)
        second.status = .resolved
        try await store.save(second, now: now)
        // Both are this device's users' edits of the field: the later one is written, as it would be
        // one after the other.
        #expect(try store.fetch(Issue.self, id: issue.id)?.status == .resolved)
    }
}

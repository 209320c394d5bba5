@testable import OutpostStore
import Foundation
import OutpostConflicts
import OutpostFieldService
import OutpostFieldServiceTesting
import OutpostModels
import OutpostSchema
import Testing

private typealias Issue = OutpostModels.Issue
private typealias Comment = OutpostModels.Comment

/// A record stays in its project, on the device as on the server (`PushRules`: "a record cannot move to
/// another project"). A server's version of a held record that names another project is refused into
/// the quarantine and the held record stays as it was: a hostile server's conflict answer moved a
/// device's own issue into a project its user was never in, and its lost values went to the conflicts
/// list (attack 101, F3).
@Suite(.fieldService) struct ProjectMoveTests {
    let server = NodeID(0xFEED)

    func remote(_ model: some Syncable, version: Int64, at milliseconds: Int64) -> VersionedRecord {
        var record = model.record
        record.sync.version = version
        record.sync.serverID = nil
        record.sync.createdAt = Date(timeIntervalSince1970: 1)
        record.sync.updatedAt = Date(timeIntervalSince1970: Double(milliseconds) / 1000)
        return VersionedRecord(
            record: record, stampedAt: HybridTimestamp(physicalMilliseconds: milliseconds, counter: 0, node: server))
    }

    /// Two projects, an issue and a comment on it in the first, and an issue in the second, all pulled.
    fileprivate struct Held {
        let store: LocalStore
        let database: TemporaryDatabase
        let first: Project
        let second: Project
        let issue: Issue
        let otherIssue: Issue
        let sibling: Issue
        let comment: Comment
    }

    fileprivate func held(alsoHoldingSecondProject: Bool = true) async throws -> Held {
        let database = try TemporaryDatabase()
        let store = try LocalStore.open(at: database.path)
        let first = Project(name: "Tower"), second = Project(name: "Depot")
        let issue = Issue(projectID: first.id, title: "Crack")
        let sibling = Issue(projectID: first.id, title: "Leak")
        let otherIssue = Issue(projectID: second.id, title: "Gate")
        let comment = Comment(issueID: issue.id, authorID: UUID(), body: "Seen at noon")
        var changes = [remote(first, version: 1, at: 1_000)]
        if alsoHoldingSecondProject { changes += [remote(second, version: 1, at: 1_000), remote(otherIssue, version: 1, at: 1_100)] }
        changes += [remote(issue, version: 1, at: 1_100), remote(sibling, version: 1, at: 1_100), remote(comment, version: 1, at: 1_200)]
        let report = try await store.applyPulledPage(PulledPage(changes: changes, cursor: "c-1"))
        #expect(report.quarantined == 0)
        return Held(
            store: store, database: database, first: first, second: second, issue: issue, otherIssue: otherIssue, sibling: sibling, comment: comment)
    }

    @Test(arguments: [true, false])
    func aPulledIssueNamingAnotherProjectIsRefused(holdingThatProject: Bool) async throws {
        let held = try await held(alsoHoldingSecondProject: holdingThatProject)
        var moved = held.issue
        moved.projectID = held.second.id
        moved.title = "Crack, moved"
        let report = try await held.store.applyPulledPage(PulledPage(changes: [remote(moved, version: 2, at: 2_000)], cursor: "c-2"))
        #expect(report.quarantined == 1)
        #expect(report.applied == 0)
        let stored = try #require(try held.store.fetch(Issue.self, id: held.issue.id))
        #expect(stored.projectID == held.first.id)
        #expect(stored.title == "Crack")
        #expect(stored.sync.version == 1)
        let quarantined = try held.store.quarantinedRecords()
        #expect(quarantined.map(\.recordID) == [held.issue.id])
        #expect(quarantined.first?.reason.contains("cannot move to another project") == true)
    }

    /// The attack's own path: the device's change of its issue waits, and the server's conflict answer
    /// names another project. The change stays queued and nothing is listed as lost.
    @Test func aConflictAnswerMovingAnIssueWithAChangeWaitingIsRefused() async throws {
        let held = try await held()
        var edited = try #require(try held.store.fetch(Issue.self, id: held.issue.id))
        edited.title = "Crack, wider"
        _ = try await held.store.save(edited)
        var moved = held.issue
        moved.projectID = held.second.id
        let report = try await held.store.merge(
            PulledPage(changes: [remote(moved, version: 4, at: 3_000)], cursor: nil), policy: ConflictPolicy(), now: Date())
        #expect(report.quarantined == 1)
        #expect(report.merged == 0)
        let stored = try #require(try held.store.fetch(Issue.self, id: held.issue.id))
        #expect(stored.projectID == held.first.id)
        #expect(stored.title == "Crack, wider")
        #expect(try held.store.unsentChanges().map(\.recordID) == [held.issue.id])
        #expect(try held.store.openConflicts().isEmpty)
    }

    /// A child moved under a parent of another project moves with it: refused too. Moved under another
    /// parent of its own project, it is the server's word, and taken.
    @Test func aCommentMovesOnlyWithinItsProject() async throws {
        let held = try await held()
        var across = held.comment
        across.issueID = held.otherIssue.id
        var report = try await held.store.applyPulledPage(PulledPage(changes: [remote(across, version: 2, at: 2_000)], cursor: "c-2"))
        #expect(report.quarantined == 1)
        #expect(try held.store.fetch(Comment.self, id: held.comment.id)?.issueID == held.issue.id)

        var within = held.comment
        within.issueID = held.sibling.id
        report = try await held.store.applyPulledPage(PulledPage(changes: [remote(within, version: 3, at: 3_000)], cursor: "c-3"))
        #expect(report.quarantined == 0)
        #expect(report.applied == 1)
        #expect(try held.store.fetch(Comment.self, id: held.comment.id)?.issueID == held.sibling.id)
    }
}

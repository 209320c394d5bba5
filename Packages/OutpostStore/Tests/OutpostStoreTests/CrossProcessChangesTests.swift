@testable import OutpostStore
import Foundation
import OutpostConflicts
import OutpostFieldService
import OutpostFieldServiceTesting
import OutpostModels
import OutpostSchema
import Testing

/// The app and its share extension on one file: what one commits reaches the other's `changes()`.
@Suite(.fieldService) struct CrossProcessChangesTests {
    let now = Date(timeIntervalSince1970: 1_795_000_000)

    /// The changes `stream` yields until `count` came or 60 seconds passed.
    func collect(_ count: Int, from stream: AsyncStream<StoreChange>) async -> [StoreChange] {
        await withTaskGroup(of: [StoreChange].self) { group in
            group.addTask {
                var seen: [StoreChange] = []
                for await change in stream {
                    seen.append(change)
                    if seen.count == count { break }
                }
                return seen
            }
            group.addTask {
                try? await Task.sleep(for: .seconds(60))
                return []
            }
            let first = await group.next() ?? []
            group.cancelAll()
            return first
        }
    }

    @Test func anotherProcesssSaveDeleteAndPullReachThisOnesSubscribers() async throws {
        let folder = try TemporaryDatabase()
        let app = try LocalStore.open(at: folder.path)
        let shareExtension = try LocalStore.open(at: folder.path)
        let changes = app.changes()
        let issue = try await shareExtension.save(Issue(projectID: UUID(), title: "Photo of the leak"), now: now)
        try await shareExtension.delete(.issue, id: issue.id, now: now)
        var pulled = Issue(projectID: UUID(), title: "From the office").record
        pulled.sync.version = 1
        try await shareExtension.applyPulledPage(
            PulledPage(changes: [VersionedRecord(record: pulled, stampedAt: HybridTimestamp(physicalMilliseconds: 1_000, counter: 0, node: NodeID(7)))],
                       cursor: "1"), now: now)
        let seen = await collect(3, from: changes)
        #expect(seen == [
            StoreChange(entity: .issue, recordID: issue.id, operation: .create),
            StoreChange(entity: .issue, recordID: issue.id, operation: .delete),
            StoreChange(entity: .issue, recordID: pulled.id, operation: .update),
        ])
    }

    @Test func aStoresOwnCommitsReachItsSubscribersOnce() async throws {
        let folder = try TemporaryDatabase()
        let app = try LocalStore.open(at: folder.path)
        let other = try LocalStore.open(at: folder.path)
        let changes = app.changes()
        let mine = try await app.save(Issue(projectID: UUID(), title: "Mine"), now: now)
        let theirs = try await other.save(Issue(projectID: UUID(), title: "Theirs"), now: now)
        // The other store's change comes through the journal, after this store's own; its own once.
        let seen = await collect(2, from: changes)
        #expect(seen.map(\.recordID) == [mine.id, theirs.id])
        try await Task.sleep(for: .seconds(1))
        let later = try await app.save(Issue(projectID: UUID(), title: "Later"), now: now)
        #expect(await collect(1, from: changes).map(\.recordID) == [later.id], "nothing repeated in between")
    }

    /// A push's acknowledgement moves the record to the server's version and marks it synced: a screen
    /// showing what is still to sync must hear of it, in this process and in another.
    @Test func anAcknowledgementReachesSubscribersHereAndInAnotherProcess() async throws {
        let folder = try TemporaryDatabase()
        let app = try LocalStore.open(at: folder.path)
        let widget = try LocalStore.open(at: folder.path)
        let issue = try await app.save(Issue(projectID: UUID(), title: "Leak by the window"), now: now)
        let here = app.changes(), there = widget.changes()
        let claimed = try #require(try app.claimMutations(limit: 10, now: now).first)
        try app.acknowledge(claimed, serverVersion: 1, serverID: nil, now: now)
        let expected = [StoreChange(entity: .issue, recordID: issue.id, operation: .update)]
        #expect(await collect(1, from: here) == expected)
        #expect(await collect(1, from: there) == expected)
        #expect(try app.record(.issue, id: issue.id)?.sync.syncStatus == .synced)
    }

    /// A change failing for good marks its record failed, and a retry marks it pending again: both reach
    /// subscribers, here and in another process, so the record's badge follows.
    @Test func aFailureAndItsRetryReachSubscribersHereAndInAnotherProcess() async throws {
        let folder = try TemporaryDatabase()
        let app = try LocalStore.open(at: folder.path)
        let widget = try LocalStore.open(at: folder.path)
        let issue = try await app.save(Issue(projectID: UUID(), title: "Leak by the door"), now: now)
        let here = app.changes(), there = widget.changes()
        let claimed = try #require(try app.claimMutations(limit: 10, now: now).first)
        try app.fail(claimed, reason: "refused")
        #expect(try app.record(.issue, id: issue.id)?.sync.syncStatus == .failed)
        #expect(try app.retryFailedMutations() == 1)
        #expect(try app.record(.issue, id: issue.id)?.sync.syncStatus == .pending)
        let expected = Array(repeating: StoreChange(entity: .issue, recordID: issue.id, operation: .update), count: 2)
        #expect(await collect(2, from: here) == expected)
        #expect(await collect(2, from: there) == expected)
    }
}

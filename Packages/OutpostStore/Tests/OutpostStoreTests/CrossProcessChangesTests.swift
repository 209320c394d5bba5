import Foundation
import OutpostConflicts
import OutpostModels
import Testing
@testable import OutpostStore

/// The app and its share extension on one file: what one commits reaches the other's `changes()`.
@Suite struct CrossProcessChangesTests {
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
}

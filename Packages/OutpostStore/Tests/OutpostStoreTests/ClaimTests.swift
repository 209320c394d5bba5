@testable import OutpostStore
import Foundation
import GRDB
import OutpostFieldService
import OutpostFieldServiceTesting
import OutpostModels
import OutpostSchema
import OutpostTesting
import Testing

/// Two processes of one app (the app and its share extension) on one database: a claim names its
/// owner and expires, and an answer settles a mutation only if it is the one that was sent.
@Suite(.fieldService) struct ClaimTests {
    let now = Date(timeIntervalSince1970: 1_795_000_000)

    @Test func anotherStoreOnTheFileDoesNotTakeBackABatchInFlight() async throws {
        let folder = try TemporaryDatabase()
        let app = try LocalStore.open(at: folder.path)
        let extensionStore = try LocalStore.open(at: folder.path)
        for index in 0..<5 { try await app.save(Issue(projectID: UUID(), title: "Issue \(index)"), now: now) }
        let sent = try app.claimMutations(limit: 10, now: now)
        #expect(sent.count == 5)
        // The extension's engine starts its first run while the app's push is under way.
        #expect(try extensionStore.requeueInFlightMutations(now: now.addingTimeInterval(1)) == 0)
        #expect(try extensionStore.claimMutations(limit: 10, now: now.addingTimeInterval(1)).isEmpty)
        for mutation in sent { try app.acknowledge(mutation, serverVersion: 1, serverID: nil, now: now) }
        #expect(try app.status().pendingChanges == 0)
    }

    @Test func aClaimPastItsLeaseIsTakenByTheNextClaim() async throws {
        let folder = try TemporaryDatabase()
        let first = try LocalStore.open(at: folder.path)
        let second = try LocalStore.open(at: folder.path)
        try await first.save(Issue(projectID: UUID(), title: "Leak"), now: now)
        #expect(try first.claimMutations(limit: 10, now: now, lease: .seconds(60)).count == 1)
        #expect(try second.claimMutations(limit: 10, now: now.addingTimeInterval(30)).isEmpty)
        // The first owner hangs (or was frozen); its lease runs out and the change goes all the same.
        let retaken = try second.claimMutations(limit: 10, now: now.addingTimeInterval(61), lease: .seconds(60))
        #expect(retaken.count == 1)
        // A long-lived engine needs no restart: the first store claims it again once that lease ran out too.
        #expect(try first.claimMutations(limit: 10, now: now.addingTimeInterval(100)).isEmpty)
        #expect(try first.claimMutations(limit: 10, now: now.addingTimeInterval(122)).count == 1)
    }

    @Test func aClaimOfAProcessThatIsGoneIsTakenAtOnce() async throws {
        let folder = try TemporaryDatabase()
        let store = try LocalStore.open(at: folder.path)
        try await store.save(Issue(projectID: UUID(), title: "Leak"), now: now)
        // A process that claimed the change and was killed mid-push.
        let dead = Int(try await SpawnedProgram.run("/bin/true", arguments: []).processIdentifier)
        try await folder.queue.write { db in
            try db.execute(
                sql: "UPDATE mutation_queue SET status = 'inFlight', sent = 1, claimed_by = ?, claim_expires_at = ?",
                arguments: ["\(dead):\(ProcessInfo.processInfo.hostName):killed", now.addingTimeInterval(3_600).storageMilliseconds])
        }
        #expect(try store.requeueInFlightMutations(now: now) == 1)
        #expect(try store.claimMutations(limit: 10, now: now).count == 1)
    }

    @Test func aLateAnswerToAMutationSentAgainUnderANewKeySettlesNothing() async throws {
        let folder = try TemporaryDatabase()
        let store = try LocalStore.open(at: folder.path)
        var issue = try await store.save(Issue(projectID: UUID(), title: "Leak"), now: now)
        let first = try #require(try store.claimMutations(limit: 10, now: now).first)
        try store.acknowledge(first, serverVersion: 1, serverID: nil, now: now)
        issue.title = "Leak under the sink"
        issue = try await store.save(issue, now: now)
        let sent = try #require(try store.claimMutations(limit: 10, now: now).first)
        // The answer is slow; meanwhile the mutation goes again under a new key (here a conflict rebased
        // it; a retry or a new clock stamp re-keys it too).
        try store.rebase(sent, onto: 1)
        #expect(try store.mutations(status: .pending).first?.idempotencyKey != sent.idempotencyKey)
        // The old request's answers arrive late: none may settle the mutation now queued.
        try store.acknowledge(sent, serverVersion: 2, serverID: nil, now: now)
        try store.scheduleRetry(sent, reason: "late", retryAt: now.addingTimeInterval(3_600))
        try store.fail(sent, reason: "late")
        let queued = try #require(try store.mutations().first { $0.sequence == sent.sequence })
        #expect(queued.status == .pending && queued.lastError == nil && queued.nextAttemptAt <= now)
        #expect(try store.fetch(Issue.self, id: issue.id)?.sync.version == 1)
        #expect(try store.fetch(Issue.self, id: issue.id)?.sync.syncStatus == .pending)
    }
}

@testable import OutpostStore
import Foundation
import GRDB
import OutpostConflicts
import OutpostFieldService
import OutpostFieldServiceTesting
import OutpostModels
import OutpostSchema
import Testing

/// A finished mutation (acknowledged, or left nothing to send by a merge) leaves the queue and only its
/// idempotency key stays: kept whole as `done`, it cost every synced record 420 bytes for good (issue 41).
@Suite(.fieldService) struct FinishedMutationsTests {
    let now = Date(timeIntervalSince1970: 1_795_000_000)

    func queueRows(_ folder: TemporaryDatabase) throws -> Int {
        try folder.queue.read { try Int.fetchOne($0, sql: "SELECT count(*) FROM mutation_queue") ?? -1 }
    }

    @Test func anAcknowledgedMutationLeavesTheQueueAndOnlyItsKeyStays() async throws {
        let folder = try TemporaryDatabase()
        let store = try LocalStore.open(at: folder.path)
        var issue = try await store.save(Issue(projectID: UUID(), title: "Leak"), now: now)
        let sent = try #require(try store.claimMutations(limit: 1, now: now).first)
        try store.acknowledge(sent, serverVersion: 1, serverID: nil, now: now)
        #expect(try queueRows(folder) == 0)
        #expect(try store.mutations().isEmpty)
        #expect(try store.finishedMutationKeys() == [sent.idempotencyKey])
        #expect(try store.fetch(Issue.self, id: issue.id)?.sync.syncStatus == .synced)

        // A late copy of the same answer settles it again and changes nothing; a failure for it is ignored.
        try store.acknowledge(sent, serverVersion: 1, serverID: nil, now: now)
        #expect(try store.fail(sent, reason: "a late answer").isEmpty)
        let held = try #require(try store.fetch(Issue.self, id: issue.id))
        #expect(held.sync.syncStatus == .synced && held.sync.version == 1)

        // The next edit is queued on the acknowledged version, under a new key.
        issue = held
        issue.title = "Leak, fixed"
        try await store.save(issue, now: now)
        let next = try #require(try store.mutations().first)
        #expect(next.baseVersion == 1 && next.idempotencyKey != sent.idempotencyKey && next.operation == .update)
        let audit = try store.verifyAudit()
        #expect(audit.isIntact && audit.entriesChecked == 2, "the audit chain keeps both writes")
    }

    @Test func aMutationAMergeLeavesNothingToSendLeavesTheQueue() async throws {
        let folder = try TemporaryDatabase()
        let store = try LocalStore.open(at: folder.path)
        var issue = OutpostModels.Issue(projectID: UUID(), title: "Leak")
        var record = issue.record
        record.sync.version = 1
        let server = NodeID(0xFEED)
        let early = HybridTimestamp(physicalMilliseconds: 1_000, counter: 0, node: server)
        _ = try await store.applyPulledPage(PulledPage(changes: [VersionedRecord(record: record, stampedAt: early)], cursor: "1"), now: now)
        issue = try #require(try store.fetch(OutpostModels.Issue.self, id: issue.id))
        issue.title = "Leak, mine"
        try await store.save(issue, now: now)
        let queued = try #require(try store.mutations().first)
        // The server's title is newer than this device's edit: the edit loses and nothing is left to send.
        record["title"] = .text("Leak, theirs")
        record.sync.version = 2
        let later = HybridTimestamp(physicalMilliseconds: now.storageMilliseconds + 60_000, counter: 0, node: server)
        _ = try await store.applyPulledPage(PulledPage(changes: [VersionedRecord(record: record, stampedAt: later)], cursor: "2"), now: now)
        #expect(try store.fetch(OutpostModels.Issue.self, id: issue.id)?.title == "Leak, theirs")
        #expect(try queueRows(folder) == 0)
        #expect(try store.finishedMutationKeys() == [queued.idempotencyKey])
    }

    /// A file whose queue holds mutations finished before this form (toolkit step 3) keeps their keys,
    /// drops their rows, and leaves every unfinished one as it was.
    @Test func finishedMutationsOfAnOlderFileMoveOutOfTheQueueOnOpen() async throws {
        let folder = try TemporaryDatabase()
        var store: LocalStore? = try LocalStore.open(at: folder.path)
        for title in ["A", "B", "C"] { try await store?.save(Issue(projectID: UUID(), title: title), now: now) }
        let queued = try #require(try store?.mutations())
        store = nil
        // As a file before the step: finished rows stayed in the queue as `done`.
        try await folder.queue.write { db in
            try db.execute(sql: "DROP TABLE finished_mutations")
            try db.execute(sql: "DROP TABLE finished_keys")
            try db.execute(sql: "DELETE FROM outpost_ledger WHERE version >= 3")
            try db.execute(sql: "ALTER TABLE mutation_queue DROP COLUMN unheard")  // step 7's
            try db.execute(sql: "ALTER TABLE conflicts DROP COLUMN kind")  // step 8's
            try db.execute(sql: "UPDATE mutation_queue SET status = 'done' WHERE seq IN (?, ?)", arguments: [queued[0].sequence, queued[2].sequence])
        }
        let reopened = try LocalStore.open(at: folder.path)
        #expect(try reopened.mutations().map(\.idempotencyKey) == [queued[1].idempotencyKey])
        #expect(try reopened.finishedMutationKeys() == [queued[0].idempotencyKey, queued[2].idempotencyKey])
        let audit = try reopened.verifyAudit()
        #expect(audit.isIntact && audit.entriesChecked == 3)
    }

    /// A finished key is kept as its 16 bytes (toolkit step 5), where its text took 47 bytes of every
    /// synced record; the keys a file finished before the step, as text, are still found.
    @Test func finishedKeysAreKeptAsBytesAndOlderTextKeysStillCount() async throws {
        let folder = try TemporaryDatabase()
        let store = try LocalStore.open(at: folder.path)
        try await store.save(Issue(projectID: UUID(), title: "Leak"), now: now)
        let sent = try #require(try store.claimMutations(limit: 1, now: now).first)
        try store.acknowledge(sent, serverVersion: 1, serverID: nil, now: now)
        let stored = try folder.queue.read { db in
            (try Row.fetchAll(db, sql: "SELECT key, typeof(key) AS kind FROM finished_keys"),
             try Int.fetchOne(db, sql: "SELECT count(*) FROM finished_mutations"))
        }
        #expect(stored.0.count == 1 && stored.0.first?["kind"] == "blob" && (stored.0.first?["key"] as Data?)?.count == 16)
        #expect(stored.1 == 0)
        // A key an older build finished, as text.
        let older = UUID()
        try await folder.queue.write { db in
            try db.execute(sql: "INSERT INTO finished_mutations (idempotency_key) VALUES (?)", arguments: [older.uuidString.lowercased()])
        }
        #expect(try store.finishedMutationKeys() == [sent.idempotencyKey, older])
        let finished = try await folder.queue.read { db in
            (try MutationQueue.isFinished(older, in: db), try MutationQueue.isFinished(sent.idempotencyKey, in: db),
             try MutationQueue.isFinished(UUID(), in: db))
        }
        #expect(finished.0 && finished.1 && !finished.2)
        // A late answer to the request finished under the byte key is still told from a stranger's.
        try store.acknowledge(sent, serverVersion: 1, serverID: nil, now: now)
        #expect(try store.fetch(OutpostModels.Issue.self, id: sent.recordID)?.sync.version == 1)
    }
}

@testable import OutpostStore
import Foundation
import GRDB
import OutpostConflicts
import OutpostFieldService
import OutpostFieldServiceTesting
import OutpostModels
import OutpostSchema
import Testing

@Suite(.fieldService) struct LocalStoreTests {
    let project = UUID()
    let member = UUID()

    func counts(_ path: String) throws -> [String: Int] {
        let queue = try DatabaseQueue(path: path)
        defer { try? queue.close() }
        return try queue.read { db in
            var counts: [String: Int] = [:]
            for table in ["issues", "fees", "field_clocks", "mutation_queue", "audit_log"] {
                counts[table] = try Int.fetchOne(db, sql: "SELECT count(*) FROM \(table)")
            }
            return counts
        }
    }

    @Test func aWriteStoresRowClocksMutationAndAuditTogether() async throws {
        let folder = try TemporaryDatabase()
        let store = try LocalStore.open(at: folder.path)
        let issue = try await store.save(Issue(projectID: project, title: "Cracked tile", assigneeID: member))
        #expect(issue.sync.syncStatus == .pending)
        #expect(try store.fetch(Issue.self, id: issue.id) == issue)
        #expect(try counts(folder.path) == ["issues": 1, "fees": 0, "field_clocks": 1, "mutation_queue": 1, "audit_log": 1])

        let mutation = try #require(try store.mutations().first)
        #expect(mutation.operation == .create)
        #expect(mutation.entity == .issue)
        #expect(mutation.fields["title"] == .text("Cracked tile"))
        #expect(Set(mutation.clocks.keys) == Set(EntityType.issue.description.fields.map(\.name)))
        #expect(Set(mutation.dependsOn) == [project, member])
        #expect(mutation.auditSequence == 1)
        #expect(try store.verifyAudit().isIntact)
    }

    @Test func aFailureInAnyPartLeavesNothingWritten() async throws {
        let folder = try TemporaryDatabase()
        let store = try LocalStore.open(at: folder.path)
        try await store.save(Fee(projectID: project, name: "Permit", amountCents: 100))
        // Make the audit insert fail for fees only, as a full disk or a bug would.
        try await folder.queue.write { db in
            try db.execute(sql: """
                CREATE TRIGGER fail_fee_audit BEFORE INSERT ON audit_log WHEN NEW.entity = 'fee'
                BEGIN SELECT RAISE(ABORT, 'injected failure'); END
                """)
        }
        let before = try counts(folder.path)
        await #expect(throws: StoreError.self) {
            try await store.save(Fee(projectID: project, name: "Disposal", amountCents: 250))
        }
        #expect(try counts(folder.path) == before)
        try await store.save(Issue(projectID: project, title: "Still works"))
        #expect(try counts(folder.path)["issues"] == 1)
    }

    @Test func anInvalidRecordIsRefusedWithItsRule() async throws {
        let folder = try TemporaryDatabase()
        let store = try LocalStore.open(at: folder.path)
        do {
            try await store.save(Fee(projectID: project, name: "Permit", amountCents: -5))
            Issue.record("a negative fee was stored")
        } catch {
            #expect(error.code == .invalidRecord)
            #expect(error.modelError?.code == .negativeAmount)
        }
        #expect(try counts(folder.path)["mutation_queue"] == 0)
    }

    @Test func updatesQueueOnlyChangedFieldsAndFoldIntoAPendingMutation() async throws {
        let folder = try TemporaryDatabase()
        let store = try LocalStore.open(at: folder.path)
        var log = try await store.save(DailyLog(projectID: project, authorID: member, day: "2026-11-22", notes: "Rain"))
        log.notes = "Rain, then sun"
        log.hours = 16
        log = try await store.save(log)
        let queued = try store.mutations()
        #expect(queued.count == 1, "the update folds into the unsent create")
        #expect(queued.first?.operation == .create)
        #expect(queued.first?.fields["notes"] == .text("Rain, then sun"))
        #expect(queued.first?.fields["hours"] == .real(16))

        // Once the create is in flight, a further edit is a mutation of its own with only what changed.
        try await folder.queue.write { try $0.execute(sql: "UPDATE mutation_queue SET status = 'inFlight'") }
        log.weather = "Windy"
        try await store.save(log)
        let update = try #require(try store.mutations(status: .pending).first)
        #expect(update.operation == .update)
        #expect(update.fields == ["weather": .text("Windy")])
        #expect(try counts(folder.path)["audit_log"] == 3)
    }

    @Test func deletesAreTombstonesThatSync() async throws {
        let folder = try TemporaryDatabase()
        let store = try LocalStore.open(at: folder.path)
        let issue = try await store.save(Issue(projectID: project, title: "Leak"))
        #expect(try await store.delete(.issue, id: issue.id))
        #expect(try await !store.delete(.issue, id: issue.id))
        let tombstone = try #require(try store.fetch(Issue.self, id: issue.id))
        #expect(tombstone.sync.isDeleted)
        #expect(try store.fetchAll(Issue.self, where: "projectID", equals: .uuid(project)).isEmpty)
        #expect(try store.mutations().map(\.operation) == [.create, .delete])
        #expect(try store.mutations().last?.deletion != nil)
    }

    @Test func readsAreLocalAndScoped() async throws {
        let folder = try TemporaryDatabase()
        let store = try LocalStore.open(at: folder.path)
        let other = UUID()
        // Lists are in creation order (created_at, then id): a millisecond apart, since writes are now fast
        // enough for several to share one, and ties go by the random id.
        let start = Timestamp.now()
        for index in 0..<5 {
            let created = start.addingTimeInterval(Double(index) / 1000)
            try await store.save(Issue(sync: SyncMetadata(createdAt: created), projectID: project, title: "Issue \(index)"))
        }
        try await store.save(Issue(projectID: other, title: "Elsewhere"))
        try await store.save(Asset(projectID: project, name: "Water heater", qrCode: "OUTPOST:ASSET:77"))
        #expect(try store.fetchAll(Issue.self, where: "projectID", equals: .uuid(project)).map(\.title)
            == (0..<5).map { "Issue \($0)" })
        #expect(try store.asset(withQRCode: "OUTPOST:ASSET:77")?.name == "Water heater")
        #expect(try store.asset(withQRCode: "nope") == nil)
        #expect(try store.status().pendingChanges == 7)
    }

    @Test func theClockStaysMonotonicAcrossRestartsAndAWallClockJumpingBack() async throws {
        let folder = try TemporaryDatabase()
        let late = Date(timeIntervalSince1970: 1_800_000_000)
        let issue = try await LocalStore.open(at: folder.path).save(Issue(projectID: project, title: "A"), now: late)
        let reopened = try LocalStore.open(at: folder.path)
        var edited = issue
        edited.title = "B"
        try await folder.queue.write { try $0.execute(sql: "UPDATE mutation_queue SET status = 'done'") }
        try await reopened.save(edited, now: late.addingTimeInterval(-3_600))
        let clocks = try reopened.mutations().map { $0.clocks["title"]! }
        #expect(clocks.count == 2)
        #expect(clocks[1] > clocks[0])
        #expect(clocks[0].node == clocks[1].node)
    }

    /// The file's clock value runs a reserve ahead of the stamps: written when a stamp passes it, and
    /// only by a write that commits, so a restart always resumes after every stamp a committed write holds.
    @Test func theSavedClockCoversEveryCommittedStampAndIsWrittenOncePerReserve() async throws {
        let folder = try TemporaryDatabase()
        let store = try LocalStore.open(at: folder.path)
        let start = Date(timeIntervalSince1970: 1_800_000_000)
        func saved() throws -> HybridTimestamp {
            try HybridTimestamp(encoded: try #require(
                try folder.queue.read { try String.fetchOne($0, sql: "SELECT value FROM sync_state WHERE key = 'clock_last'") }))
        }
        func milliseconds(_ date: Date) -> Int64 { Int64((date.timeIntervalSince1970 * 1000).rounded()) }
        let reserve = StoreWriter.clockReserveMilliseconds

        try await store.save(Fee(projectID: project, name: "Permit", amountCents: 100), now: start)
        #expect(try saved().physicalMilliseconds == milliseconds(start) + reserve)
        // Within the reserve: the saved value already covers the stamp and stays as it was.
        try await store.save(Fee(projectID: project, name: "Skip", amountCents: 100), now: start.addingTimeInterval(0.005))
        #expect(try saved().physicalMilliseconds == milliseconds(start) + reserve)

        // A write that fails saves nothing, and the next one that commits still moves the saved value.
        try await folder.queue.write { db in
            try db.execute(sql: """
                CREATE TRIGGER fail_fee_audit BEFORE INSERT ON audit_log WHEN NEW.entity = 'fee'
                BEGIN SELECT RAISE(ABORT, 'injected failure'); END
                """)
        }
        await #expect(throws: StoreError.self) {
            try await store.save(Fee(projectID: project, name: "Lost", amountCents: 1), now: start.addingTimeInterval(2))
        }
        #expect(try saved().physicalMilliseconds == milliseconds(start) + reserve)
        let later = start.addingTimeInterval(2.1)
        try await store.save(Issue(projectID: project, title: "After the failure"), now: later)
        #expect(try saved().physicalMilliseconds == milliseconds(later) + reserve)

        let stamps = try store.mutations().flatMap { $0.clocks.values }
        let current = try saved()
        #expect(stamps.count == 2 * EntityType.fee.description.fields.count + EntityType.issue.description.fields.count)
        #expect(stamps.allSatisfy { $0 < current })
        // A restart resumes from the saved value: the next stamp follows it even with the same wall time.
        let reopened = try LocalStore.open(at: folder.path)
        let next = try await reopened.save(Issue(projectID: project, title: "Reopened"), now: later)
        let stamp = try #require(try reopened.mutations().first { $0.recordID == next.id }?.clocks["title"])
        #expect(stamp > current)
    }

    /// `.full` reaches the connection that commits: GRDB sets its writer to NORMAL when it opens WAL.
    @Test(arguments: [(LocalStore.SynchronousMode.normal, 1), (.full, 2)])
    func theDurabilityModeIsTheWritersSetting(mode: LocalStore.SynchronousMode, pragma: Int) throws {
        let folder = try TemporaryDatabase()
        let store = try LocalStore.open(at: folder.path, synchronous: mode)
        #expect(try store.write { try Int.fetchOne($0, sql: "PRAGMA synchronous") } == pragma)
    }

    /// With `.full` every commit syncs the WAL, and a WAL that grows instead of starting over adds its
    /// size to each sync: the background checkpoint took writes/s from 0.71× to 0.48× the sqlite3 CLI
    /// (`outpost-bench store`, alternating builds). A full-sync store checkpoints on the writer at
    /// `checkpointPages`, as SQLite's rule did; a normal one leaves that to the background up to
    /// `inlineCheckpointPages` (NORMAL writes/s 0.66–0.70× → 0.77–0.80×).
    @Test(arguments: [
        (LocalStore.SynchronousMode.normal, LocalStore.inlineCheckpointPages), (.full, LocalStore.checkpointPages),
    ])
    func aFullSyncStoreCheckpointsOnTheWriter(mode: LocalStore.SynchronousMode, writerLine: Int) throws {
        let folder = try TemporaryDatabase()
        let store = try LocalStore.open(at: folder.path, synchronous: mode)
        #expect(store.checkpointer.inlinePages == Int32(writerLine))
        #expect(store.checkpointer.backgroundPages == Int32(LocalStore.checkpointPages))
    }

    @Test func observersSeeCommittedChanges() async throws {
        let folder = try TemporaryDatabase()
        let store = try LocalStore.open(at: folder.path)
        let changes = store.changes()
        let issue = try await store.save(Issue(projectID: project, title: "Leak"))
        var iterator = changes.makeAsyncIterator()
        let change = await iterator.next()
        #expect(change == StoreChange(entity: .issue, recordID: issue.id, operation: .create))
    }

    /// The verifier names the first entry that was edited, removed or swapped.
    @Test(arguments: ["edit", "delete", "swap"])
    func theAuditVerifierCatchesTampering(kind: String) async throws {
        let folder = try TemporaryDatabase()
        let store = try LocalStore.open(at: folder.path)
        for index in 0..<6 { try await store.save(Issue(projectID: project, title: "Issue \(index)")) }
        #expect(try store.verifyAudit() == AuditReport(entriesChecked: 6, firstBrokenEntry: nil, problem: nil))
        try await folder.queue.write { db in
            switch kind {
            case "edit":
                // A byte of the stored payload (deflated: the title is not there as text to replace).
                var payload = try #require(try Data.fetchOne(db, sql: "SELECT payload FROM audit_log WHERE seq = 4"))
                payload[payload.endIndex - 2] ^= 0x10
                try db.execute(sql: "UPDATE audit_log SET payload = ? WHERE seq = 4", arguments: [payload])
            case "delete":
                try db.execute(sql: "DELETE FROM audit_log WHERE seq = 4")
            default:
                try db.execute(sql: "UPDATE audit_log SET seq = -4 WHERE seq = 4")
                try db.execute(sql: "UPDATE audit_log SET seq = 4 WHERE seq = 5")
                try db.execute(sql: "UPDATE audit_log SET seq = 5 WHERE seq = -4")
            }
        }
        let report = try store.verifyAudit()
        #expect(!report.isIntact)
        #expect(report.firstBrokenEntry == (kind == "delete" ? 5 : 4), "\(report)")
        #expect(report.entriesChecked == 3)
    }
}

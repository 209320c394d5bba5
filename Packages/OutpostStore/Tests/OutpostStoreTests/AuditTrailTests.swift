@testable import OutpostStore
import Foundation
import GRDB
import OutpostFieldService
import OutpostFieldServiceTesting
import OutpostModels
import OutpostSchema
import OutpostWire
import Testing

/// Entries written before the compact audit form (the whole canonical encoding in `payload`) must keep
/// verifying next to compact ones, and tampering with either form must still be named.
@Suite(.fieldService) struct AuditTrailTests {
    /// Writes `count` entries the way earlier versions did: the full canonical encoding as the payload.
    private func appendFullFormEntries(_ count: Int, to folder: TemporaryDatabase) async throws {
        try await folder.queue.write { db in
            var previous = AuditTrail.genesis
            for seq in Int64(1)...Int64(count) {
                var fields = JSONWriter()
                try fields.fields(["title": .text("Old issue \(seq)"), "projectID": .uuid(UUID())])
                let id = UUID().storageText
                let payload = AuditTrail.canonicalEncoding(
                    seq: seq, at: 1_795_000_000_000 + seq, entity: "issue", recordID: id, operation: "create",
                    fields: fields.data)
                #expect(payload.starts(with: AuditTrail.fullFormPrefix))
                let hash = AuditTrail.chainHash(previous: previous, payload: payload)
                try db.execute(
                    sql: """
                        INSERT INTO audit_log (seq, at, entity, record_id, operation, payload, previous_hash, hash)
                        VALUES (?, ?, 'issue', ?, 'create', ?, ?, ?)
                        """,
                    arguments: [seq, 1_795_000_000_000 + seq, id, payload, previous, hash])
                previous = hash
            }
        }
    }

    @Test func oldFullEntriesAndNewCompactOnesVerifyTogether() async throws {
        let folder = try TemporaryDatabase()
        let store = try LocalStore.open(at: folder.path)
        try await appendFullFormEntries(3, to: folder)
        for index in 0..<3 { try await store.save(Issue(projectID: UUID(), title: "New issue \(index)")) }
        #expect(try store.verifyAudit() == AuditReport(entriesChecked: 6, firstBrokenEntry: nil, problem: nil))
        let compact = try await folder.queue.read { try Data.fetchOne($0, sql: "SELECT payload FROM audit_log WHERE seq = 4") }
        #expect(compact?.starts(with: AuditTrail.fullFormPrefix) == false, "new entries store only their fields")
    }

    @Test(arguments: [2, 5])
    func anEditedColumnIsNamedInEitherForm(seq: Int) async throws {
        let folder = try TemporaryDatabase()
        let store = try LocalStore.open(at: folder.path)
        try await appendFullFormEntries(3, to: folder)
        for index in 0..<3 { try await store.save(Issue(projectID: UUID(), title: "New issue \(index)")) }
        try await folder.queue.write { try $0.execute(sql: "UPDATE audit_log SET operation = 'delete' WHERE seq = ?", arguments: [seq]) }
        let report = try store.verifyAudit()
        #expect(report.firstBrokenEntry == Int64(seq), "\(report)")
        #expect(report.entriesChecked == seq - 1)
    }

    /// A queued write keeps its fields in its own audit entry; a queue row pointed at another record's
    /// entry must not send that record's fields as its own (attack 58, finding 1), and the walk names it.
    @Test func aQueuedWriteReadsOnlyItsOwnEntry() async throws {
        let folder = try TemporaryDatabase()
        let store = try LocalStore.open(at: folder.path)
        let first = Issue(projectID: UUID(), title: "First")
        let second = Issue(projectID: UUID(), title: "Second")
        try await store.save(first)
        try await store.save(second)
        let firstSeq = try await folder.queue.write { db -> Int64 in
            let seq = try #require(try Int64.fetchOne(
                db, sql: "SELECT seq FROM mutation_queue WHERE record_id = ?", arguments: [first.id.storageText]))
            try db.execute(sql: "UPDATE mutation_queue SET audit_seq = 2 WHERE seq = ?", arguments: [seq])
            return seq
        }
        let sent = try store.claimMutations(limit: 10, now: Date())
        #expect(sent.map(\.recordID) == [second.id], "only the second issue's own write goes out")
        #expect(!sent.contains { $0.recordID == first.id && $0.fields["title"] == .text("Second") })
        let status = try await folder.queue.read { db in
            try String.fetchOne(db, sql: "SELECT status FROM mutation_queue WHERE seq = ?", arguments: [firstSeq])
        }
        #expect(status == "failed", "the row that cannot be read is held back, not sent")
        let report = try store.verifyAudit()
        #expect(!report.isIntact, "\(report)")
        #expect(report.brokenMutation == firstSeq, "\(report)")
    }

    /// Removing the newest entries leaves a chain that holds from its start; the head the store keeps
    /// beside it must still name what is gone (attack 58, finding 2).
    @Test(arguments: ["DELETE FROM audit_log WHERE seq = 3", "DELETE FROM audit_log"])
    func removingTheNewestEntriesIsNamed(removal: String) async throws {
        let folder = try TemporaryDatabase()
        let store = try LocalStore.open(at: folder.path)
        for index in 0..<3 { try await store.save(Issue(projectID: UUID(), title: "Issue \(index)")) }
        #expect(try store.verifyAudit().isIntact)
        try await folder.queue.write { try $0.execute(sql: removal) }
        let report = try store.verifyAudit()
        #expect(!report.isIntact, "\(report)")
        #expect(report.problem?.contains("newest") == true, "\(report)")
    }

    /// A store upgraded from before the head was kept takes its head from the chain it has, and an
    /// empty chain's head is the genesis: both verify, and a removal after the upgrade is named.
    @Test func anUpgradedChainIsAnchoredWhereItStood() async throws {
        let folder = try TemporaryDatabase()
        let store = try LocalStore.open(at: folder.path)
        #expect(try store.verifyAudit().isIntact, "an empty chain holds")
        try await appendFullFormEntries(2, to: folder)
        // As an older build left it: entries, and no head.
        try await folder.queue.write { try $0.execute(sql: "DELETE FROM sync_state WHERE key = ?", arguments: [AuditTrail.headKey]) }
        #expect(try !store.verifyAudit().isIntact, "a head gone is named")
        try await folder.queue.write { db in
            try db.execute(sql: ToolkitSchema.auditHeadSQL)
        }
        #expect(try store.verifyAudit().isIntact)
        try await store.save(Issue(projectID: UUID(), title: "After"))
        #expect(try store.verifyAudit() == AuditReport(entriesChecked: 3, firstBrokenEntry: nil, problem: nil))
    }

    /// Saves `count` issues of one project: entry 1 plain, the rest primed against it.
    private func savePrimedIssues(_ count: Int, in folder: TemporaryDatabase) async throws -> (LocalStore, [OutpostModels.Issue]) {
        let store = try LocalStore.open(at: folder.path)
        let project = UUID()
        var issues: [OutpostModels.Issue] = []
        for index in 0..<count {
            let issue = Issue(projectID: project, title: "Issue number \(index) on the east wall")
            try await store.save(issue)
            issues.append(issue)
        }
        return (store, issues)
    }

    @Test func primedEntriesVerifyAndTheQueueSendsTheirFields() async throws {
        let folder = try TemporaryDatabase()
        let (store, issues) = try await savePrimedIssues(5, in: folder)
        let stored = try await folder.queue.read { db in
            try Row.fetchAll(db, sql: "SELECT payload, previous_hash FROM audit_log ORDER BY seq").map {
                (($0[0] as Data).first, ($0[1] as Data).count)
            }
        }
        #expect(stored.map(\.0) == [UInt8(ascii: "{"), 0, 0, 0, 0], "the first entry is plain, the rest primed against it")
        #expect(stored.allSatisfy { $0.1 == 0 }, "the previous hash is the walk's to know")
        #expect(try store.verifyAudit() == AuditReport(entriesChecked: 5, firstBrokenEntry: nil, problem: nil))
        let sent = try store.claimMutations(limit: 10, now: Date())
        #expect(sent.map(\.recordID) == issues.map(\.id))
        #expect(sent.map { $0.fields["title"] } == issues.map { .text($0.title) })
    }

    /// A primed entry edited to inflate far past what it holds (a deflate bomb) is refused while it
    /// inflates, by the walk and by the queue (attack 58, finding 3).
    @Test func aPrimedEntryThatInflatesPastItsBoundIsRefused() async throws {
        let folder = try TemporaryDatabase()
        let (store, _) = try await savePrimedIssues(2, in: folder)
        let reference = try await folder.queue.read { try Data.fetchOne($0, sql: "SELECT payload FROM audit_log WHERE seq = 1") }
        let bomb = Data([0, 1]) + PrimedDeflate.compress(Data(count: 8 << 20), dictionary: try #require(reference))
        try await folder.queue.write { try $0.execute(sql: "UPDATE audit_log SET payload = ? WHERE seq = 2", arguments: [bomb]) }
        let report = try store.verifyAudit()
        #expect(report.firstBrokenEntry == 2 && report.problem?.contains("inflates past") == true, "\(report)")
        let sent = try store.claimMutations(limit: 10, now: Date())
        #expect(sent.count == 1, "the first issue goes; the second is held back")
    }

    /// A primed entry names an earlier plain entry of its own entity, in the fewest bytes; the walk
    /// and the queue read references with one reader and refuse the same edits (attack 58, findings 5, 6).
    @Test(arguments: [
        Data([0, 3]),  // a later entry
        Data([0, 2]),  // itself
        Data([0, 0x81, 0x00]),  // entry 1, spelled in two bytes
        Data([0, 0x80]),  // cut short
    ])
    func aPrimedEntryNamesOnlyAnEarlierPlainReference(header: Data) async throws {
        let folder = try TemporaryDatabase()
        let (store, _) = try await savePrimedIssues(3, in: folder)
        try await folder.queue.write { db in
            let payload = try #require(try Data.fetchOne(db, sql: "SELECT payload FROM audit_log WHERE seq = 2"))
            try db.execute(
                sql: "UPDATE audit_log SET payload = ? WHERE seq = 2", arguments: [header + payload.dropFirst(2)])
        }
        let report = try store.verifyAudit()
        #expect(report.firstBrokenEntry == 2, "\(report)")
        #expect(try store.claimMutations(limit: 10, now: Date()).count == 2)
    }

    /// An entry stored in the full form in place of its primed one hashes the same bytes: the walk
    /// accepts it, so the queue must read it too (attack 58, finding 4).
    @Test func aFullFormInPlaceOfAPrimedEntryIsReadByTheQueue() async throws {
        let folder = try TemporaryDatabase()
        let (store, issues) = try await savePrimedIssues(2, in: folder)
        try await folder.queue.write { db in
            let row = try #require(try Row.fetchOne(db, sql: "SELECT at, payload FROM audit_log WHERE seq = 2"))
            let fields = try AuditTrail.storedFields(seq: 2, entity: "issue", payload: row[1], in: db)
            let full = AuditTrail.canonicalEncoding(
                seq: 2, at: row[0], entity: "issue", recordID: issues[1].id.storageText, operation: "create", fields: fields)
            try db.execute(sql: "UPDATE audit_log SET payload = ? WHERE seq = 2", arguments: [full])
        }
        #expect(try store.verifyAudit().isIntact)
        let sent = try store.claimMutations(limit: 10, now: Date())
        #expect(sent.map { $0.fields["title"] } == issues.map { .text($0.title) })
    }

    /// Columns the store writes as integers and plain text: a time turned into a fraction or a name
    /// with a NUL after it (C readers stop there, so it hashes as before) is named (attack 58, finding 5).
    @Test(arguments: [
        "UPDATE audit_log SET entity = entity || char(0) || 'x' WHERE seq = 2",
        "UPDATE audit_log SET record_id = record_id || char(0) WHERE seq = 2",
        "UPDATE audit_log SET at = CAST(at AS TEXT) || 'ms' WHERE seq = 2",
    ])
    func aColumnInAFormTheStoreNeverWritesIsNamed(edit: String) async throws {
        let folder = try TemporaryDatabase()
        let (store, _) = try await savePrimedIssues(3, in: folder)
        try await folder.queue.write { try $0.execute(sql: edit) }
        #expect(try store.verifyAudit().firstBrokenEntry == 2)
    }

    /// Entries name their record by its 16 bytes (toolkit step 6), 20 fewer than its text, and the
    /// queue still reads each write's fields from its own entry.
    @Test func entriesNameTheirRecordInSixteenBytes() async throws {
        let folder = try TemporaryDatabase()
        let (store, issues) = try await savePrimedIssues(3, in: folder)
        let stored = try await folder.queue.read { db in
            try Row.fetchAll(db, sql: "SELECT typeof(record_id), length(record_id), record_id FROM audit_log ORDER BY seq").map {
                ($0[0] as String, $0[1] as Int, $0[2] as Data)
            }
        }
        #expect(stored.map(\.0) == ["blob", "blob", "blob"] && stored.map(\.1) == [16, 16, 16])
        #expect(stored.map { UUID(storageBytes: $0.2) } == issues.map(\.id))
        #expect(try store.verifyAudit().isIntact)
        let sent = try store.claimMutations(limit: 10, now: Date())
        #expect(sent.map { $0.fields["title"] } == issues.map { .text($0.title) })
    }

    /// Another record's bytes, bytes of another length, or another spelling of the id are edits the
    /// walk names; the id's own text in place of its bytes is the same entry (the hash covers the text).
    @Test(arguments: [
        ("UPDATE audit_log SET record_id = randomblob(16) WHERE seq = 2", true),
        ("UPDATE audit_log SET record_id = substr(record_id, 1, 15) WHERE seq = 2", true),
        ("UPDATE audit_log SET record_id = record_id || X'00' WHERE seq = 2", true),
        ("UPDATE audit_log SET record_id = lower(hex(record_id)) WHERE seq = 2", true),
        ("UPDATE audit_log SET record_id = \(LocalStore.idTextSQL(of: "record_id")) WHERE seq = 2", false),
    ])
    func anEditedRecordIDIsNamed(edit: String, breaks: Bool) async throws {
        let folder = try TemporaryDatabase()
        let (store, _) = try await savePrimedIssues(3, in: folder)
        try await folder.queue.write { try $0.execute(sql: edit) }
        let report = try store.verifyAudit()
        #expect(report.firstBrokenEntry == (breaks ? 2 : nil), "\(report)")
    }

    /// An issue created (acknowledged), resolved (sent, and acknowledged when asked) and opened again
    /// a few milliseconds later: three entries, the last write's mutation a row of its own.
    private func saveThreeWritesOfOneIssue(in folder: TemporaryDatabase, acknowledgingTheSecond: Bool) async throws -> LocalStore {
        let store = try LocalStore.open(at: folder.path)
        var issue = Issue(projectID: UUID(), title: "Leak", status: .open)
        try await store.save(issue)
        for (index, status) in [OutpostModels.Issue.Status.resolved, .open].enumerated() {
            let sent = try store.claimMutations(limit: 10, now: Date())
            #expect(sent.count == 1)
            if index == 0 || acknowledgingTheSecond {
                for mutation in sent { try store.acknowledge(mutation, serverVersion: Int64(index + 1), serverID: nil, now: Date()) }
            }
            try await Task.sleep(for: .milliseconds(5))
            issue = try #require(try store.fetch(Issue.self, id: issue.id))
            issue.status = status
            try await store.save(issue)
        }
        return store
    }

    /// A queued update pointed at an earlier update of its own record (same entity, record and
    /// operation) must not send that write's fields in place of its own (attack 59, finding 1).
    @Test func aQueuedWritePointedAtAnEarlierWriteOfItsRecordIsHeldBack() async throws {
        let folder = try TemporaryDatabase()
        let store = try await saveThreeWritesOfOneIssue(in: folder, acknowledgingTheSecond: false)
        let last = try await folder.queue.write { db -> Int64 in
            let seq = try #require(try Int64.fetchOne(db, sql: "SELECT max(seq) FROM mutation_queue"))
            try db.execute(sql: "UPDATE mutation_queue SET audit_seq = 2 WHERE seq = ?", arguments: [seq])
            return seq
        }
        let report = try store.verifyAudit()
        #expect(report.brokenMutation == last, "\(report)")
        let sent = try store.claimMutations(limit: 10, now: Date().addingTimeInterval(600))
        #expect(!sent.contains { $0.sequence == last }, "held back, not sent with the earlier write's fields")
    }

    /// Queue columns in forms the store never writes (or naming no entry, or another record's) are a
    /// named mismatch, never a crash (attack 59, findings 2 and 3).
    @Test(arguments: [
        "UPDATE mutation_queue SET audit_seq = X'3132' WHERE seq = 2",
        "UPDATE mutation_queue SET audit_seq = NULL WHERE seq = 2",
        "UPDATE mutation_queue SET record_id = upper(record_id) WHERE seq = 2",
    ])
    func aQueueRowThatDoesNotMatchTheChainIsNamed(edit: String) async throws {
        let folder = try TemporaryDatabase()
        let (store, _) = try await savePrimedIssues(3, in: folder)
        try await folder.queue.write { try $0.execute(sql: edit) }
        let report = try store.verifyAudit()
        #expect(report.brokenMutation == 2 && report.firstBrokenEntry == nil, "\(report)")
    }

    /// A queue row written whole with the values its writes recorded holds (a folded edit is one).
    @Test func aWholeRowOfRecordedValuesHolds() async throws {
        let folder = try TemporaryDatabase()
        let (store, issues) = try await savePrimedIssues(2, in: folder)
        try await folder.queue.write { db in
            // Written whole, as a fold writes it: the very values entry 2 recorded.
            let row = try #require(try Row.fetchOne(
                db, sql: "SELECT *, \(MutationQueue.auditFieldsColumn) FROM mutation_queue WHERE seq = 2"))
            let payload = try MutationQueue.Payload.read(row, in: db)
            #expect(payload.fields["title"] == .text(issues[1].title))
            try db.execute(sql: "UPDATE mutation_queue SET payload = ? WHERE seq = 2", arguments: [try payload.encoded()])
        }
        let report = try store.verifyAudit()
        #expect(report.isIntact, "\(report)")
    }

    /// A queue row written whole with a value no write recorded is named (attack 59, finding 7).
    @Test func aWholeRowWithAValueNoWriteRecordedIsNamed() async throws {
        let folder = try TemporaryDatabase()
        let (store, _) = try await savePrimedIssues(2, in: folder)
        try await folder.queue.write { db in
            let row = try #require(try Row.fetchOne(
                db, sql: "SELECT *, \(MutationQueue.auditFieldsColumn) FROM mutation_queue WHERE seq = 2"))
            var payload = try MutationQueue.Payload.read(row, in: db)
            payload.fields["title"] = .text("PWNED")
            try db.execute(sql: "UPDATE mutation_queue SET payload = ? WHERE seq = 2", arguments: [try payload.encoded()])
        }
        let report = try store.verifyAudit()
        #expect(report.brokenMutation == 2 && report.problem?.contains("title") == true, "\(report)")
    }

    /// A change written straight into the queue, with no audit entry, is named: it passed `audit verify`
    /// (the walk read only rows that name an entry) and the next sync sent it as the user's write
    /// (attack 134, F6). A row queued before the file had an audit chain (field-service v1…v4) names
    /// none and is not one: toolkit step 9 noted the last of them.
    @Test func aQueuedChangeWithNoAuditEntryIsNamed() async throws {
        let folder = try TemporaryDatabase()
        let (store, issues) = try await savePrimedIssues(2, in: folder)
        #expect(try store.verifyAudit().isIntact)
        let injected = try await folder.queue.write { db -> Int64 in
            try db.execute(sql: """
                INSERT INTO mutation_queue (idempotency_key, entity, record_id, operation, payload, created_at, base_version)
                VALUES (?, 'issue', ?, 'update', '{"fields":{"title":{"text":"INJECTED"}},"clocks":{}}', 0, 1)
                """, arguments: [UUID().uuidString, issues[0].id.storageText])
            let sequence = db.lastInsertedRowID
            // The row shows what the change sends, as the attack wrote it: nothing else tells the two apart.
            try db.execute(sql: "UPDATE issues SET title = 'INJECTED' WHERE id = ?", arguments: [issues[0].id.storageText])
            return sequence
        }
        let report = try store.verifyAudit()
        #expect(!report.isIntact && report.brokenMutation == injected, "\(report)")
        #expect(report.problem?.contains("names no audit entry") == true, "\(report)")
    }

    /// A file whose queue held changes from before its audit chain (no entry named) when toolkit step 9
    /// ran keeps them unnamed: they are the file's own history, not an edit.
    @Test func changesQueuedBeforeTheChainAreNotNamed() async throws {
        let folder = try TemporaryDatabase()
        _ = try await savePrimedIssues(2, in: folder)
        try await folder.queue.write { db in
            // As an older build left the file: its queue's rows named no entry, and step 9 had not run.
            try db.execute(sql: "UPDATE mutation_queue SET audit_seq = NULL, payload = json_remove(payload, '$.fieldsInAudit')")
            try db.execute(sql: "DELETE FROM outpost_ledger WHERE version >= 9")
            try db.execute(sql: "DELETE FROM sync_state WHERE key = ?", arguments: [AuditTrail.queuedBeforeChainKey])
        }
        let reopened = try LocalStore.open(at: folder.path)
        let report = try reopened.verifyAudit()
        #expect(report.brokenMutation == nil, "\(report)")
    }

    /// A primed payload stored as text reads the same in the walk and in the queue (attack 59, finding 4).
    @Test func aPrimedPayloadStoredAsTextReadsTheSameEverywhere() async throws {
        let folder = try TemporaryDatabase()
        let (store, issues) = try await savePrimedIssues(3, in: folder)
        try await folder.queue.write { try $0.execute(sql: "UPDATE audit_log SET payload = CAST(payload AS TEXT) WHERE seq = 2") }
        #expect(try store.verifyAudit().isIntact)
        let sent = try store.claimMutations(limit: 10, now: Date())
        #expect(sent.map { $0.fields["title"] } == issues.map { .text($0.title) })
    }

    /// Entries cut from the end with the head and step 4's ledger row (and the later steps'): step 4 runs again on open, and
    /// must not anchor the shortened chain (attack 59, finding 8).
    @Test func stepFourRunAgainDoesNotAnchorAShortenedChain() async throws {
        let folder = try TemporaryDatabase()
        _ = try await savePrimedIssues(3, in: folder)
        try await folder.queue.write { db in
            try db.execute(sql: "DELETE FROM audit_log WHERE seq = 3")
            try db.execute(sql: "DELETE FROM mutation_queue WHERE audit_seq = 3")
            try db.execute(sql: "DELETE FROM sync_state WHERE key = ?", arguments: [AuditTrail.headKey])
            // Step 4 and the steps after it, undone, so the file looks as step 4 found it.
            try db.execute(sql: "DELETE FROM outpost_ledger WHERE version >= 4")
            try db.execute(sql: "DROP TABLE finished_keys")
            try db.execute(sql: "ALTER TABLE mutation_queue DROP COLUMN unheard")  // step 7's
            try db.execute(sql: "ALTER TABLE conflicts DROP COLUMN kind")  // step 8's
        }
        let reopened = try LocalStore.open(at: folder.path)
        #expect(try !reopened.verifyAudit().isIntact)
    }

    /// The newest row of a record that waits to go sends what the device holds: a row pointed at an
    /// earlier write with its time matched, or written whole with flags that exempt values from the
    /// chain, or with no entry named, is still named (attack 59b, findings 10 and 11).
    @Test(arguments: ["earlier entry, same time", "resent flag", "no entry"])
    func theNewestQueuedRowSendsWhatTheRecordHolds(edit: String) async throws {
        let folder = try TemporaryDatabase()
        let store = try await saveThreeWritesOfOneIssue(in: folder, acknowledgingTheSecond: true)
        #expect(try store.verifyAudit().isIntact)
        try await folder.queue.write { db in
            let seq = try #require(try Int64.fetchOne(db, sql: "SELECT max(seq) FROM mutation_queue"))
            switch edit {
            case "earlier entry, same time":
                try db.execute(
                    sql: "UPDATE mutation_queue SET audit_seq = 2, created_at = (SELECT at FROM audit_log WHERE seq = 2) WHERE seq = ?",
                    arguments: [seq])
            default:
                let row = try #require(try Row.fetchOne(
                    db, sql: "SELECT *, \(MutationQueue.auditFieldsColumn) FROM mutation_queue WHERE seq = ?", arguments: [seq]))
                var payload = try MutationQueue.Payload.read(row, in: db)
                payload.fields["title"] = .text("PWNED")
                payload.resent = edit == "resent flag"
                try db.execute(
                    sql: "UPDATE mutation_queue SET payload = ?, audit_seq = ? WHERE seq = ?",
                    arguments: [try payload.encoded(), edit == "no entry" ? nil : 3, seq])
            }
        }
        let report = try store.verifyAudit()
        #expect(report.brokenMutation != nil, "\(report)")
    }
}

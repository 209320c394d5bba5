@testable import OutpostStore
import Foundation
import GRDB
import OutpostFieldService
import OutpostFieldServiceTesting
import OutpostModels
import OutpostSchema
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
}

@testable import OutpostStore
import Foundation
import GRDB
import OutpostFieldService
import OutpostFieldServiceTesting
import OutpostModels
import OutpostSchema
import Testing

/// A `StoreError` keeps the error that caused it as a value, not only as text.
@Suite(.fieldService) struct StoreErrorCauseTests {
    @Test func aStoreThatCannotOpenItsFileKeepsSQLitesError() throws {
        // A path inside a regular file: SQLite cannot open it, whoever runs the test (root included).
        let folder = try TemporaryDatabase()
        let notAFolder = folder.directory.appendingPathComponent("plain-file")
        try Data("not a folder".utf8).write(to: notAFolder)
        let path = notAFolder.appendingPathComponent("store.sqlite").path
        let error = try #require(throws: StoreError.self) { try LocalStore.open(at: path) }
        #expect(error.code == .databaseFailure)
        let cause = try #require(error.underlying as? DatabaseError, "the cause is \(String(describing: error.underlying))")
        #expect(cause.resultCode == .SQLITE_CANTOPEN)
        #expect(error.message == "\(cause)", "the message keeps the cause's text")
    }

    @Test func aWriteSQLiteRefusesKeepsSQLitesError() async throws {
        let folder = try TemporaryDatabase()
        let store = try LocalStore.open(at: folder.path)
        try await folder.queue.write { db in
            try db.execute(sql: """
                CREATE TRIGGER fail_fee_audit BEFORE INSERT ON audit_log WHEN NEW.entity = 'fee'
                BEGIN SELECT RAISE(ABORT, 'injected failure'); END
                """)
        }
        let error = try await #require(throws: StoreError.self) {
            try await store.save(Fee(projectID: UUID(), name: "Disposal", amountCents: 250))
        }
        #expect(error.code == .databaseFailure)
        let cause = try #require(error.underlying as? DatabaseError, "the cause is \(String(describing: error.underlying))")
        #expect(cause.message == "injected failure")
    }
}

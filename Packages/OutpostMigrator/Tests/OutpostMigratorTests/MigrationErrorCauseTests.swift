import Foundation
import GRDB
import Testing
@testable import OutpostMigrator

/// A `MigrationError` keeps the error that caused it as a value, not only as text.
@Suite struct MigrationErrorCauseTests {
    @Test func aStepSQLiteRefusesKeepsSQLitesError() throws {
        let database = try TemporaryDatabase()
        let broken = Migrator(steps: [CrewSchema.v1, MigrationStep(version: 2, name: "typo", sql: """
            ALTER TABLE jobz ADD COLUMN priority INTEGER;
            """)])
        let error = try #require(throws: MigrationError.self) { try broken.migrate(database.queue) }
        #expect(error.code == .stepFailed)
        let cause = try #require(error.underlying as? DatabaseError, "the cause is \(String(describing: error.underlying))")
        #expect(cause.resultCode == .SQLITE_ERROR)
        #expect(error.message == "\(cause)", "the message keeps the cause's text")
    }
}

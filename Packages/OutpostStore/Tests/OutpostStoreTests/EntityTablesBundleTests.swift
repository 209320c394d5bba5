@testable import OutpostStore
import Foundation
import GRDB
import OutpostFieldService
import OutpostFieldServiceTesting
import OutpostModels
import OutpostSchema
import Testing

/// The small reads the bundle importer needs from `EntityTables`.
@Suite(.fieldService) struct EntityTablesBundleTests {
    @Test func containsRecordSeesRowsAndTombstonesOfItsOwnTableOnly() throws {
        let database = try TemporaryDatabase()
        try LocalSchema.migrator.migrate(database.queue)
        let issue = Issue(projectID: UUID(), title: "Cracked tile").record
        let tombstone = Issue(projectID: UUID(), title: "Gone").record
        try database.queue.write { db in
            try EntityTables.save(issue, in: db)
            var deleted = tombstone
            deleted.sync.deletedAt = Date(timeIntervalSince1970: 1_800_000_000)
            try EntityTables.save(deleted, in: db)
        }
        let found = try database.queue.read { db in
            [
                try EntityTables.containsRecord(.issue, id: issue.id, in: db),
                try EntityTables.containsRecord(.issue, id: tombstone.id, in: db),
                try EntityTables.containsRecord(.issue, id: UUID(), in: db),
                try EntityTables.containsRecord(.comment, id: tombstone.id, in: db),
            ]
        }
        #expect(found == [true, true, false, false])
    }
}

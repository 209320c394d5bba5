import Foundation
import GRDB
import OutpostMigrationTesting
import OutpostMigrator
import Testing

/// The path tests a team runs on its own steps: every shipped version upgraded with edge-case rows keeps
/// every value, and a shipped step edited or a value lost fails naming where.
@Suite struct MigrationPathCheckTests {
    /// A team's three steps: jobs, notes that reference a job with a CHECK list, then a column added.
    static let steps = [
        MigrationStep(version: 1, name: "jobs", sql: """
            CREATE TABLE jobs (id TEXT PRIMARY KEY NOT NULL, title TEXT NOT NULL, hours REAL, photo BLOB) WITHOUT ROWID;
            """),
        MigrationStep(version: 2, name: "notes", sql: """
            CREATE TABLE notes (
                id TEXT PRIMARY KEY NOT NULL, job_id TEXT NOT NULL REFERENCES jobs(id),
                kind TEXT NOT NULL CHECK (kind IN ('text', 'voice')), body TEXT, position INTEGER NOT NULL DEFAULT 0
            ) WITHOUT ROWID;
            """),
        MigrationStep(version: 3, name: "a job's status", sql: """
            ALTER TABLE jobs ADD COLUMN status TEXT NOT NULL DEFAULT 'open';
            """),
    ]

    func checksums() throws -> (URL, () -> Void) {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("paths-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        return (folder.appendingPathComponent("steps.txt"), { try? FileManager.default.removeItem(at: folder) })
    }

    @Test func aTeamsStepsPassAndTheirChecksumsAreRecordedOnce() throws {
        let (file, remove) = try checksums()
        defer { remove() }
        let check = MigrationPathCheck(migrator: Migrator(steps: Self.steps), checksums: file)
        // The first run records the steps and says to commit the file; the second passes.
        #expect(throws: MigrationPathFailure.self) { try check.run() }
        #expect(try String(contentsOf: file, encoding: .utf8).split(separator: "\n").count == 3)
        try check.run()
    }

    @Test func anEditedShippedStepFailsNamingIt() throws {
        let (file, remove) = try checksums()
        defer { remove() }
        _ = try? MigrationPathCheck(migrator: Migrator(steps: Self.steps), checksums: file).run()
        var edited = Self.steps
        let sql = try #require(edited[1].sql)
        edited[1] = MigrationStep(version: 2, name: "notes", sql: sql.replacingOccurrences(of: "'voice'", with: "'voice', 'video'"))
        let error = try #require(throws: MigrationPathFailure.self) {
            try MigrationPathCheck(migrator: Migrator(steps: edited), checksums: file).run()
        }
        #expect(error.problems.contains { $0.contains("step 2 ('notes') was edited") }, "\(error)")
    }

    @Test func aStepThatChangesOldValuesFailsNamingTheTableAndColumn() throws {
        let (file, remove) = try checksums()
        defer { remove() }
        // Allowed by the migrator (a backfill), but it overwrites what users wrote.
        let lossy = Self.steps + [MigrationStep(version: 4, name: "tidy titles", sql: "UPDATE jobs SET title = trim(title);")]
        _ = try? MigrationPathCheck(migrator: Migrator(steps: lossy), checksums: file).run()
        let error = try #require(throws: MigrationPathFailure.self) {
            try MigrationPathCheck(migrator: Migrator(steps: lossy), checksums: file).run()
        }
        #expect(error.problems.contains { $0.contains("jobs row") && $0.contains(", title:") }, "\(error)")
    }

    /// A CHECK list is the named column's own: `status` does not take `sync_status`'s values.
    @Test func eachColumnGetsItsOwnCheckList() throws {
        let (file, remove) = try checksums()
        defer { remove() }
        let steps = [
            MigrationStep(version: 1, name: "tasks", sql: """
                CREATE TABLE tasks (
                    id TEXT PRIMARY KEY NOT NULL, sync_status TEXT NOT NULL CHECK (sync_status IN ('pending', 'synced')),
                    status TEXT NOT NULL CHECK (status IN ('open', 'done'))
                ) WITHOUT ROWID;
                """),
            MigrationStep(version: 2, name: "a note", sql: "ALTER TABLE tasks ADD COLUMN note TEXT;"),
        ]
        _ = try? MigrationPathCheck(migrator: Migrator(steps: steps), checksums: file).run()
        try MigrationPathCheck(migrator: Migrator(steps: steps), checksums: file).run()
    }

    /// A nullable reference is sometimes NULL: a step that touches only those rows is seen.
    @Test func rowsWithoutAParentAreFilledAndChecked() throws {
        let (file, remove) = try checksums()
        defer { remove() }
        let steps = [
            Self.steps[0],
            MigrationStep(version: 2, name: "notes", sql: """
                CREATE TABLE notes (id TEXT PRIMARY KEY NOT NULL, job_id TEXT REFERENCES jobs(id), body TEXT) WITHOUT ROWID;
                """),
            MigrationStep(version: 3, name: "orphans tidied", sql: "UPDATE notes SET body = 'orphan' WHERE job_id IS NULL;"),
        ]
        _ = try? MigrationPathCheck(migrator: Migrator(steps: steps), checksums: file).run()
        let error = try #require(throws: MigrationPathFailure.self) {
            try MigrationPathCheck(migrator: Migrator(steps: steps), checksums: file).run()
        }
        #expect(error.problems.contains { $0.contains("notes row") && $0.contains(", body:") }, "\(error)")
    }
}

import Foundation
import GRDB
import OutpostFieldService
import OutpostFieldServiceTesting
import OutpostStore
import OutpostTesting
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `outpost migrate` and `outpost info`, run as a user would, including being killed mid-migration.
@Suite(.fieldService) struct MigrationCommandTests {
    @Test func migrateCreatesAndUpgradesAndInfoDescribes() async throws {
        let folder = try TemporaryFolder()
        let path = folder.file("field.sqlite")
        let first = try await Outpost.run(["migrate", "--db", path, "--to", "2"])
        #expect(first.status == 0)
        #expect(first.output.split(separator: "\n").first == "v0 -> v2")
        let second = try await Outpost.run(["migrate", "--db", path])
        let latest = LocalSchema.latestVersion
        #expect(second.output.split(separator: "\n").first == "v2 -> v\(latest)")
        #expect(try await Outpost.run(["migrate", "--db", path]).output == "v\(latest) -> v\(latest)\n")

        let info = try await Outpost.run(["info", "--db", path, "--json"])
        #expect(info.status == 0)
        let summary = try JSONDecoder().decode(DatabaseSummary.self, from: Data(info.output.utf8))
        #expect(summary.schemaVersion == latest)
        #expect(summary.steps.map(\.version) == Array(1...latest))
        #expect(summary.tables["issues"] == 0)
        #expect(summary.tables.count > 20)
        let json = try JSONSerialization.jsonObject(with: Data(info.output.utf8)) as? [String: Any]
        #expect(json?["schemaVersion"] is Int)

        let text = try await Outpost.run(["info", "--db", path])
        #expect(text.output.contains("schema version: v\(latest)"))
        let schema = try await Outpost.run(["info", "--db", path, "--schema"])
        #expect(schema.output.hasPrefix("CREATE TABLE assets"))
    }

    @Test func aNewerDatabaseIsRefusedAndLeftUntouched() async throws {
        let folder = try TemporaryFolder()
        let path = folder.file("newer.sqlite")
        try LocalDatabase.migrate(at: path)
        let queue = try DatabaseQueue(path: path)
        try await queue.write { db in
            try db.execute(
                sql: "INSERT INTO migrator_ledger VALUES (?, 'from the future', 'abc', '2027-01-01')",
                arguments: [LocalSchema.latestVersion + 1])
        }
        try queue.close()
        let bytes = try Data(contentsOf: URL(fileURLWithPath: path))

        let result = try await Outpost.run(["migrate", "--db", path])
        #expect(result.status != 0)
        #expect(result.errorOutput.contains("version \(LocalSchema.latestVersion + 1)"))
        #expect(result.errorOutput.contains("databaseNewerThanCode"))
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == bytes)
    }

    @Test func infoOnAMissingFileFailsAndCreatesNothing() async throws {
        let folder = try TemporaryFolder()
        let path = folder.file("missing.sqlite")
        let result = try await Outpost.run(["info", "--db", path])
        #expect(result.status != 0)
        #expect(result.errorOutput.contains("no database file"))
        #expect(!FileManager.default.fileExists(atPath: path))
    }

    /// SIGKILL `outpost migrate` at seeded random moments during a large backfill; after every kill the
    /// database is intact at some completed version, and a later run finishes the job.
    @Test func aKilledMigrationLeavesACompletedVersionAndTheNextRunFinishes() async throws {
        let folder = try TemporaryFolder()
        let path = folder.file("big.sqlite")
        let rows = 150_000
        try LocalDatabase.migrate(at: path, to: 1)
        let queue = try DatabaseQueue(path: path)
        try await queue.write { db in
            try db.execute(sql: """
                WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?)
                INSERT INTO daily_logs (id, created_at, updated_at, project_id, author_id, day, notes, crew, hours)
                SELECT printf('log-%08d', i), i, i, 'p1', 'm1', '2026-01-01', 'notes ' || i,
                       CASE i % 3 WHEN 0 THEN '' WHEN 1 THEN 'Ana' ELSE 'Ana, Bo, Chidi' END, 8 FROM n
                """, arguments: [rows])
        }
        try queue.close()

        var random = SeededGenerator(seed: 7)
        var versionsSeen: Set<Int> = []
        for attempt in 0..<12 {
            let process = try Outpost.start(["migrate", "--db", path])
            // Slept and killed on a thread of its own: a task's sleep resumes late on a busy machine, and
            // the migration would be over before its kill.
            let pause = UInt32.random(in: 20_000...700_000, using: &random)
            await offThePool {
                usleep(pause)
                kill(process.processIdentifier, SIGKILL)
            }
            await ChildProcess.waitUntilExit(process)
            let summary = try LocalDatabase.inspect(at: path)
            versionsSeen.insert(summary.schemaVersion)
            #expect(summary.tables["daily_logs"] == rows, "attempt \(attempt): rows lost")
            let check = try DatabaseQueue(path: path)
            #expect(try await check.read { try String.fetchAll($0, sql: "PRAGMA integrity_check") } == ["ok"])
            try check.close()
        }
        let finish = try await Outpost.run(["migrate", "--db", path])
        #expect(finish.status == 0)
        #expect(finish.output.contains("-> v\(LocalSchema.latestVersion)\n"))
        let done = try DatabaseQueue(path: path)
        let wrongSizes = try await done.read { db in
            try Int.fetchOne(db, sql: """
                SELECT count(*) FROM daily_logs WHERE crew_size != CASE crew WHEN '' THEN 0 WHEN 'Ana' THEN 1 ELSE 3 END
                """)
        }
        #expect(wrongSizes == 0)
        #expect(try await done.read { try String.fetchAll($0, sql: "PRAGMA integrity_check") } == ["ok"])
        // The kills must have interrupted the migration at least once, or this test proved nothing.
        #expect(versionsSeen.contains { $0 < LocalSchema.latestVersion }, "versions seen after kills: \(versionsSeen.sorted())")
    }
}

/// A temporary folder removed when the value goes away.
final class TemporaryFolder: Sendable {
    let url: URL
    init() throws {
        url = FileManager.default.temporaryDirectory.appendingPathComponent("outpost-workspace-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }
    func file(_ name: String) -> String { url.appendingPathComponent(name).path }
    deinit { try? FileManager.default.removeItem(at: url) }
}


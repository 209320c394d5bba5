import Foundation
import GRDB
import OutpostFieldService
import OutpostStore
import OutpostTesting

#if canImport(Glibc)
import Glibc
#endif

/// Scenario `crash-migrate`: a device database of an old schema version (v1, the field app 1.0, or a
/// later one, seeded), filled with tens of thousands of rows, upgraded by `outpost migrate` that is
/// SIGKILLed after a seeded delay within the time a clean upgrade takes (the shortest seen so far in the
/// seed), and restarted until a run
/// finishes by itself. After every kill the file passes `integrity_check`, is at a completed version,
/// and every row it started with still holds its original values. At the end the file holds exactly
/// what a clean upgrade of the same file gives (every table's rows), the same ledger, and a schema
/// equal to that of a fresh database.
enum CrashMigrateScenario {
    static let scenario = Scenario(
        name: "crash-migrate",
        summary: "outpost migrate of a populated old store SIGKILLed at seeded moments, restarted until done",
        quickSeeds: 1, fullSeeds: 3
    ) { seed, quick in await run(seed: seed, quick: quick) }

    /// The v1 tables and the columns v1 gave them: what must survive every step untouched.
    static let versionOneColumns: [(table: String, columns: String)] = [
        ("projects", "id, server_id, version, created_at, updated_at, deleted_at, sync_status, name, number, address, status"),
        ("members", "id, server_id, version, created_at, updated_at, deleted_at, sync_status, project_id, user_id, name, email, role"),
        ("issues", "id, server_id, version, created_at, updated_at, deleted_at, sync_status, project_id, title, description, status, priority, assignee_id, latitude, longitude"),
        ("daily_logs", "id, server_id, version, created_at, updated_at, deleted_at, sync_status, project_id, author_id, day, notes, weather, crew, hours"),
        ("comments", "id, server_id, version, created_at, updated_at, deleted_at, sync_status, issue_id, author_id, body"),
        ("time_entries", "id, server_id, version, created_at, updated_at, deleted_at, sync_status, project_id, member_id, kind, recorded_at, clock_in_id, latitude, longitude, note"),
        ("mutation_queue", "seq, idempotency_key, entity, record_id, operation, payload, status, attempts, created_at"),
        ("sync_state", "key, value"),
    ]

    static func run(seed: UInt64, quick: Bool) async -> SeedOutcome {
        await SeedOutcome.inScratchFolder("crash-migrate") { folder, outcome in
            try await run(seed: seed, quick: quick, folder: folder, outcome: &outcome)
        }
    }

    private static func run(seed: UInt64, quick: Bool, folder: ScratchFolder, outcome: inout SeedOutcome) async throws {
        var random = SeededGenerator(seed: seed ^ 0x316A_7E00)
        let latest = LocalSchema.latestVersion
        // Mostly v1, sometimes a later old version, so each step meets a kill now and then.
        let startVersion = random.chance(0.6) ? 1 : 1 + random.below(max(latest - 1, 1))
        let base = folder.path("base.sqlite")
        let rows = try populate(base, rows: quick ? 4_000 : 30_000, random: &random)
        if startVersion > 1 { _ = try LocalDatabase.migrate(at: base, to: startVersion) }
        let original = try versionOneContent(base)

        // The clean upgrade of the same file, and how long it takes here as a child process.
        let reference = folder.path("reference.sqlite")
        try copyDatabase(base, to: reference)
        let started = ContinuousClock.now
        let cleanChild = try Child(["migrate", "--db", reference])
        let clean = await cleanChild.exit()
        var window = max(Int((ContinuousClock.now - started).seconds * 1000), 20)
        guard !clean.signaled, clean.status == 0 else {
            outcome.crashes += 1
            outcome.problems.append("a clean outpost migrate from v\(startVersion) ended with \(clean)")
            return
        }
        let expected = try contentWithoutLedger(reference)
        let expectedSteps = try LocalDatabase.inspect(at: reference).steps
        let fresh = folder.path("fresh.sqlite")
        _ = try LocalDatabase.migrate(at: fresh)
        let freshSchema = try LocalDatabase.schemaSQL(at: fresh)

        let target = folder.path("device.sqlite")
        let rounds = quick ? 4 : 10
        for round in 0..<rounds {
            try copyDatabase(base, to: target)
            outcome.mutations += rows
            var finished = false
            var attempt = 0
            while !finished {
                attempt += 1
                let last = attempt >= 40
                // A seed whose kills all came too late so far aims at the first half of the upgrade in
                // its last round: a seed that killed nothing has tested nothing.
                let delay = outcome.kills == 0 && round == rounds - 1
                    ? random.below(max(window / 2, 1)) : random.below(window + window / 4)
                let attemptStarted = ContinuousClock.now
                let child = try Child(["migrate", "--db", target])
                if !last {
                    try await Task.sleep(for: .milliseconds(delay))
                    if child.isRunning { child.kill() }
                }
                let exit = await child.exit()
                let what = "round \(round) attempt \(attempt) (from v\(startVersion), killed after \(delay) ms)"
                if exit.signaled, exit.status == SIGKILL {
                    outcome.kills += 1
                } else if exit.signaled || exit.status != 0 {
                    outcome.crashes += 1
                    outcome.problems.append("\(what): outpost migrate ended with \(exit)")
                    return
                } else {
                    finished = true
                    // A whole upgrade that outran its kill shows how long one takes now. The clean run
                    // may have been timed on a busier machine, and delays past the end kill nothing.
                    if attempt == 1 {
                        window = max(min(window, Int((ContinuousClock.now - attemptStarted).seconds * 1000)), 20)
                    }
                }
                let integrity = try integrityCheck(target)
                if integrity != "ok" {
                    outcome.corrupt += 1
                    outcome.problems.append("\(what): integrity_check: \(integrity)")
                }
                let version = try LocalDatabase.inspect(at: target).schemaVersion
                if !(startVersion...latest).contains(version) {
                    outcome.diverged += 1
                    outcome.problems.append("\(what): the file says v\(version)")
                }
                if try versionOneContent(target) != original {
                    outcome.lost += 1
                    outcome.problems.append("\(what): rows of the v1 tables changed or went missing")
                }
            }
            let summary = try LocalDatabase.inspect(at: target)
            if summary.schemaVersion != latest || summary.steps != expectedSteps {
                outcome.diverged += 1
                outcome.problems.append("round \(round): ended at v\(summary.schemaVersion) with steps \(summary.steps.map(\.version))")
            }
            if try LocalDatabase.schemaSQL(at: target) != freshSchema {
                outcome.diverged += 1
                outcome.problems.append("round \(round): the upgraded schema differs from a fresh database's")
            }
            if try contentWithoutLedger(target) != expected {
                outcome.diverged += 1
                outcome.problems.append("round \(round): the upgraded rows differ from a clean upgrade's")
            }
        }
    }

    /// Creates a v1 database at `path` holding `rows` issues and as many daily logs, plus projects,
    /// members, comments, time entries, queued mutations and a pull cursor; returns the rows written.
    static func populate(_ path: String, rows: Int, random: inout SeededGenerator) throws -> Int {
        _ = try LocalDatabase.migrate(at: path, to: 1)
        let salt = Int(random.below(1_000_000))
        let queue = try DatabaseQueue(path: path)
        defer { try? queue.close() }
        try queue.write { db in
            let sequence = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?)"
            try db.execute(
                sql: """
                    \(sequence) INSERT INTO projects (id, created_at, updated_at, name, number, address, status)
                    SELECT printf('proj-%04d', i), i, i, 'Project ' || i, CASE i % 2 WHEN 0 THEN NULL ELSE 'P-' || i END,
                           i || ' Main Street', 'active' FROM n
                    """, arguments: [20])
            try db.execute(
                sql: """
                    \(sequence) INSERT INTO members (id, created_at, updated_at, project_id, user_id, name, email, role)
                    SELECT printf('member-%04d', i), i, i, printf('proj-%04d', i % 20 + 1), printf('user-%04d', i),
                           'Member ' || i, 'm' || i || '@example.com', 'crew' FROM n
                    """, arguments: [100])
            try db.execute(
                sql: """
                    \(sequence) INSERT INTO issues (id, server_id, version, created_at, updated_at, deleted_at, sync_status,
                                        project_id, title, description, status, priority, assignee_id, latitude, longitude)
                    SELECT printf('issue-%08d', i), CASE i % 3 WHEN 0 THEN NULL ELSE 'srv-' || i END, i % 4, i, i + ?,
                           CASE i % 50 WHEN 0 THEN i + 7 ELSE NULL END, CASE i % 5 WHEN 0 THEN 'pending' ELSE 'synced' END,
                           printf('proj-%04d', i % 20 + 1), 'Issue ' || i || ' ' || ?, 'Description of ' || i,
                           CASE i % 4 WHEN 0 THEN 'open' WHEN 1 THEN 'in_progress' WHEN 2 THEN 'resolved' ELSE 'closed' END,
                           CASE i % 3 WHEN 0 THEN 'low' WHEN 1 THEN 'medium' ELSE 'high' END,
                           CASE i % 7 WHEN 0 THEN NULL ELSE printf('member-%04d', i % 100 + 1) END,
                           CASE i % 2 WHEN 0 THEN NULL ELSE 45.0 + i / 100000.0 END,
                           CASE i % 2 WHEN 0 THEN NULL ELSE -73.0 - i / 100000.0 END FROM n
                    """, arguments: [rows, salt, salt])
            try db.execute(
                sql: """
                    \(sequence) INSERT INTO daily_logs (id, created_at, updated_at, project_id, author_id, day, notes, weather, crew, hours)
                    SELECT printf('log-%08d', i), i, i, printf('proj-%04d', i % 20 + 1), printf('member-%04d', i % 100 + 1),
                           printf('2026-%02d-%02d', i % 12 + 1, i % 28 + 1), 'Notes ' || i || ' ' || ?, 'Sunny',
                           CASE i % 4 WHEN 0 THEN '' WHEN 1 THEN 'Ana' WHEN 2 THEN 'Ana, Bo' ELSE ' Ana, Bo,Chidi ' END,
                           (i % 16) / 2.0 FROM n
                    """, arguments: [rows, salt])
            try db.execute(
                sql: """
                    \(sequence) INSERT INTO comments (id, created_at, updated_at, issue_id, author_id, body)
                    SELECT printf('comment-%08d', i), i, i, printf('issue-%08d', i % ? + 1), printf('member-%04d', i % 100 + 1),
                           'Comment ' || i FROM n
                    """, arguments: [rows / 4, rows])
            try db.execute(
                sql: """
                    \(sequence) INSERT INTO time_entries (id, created_at, updated_at, project_id, member_id, kind, recorded_at,
                                              clock_in_id, note)
                    SELECT printf('time-%08d', i), i, i, printf('proj-%04d', i % 20 + 1), printf('member-%04d', i % 100 + 1),
                           CASE i % 2 WHEN 1 THEN 'clock_in' ELSE 'clock_out' END, i * 1000,
                           CASE i % 2 WHEN 0 THEN printf('time-%08d', i - 1) ELSE NULL END, '' FROM n
                    """, arguments: [rows / 4])
            try db.execute(
                sql: """
                    \(sequence) INSERT INTO mutation_queue (idempotency_key, entity, record_id, operation, payload, status, attempts, created_at)
                    SELECT printf('key-%08d', i), 'issue', printf('issue-%08d', i), 'update', '{"title":"Issue ' || i || '"}',
                           CASE i % 3 WHEN 0 THEN 'pending' WHEN 1 THEN 'in_flight' ELSE 'done' END, i % 4, i FROM n
                    """, arguments: [rows / 10])
            try db.execute(sql: "INSERT INTO sync_state (key, value) VALUES ('last_pull_cursor', ?)", arguments: ["cursor-\(salt)"])
        }
        return 20 + 100 + rows * 2 + rows / 4 * 2 + rows / 10 + 1
    }

    /// The v1 tables' rows in v1's columns, sorted: what every step must leave as it was.
    static func versionOneContent(_ path: String) throws -> String {
        let queue = try DatabaseQueue(path: path)
        defer { try? queue.close() }
        return try queue.read { db in
            var lines: [String] = []
            for (table, columns) in versionOneColumns {
                lines.append("== \(table)")
                // The audit chain's head is a row toolkit step 4 adds, and the last change queued before
                // the chain one toolkit step 9 adds (they change none that was there).
                let added = table == "sync_state" ? " WHERE key NOT IN ('audit_head', 'audit_queued_before_chain')" : ""
                lines += try Row.fetchAll(db, sql: "SELECT \(columns) FROM \(table)" + added).map(\.description).sorted()
            }
            return lines.joined(separator: "\n")
        }
    }

    /// Every table's rows but the ledger's, whose entries carry the time each step ran.
    static func contentWithoutLedger(_ path: String) throws -> String {
        try databaseContent(path).split(separator: "\n", omittingEmptySubsequences: false)
            .reduce(into: (lines: [Substring](), skipping: false)) { state, line in
                // The ledgers record when each step ran; the rest must be equal.
                if line.hasPrefix("== ") { state.skipping = ToolkitSchema.bookkeepingTables.contains(String(line.dropFirst(3))) }
                if !state.skipping { state.lines.append(line) }
            }.lines.joined(separator: "\n")
    }
}

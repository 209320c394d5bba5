import Foundation
import GRDB
import OutpostFieldService
import OutpostMigrator
import OutpostStore

/// Issue 4's figure: upgrading a v1 database holding 100,000 time entries and 100,000 daily logs to v5,
/// against the `sqlite3` CLI running the same statements, one transaction per step, on a copy.
struct MigrationBenchmark: BenchmarkSuite {
    let name = "migrate"
    let rowsPerTable = 100_000
    let runs = 3

    func run() async throws -> [BenchmarkRow] {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("outpost-bench-migrate-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let template = folder.appendingPathComponent("v1.sqlite").path
        try makeVersion1(at: template)

        let script = folder.appendingPathComponent("steps.sql")
        try LocalSchema.steps[1..<5].map { "BEGIN IMMEDIATE;\n\($0.sql ?? "")\nCOMMIT;\n" }.joined()
            .write(to: script, atomically: true, encoding: .utf8)

        var ours: [Double] = [], peer: [Double] = []
        for run in 0..<runs {
            let mine = folder.appendingPathComponent("ours-\(run).sqlite").path
            let theirs = folder.appendingPathComponent("sqlite3-\(run).sqlite").path
            try FileManager.default.copyItem(atPath: template, toPath: mine)
            try FileManager.default.copyItem(atPath: template, toPath: theirs)

            let queue = try DatabaseQueue(path: mine)
            ours.append(try measureSeconds { try LocalSchema.migrator.migrate(queue, to: 5) })
            peer.append(try measureSeconds { try runSQLite3(theirs, script: script) })

            // The peer must have done the same work, or the comparison means nothing.
            let schema = try Migrator.schemaSQL(of: queue)
            guard try Migrator.schemaSQL(of: DatabaseQueue(path: theirs)) == schema else {
                throw BenchmarkFailure("sqlite3 and the migrator produced different schemas")
            }
            try queue.close()
        }
        let (value, peerValue) = (median(ours), median(peer))
        return [BenchmarkRow(
            metric: "migrate v1→v5, \(rowsPerTable / 1000)K time entries + \(rowsPerTable / 1000)K daily logs (median of \(runs))",
            value: value, unit: "s", peer: "sqlite3 CLI, same statements", peerValue: peerValue,
            target: "≤ 1.5× peer", met: value <= 1.5 * peerValue)]
    }

    private func makeVersion1(at path: String) throws {
        try LocalDatabase.migrate(at: path, to: 1)
        let queue = try DatabaseQueue(path: path)
        try queue.write { db in
            try db.execute(sql: """
                WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?)
                INSERT INTO daily_logs (id, created_at, updated_at, project_id, author_id, day, notes, weather, crew, hours)
                SELECT printf('00000000-0000-4000-8000-%012d', i), 1795000000000 + i, 1795000000000 + i,
                       printf('p-%03d', i % 200), printf('m-%03d', i % 50), printf('2026-%02d-%02d', i % 12 + 1, i % 28 + 1),
                       'Framing on the north side, inspection at 14:00 #' || i, 'Overcast, 7 °C',
                       CASE i % 4 WHEN 0 THEN '' WHEN 1 THEN 'Ana' ELSE 'Ana, Bo, Chidi' END, (i % 40) * 0.5
                FROM n;
                WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?)
                INSERT INTO time_entries (id, created_at, updated_at, project_id, member_id, kind, recorded_at, clock_in_id, latitude, longitude, note)
                SELECT printf('10000000-0000-4000-8000-%012d', i), 1795000000000 + i, 1795000000000 + i,
                       printf('p-%03d', i % 200), printf('m-%03d', i % 50), CASE i % 2 WHEN 0 THEN 'clockIn' ELSE 'clockOut' END,
                       1795000000000 + i * 60000, CASE i % 2 WHEN 1 THEN printf('10000000-0000-4000-8000-%012d', i - 1) END,
                       47.6 + (i % 1000) / 100000.0, -122.3 - (i % 1000) / 100000.0, ''
                FROM n;
                """, arguments: [rowsPerTable, rowsPerTable])
        }
        try queue.close()
    }

    private func runSQLite3(_ database: String, script: URL) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["sqlite3", "-bail", database]
        process.standardInput = try FileHandle(forReadingFrom: script)
        try process.run()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw BenchmarkFailure("sqlite3 exited with \(process.terminationStatus); is the sqlite3 CLI installed (make setup)?")
        }
    }
}

/// A benchmark that could not measure what it promised.
struct BenchmarkFailure: Error, CustomStringConvertible {
    let description: String
    init(_ message: String) { description = message }
}

/// The middle value, which one slow run cannot skew.
func median(_ values: [Double]) -> Double {
    let sorted = values.sorted()
    return sorted[sorted.count / 2]
}

import Foundation
import GRDB
import GRDBSQLite
import OutpostFieldService
import OutpostModels
import OutpostSchema
import OutpostStore

/// Issue 7's local figures: write throughput (row + clocks + queue + audit, one transaction each) with
/// synchronous NORMAL and FULL, listing 10,000 issues, size per 1,000 issues, and a cold open to first list
/// (the median of five fresh opens).
/// The writes' peer is the `sqlite3` CLI replaying the very rows the store wrote, one write's rows per
/// transaction, into an empty database of the same schema and settings: what SQLite itself costs for the
/// same B-trees. Bare single-row INSERT transactions are printed alongside (standard error), to show
/// what the number of tables and indexes a write touches costs.
struct StoreBenchmark: BenchmarkSuite {
    let name = "store"
    let writes = 15_000
    let listSize = 10_000
    let coldRecords = 100_000

    func run() async throws -> [BenchmarkRow] {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("outpost-bench-store-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        var rows: [BenchmarkRow] = []
        for mode in [LocalStore.SynchronousMode.normal, .full] {
            let path = folder.appendingPathComponent("writes-\(mode.rawValue).sqlite").path
            let store = try LocalStore.open(at: path, synchronous: mode)
            let project = UUID()
            let issues = (0..<writes).map { Issue(projectID: project, title: "Cracked tile #\($0)", details: "Hairline crack near the sink, 30 cm") }
            let clock = ContinuousClock()
            let start = clock.now
            for issue in issues { try await store.save(issue) }
            let seconds = (clock.now - start).seconds
            let replay = try sqlite3ReplayRate(of: path, mode: mode, folder: folder)
            let bare = try sqlite3InsertRate(folder: folder, mode: mode, count: writes)
            FileHandle.standardError.write(Data(
                "store writes, synchronous=\(mode.rawValue): sqlite3 CLI bare 1-row INSERT txns: \(Int(bare)) writes/s\n".utf8))
            rows.append(BenchmarkRow(
                metric: "local writes, synchronous=\(mode.rawValue) (row+clocks+queue+audit, 1 txn each)",
                value: Double(writes) / seconds, unit: "writes/s", peer: "sqlite3 CLI replaying the same rows, 1 write per txn",
                peerValue: replay, target: "≥ 5,000 writes/s", met: Double(writes) / seconds >= 5_000))
        }

        // Size and listing: 10,000 issues of one project with their queue and audit rows.
        let listPath = folder.appendingPathComponent("list.sqlite").path
        let project = UUID()
        try await fill(listPath, project: project, count: listSize)
        let store = try LocalStore.open(at: listPath)
        _ = try store.fetchAll(Issue.self, where: "projectID", equals: .uuid(project))
        let listSeconds = median((0..<5).map { _ in
            (try? measureSeconds { _ = try store.fetchAll(Issue.self, where: "projectID", equals: .uuid(project)) }) ?? .infinity
        })
        let peerList = try sqlite3Seconds(listPath, "SELECT * FROM issues WHERE project_id = '\(project.uuidString.lowercased())' AND deleted_at IS NULL ORDER BY created_at, id;")
        rows.append(BenchmarkRow(
            metric: "list 10,000 issues of a project (typed)", value: listSeconds * 1000, unit: "ms",
            peer: "sqlite3 CLI, same query (incl. process start)", peerValue: peerList * 1000, target: "< 5 ms (field: 50 ms)",
            met: listSeconds * 1000 < 5))
        let floorSeconds = try listFloorSeconds(listPath, project: project)
        // The windowed list: every id in order, then the first screenful typed (`RecordList`).
        let screen = 50
        let windowed = try store.list(Issue.self, where: "projectID", equals: .uuid(project))
        guard windowed.count == listSize, try windowed.fetch(5_000..<(5_000 + screen)).compactMap({ $0 }).count == screen else {
            throw BenchmarkFailure("the windowed list read \(windowed.count) issues, not \(listSize)")
        }
        let windowSeconds = median((0..<5).map { _ in
            (try? measureSeconds {
                let list = try store.list(Issue.self, where: "projectID", equals: .uuid(project))
                _ = try list.fetch(0..<screen)
            }) ?? .infinity
        })
        let laterWindowSeconds = median((0..<5).map { _ in
            (try? measureSeconds { _ = try windowed.fetch(5_000..<(5_000 + screen)) }) ?? .infinity
        })
        FileHandle.standardError.write(Data(
            "store windowed list: a later window of \(screen) (positions 5,000…) \(String(format: "%.3f", laterWindowSeconds * 1000)) ms\n".utf8))
        rows.append(BenchmarkRow(
            metric: "  SQLite's own part: same query, every column read through the C API, no models", value: floorSeconds * 1000,
            unit: "ms"))
        rows.append(BenchmarkRow(
            metric: "list 10,000 issues of a project, windowed: every id in order + the first \(screen) typed", value: windowSeconds * 1000,
            unit: "ms", peer: "the typed list of all 10,000 (row above)", peerValue: listSeconds * 1000, target: "< 5 ms (field: 50 ms)",
            met: windowSeconds * 1000 < 5))
        let bytes = try checkpointedSize(listPath)
        printSizeBreakdown(listPath, records: listSize)
        rows.append(BenchmarkRow(
            metric: "database size per 1,000 issues (with queue and audit rows)", value: Double(bytes) / Double(listSize / 1000) / 1024,
            unit: "KB", peer: "field figure", peerValue: 500, target: "< 300 KB", met: Double(bytes) / Double(listSize / 1000) / 1024 < 300))

        // Cold open of a 100,000-record store, to the first list of one project's issues.
        let coldPath = folder.appendingPathComponent("cold.sqlite").path
        try await fill(coldPath, project: project, count: coldRecords, projects: 10)
        // Five fresh opens, each with its own empty page cache (the file itself stays in the OS's cache,
        // as it is when an app is relaunched): one sample was the noisiest figure in the table.
        let coldSamples = try (0..<5).map { _ in
            try measureSeconds {
                let cold = try LocalStore.open(at: coldPath)
                _ = try cold.fetchAll(Issue.self, where: "projectID", equals: .uuid(project))
            }
        }
        let coldSeconds = median(coldSamples)
        FileHandle.standardError.write(Data(
            "store cold open to first list, 5 fresh opens: \(coldSamples.map { String(format: "%.1f", $0 * 1000) }.joined(separator: " / ")) ms\n".utf8))
        rows.append(BenchmarkRow(
            metric: "cold open of a 100,000-record store to first list (median of 5)", value: coldSeconds * 1000, unit: "ms",
            peer: "field figure (cold start to content)", peerValue: 500, target: "< 20 ms", met: coldSeconds * 1000 < 20))
        let coldWindowSeconds = median(try (0..<5).map { _ in
            try measureSeconds {
                let cold = try LocalStore.open(at: coldPath)
                _ = try cold.list(Issue.self, where: "projectID", equals: .uuid(project)).fetch(0..<screen)
            }
        })
        rows.append(BenchmarkRow(
            metric: "cold open of a 100,000-record store to its first screen (windowed list, median of 5)",
            value: coldWindowSeconds * 1000, unit: "ms", peer: "to the typed list of all (row above)", peerValue: coldSeconds * 1000,
            target: "< 20 ms", met: coldWindowSeconds * 1000 < 20))
        return rows
    }

    /// Writes `count` issues through the store, spread over `projects` projects (the first is `project`).
    private func fill(_ path: String, project: UUID, count: Int, projects: Int = 1) async throws {
        let store = try LocalStore.open(at: path)
        let others = [project] + (1..<max(projects, 1)).map { _ in UUID() }
        for index in 0..<count {
            try await store.save(Issue(
                projectID: others[index % others.count], title: "Issue \(index)", details: "Noted on the site walk",
                priority: .medium))
        }
    }

    /// What SQLite alone spends on the list: the store's list query (the same WHERE and ORDER BY, the
    /// model's columns), stepped through the C API with each column's type and value read (text as a
    /// pointer and length, nothing copied) and no model built. No typed list of these rows can be faster
    /// on this machine. A floor, not a goal, so it has no target. Median of 5, after one warm-up.
    private func listFloorSeconds(_ path: String, project: UUID) throws -> Double {
        let queue = try DatabaseQueue(path: path)
        defer { try? queue.close() }
        return try queue.read { db in
            // The columns the store reads: every one but v4's legacy `description`, which no model has.
            let columns = try String.fetchAll(db, sql: "SELECT name FROM pragma_table_info('issues') WHERE name != 'description'")
            let statement = try db.makeStatement(sql: """
                SELECT \(columns.map(\.quotedDatabaseIdentifier).joined(separator: ", ")) FROM issues
                WHERE project_id = ? AND deleted_at IS NULL ORDER BY created_at, id
                """)
            try statement.setArguments([project.uuidString.lowercased()])
            let raw = statement.sqliteStatement
            var checksum = 0
            func list() {
                defer { sqlite3_reset(raw) }
                while sqlite3_step(raw) == SQLITE_ROW {
                    for column in 0..<sqlite3_column_count(raw) {
                        switch sqlite3_column_type(raw, column) {
                        case SQLITE_INTEGER: checksum &+= Int(sqlite3_column_int64(raw, column))
                        case SQLITE_FLOAT: checksum &+= Int(sqlite3_column_double(raw, column))
                        case SQLITE_TEXT:
                            checksum &+= Int(bitPattern: sqlite3_column_text(raw, column)) &+ Int(sqlite3_column_bytes(raw, column))
                        default: break
                        }
                    }
                }
            }
            list()
            let seconds = median((0..<5).map { _ in measureSeconds(list) })
            guard checksum != 0 else { throw BenchmarkFailure("the list's floor read no rows") }
            return seconds
        }
    }

    func checkpointedSize(_ path: String) throws -> Int {
        let queue = try DatabaseQueue(path: path)
        try queue.writeWithoutTransaction { try $0.execute(sql: "PRAGMA wal_checkpoint(TRUNCATE)") }
        try queue.close()
        return (try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) ?? 0
    }

    /// Where the bytes are, per table and index, on standard error (the table and JSON on standard
    /// output stay as they were). SQLite's `dbstat` is read through the `sqlite3` CLI, whose build has
    /// it where the library linked here may not.
    func printSizeBreakdown(_ path: String, records: Int, title: String = "store size breakdown") {
        let process = Process()
        let output = Pipe()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = [
            "sqlite3", path,
            "SELECT name, sum(pgsize), sum(payload), sum(ncell) FROM dbstat GROUP BY name ORDER BY 2 DESC",
        ]
        let errors = Pipe()
        process.standardOutput = output
        process.standardError = errors
        guard (try? process.run()) != nil else { return }
        let data = output.fileHandleForReading.readDataToEndOfFile()
        let problem = errors.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        if data.isEmpty {
            FileHandle.standardError.write(Data("\(title): sqlite3 printed nothing: ".utf8) + problem)
            return
        }
        var text = "\(title), bytes per record (pages / payload / cells per record):\n"
        for line in String(decoding: data, as: UTF8.self).split(separator: "\n") {
            let parts = line.split(separator: "|")
            guard parts.count == 4, let pages = Int(parts[1]), let payload = Int(parts[2]), let cells = Int(parts[3]),
                pages > 8192
            else { continue }
            text += "  \(parts[0]): \(pages / records) / \(payload / records) / \(Double(cells) / Double(records))\n"
        }
        FileHandle.standardError.write(Data(text.utf8))
    }

    /// Writes per second of the `sqlite3` CLI inserting the rows the store at `path` wrote (each issue,
    /// its field clocks, its audit entry and its queued mutation, in the order written), one write per
    /// transaction, into a freshly migrated database with the store's settings (WAL, `mode`, the same
    /// checkpoint interval).
    private func sqlite3ReplayRate(of path: String, mode: LocalStore.SynchronousMode, folder: URL) throws -> Double {
        let byWrite = "FROM audit_log a JOIN %@ ORDER BY a.seq"
        let tables: [(name: String, select: String)] = [
            ("issues", "SELECT t.* " + byWrite.replacingOccurrences(of: "%@", with: "issues t ON t.id = \(LocalStore.idTextSQL(of: "a.record_id"))")),
            ("field_clocks", "SELECT t.* " + byWrite.replacingOccurrences(
                of: "%@", with: "field_clocks t ON t.entity = a.entity AND t.record_id = \(LocalStore.idTextSQL(of: "a.record_id"))")),
            ("audit_log", "SELECT * FROM audit_log ORDER BY seq"),
            ("mutation_queue", "SELECT * FROM mutation_queue ORDER BY seq"),
        ]
        var commands: [String] = []
        for table in tables {
            commands += [".output \(folder.appendingPathComponent("\(table.name).sql").path)", ".mode insert \(table.name)", table.select + ";"]
        }
        let dump = try ChildProcess.run("/usr/bin/env", ["sqlite3", "-bail", "-readonly", path] + commands)
        guard dump.status == 0 else { throw BenchmarkFailure("sqlite3 could not read \(path); is sqlite3 installed (make bench installs it)?") }
        let lines = try tables.map { table in
            let file = folder.appendingPathComponent("\(table.name).sql")
            defer { try? FileManager.default.removeItem(at: file) }
            return try String(contentsOf: file, encoding: .utf8).split(separator: "\n")
        }
        guard let count = lines.first?.count, count == writes, lines.allSatisfy({ $0.count == count }) else {
            throw BenchmarkFailure("the store holds \(lines.map(\.count)) rows per table for \(writes) writes")
        }
        let scriptURL = folder.appendingPathComponent("replay.sql")
        let script = try BufferedFile(scriptURL)
        try script.write("""
            PRAGMA journal_mode=WAL;
            PRAGMA synchronous=\(mode.rawValue);
            PRAGMA wal_autocheckpoint=4000;

            """)
        for index in 0..<count {
            try script.write("BEGIN IMMEDIATE;\n")
            for table in lines { try script.write(table[index] + "\n") }
            try script.write("COMMIT;\n")
        }
        try script.close()
        let replay = folder.appendingPathComponent("replay-\(mode.rawValue).sqlite").path
        try LocalDatabase.migrate(at: replay)
        let job = try ChildProcess.run("/usr/bin/env", ["sqlite3", "-bail", replay, ".read \(scriptURL.path)"])
        try FileManager.default.removeItem(at: scriptURL)
        guard job.status == 0 else { throw BenchmarkFailure("sqlite3 replay exited with \(job.status)") }
        let replayed = try DatabaseQueue(path: replay).read { try Int.fetchOne($0, sql: "SELECT count(*) FROM mutation_queue") ?? 0 }
        guard replayed == count else { throw BenchmarkFailure("sqlite3 replayed \(replayed) of \(count) writes") }
        return Double(count) / job.seconds
    }

    private func sqlite3InsertRate(folder: URL, mode: LocalStore.SynchronousMode, count: Int) throws -> Double {
        let path = folder.appendingPathComponent("peer-\(mode.rawValue).sqlite").path
        var script = "PRAGMA journal_mode=WAL;\nPRAGMA synchronous=\(mode.rawValue);\nCREATE TABLE t (id TEXT PRIMARY KEY, title TEXT, details TEXT);\n"
        for index in 0..<count {
            script += "INSERT INTO t VALUES ('\(UUID().uuidString.lowercased())', 'Cracked tile #\(index)', 'Hairline crack near the sink, 30 cm');\n"
        }
        return Double(count) / (try sqlite3Seconds(path, script))
    }

    private func sqlite3Seconds(_ path: String, _ script: String) throws -> Double {
        let file = URL(fileURLWithPath: path + ".sql")
        try script.write(to: file, atomically: true, encoding: .utf8)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["sqlite3", "-bail", path]
        process.standardInput = try FileHandle(forReadingFrom: file)
        process.standardOutput = FileHandle.nullDevice
        return try measureSeconds {
            try process.run()
            process.waitUntilExit()
        }
    }
}

import Foundation
import Outpost
import OutpostConflicts
import OutpostFieldService
import OutpostModels
import OutpostSchema
import OutpostServer
import OutpostStore
import OutpostSync
import OutpostWire

/// Issue 10's figures: push and pull through the real server on loopback with PostgreSQL behind it,
/// one instance and two instances on one database, next to the same work on SQLite in the same run
/// (the peer: the embedded backend every figure is a ratio to).
///
/// - Push: `records` issue creates, 500 per request, mutations/s; with two instances, two clients push
///   at once, each to its own instance and project, and the rate is the total over the wall time.
/// - Pull: every record of the project(s) pulled over HTTP (`transport.pull`, 1,000 per page), records/s;
///   with two instances, two readers at once, one per instance.
///
/// Needs a PostgreSQL URL in `OUTPOST_BENCH_POSTGRES_URL` or `OUTPOST_TEST_POSTGRES_URL` (`make bench`
/// starts a throwaway cluster with fsync on); without one the suite says so and measures nothing.
/// `OUTPOST_BENCH_POSTGRES_RECORDS` sets the size (default 20,000).
struct PostgresBenchmark: BenchmarkSuite {
    let name = "postgres"
    let records = ProcessInfo.processInfo.environment["OUTPOST_BENCH_POSTGRES_RECORDS"].flatMap(Int.init) ?? 20_000
    let pullLimit = 1000

    static let projects = [ServerBenchmark.pushProject, ServerBenchmark.bundleProject]
    static let users = [ServerBenchmark.pusher, ServerBenchmark.surveyor]
    static let tokens = [ServerBenchmark.pusherToken, ServerBenchmark.surveyorToken]

    static let seed = ServerSeed(
        projects: [
            .init(id: projects[0], name: "Bench tower", address: "1 Main St"),
            .init(id: projects[1], name: "Bench annex", address: "3 Main St"),
        ],
        members: [
            .init(userID: users[0], name: "Ana Lima", role: "foreman", projects: [projects[0]]),
            .init(userID: users[1], name: "Ben Ode", role: "foreman", projects: [projects[1]]),
        ],
        tokens: [.init(userID: users[0], token: tokens[0]), .init(userID: users[1], token: tokens[1])])

    func run() async throws -> [BenchmarkRow] {
        let environment = ProcessInfo.processInfo.environment
        guard let url = environment["OUTPOST_BENCH_POSTGRES_URL"] ?? environment["OUTPOST_TEST_POSTGRES_URL"] else {
            FileHandle.standardError.write(Data(
                "bench: postgres: no OUTPOST_BENCH_POSTGRES_URL or OUTPOST_TEST_POSTGRES_URL; skipped (make bench sets one)\n".utf8))
            return []
        }
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("outpost-bench-pg-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let count = records.formatted()
        var rows: [BenchmarkRow] = []

        // SQLite, one instance: the peer of every row.
        let sqlite = try await BenchServer.start(in: try subfolder("sqlite", of: folder), seed: Self.seed)
        let sqlitePush: Double, sqlitePull: Double
        do {
            sqlitePush = try await pushRate([sqlite], count: records)
            sqlitePull = try await pullRate([sqlite], count: records)
            await sqlite.stop()
        } catch {
            await sqlite.stop()
            throw error
        }

        // PostgreSQL, one instance, then two instances on a second fresh database.
        for instances in [1, 2] {
            let database = try await BenchPostgres.createDatabase(base: url)
            var servers: [BenchServer] = []
            do {
                for index in 0..<instances {
                    servers.append(try await BenchServer.start(
                        in: try subfolder("pg\(instances)-\(index)", of: folder), seed: Self.seed,
                        postgresURL: database.url))
                }
                let push = try await pushRate(servers, count: records)
                let pull = try await pullRate(servers, count: records)
                let label = instances == 1 ? "1 instance" : "2 instances, 2 clients"
                rows.append(BenchmarkRow(
                    metric: "push \(count) issue creates, 500/request, PostgreSQL, \(label)", value: push,
                    unit: "mutations/s", peer: "SQLite backend, 1 instance, same run", peerValue: sqlitePush))
                rows.append(BenchmarkRow(
                    metric: "pull \(count) records over HTTP, \(pullLimit)/page, PostgreSQL, \(label)", value: pull,
                    unit: "records/s", peer: "SQLite backend, 1 instance, same run", peerValue: sqlitePull))
            } catch {
                for server in servers { await server.stop() }
                await BenchPostgres.dropDatabase(database.name, base: url)
                throw error
            }
            for server in servers { await server.stop() }
            await BenchPostgres.dropDatabase(database.name, base: url)
        }
        return rows
    }

    private func subfolder(_ name: String, of folder: URL) throws -> URL {
        let url = folder.appendingPathComponent(name)
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }

    /// Mutations/s of `count` creates split over the servers, one client per server, all at once.
    private func pushRate(_ servers: [BenchServer], count: Int) async throws -> Double {
        let share = count / servers.count
        let clock = ContinuousClock()
        let started = clock.now
        try await withThrowingTaskGroup(of: Void.self) { group in
            for (index, server) in servers.enumerated() {
                group.addTask {
                    _ = try await ServerBenchmark().push(
                        share, to: Self.projects[index], through: server.transport(token: Self.tokens[index]))
                }
            }
            try await group.waitForAll()
        }
        return Double(share * servers.count) / (clock.now - started).seconds
    }

    /// Records/s of every server's reader pulling its own project from the start, all at once.
    private func pullRate(_ servers: [BenchServer], count: Int) async throws -> Double {
        let clock = ContinuousClock()
        let started = clock.now
        let pulled = try await withThrowingTaskGroup(of: Int.self) { group in
            for (index, server) in servers.enumerated() {
                let transport = server.transport(token: Self.tokens[index])
                let limit = pullLimit
                group.addTask {
                    var cursor: String?
                    var total = 0
                    while true {
                        let page = try await transport.pull(PullRequest(cursor: cursor, limit: limit))
                        total += page.changes.count
                        cursor = page.nextCursor
                        if !page.hasMore { return total }
                    }
                }
            }
            return try await group.reduce(0, +)
        }
        guard pulled >= count else { throw BenchmarkFailure("pull returned \(pulled) records, expected \(count)") }
        return Double(pulled) / (clock.now - started).seconds
    }
}

/// Fresh databases on the bench's PostgreSQL cluster, one per measurement.
enum BenchPostgres {
    static func createDatabase(base: String) async throws -> (name: String, url: String) {
        guard var components = URLComponents(string: base) else { throw BenchmarkFailure("bad PostgreSQL URL") }
        let name = "outpost_bench_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
        try psql(base, "CREATE DATABASE \(name)")
        components.path = "/" + name
        return (name, components.string!)
    }

    static func dropDatabase(_ name: String, base: String) async {
        try? psql(base, "DROP DATABASE IF EXISTS \(name) WITH (FORCE)")
    }

    /// Runs one statement of the bench's own with the `psql` client that comes with the server.
    private static func psql(_ url: String, _ sql: String) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["psql", "-q", "-v", "ON_ERROR_STOP=1", "-d", url, "-c", sql]
        try process.run()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { throw BenchmarkFailure("psql failed: \(sql)") }
    }
}

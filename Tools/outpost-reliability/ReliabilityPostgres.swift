import Foundation
import Logging
import PostgresNIO

/// The throwaway PostgreSQL cluster of `make reliability` and `make test`
/// (`scripts/with-test-postgres.sh`, `OUTPOST_TEST_POSTGRES_URL`): a fresh database per seed, and the
/// scenario's own queries on it.
enum ReliabilityPostgres {
    private static let logger = Logger(label: "outpost.reliability.postgres") { _ in SwiftLogNoOpLogHandler() }

    /// The cluster's URL, or an error saying how to get one.
    static func baseURL() throws -> String {
        guard let base = ProcessInfo.processInfo.environment["OUTPOST_TEST_POSTGRES_URL"], !base.isEmpty else {
            throw ReliabilityError(
                "OUTPOST_TEST_POSTGRES_URL is not set: run it through make reliability (or scripts/with-test-postgres.sh)")
        }
        return base
    }

    static func connect(_ url: String) async throws -> PostgresConnection {
        guard let components = URLComponents(string: url), let host = components.host, let user = components.user else {
            throw ReliabilityError("cannot read the PostgreSQL URL \(url)")
        }
        let configuration = PostgresConnection.Configuration(
            host: host, port: components.port ?? 5432, username: user, password: components.password,
            database: String(components.path.dropFirst()), tls: .disable)
        return try await PostgresConnection.connect(configuration: configuration, id: 1, logger: logger)
    }

    /// Runs a statement a scenario wrote itself (names it made, never input) on the database at `url`.
    static func administer(_ sql: String, on url: String) async throws {
        let connection = try await connect(url)
        defer { Task { try? await connection.close() } }
        _ = try await connection.query(PostgresQuery(unsafeSQL: sql), logger: logger).collect()
    }

    /// A new, empty database on the cluster at `base`, named after `purpose`; its name and URL.
    static func createDatabase(on base: String, for purpose: String) async throws -> (name: String, url: String) {
        guard var components = URLComponents(string: base) else { throw ReliabilityError("cannot read \(base)") }
        let name = "outpost_\(purpose)_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
        try await administer("CREATE DATABASE \(name)", on: base)
        components.path = "/" + name
        return (name, components.string!)
    }

    /// Drops a database `createDatabase` made, closing whatever is still connected to it.
    static func dropDatabase(_ name: String, on base: String) async {
        try? await administer("DROP DATABASE IF EXISTS \(name) WITH (FORCE)", on: base)
    }

    /// The rows of a query a scenario wrote itself, each decoded as the columns' types.
    static func rows<each Column: PostgresDecodable & Sendable>(
        _ sql: PostgresQuery, of columns: (repeat each Column).Type, on url: String
    ) async throws -> [(repeat each Column)] {
        let connection = try await connect(url)
        defer { Task { try? await connection.close() } }
        var rows: [(repeat each Column)] = []
        for try await row in try await connection.query(sql, logger: logger).decode(columns) { rows.append(row) }
        return rows
    }
}

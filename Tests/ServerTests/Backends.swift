import Foundation
import GRDB
import Logging
@testable import OutpostServer
import PostgresNIO
import Testing

/// The storage a test server runs on. Server tests take it as an argument, so the same test code
/// runs on both: PostgreSQL only when `OUTPOST_TEST_POSTGRES_URL` names a cluster (as `make test` does
/// through `scripts/with-test-postgres.sh`); otherwise those cases are left out, with one message.
enum Backend: String, Sendable, CaseIterable, CustomTestStringConvertible {
    case sqlite
    case postgres

    /// The backends this run can test.
    static let available: [Backend] = {
        if TestPostgres.baseURL != nil { return [.sqlite, .postgres] }
        FileHandle.standardError.write(Data(
            "note: OUTPOST_TEST_POSTGRES_URL is not set; the server tests run on SQLite only and skip PostgreSQL (make test sets it)\n".utf8))
        return [.sqlite]
    }()

    var testDescription: String { rawValue }
}

/// The throwaway cluster of `scripts/with-test-postgres.sh`: each test gets its own fresh database.
enum TestPostgres {
    static let baseURL: String? = ProcessInfo.processInfo.environment["OUTPOST_TEST_POSTGRES_URL"]
        .flatMap { $0.isEmpty ? nil : $0 }

    static let skipMessage: Comment = "OUTPOST_TEST_POSTGRES_URL is not set (make test starts a throwaway PostgreSQL)"

    private static let logger = Logger(label: "outpost.tests.postgres") { _ in SwiftLogNoOpLogHandler() }

    /// Runs `sql` (a test's own fixed statement) on the cluster's maintenance database.
    private static func administer(_ sql: String) async throws {
        guard let baseURL else { throw CancellationError() }
        let url = try PostgresConnectionURL(baseURL)
        let connection = try await PostgresConnection.connect(configuration: url.connection, id: 1, logger: logger)
        do {
            try await connection.query(PostgresQuery(unsafeSQL: sql), logger: logger)
        } catch {
            try? await connection.close()
            throw error
        }
        try await connection.close()
    }

    /// A new, empty database on the cluster; its URL.
    static func createDatabase() async throws -> (name: String, url: String) {
        guard let baseURL, var components = URLComponents(string: baseURL) else { throw CancellationError() }
        let name = "outpost_test_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
        // The name is made here, never taken from input: an identifier cannot be a bound parameter.
        try await administer("CREATE DATABASE \(name)")
        components.path = "/" + name
        return (name, components.string!)
    }

    /// Makes a database made by `createDatabase` refuse new connections and ends those it has: a
    /// database that stopped answering, as far as a server on it can tell.
    static func refuseConnections(to name: String) async throws {
        try await administer("ALTER DATABASE \(name) ALLOW_CONNECTIONS false")
        try await administer("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '\(name)'")
    }

    /// Drops a database made by `createDatabase`, closing whatever is still connected to it.
    static func dropDatabase(_ name: String) async {
        try? await administer("DROP DATABASE IF EXISTS \(name) WITH (FORCE)")
    }

    /// Runs a test's own query on a database and returns the first column of each row as text.
    static func strings(_ sql: String, url: String) async throws -> [String] {
        let parsed = try PostgresConnectionURL(url)
        let connection = try await PostgresConnection.connect(configuration: parsed.connection, id: 2, logger: logger)
        var values: [String] = []
        do {
            for try await value in try await connection.query(PostgresQuery(unsafeSQL: sql), logger: logger)
                .decode(String.self)
            {
                values.append(value)
            }
        } catch {
            try? await connection.close()
            throw error
        }
        try await connection.close()
        return values
    }
}

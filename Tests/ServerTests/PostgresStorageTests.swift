@testable import OutpostServer
import Foundation
import Logging
import OutpostFieldService
import OutpostFieldServiceTesting
import OutpostModels
import OutpostSchema
import OutpostSync
import PostgresNIO
import Testing

@Suite("PostgreSQL storage: URL, migrations and lifecycle", .fieldService)
struct PostgresStorageTests {
    static let quiet = Logger(label: "outpost.tests") { _ in SwiftLogNoOpLogHandler() }

    @Test("A PostgreSQL URL is read like libpq's; a malformed one is refused before anything connects")
    func urls() throws {
        let url = try PostgresConnectionURL("postgres://outpost:s%40cret@db.example.com:6543/field?sslmode=verify-full")
        #expect(url.configuration.host == "db.example.com")
        #expect(url.configuration.port == 6543)
        #expect(url.configuration.username == "outpost")
        #expect(url.configuration.password == "s@cret")
        #expect(url.configuration.database == "field")
        #expect(!url.redacted.contains("cret"))
        for bad in [
            "mysql://x@host/db", "postgres:///db", "postgres://x@host/db?sslmode=sometimes",
            "postgres://x@host/db?application=1",
        ] {
            #expect(throws: ServerError.self) { _ = try PostgresConnectionURL(bad) }
        }
        let refused = #expect(throws: ServerError.self) {
            _ = try SyncServer(configuration: ServerConfiguration(databasePath: "", postgresURL: "http://nope"))
        }
        #expect(refused?.code == .invalidConfiguration)
    }

    @Test("The PostgreSQL steps only add: no DROP, RENAME or column type change")
    func stepsAreAdditive() {
        for step in PostgresSchema.steps {
            let sql = (step.sql ?? "").uppercased()
            for word in ["DROP ", "RENAME ", "ALTER COLUMN", "TRUNCATE", "DELETE "] {
                #expect(!sql.contains(word), "step \(step.version) contains \(word)")
            }
            #expect(!PostgresSchema.statements(of: step.sql ?? "").isEmpty)
        }
        #expect(PostgresSchema.steps.map(\.version) == Array(1...PostgresSchema.steps.count))
    }

    @Test(
        "Migrations run once, also when two servers start together; a changed or newer ledger is refused",
        .enabled(if: TestPostgres.baseURL != nil, TestPostgres.skipMessage))
    func migrations() async throws {
        let database = try await TestPostgres.createDatabase()
        let first = try PostgresStorage(url: database.url, assignsServerIDs: false, logger: Self.quiet)
        let second = try PostgresStorage(url: database.url, assignsServerIDs: false, logger: Self.quiet)
        async let a: Void = first.prepare()
        async let b: Void = second.prepare()
        _ = try await (a, b)
        try await first.load(TestServer.seed, now: Timestamp.now())
        #expect(try await TestPostgres.strings("SELECT version::text FROM migrator_ledger ORDER BY version", url: database.url)
            == PostgresSchema.steps.map { String($0.version) })
        #expect(try await TestPostgres.strings("SELECT value::text FROM counters WHERE name = 'change_sequence'",
                                               url: database.url) == ["6"])
        #expect(try await second.caller(forTokenDigest: TokenDigest.hex(of: TestServer.aliceToken))
            == Caller(userID: TestServer.alice))
        await first.close()
        await second.close()

        // A step edited after it shipped, then a database newer than this server: both refused at start.
        _ = try await TestPostgres.strings(
            "UPDATE migrator_ledger SET checksum = 'edited' WHERE version = 1 RETURNING 'x'", url: database.url)
        let edited = try PostgresStorage(url: database.url, assignsServerIDs: false, logger: Self.quiet)
        let changed = await #expect(throws: ServerError.self) { try await edited.prepare() }
        #expect(changed?.code == .migrationFailed)
        await edited.close()
        _ = try await TestPostgres.strings(
            """
            UPDATE migrator_ledger SET checksum = '\(PostgresSchema.steps[0].checksum)' WHERE version = 1 RETURNING 'x'
            """, url: database.url)
        _ = try await TestPostgres.strings(
            "INSERT INTO migrator_ledger VALUES (\(PostgresSchema.steps.count + 1), 'future', 'x', 0) RETURNING 'x'",
            url: database.url)
        let newer = try PostgresStorage(url: database.url, assignsServerIDs: false, logger: Self.quiet)
        let refused = await #expect(throws: ServerError.self) { try await newer.prepare() }
        #expect(refused?.code == .migrationFailed)
        #expect(refused?.message.contains("newer") == true)
        await newer.close()
        await TestPostgres.dropDatabase(database.name)
    }

    @Test(
        "A server that cannot reach its PostgreSQL fails to start with databaseFailure, not a hang",
        .enabled(if: TestPostgres.baseURL != nil, TestPostgres.skipMessage))
    func unreachable() async throws {
        // Port 1 on loopback: nothing listens, the connection is refused at once.
        let server = try SyncServer(
            configuration: ServerConfiguration(
                databasePath: "", mediaDirectory: FileManager.default.temporaryDirectory.path,
                logLevel: "critical", postgresURL: "postgres://outpost@127.0.0.1:1/outpost?sslmode=disable"))
        let error = await #expect(throws: ServerError.self) { try await server.load(TestServer.seed) }
        #expect(error?.code == .databaseFailure)
    }
}

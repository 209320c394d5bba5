@testable import OutpostServer
import AsyncHTTPClient
import Foundation
import GRDB
import NIOCore
import NIOHTTP1
import OutpostConflicts
import OutpostFieldService
import OutpostModels
import OutpostSchema
import OutpostSync
import OutpostWire
import Testing

/// A real server on 127.0.0.1 (port 0, read back), on a SQLite file in a fresh temp folder or on a
/// fresh PostgreSQL database of the test cluster, seeded with two projects: Alice belongs to A, Bob to
/// B, Carol to both.
final class TestServer: Sendable {
    static let projectA = UUID(uuidString: "a0000000-0000-4000-8000-00000000000a")!
    static let projectB = UUID(uuidString: "b0000000-0000-4000-8000-00000000000b")!
    static let alice = UUID(uuidString: "a11ce000-0000-4000-8000-000000000001")!
    static let bob = UUID(uuidString: "b0b00000-0000-4000-8000-000000000002")!
    static let carol = UUID(uuidString: "ca201000-0000-4000-8000-000000000003")!
    static let aliceToken = "alice-token-123"
    static let bobToken = "bob-token-456"
    static let carolToken = "carol-token-789"
    /// A caller as a request bearing `user`'s token of the seed is let in (a user without one bears a
    /// token no one was issued, which a push's transaction refuses).
    static func caller(_ user: UUID) -> Caller {
        let token = [alice: aliceToken, bob: bobToken, carol: carolToken][user] ?? "no token of \(user)"
        return Caller(userID: user, tokenDigest: TokenDigest.hex(of: token))
    }
    /// The scraper's token every test server takes for `/metrics` (`ServerConfiguration.metricsToken`).
    static let metricsToken = "scraper-token-0ab"

    static let seed = ServerSeed(
        projects: [
            .init(id: projectA, name: "Maple Street", address: "12 Maple Street"),
            .init(id: projectB, name: "Oak Avenue", address: "3 Oak Avenue"),
        ],
        members: [
            .init(userID: alice, name: "Alice", email: "alice@example.com", role: "foreman", projects: [projectA]),
            .init(userID: bob, name: "Bob", projects: [projectB]),
            .init(userID: carol, name: "Carol", role: "projectManager", projects: [projectA, projectB]),
        ],
        tokens: [.init(userID: alice, token: aliceToken), .init(userID: bob, token: bobToken),
                 .init(userID: carol, token: carolToken)])

    let directory: URL
    let server: SyncServer
    let port: Int
    let backend: Backend
    /// The PostgreSQL database made for this server, dropped by `stop` unless another server shares it.
    let postgres: (name: String, url: String)?
    private let ownsDatabase: Bool
    private let task: Task<Void, any Error>

    var baseURL: URL { URL(string: "http://127.0.0.1:\(port)")! }
    var databasePath: String { server.configuration.databasePath }

    private init(
        directory: URL, server: SyncServer, port: Int, backend: Backend, postgres: (name: String, url: String)?,
        ownsDatabase: Bool, task: Task<Void, any Error>
    ) {
        self.directory = directory
        self.server = server
        self.port = port
        self.backend = backend
        self.postgres = postgres
        self.ownsDatabase = ownsDatabase
        self.task = task
    }

    /// Starts a server and waits until it listens. `sharing` starts a second instance on the same
    /// PostgreSQL database (and media folder) as another test server.
    static func start(
        _ backend: Backend = .sqlite, assignsServerIDs: Bool = false, maximumBatchSize: Int = 500,
        maximumPullLimit: Int = 1000, maximumPullPageBytes: Int = 4 * 1024 * 1024, maximumBodyBytes: Int = 8 * 1024 * 1024,
        sharing other: TestServer? = nil, conflictPolicy: ConflictPolicy = ConflictPolicy(), idleTimeoutSeconds: Int = 180,
        maximumConnections: Int = 1_024, configure: (inout ServerConfiguration) -> Void = { _ in }
    ) async throws -> TestServer {
        // Throwaway servers skip the fsync per commit, as the throwaway PostgreSQL runs with fsync off:
        // with FULL, dozens of servers in one run queued on one slow disk until requests timed out.
        // OUTPOST_TEST_SQLITE_DURABLE=1 keeps it (the durability test checks the default on its own).
        let durableCommits = ProcessInfo.processInfo.environment["OUTPOST_TEST_SQLITE_DURABLE"] == "1"
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("outpost-server-\(UUID())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let postgres: (name: String, url: String)? =
            if let other { other.postgres } else if backend == .postgres { try await TestPostgres.createDatabase() } else { nil }
        var configuration = ServerConfiguration(
            databasePath: directory.appendingPathComponent("server.sqlite").path, port: 0,
            mediaDirectory: other?.server.configuration.mediaDirectory,
            assignsServerIDs: assignsServerIDs, maximumBatchSize: maximumBatchSize,
            maximumPullLimit: maximumPullLimit, maximumPullPageBytes: maximumPullPageBytes,
            maximumBodyBytes: maximumBodyBytes,
            // Cancelling the server task makes Hummingbird log its shutdown as errors; tests check answers instead.
            logLevel: "critical", postgresURL: postgres?.url, conflictPolicy: conflictPolicy,
            idleTimeoutSeconds: idleTimeoutSeconds, maximumConnections: maximumConnections,
            durableCommits: durableCommits)
        configuration.metricsToken = metricsToken
        // A full run's servers share one PostgreSQL and two cores (with a CPU-bound process beside it, a
        // request once waited past the 70 s a 10 s lock wait gives an operation, and got 503). Tests of
        // the waits set their own.
        configuration.databaseLockWaitSeconds = 30
        configure(&configuration)
        let server = try SyncServer(
            configuration: configuration, logger: nil, readAhead: PreparedPulls(lifetime: .seconds(3600)))
        try await server.load(seed)
        let (port, task) = try await serve(server)
        return TestServer(
            directory: directory, server: server, port: port, backend: backend, postgres: postgres,
            ownsDatabase: other == nil, task: task)
    }

    /// Stops serving and starts again on the same database and media folder (on a new port), as an
    /// operator restarts after a restore; `whileStopped` runs in between (putting a backup in place).
    /// Use the returned server from then on; its `stop` removes what this one would have.
    func restarted(whileStopped: () async throws -> Void = {}) async throws -> TestServer {
        task.cancel()
        _ = await task.result
        try await whileStopped()
        var configuration = server.configuration
        configuration.port = 0
        let server = try SyncServer(
            configuration: configuration, logger: nil, readAhead: PreparedPulls(lifetime: .seconds(3600)))
        let (port, task) = try await Self.serve(server)
        return TestServer(
            directory: directory, server: server, port: port, backend: backend, postgres: postgres,
            ownsDatabase: ownsDatabase, task: task)
    }

    /// Runs `server` and waits until it listens: its port and the task serving.
    private static func serve(_ server: SyncServer) async throws -> (port: Int, task: Task<Void, any Error>) {
        let (ports, continuation) = AsyncStream.makeStream(of: Int.self)
        let task = Task {
            try await server.run(handlingSignals: false) { port in continuation.yield(port) }
        }
        var iterator = ports.makeAsyncIterator()
        guard let port = await iterator.next() else { throw CancellationError() }
        return (port, task)
    }

    /// `work` (a request to this server), and, when it is still under way after `after`, a report on
    /// standard error of what the server and its database are doing, each line starting `stall:` (the
    /// test digest prints those). Why: twice a full CI run had a push on PostgreSQL go unanswered for
    /// 180 s (FailClosedTests), never reproduced here, alone or in a full run; the report tells a
    /// connection never taken in, a request waiting for its user's turn, and one waiting on the database
    /// apart. It changes no outcome.
    func reportingAStall<T>(
        of name: String, after: Duration = .seconds(90),
        to report: @escaping @Sendable ([String]) -> Void = { FileHandle.standardError.write(Data($0.map { "stall: \($0)\n" }.joined().utf8)) },
        _ work: () async throws -> T
    ) async throws -> T {
        let server = self.server, postgres = self.postgres, port = self.port
        let admittedBefore = server.openConnections.admittedCount
        let watchdog = Task {
            try await Task.sleep(for: after)
            let connections = server.openConnections
            var lines = [
                "\(name) to the server on port \(port) (\(postgres == nil ? "SQLite" : "PostgreSQL")) unanswered after \(after)",
                "connections: \(connections.current) open, \(connections.idleCount) idle, \(connections.stalledCount) unread; "
                    + "\(connections.admittedCount - admittedBefore) taken in since the request began",
                "database connections in use: \(server.activity.connectionsInUse)",
                "request turns held or awaited: \(server.requestTurns.lines.map { "\($0.working) held, \($0.waiting) waiting" })",
                "push turns held or awaited: \(server.pushTurns.lines.map { "\($0.working) held, \($0.waiting) waiting" })",
            ]
            if let postgres {
                do {
                    lines += try await TestPostgres.strings(
                        "SELECT coalesce(state, '?') || ' ' || coalesce(wait_event_type, '-') || ':' || coalesce(wait_event, '-') || ' for '"
                            + " || coalesce(extract(epoch FROM now() - coalesce(xact_start, query_start))::int::text, '?') || ' s: '"
                            + " || left(coalesce(query, ''), 100) FROM pg_stat_activity WHERE datname = current_database()"
                            + " AND pid <> pg_backend_pid()",
                        url: postgres.url)
                } catch {
                    lines.append("pg_stat_activity could not be read: \(error)")
                }
            }
            report(lines)
        }
        defer { watchdog.cancel() }
        return try await work()
    }

    /// Stops the server and removes its files (and its PostgreSQL database).
    func stop() async {
        task.cancel()
        _ = await task.result
        try? FileManager.default.removeItem(at: directory)
        if ownsDatabase, let postgres { await TestPostgres.dropDatabase(postgres.name) }
    }

    /// The first column of each row of a test's own query, as text, on whichever backend runs.
    func strings(_ sql: String) async throws -> [String] {
        if let postgres { return try await TestPostgres.strings(sql, url: postgres.url) }
        let queue = try DatabaseQueue(path: databasePath)
        defer { try? queue.close() }
        return try await queue.read { db in try String.fetchAll(db, sql: sql) }
    }

    /// Runs a test's own statement that writes, on whichever backend runs.
    func execute(_ sql: String) async throws {
        if let postgres {
            _ = try await TestPostgres.strings(sql, url: postgres.url)
            return
        }
        let queue = try openFile()
        defer { try? queue.close() }
        try await queue.write { db in try db.execute(sql: sql) }
    }

    /// The SQLite server's file, for a test's own writes: it waits for the server's writer, as the server's
    /// own connections do. With GRDB's default (no wait), a write the server made at that moment (a
    /// token's use noted, say) failed the test with "database is locked" on a busy 2-core run.
    func openFile() throws -> DatabaseQueue {
        var configuration = Configuration()
        configuration.busyMode = .timeout(30)
        return try DatabaseQueue(path: databasePath, configuration: configuration)
    }

    /// How long a test's request may wait: far above what any answer takes, so a test machine busy
    /// with the rest of the run (a 2-core CI machine stalled a whole run for 40 s) fails no request.
    static let requestTimeout: Duration = .seconds(180)

    /// An `HTTPTransport` as an app would make it (with the tests' patient timeout).
    func transport(token: String?, schemaVersion: Int = 7) -> HTTPTransport {
        HTTPTransport(
            configuration: .init(baseURL: baseURL, schemaVersion: schemaVersion, requestTimeout: Self.requestTimeout),
            token: token)
    }

    /// `/metrics` as the scraper reads it, with its token.
    func scrape() async throws -> String {
        let answer = try await send("GET", "/metrics", token: Self.metricsToken, versions: false)
        #expect(answer.status == 200, "\(String(decoding: answer.body, as: UTF8.self))")
        return String(decoding: answer.body, as: UTF8.self)
    }

    /// Whether `path` (a probe: `/health`, `/readyz`) answers 200 within a minute. A probe's database
    /// check has a 3 s deadline, and on a loaded host (a full run beside a CPU-bound process) one has
    /// passed it: a 503 then is the deadline working, so it is asked again rather than taken as the answer.
    func answers200(_ path: String = "/health", versions: Bool = true) async throws -> Bool {
        try await probe(path, versions: versions).status == 200
    }

    /// A probe's answer (`GET path`), asked again every 2 s for a minute while it is a 503 (see `answers200`).
    func probe(_ path: String, versions: Bool = true) async throws -> (status: Int, headers: [String: String], body: Data) {
        var answer = try await send("GET", path, versions: versions)
        for _ in 0..<30 where answer.status == 503 {
            try await Task.sleep(for: .seconds(2))
            answer = try await send("GET", path, versions: versions)
        }
        return answer
    }

    /// A raw request, for what `HTTPTransport` never sends (no token, wrong versions, gzip by hand).
    func send(
        _ method: String, _ path: String, token: String? = nil, body: Data? = nil,
        headers: [String: String] = [:], versions: Bool = true
    ) async throws -> (status: Int, headers: [String: String], body: Data) {
        var request = HTTPClientRequest(url: "http://127.0.0.1:\(port)\(path)")
        request.method = HTTPMethod(rawValue: method)
        if versions {
            request.headers.add(name: "Outpost-Protocol-Version", value: "1")
            request.headers.add(name: "Outpost-Schema-Version", value: "7")
        }
        if let token { request.headers.add(name: "Authorization", value: "Bearer \(token)") }
        for (name, value) in headers { request.headers.replaceOrAdd(name: name, value: value) }
        if let body { request.body = .bytes(ByteBuffer(bytes: body)) }
        let response = try await Self.client.execute(request, timeout: .seconds(180))
        let data = try await response.body.collect(upTo: 1 << 30)
        var fields: [String: String] = [:]
        for (name, value) in response.headers {
            let key = name.lowercased()
            fields[key] = fields[key].map { "\($0), \(value)" } ?? value
        }
        return (Int(response.status.code), fields, Data(data.readableBytesView))
    }

    /// The raw requests' client: it inflates a gzip answer as URL loading did, follows no redirect,
    /// and lives as long as the test process (never shut down, so never torn down under a request).
    static let client = HTTPClient(
        eventLoopGroupProvider: .singleton,
        configuration: .init(
            redirectConfiguration: .disallow, timeout: .init(connect: .seconds(180), read: .seconds(180)),
            decompression: .enabled(limit: .none)))
}

/// Records and mutations the tests push.
enum Sample {
    static let node = NodeID(0x5eed)

    static func clock(_ offsetMilliseconds: Int64 = 0, counter: UInt16 = 0) -> HybridTimestamp {
        HybridTimestamp(
            physicalMilliseconds: Int64(Date().timeIntervalSince1970 * 1000) - 60_000 + offsetMilliseconds,
            counter: counter, node: node)
    }

    static func issueFields(project: UUID, title: String = "Cracked sill") -> [String: FieldValue] {
        [
            "projectID": .uuid(project), "title": .text(title), "details": .text(""), "status": .text("open"),
            "priority": .text("high"), "assigneeID": .null, "latitude": .null, "longitude": .null, "assetID": .null,
            "modelElementID": .null,
        ]
    }

    static func create(
        _ entity: EntityType, id: UUID = UUID(), fields: [String: FieldValue], key: UUID = UUID(),
        clock: HybridTimestamp = Sample.clock()
    ) -> PushMutation {
        PushMutation(
            idempotencyKey: key, entity: entity, operation: .create, recordID: id, baseVersion: 0, fields: fields,
            clocks: fields.mapValues { _ in clock }, createdAt: Timestamp.now())
    }

    static func update(
        _ entity: EntityType, id: UUID, baseVersion: Int64, fields: [String: FieldValue], key: UUID = UUID(),
        clock: HybridTimestamp = Sample.clock(1000)
    ) -> PushMutation {
        PushMutation(
            idempotencyKey: key, entity: entity, operation: .update, recordID: id, baseVersion: baseVersion,
            fields: fields, clocks: fields.mapValues { _ in clock })
    }

    static func attachmentFields(issue: UUID, bytes: Data) -> [String: FieldValue] {
        [
            "issueID": .uuid(issue), "dailyLogID": .null, "kind": .text("photo"), "fileName": .text("sill.jpg"),
            "contentType": .text("image/jpeg"), "byteSize": .integer(Int64(bytes.count)),
            "sha256": .text(sha256Hex(bytes)), "thumbnail": .null, "capturedAt": .date(Timestamp.now()),
            "durationSeconds": .null,
        ]
    }
}

extension MutationOutcome {
    var appliedVersion: Int64? {
        if case .applied(let version, _) = self { return version }
        return nil
    }

    var rejectedCode: ServerErrorCode? {
        if case .rejected(let reason) = self { return reason.code }
        return nil
    }
}

func sha256Hex(_ data: Data) -> String {
    TokenDigest.hex(of: data)
}

/// `value` as the wire's JSON (instants as ISO 8601 text with milliseconds), as `HTTPTransport` sends it.
func wireJSON(_ value: some Encodable) throws -> Data {
    try WireCoding.encoder().encode(value)
}

/// Another process's write transaction on a server's SQLite file (a second connection locks as one
/// would), taken and held on a thread of its own until `release()`, or until the holder is gone (a test
/// that throws first). Waiting for it never blocks a task: a test that waited on a semaphore held one of
/// the two cooperative threads a 2-core machine has, and two such tests at once left none to run the
/// task that takes the lock. No clock lets it go: a hold that ended after 120 s let a push through that
/// the test had not yet sent, under a full run on a loaded 2-core machine.
final class HeldWriteLock: @unchecked Sendable {
    /// The thread's side: it holds this, not the `HeldWriteLock`, so dropping the holder releases the lock.
    private final class Hold: @unchecked Sendable {
        // @unchecked: `state` is only touched under `lock`.
        let lock = NSLock()
        var state: (held: Bool, done: Bool, failure: (any Error)?) = (false, false, nil)
        let released = DispatchSemaphore(value: 0)
    }

    private let hold = Hold()

    init(path: String) {
        let thread = Thread { [hold] in
            do {
                let queue = try DatabaseQueue(path: path)
                try queue.write { db in
                    try db.execute(sql: "UPDATE tokens SET expires_at = expires_at")
                    hold.lock.withLock { hold.state.held = true }
                    hold.released.wait()
                }
                try queue.close()
            } catch {
                hold.lock.withLock { hold.state.failure = error }
            }
            hold.lock.withLock { hold.state.done = true }
        }
        thread.start()
    }

    deinit {
        hold.released.signal()
    }

    /// Returns once the lock is held (or taking it failed).
    func waitUntilHeld() async throws {
        while true {
            let (held, done, failure) = hold.lock.withLock { (hold.state.held, hold.state.done, hold.state.failure) }
            if let failure { throw failure }
            if held || done { return }
            try await Task.sleep(for: .milliseconds(5))
        }
    }

    /// Lets the lock go and returns once the transaction has ended.
    func release() async throws {
        hold.released.signal()
        while !hold.lock.withLock({ hold.state.done }) { try await Task.sleep(for: .milliseconds(5)) }
        if let failure = hold.lock.withLock({ hold.state.failure }) { throw failure }
    }
}

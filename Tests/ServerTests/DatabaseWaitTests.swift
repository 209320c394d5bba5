@testable import OutpostServer
import Foundation
import Logging
import OutpostFieldService
import OutpostFieldServiceTesting
import OutpostSync
import OutpostWire
import PostgresNIO
import Testing

/// Several instances on one PostgreSQL: one frozen while it holds the write lock must not stop the
/// others for longer than the bounds, and `/health` must say when the database does not answer.
@Suite("Database waits are bounded", .fieldService)
struct DatabaseWaitTests {
    private static let logger = Logger(label: "outpost.tests.waits") { _ in SwiftLogNoOpLogHandler() }

    @Test("A writer frozen mid-push: pushes elsewhere are answered 503 within the lock wait, and its lock is freed once it sits idle past the limit",
          .enabled(if: TestPostgres.baseURL != nil, TestPostgres.skipMessage))
    func aFrozenWriterIsBounded() async throws {
        // The database is made and seeded by an instance with the default waits: with a 2 s lock wait every
        // call is bounded at 22 s, and on a loaded host the first seeding (migrations included) once took
        // longer, which said nothing about a frozen writer. The instance under test shares it.
        let seeding = try await TestServer.start(.postgres)
        let server = try await TestServer.start(.postgres, sharing: seeding) { configuration in
            configuration.databaseLockWaitSeconds = 2
            configuration.idleTransactionSeconds = 8
        }
        // The frozen session's own idle limit is longer than the server's: under make test's load on two
        // cores the push below has reached the database more than 8 s after the lock was taken (CI saw
        // it applied, the frozen session already ended), which said nothing about the lock wait.
        let frozenIdleSeconds = 30  // the SET LOCAL below says the same
        defer { Task { await server.stop(); await seeding.stop() } }
        let url = try #require(server.postgres?.url)
        // Another instance's write transaction, frozen (SIGSTOP) after it took the write lock: its own
        // session carries an idle limit, as this server sets on every session of its own.
        let frozen = try await PostgresConnection.connect(
            configuration: try PostgresConnectionURL(url).connection, id: 7, logger: Self.logger)
        defer { Task { try? await frozen.close() } }
        try await frozen.query("BEGIN", logger: Self.logger)
        try await frozen.query("SET LOCAL idle_in_transaction_session_timeout = '30s'", logger: Self.logger)
        try await frozen.query("SELECT pg_advisory_xact_lock(\(PostgresStorage.writeLockKey))", logger: Self.logger)
        let frozenAt = ContinuousClock.now

        let alice = server.transport(token: TestServer.aliceToken)
        let started = ContinuousClock.now
        let blocked = try await server.send(
            "POST", "/push", token: TestServer.aliceToken,
            body: try wireJSON(PushRequest(mutations: [Sample.create(.issue, fields: Sample.issueFields(project: TestServer.projectA))])))
        let waited = ContinuousClock.now - started
        if ContinuousClock.now - frozenAt < .seconds(frozenIdleSeconds) {
            #expect(blocked.status == 503, "answered while the lock is held: \(String(decoding: blocked.body, as: UTF8.self))")
        } else {
            // The push came after the frozen session's idle limit: the lock may be gone, either answer is right.
            #expect([200, 503].contains(blocked.status))
        }
        #expect(waited < .seconds(60), "bounded by the lock wait (2 s), not by the frozen writer")
        if ContinuousClock.now - frozenAt < .seconds(frozenIdleSeconds) {
            // Still within the frozen session's idle limit: the server itself stays healthy.
            #expect(try await server.answers200())
        }
        // The database ends the frozen session once idle past its limit, and its lock goes with it.
        let applied = try await eventuallyApplied(alice, within: .seconds(120))
        #expect(applied, "a push goes through once the frozen writer's session is ended")
    }

    /// Judged by its outcome, not by a clock: it returns at all, with the deadline's error, although the
    /// probe never does. Under make test's load on two cores a 1 s timer has woken 165 s late, so an
    /// elapsed-time bound failed for no fault of the code; the time limit only stops a hang.
    @Test("Health answers 503 when the database does not answer, within its deadline", .timeLimit(.minutes(10)))
    func healthHasADeadline() async throws {
        await #expect(throws: Deadline.TimedOut.self) {
            try await Deadline.run(seconds: 1) {
                // A probe that never returns and ignores cancellation, as a query on a dead connection may.
                // Suspended for good, not looping: a loop of `try? await Task.sleep` spins once cancelled
                // (the sleep throws at once), and held one of the pool's two threads for the rest of the
                // run: the suite after it crawled, and tests judged against a server's deadlines failed.
                await withUnsafeContinuation { (_: UnsafeContinuation<Void, Never>) in }
            }
        }
    }

    /// Every PostgreSQL statement runs under a deadline of 70 s, and its timer task slept on for the
    /// whole bound after the statement had answered: under load, thousands of sleeping tasks, each
    /// holding its work's closure. The timer must end with the work.
    @Test("A deadline's timer ends as soon as the work answers, not when the bound runs out", .timeLimit(.minutes(10)))
    func deadlineTimerEndsWithTheWork() async throws {
        let timerEnded = TimerEnd()
        let answer = try await Deadline.run(seconds: 3_600, sleep: { duration in
            do {
                try await Task.sleep(for: duration)
            } catch {
                await timerEnded.cancelled()
                throw error
            }
        }) { 42 }
        #expect(answer == 42)
        // Judged by the outcome: the timer's sleep is cancelled (within the test's limit, not the hour).
        #expect(await timerEnded.waitForCancel(), "the timer's sleep is cancelled once the work answered")
    }

    @Test("Health and the readiness probe answer 503, not 200, once the PostgreSQL database stops accepting connections; the liveness probe stays 200",
          .enabled(if: TestPostgres.baseURL != nil, TestPostgres.skipMessage))
    func healthSeesTheDatabase() async throws {
        let server = try await TestServer.start(.postgres)
        defer { Task { await server.stop() } }
        // Healthy first: judged by an answer within a minute, since under make test's load on two cores
        // one probe has taken past its 3 s deadline (a 503 then is the deadline working, not a fault).
        #expect(try await server.answers200("/health"))
        // The probes a load balancer sends are plain HTTP: no token, no protocol headers. Judged the same
        // way: CI once saw /health answer 200 and the /readyz right after it pass its deadline.
        #expect(try await server.answers200("/readyz", versions: false))
        let name = try #require(server.postgres?.name)
        try await TestPostgres.refuseConnections(to: name)
        let answer = try await server.send("GET", "/health")
        #expect(answer.status == 503, "\(String(decoding: answer.body, as: UTF8.self))")
        #expect(try JSONDecoder().decode(ErrorBody.self, from: answer.body).code == .unavailable)
        let ready = try await server.send("GET", "/readyz", versions: false)
        #expect(ready.status == 503, "\(String(decoding: ready.body, as: UTF8.self))")
        #expect(try JSONDecoder().decode(ErrorBody.self, from: ready.body).code == .unavailable)
        #expect(ready.headers["retry-after"] != nil)
        #expect(try await server.send("GET", "/livez", versions: false).status == 200, "the process still serves")
    }

    /// Pushes a new issue every second until one is applied or `limit` passes.
    private func eventuallyApplied(_ transport: HTTPTransport, within limit: Duration) async throws -> Bool {
        let deadline = ContinuousClock.now + limit
        while ContinuousClock.now < deadline {
            let answer = try? await transport.push(PushRequest(mutations: [
                Sample.create(.issue, fields: Sample.issueFields(project: TestServer.projectA)),
            ]))
            if answer?.results.first?.outcome.appliedVersion == 1 { return true }
            try await Task.sleep(for: .seconds(1))
        }
        return false
    }
}

/// Whether a deadline's timer saw its sleep cancelled.
private actor TimerEnd {
    private var ended = false

    func cancelled() { ended = true }

    /// True once the sleep was cancelled; false if it still sleeps after two minutes (a loaded
    /// machine wakes a task late, never by two minutes in a run that otherwise passes).
    func waitForCancel() async -> Bool {
        for _ in 0..<1_200 where !ended { try? await Task.sleep(for: .milliseconds(100)) }
        return ended
    }
}

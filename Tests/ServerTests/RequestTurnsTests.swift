@testable import OutpostServer
import Foundation
import OutpostFieldService
import OutpostTesting
import OutpostWire
import Synchronization
import Testing

/// One user's pushes and pulls take turns (`SyncServer.requestTurns`): past their turns, a user's
/// requests wait behind each other, never in front of another user's. A member of 990 projects sending
/// 32 one-record pulls at once kept both cores busy and another member's pull went from 0.03 to 7–9 s
/// (attack 112, F1).
@Suite("A user's requests take turns", .fieldService)
struct RequestTurnsTests {
    /// Waits, without a clock deciding the outcome, until `condition` holds; false after `limit` (a hang's
    /// stop, not a measure).
    private func eventually(within limit: Duration = .seconds(120), _ condition: () -> Bool) async throws -> Bool {
        let deadline = ContinuousClock.now + limit
        while !condition() {
            guard ContinuousClock.now < deadline else { return false }
            try await Task.sleep(for: .milliseconds(5))
        }
        return true
    }

    @Test("Alice's requests past her turns wait while her push waits for the database, her next push behind it; Bob's pull is answered meanwhile")
    func aUsersRequestsPastHerTurnsWaitAndNoOneElses() async throws {
        let server = try await TestServer.start(.sqlite) { configuration in
            configuration.requestsWorkedAtOncePerUser = 1
            // The pushes wait for the held lock for as long as the test needs, however busy the host.
            configuration.databaseLockWaitSeconds = 600
        }
        defer { Task { await server.stop() } }
        let turns = server.server.requestTurns
        let alice = TestServer.alice
        // Another process's write transaction: Alice's first push waits for it in her one turn, her second
        // push behind it (one push of a user at a time), holding no turn.
        let lock = HeldWriteLock(path: server.databasePath)
        try await lock.waitUntilHeld()
        let push = try wireJSON(PushRequest(mutations: [Sample.create(.issue, fields: Sample.issueFields(project: TestServer.projectA))]))
        let pushes = (0..<2).map { _ in
            Task { try await server.send("POST", "/push", token: TestServer.aliceToken, body: push).status }
        }
        let pushTurns = server.server.pushTurns
        #expect(try await eventually { turns.line(of: alice) == (1, 0) && pushTurns.line(of: alice) == (1, 1) }, "one push at a time")
        let pull = try wireJSON(PullRequest(cursor: nil, limit: 100))
        let alicesPull = Task { try await server.send("POST", "/pull", token: TestServer.aliceToken, body: pull).status }
        #expect(try await eventually { turns.line(of: alice).waiting == 1 }, "her pull waits its turn")
        // Bob's pull needs no turn of Alice's: answered while all three of hers wait.
        #expect(try await server.send("POST", "/pull", token: TestServer.bobToken, body: pull).status == 200)
        #expect(turns.line(of: alice) == (1, 1), "Alice's pull still waits behind her push")
        #expect(pushTurns.line(of: alice) == (1, 1), "and her second push behind her first")
        try await lock.release()
        for push in pushes { #expect(try await push.value == 200) }
        #expect(try await alicesPull.value == 200)
        #expect(try await eventually { turns.line(of: alice) == (0, 0) && pushTurns.line(of: alice) == (0, 0) }, "every turn given back")
    }

    /// Holds its work until `release()`, and says when it has started.
    final class Gate: @unchecked Sendable {
        private let lock = NSLock()
        private var waiters: [CheckedContinuation<Void, Never>] = []
        private var open = false

        func pass() async {
            await withCheckedContinuation { (waiter: CheckedContinuation<Void, Never>) in
                lock.lock()
                if open {
                    lock.unlock()
                    waiter.resume()
                } else {
                    waiters.append(waiter)
                    lock.unlock()
                }
            }
        }

        func release() {
            lock.lock()
            open = true
            let all = waiters
            waiters = []
            lock.unlock()
            for waiter in all { waiter.resume() }
        }
    }

    /// The order work began in, and how much of each key ran at once.
    final class Log: @unchecked Sendable {
        private let lock = NSLock()
        private var running: [Int: Int] = [:]
        private(set) var most: [Int: Int] = [:]
        private(set) var began: [Int: [Int]] = [:]

        func enter(_ key: Int, _ index: Int) {
            lock.lock()
            running[key, default: 0] += 1
            most[key] = max(most[key, default: 0], running[key]!)
            began[key, default: []].append(index)
            lock.unlock()
        }

        func leave(_ key: Int) {
            lock.lock()
            running[key, default: 0] -= 1
            lock.unlock()
        }
    }

    /// The report a test server gives of a request still under way past its bound (`reportingAStall`):
    /// the turn it holds, and on PostgreSQL the database's sessions, read without an error. Its job is
    /// to tell, from a CI log, where a request that never came back was waiting.
    @Test("A request still under way after its bound is reported with its server's turns, connections and database sessions",
          arguments: Backend.available)
    func aStalledRequestIsReported(_ backend: Backend) async throws {
        let server = try await TestServer.start(backend)
        defer { Task { await server.stop() } }
        let reported = Reported()
        let answer = try await server.reportingAStall(of: "a held turn", after: .milliseconds(50), to: { reported.keep($0) }) {
            // Under way until the report is in (no clock decides it).
            try await server.server.requestTurns.inTurn(of: TestServer.alice) { () async throws(ServerError) in
                let deadline = ContinuousClock.now + .seconds(120)
                while reported.lines.isEmpty, ContinuousClock.now < deadline { _ = try? await Task.sleep(for: .milliseconds(10)) }
                return 7
            }
        }
        #expect(answer == 7)
        let lines = reported.lines
        #expect(lines.first?.contains("a held turn to the server on port \(server.port)") == true, "\(lines)")
        #expect(lines.contains("request turns held or awaited: [\"1 held, 0 waiting\"]"), "\(lines)")
        #expect(lines.contains { $0.hasPrefix("connections: ") }, "\(lines)")
        #expect(!lines.contains { $0.contains("could not be read") }, "\(lines)")
        // A request answered in time reports nothing.
        let quiet = Reported()
        _ = try await server.reportingAStall(of: "a quick one", after: .seconds(30), to: { quiet.keep($0) }) { 1 }
        try await Task.sleep(for: .milliseconds(100))
        #expect(quiet.lines.isEmpty)
    }

    /// The lines a report gave.
    private final class Reported: Sendable {
        private let kept = Mutex<[String]>([])
        func keep(_ lines: [String]) { kept.withLock { $0 += lines } }
        var lines: [String] { kept.withLock { $0 } }
    }

    @Test("Turns per key: never more than the limit of one key at once, waiters in the order they came, other keys never wait",
          arguments: 1...8)
    func turnsPerKeyKeepTheirLaw(seed: UInt64) async throws {
        var random = SeededGenerator(seed: seed)
        let limit = Int.random(in: 1...3, using: &random)
        let turns = Turns<Int>(limit: limit)
        let log = Log()
        let gate = Gate()
        // Key 0's work holds its turns until the gate opens; it comes one request at a time, each queued
        // before the next is sent, so the order they came is known.
        let held = Int.random(in: limit...(limit + 6), using: &random)
        var first: [Task<Void, Never>] = []
        for index in 0..<held {
            first.append(Task {
                try? await turns.inTurn(of: 0) { () async throws(ServerError) in
                    log.enter(0, index)
                    await gate.pass()
                    log.leave(0)
                }
            })
            let expected = (min(index + 1, limit), max(0, index + 1 - limit))
            #expect(try await eventually { turns.line(of: 0) == expected }, "seed \(seed): request \(index) counted")
        }
        // Other keys' work runs to its end while every turn of key 0 is held.
        for key in 1...Int.random(in: 1...3, using: &random) {
            for index in 0..<Int.random(in: 1...5, using: &random) {
                try await turns.inTurn(of: key) { () async throws(ServerError) in
                    log.enter(key, index)
                    log.leave(key)
                }
            }
        }
        #expect(turns.line(of: 0) == (limit, held - limit), "seed \(seed): key 0 unchanged by the others")
        gate.release()
        for task in first { await task.value }
        // Failing work gives its turn back too.
        await #expect(throws: ServerError.self) {
            try await turns.inTurn(of: 0) { () async throws(ServerError) in throw ServerError.badRequest("fails") }
        }
        #expect(turns.line(of: 0) == (0, 0), "seed \(seed): every turn given back")
        #expect(log.most[0] == limit, "seed \(seed): \(log.most[0] ?? 0) of key 0 ran at once under a limit of \(limit)")
        #expect(log.began[0] == Array(0..<held), "seed \(seed): key 0 began in the order it came")
        #expect(turns.peak == limit, "seed \(seed)")
    }
}

/// Answers a caller has not read count against the caller's bound with its bodies under way, and only
/// there (`BodiesInFlight.take`, `inAll` false): one member's tokens leaving 15 MB conflict answers unread on 32
/// connections each took a server from 133 MB to 2.4 GB (attack 113, F1). `ConnectionGuard` closes the
/// connection whose answer would pass the bound, which drops what it held.
struct AnswersInFlightTests {
    @Test("An answer past its caller's bound is refused, bodies and answers together; other callers and the total are untouched; every byte comes back",
          arguments: 1...6)
    func answersCountAgainstTheirCallerAlone(seed: UInt64) {
        var random = SeededGenerator(seed: seed)
        let perCaller = Int.random(in: 1_000...50_000, using: &random)
        let bodies = BodiesInFlight(perCaller: perCaller, total: perCaller * 2)
        var held: [String: Int] = [:]
        var taken: [(caller: String, bytes: Int, answer: Bool)] = []
        for _ in 0..<200 {
            let caller = ["alice", "bob", "carol"].randomElement(using: &random)!
            if !taken.isEmpty, Int.random(in: 0..<3, using: &random) == 0 {
                let given = taken.remove(at: Int.random(in: 0..<taken.count, using: &random))
                bodies.give(given.bytes, for: given.caller, inAll: !given.answer)
                held[given.caller, default: 0] -= given.bytes
                continue
            }
            let bytes = Int.random(in: 1...(perCaller / 3), using: &random)
            let answer = Bool.random(using: &random)
            let fits = held[caller, default: 0] + bytes <= perCaller
            // A body also meets the total of all callers, counted from bodies alone.
            let bodiesHeld = taken.filter { !$0.answer }.map(\.bytes).reduce(0, +)
            let expected = answer ? fits : fits && bodiesHeld + bytes <= perCaller * 2
            let took = bodies.take(bytes, for: caller, inAll: !answer)
            #expect(took == expected, "seed \(seed): \(answer ? "answer" : "body") of \(bytes) for \(caller) holding \(held[caller, default: 0])")
            if took {
                held[caller, default: 0] += bytes
                taken.append((caller, bytes, answer))
            }
            #expect(bodies.held(by: caller) == held[caller, default: 0], "seed \(seed)")
        }
        for given in taken {
            bodies.give(given.bytes, for: given.caller, inAll: !given.answer)
        }
        for caller in ["alice", "bob", "carol"] { #expect(bodies.held(by: caller) == 0, "seed \(seed): \(caller)'s bytes came back") }
        // The total was given back whole: a body of the whole bound fits again.
        #expect(bodies.take(perCaller, for: "dave"), "seed \(seed)")
    }
}

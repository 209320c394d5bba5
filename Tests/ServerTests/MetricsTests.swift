@testable import OutpostServer
import Foundation
import OutpostFieldServiceTesting
import OutpostSync
import OutpostTesting
import OutpostWire
import Testing

@Suite("Metrics: /metrics as Prometheus reads it", .fieldService)
struct MetricsTests {
    @Test("Every family has its # TYPE; requests are counted and timed per route and status, pushes per outcome; gauges stand as scraped")
    func prometheusParsesEveryFamily() async throws {
        let server = try await TestServer.start()
        let alice = server.transport(token: TestServer.aliceToken)
        _ = try await alice.push(PushRequest(mutations: [Sample.create(.issue, fields: Sample.issueFields(project: TestServer.projectA))]))
        _ = try await alice.pull(PullRequest(cursor: nil, limit: 10))
        _ = try await server.send("POST", "/pull", token: "no such token", body: Data(#"{"limit": 1}"#.utf8))
        // A method a route does not have (standard or one of the few dozen the server's parser knows,
        // WebDAV's among them) shares one label per route, and paths no route has share one label: the
        // label set is bounded by the routes, whatever clients send.
        for made in ["PROPFIND", "MKCOL", "PURGE", "DELETE", "PATCH"] {
            _ = try await server.send(made, "/health", versions: false)
            _ = try await server.send(made, "/push", versions: false)
            _ = try await server.send(made, "/\(made.lowercased())", versions: false)
        }
        _ = try await server.send("GET", "/health/more", versions: false)
        let answer = try await server.send("GET", "/metrics", token: TestServer.metricsToken, versions: false)
        #expect(answer.status == 200)
        let families = try await PrometheusText.families(in: String(decoding: answer.body, as: UTF8.self))
        let byName = Dictionary(families.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
        for family in families {
            #expect(family.type != "unknown", "\(family.name) has no # TYPE line")
        }
        #expect(byName["outpost_requests"]?.type == "counter")
        let routes = Set((byName["outpost_requests"]?.samples.keys ?? [:].keys).compactMap { $0.split(separator: "\"").dropFirst().first.map(String.init) })
        let possible = Set(Routes.all.flatMap { route in (route.methods.map(\.rawValue) + ["OTHER"]).map { "\($0) /\(route.segments[0])" } })
        #expect(routes.isSubset(of: possible.union(["OTHER /other"])), "\(routes.subtracting(possible).sorted())")
        #expect(routes.isSuperset(of: ["OTHER /health", "OTHER /push", "OTHER /other"]), "\(routes.sorted())")
        #expect(byName["outpost_requests"]?.samples[#"outpost_requests_total{route="POST /push",status="200"}"#] == 1)
        #expect(byName["outpost_requests"]?.samples[#"outpost_requests_total{route="POST /pull",status="401"}"#] == 1)
        let latency = try #require(byName["outpost_request_duration_seconds"])
        #expect(latency.type == "histogram")
        #expect(latency.samples[#"outpost_request_duration_seconds_count{route="POST /pull",status="200"}"#] == 1)
        #expect(byName["outpost_mutations"]?.samples[#"outpost_mutations_total{outcome="applied"}"#] == 1)
        #expect(byName["outpost_open_connections"]?.type == "gauge")
        #expect((byName["outpost_open_connections"]?.samples["outpost_open_connections"] ?? 0) >= 1)
        #expect(byName["outpost_bundle_downloads_streaming"]?.type == "gauge")
        #expect(byName["outpost_received_bytes"]?.type == "counter")
        #expect(byName["outpost_sent_bytes"]?.type == "counter")
        #expect(byName["outpost_database_connections_in_use"]?.type == "gauge")
        #expect(byName["outpost_database_lock_wait_seconds"]?.type == "histogram")
        await server.stop()
    }

    @Test("Pushes naming made-up project ids leave no series behind: the per-project gauge names only projects with a push under way")
    func madeUpProjectsLeaveNoSeries() async throws {
        let server = try await TestServer.start(.sqlite)
        defer { Task { await server.stop() } }
        let alice = server.transport(token: TestServer.aliceToken)
        let named = (0..<400).map { _ in UUID() }
        for chunk in stride(from: 0, to: named.count, by: 200) {
            let mutations = named[chunk..<chunk + 200].map { Sample.create(.issue, fields: Sample.issueFields(project: $0)) }
            let answer = try await alice.push(PushRequest(mutations: mutations))
            #expect(answer.results.allSatisfy { $0.outcome.appliedVersion == nil }, "every one is refused")
        }
        let text = try await server.scrape()
        let family = try await PrometheusText.families(in: text).first { $0.name == "outpost_pushes_in_progress" }
        #expect(family?.samples.isEmpty ?? true, "\(family?.samples.count ?? 0) series left")
        #expect(!named.contains { text.contains($0.storageText) })
    }

    /// The per-project series name the ids of projects being pushed to, and when: anyone reaching the
    /// port read them (attack finding 3 of stop 49). Only the scraper's token and admin tokens read
    /// the metrics now; a member's token, an unknown one and none get the same refusals as elsewhere.
    @Test("/metrics answers the scraper's token and admin tokens only: 401 without a token or with an unknown one, 403 for a member's", arguments: Backend.available)
    func metricsAreForTheScraperAndAdministrators(_ backend: Backend) async throws {
        let server = try await TestServer.start(backend)
        defer { Task { await server.stop() } }
        let admin = try await server.server.issueToken(for: TestServer.carol, admin: true)
        let expired = try await server.server.issueToken(for: TestServer.carol, expiresAt: Date().addingTimeInterval(-1), admin: true)
        for (token, status) in [
            (nil, 401), ("", 401), ("no such token", 401), (TestServer.metricsToken + "x", 401), (expired, 401),
            (TestServer.aliceToken, 403), (TestServer.carolToken, 403), (TestServer.metricsToken, 200), (admin, 200),
        ] as [(String?, Int)] {
            let answer = try await server.send("GET", "/metrics", token: token, versions: false)
            #expect(answer.status == status, "\(token ?? "no token"): \(String(decoding: answer.body.prefix(300), as: UTF8.self))")
            let text = String(decoding: answer.body, as: UTF8.self)
            #expect((status == 200) == text.contains("# TYPE outpost_requests_total counter"), "\(token ?? "no token")")
        }
        // A server given no scraper token answers admin tokens alone: nothing falls open.
        let plain = try await TestServer.start(.sqlite) { $0.metricsToken = nil }
        defer { Task { await plain.stop() } }
        #expect(try await plain.send("GET", "/metrics", versions: false).status == 401)
        #expect(try await plain.send("GET", "/metrics", token: TestServer.metricsToken, versions: false).status == 401)
        let plainAdmin = try await plain.server.issueToken(for: TestServer.carol, admin: true)
        #expect(try await plain.send("GET", "/metrics", token: plainAdmin, versions: false).status == 200)
    }

    @Test("A push stuck behind another writer shows as in progress for its project, and its wait for the lock is timed")
    func aStuckPushIsSeen() async throws {
        // The push waits for the lock as long as the test needs: under full load the scrapes took past the
        // default 10 s, and the push was answered before the test let the lock go.
        let server = try await TestServer.start { $0.databaseLockWaitSeconds = 600 }
        defer { Task { await server.stop() } }
        // Another process's write transaction on the server's file (a second connection locks as one would),
        // held until the test has seen the push wait (released by the test, not by a clock: under load a fixed hold
        // ended before a scrape came).
        let held = HeldWriteLock(path: server.databasePath)
        try await held.waitUntilHeld()
        let alice = server.transport(token: TestServer.aliceToken)
        let push = Task {
            try await alice.push(PushRequest(mutations: [Sample.create(.issue, fields: Sample.issueFields(project: TestServer.projectA))]))
        }
        func scrape() async throws -> [String: PrometheusText.Family] {
            let text = try await server.scrape()
            return Dictionary(try await PrometheusText.families(in: text).map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
        }
        let gauge = #"outpost_pushes_in_progress{project="\#(TestServer.projectA.storageText)"}"#
        var waiting: Double?
        let started = ContinuousClock.now
        // Until the server has the push, however long a busy machine takes to deliver it (60 s ran out
        // once with a CPU-bound process beside a full run); below the 600 s lock wait, past which the
        // push would be answered 503 instead.
        while waiting != 1, ContinuousClock.now - started < .seconds(540) {
            try await Task.sleep(for: .milliseconds(50))
            waiting = try await scrape()["outpost_pushes_in_progress"]?.samples[gauge]
        }
        #expect(waiting == 1, "the push waiting for the lock is counted for its project")
        // It waits a second more, then the lock goes.
        try await Task.sleep(for: .seconds(1))
        try await held.release()
        _ = try await push.value
        let after = try await scrape()
        // A project with no push under way has no series: the label set is the projects being pushed to
        // now, never every id a push ever named.
        #expect(after["outpost_pushes_in_progress"]?.samples[gauge] == nil)
        let lockWaits = try #require(after["outpost_database_lock_wait_seconds"])
        #expect((lockWaits.samples["outpost_database_lock_wait_seconds_sum"] ?? 0) >= 1, "the push waited over a second: \(lockWaits.samples)")
    }

    @Test("A push that waits past the lock wait for another process's write lock is answered 503 with Retry-After, and the next goes through")
    func aLockHeldPastTheWaitIs503() async throws {
        let server = try await TestServer.start { $0.databaseLockWaitSeconds = 1 }
        defer { Task { await server.stop() } }
        let held = HeldWriteLock(path: server.databasePath)
        try await held.waitUntilHeld()
        let body = try WireCoding.encoder().encode(
            PushRequest(mutations: [Sample.create(.issue, fields: Sample.issueFields(project: TestServer.projectA))]))
        let refused = try await server.send("POST", "/push", token: TestServer.aliceToken, body: body)
        #expect(refused.status == 503, "\(String(decoding: refused.body, as: UTF8.self))")
        #expect(refused.headers["retry-after"] == "2")
        #expect(String(decoding: refused.body, as: UTF8.self).contains("unavailable"))
        try await held.release()
        let taken = try await server.send("POST", "/push", token: TestServer.aliceToken, body: body)
        #expect(taken.status == 200)
    }
}

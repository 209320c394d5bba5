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
        // Methods outside HTTP's standard ones (the server's parser knows a few dozen, WebDAV's among them;
        // it refuses any other before a route sees it), and paths no route has, share one label each.
        for made in ["PROPFIND", "MKCOL", "PURGE"] {
            _ = try await server.send(made, "/health/\(made)", versions: false)
            _ = try await server.send(made, "/\(made.lowercased())", versions: false)
        }
        let answer = try await server.send("GET", "/metrics", versions: false)
        #expect(answer.status == 200)
        let families = try await PrometheusText.families(in: String(decoding: answer.body, as: UTF8.self))
        let byName = Dictionary(families.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
        for family in families {
            #expect(family.type != "unknown", "\(family.name) has no # TYPE line")
        }
        #expect(byName["outpost_requests"]?.type == "counter")
        let routes = Set((byName["outpost_requests"]?.samples.keys ?? [:].keys).compactMap { $0.split(separator: "\"").dropFirst().first })
        #expect(!routes.contains { $0.hasPrefix("PROPFIND") || $0.hasPrefix("MKCOL") || $0.hasPrefix("PURGE") }, "\(routes.sorted())")
        #expect(routes.contains("OTHER /health") && routes.contains("OTHER /other"), "\(routes.sorted())")
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
        await server.stop()
    }
}

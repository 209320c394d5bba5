import Foundation
import OutpostFieldService
import OutpostFieldServiceTesting
import OutpostModels
import OutpostSchema
import OutpostServer
import OutpostSync
import OutpostWire
import Testing

/// A token may expire: from then on its next request is answered 401 on every instance, as a revoked
/// one is; a token without an expiry keeps working.
@Suite(.fieldService) struct TokenExpiryTests {
    @Test("A token expiring mid-session gets 401 on its next request, on every instance", arguments: Backend.available)
    func anExpiredTokenIsRefusedEverywhere(_ backend: Backend) async throws {
        let first = try await TestServer.start(backend)
        // PostgreSQL: a second instance on the same database; SQLite serves one instance per file.
        let second = backend == .postgres ? try await TestServer.start(backend, sharing: first) : nil
        let instances = [first] + (second.map { [$0] } ?? [])
        let token = try await first.server.issueToken(for: TestServer.alice, expiresAt: Date().addingTimeInterval(3600))
        for instance in instances {
            #expect(try await instance.send("POST", "/pull", token: token, body: Self.pull).status == 200)
        }
        // The hour passes (the clock is the database's row, moved back, not a test that waits an hour).
        try await first.execute("UPDATE tokens SET expires_at = 1 WHERE expires_at IS NOT NULL")
        for instance in instances {
            let answer = try await instance.send("POST", "/pull", token: token, body: Self.pull)
            #expect(answer.status == 401, "\(String(decoding: answer.body, as: UTF8.self))")
        }
        // A token without an expiry is untouched.
        #expect(try await first.send("POST", "/pull", token: TestServer.aliceToken, body: Self.pull).status == 200)
        // One issued already expired never works.
        let stale = try await first.server.issueToken(for: TestServer.alice, expiresAt: Date().addingTimeInterval(-1))
        #expect(try await first.send("POST", "/pull", token: stale, body: Self.pull).status == 401)
        if let second { await second.stop() }
        await first.stop()
    }

    static let pull = try! wireJSON(PullRequest(cursor: nil, limit: 1))
}

/// A token's requests are limited per minute when the operator sets a limit: past it, 429
/// `rate_limited` with `Retry-After`; another token is not held back by it.
@Suite(.fieldService) struct RateLimitTests {
    @Test("Past its per-minute limit a token gets 429 with Retry-After; another token goes on")
    func aTokenPastItsLimitIsToldWhenToComeBack() async throws {
        let server = try await TestServer.start(.sqlite) { $0.requestsPerMinutePerToken = 3 }
        let pull = try wireJSON(PullRequest(cursor: nil, limit: 1))
        for _ in 0..<3 {
            #expect(try await server.send("POST", "/pull", token: TestServer.aliceToken, body: pull).status == 200)
        }
        let limited = try await server.send("POST", "/pull", token: TestServer.aliceToken, body: pull)
        #expect(limited.status == 429, "\(String(decoding: limited.body, as: UTF8.self))")
        #expect(try JSONDecoder().decode(ErrorBody.self, from: limited.body).code == .rateLimited)
        let retryAfter = try #require(limited.headers["retry-after"].flatMap(Int.init))
        #expect((1...20).contains(retryAfter), "a minute's limit of 3 refills one request in 20 s: \(retryAfter)")
        #expect(try await server.send("POST", "/pull", token: TestServer.carolToken, body: pull).status == 200)
        // A token no one issued is not counted, and stays 401.
        #expect(try await server.send("POST", "/pull", token: "guess", body: pull).status == 401)
        await server.stop()
    }
}

import Foundation
import OutpostFieldService
import OutpostFieldServiceTesting
import OutpostModels
import OutpostSchema
@testable import OutpostServer
import OutpostSync
import OutpostWire
import Testing

/// A request is let in by its token when it arrives, and worked on when its turn comes: behind the
/// user's other requests (`SyncServer.requestTurns`, `pushTurns`) and, for a push, behind the database's
/// one writer. An office that revokes a lost phone's token meanwhile must not see the phone's push land
/// nor its pull answered after the revocation (attack 113, F7): the token is asked for again when the
/// work begins, and for a push inside the very transaction that writes it.
@Suite("A token revoked while its request waits", .fieldService)
struct RevokedWhileWaitingTests {
    /// How a token's loss reaches the database: revoked through the admin API's call, or expired.
    enum Loss: String, CaseIterable, CustomTestStringConvertible {
        case revoked, expired
        var testDescription: String { rawValue }
    }

    @Test("A push or pull let in before its token was revoked or expired is refused with 401 when its turn comes; nothing of the push is written, the user's other token goes on",
          arguments: Backend.available, Loss.allCases)
    func refusedWhenItsTurnComes(_ backend: Backend, _ loss: Loss) async throws {
        let server = try await TestServer.start(backend)
        defer { Task { await server.stop() } }
        let phone = try await server.server.issueToken(
            for: TestServer.alice, expiresAt: loss == .expired ? Date().addingTimeInterval(3600) : nil)
        // Let in as the route lets a request in when it arrives.
        let waiting = try await server.server.caller(bearing: phone)
        switch loss {
        case .revoked: #expect(try await server.server.revokeToken(phone))
        case .expired: try await server.execute("UPDATE tokens SET expires_at = 1 WHERE expires_at IS NOT NULL")
        }

        let issue = Sample.create(.issue, fields: Sample.issueFields(project: TestServer.projectA, title: "From the lost phone"))
        await Self.expectUnauthorized("the push") { try await server.server.push(PushRequest(mutations: [issue]), by: waiting) }
        await Self.expectUnauthorized("the pull") {
            try await server.server.pull(PullRequest(cursor: nil, limit: 100), by: waiting, gzip: false)
        }
        await Self.expectUnauthorized("the push's answers") {
            try await server.server.pushAnswers(PushAnswersRequest(idempotencyKeys: [issue.idempotencyKey]), by: waiting)
        }
        // The storage refuses it too, inside the push's transaction: a push past the server's check when
        // the office revokes writes nothing.
        await Self.expectUnauthorized("the storage's push") {
            try await server.server.storage.push([issue], by: waiting, now: Timestamp.now())
        }

        // Nothing of it landed; Alice's other token pulls and pushes as before.
        let alice = server.transport(token: TestServer.aliceToken)
        let pulled = try await alice.pull(PullRequest(cursor: nil, limit: 500))
        #expect(!pulled.changes.contains { $0.recordID == issue.recordID }, "the refused push wrote its issue")
        let later = Sample.create(.issue, fields: Sample.issueFields(project: TestServer.projectA))
        #expect(try await alice.push(PushRequest(mutations: [later])).results.first?.outcome.appliedVersion == 1)
    }

    @Test("A caller let in by a token of another user, or by an admin token, is refused when its turn comes", arguments: Backend.available)
    func aTokenNamesItsOwnUserOnly(_ backend: Backend) async throws {
        let server = try await TestServer.start(backend)
        defer { Task { await server.stop() } }
        let bobs = TokenDigest.hex(of: TestServer.bobToken)
        let forged = Caller(userID: TestServer.alice, tokenDigest: bobs)
        let issue = Sample.create(.issue, fields: Sample.issueFields(project: TestServer.projectA))
        await Self.expectUnauthorized("a push under Bob's token as Alice") {
            try await server.server.storage.push([issue], by: forged, now: Timestamp.now())
        }
        await Self.expectUnauthorized("a pull under Bob's token as Alice") {
            try await server.server.pull(PullRequest(cursor: nil, limit: 1), by: forged, gzip: false)
        }
        // An admin token administers and never syncs, however its caller was made.
        let admin = try await server.server.issueToken(for: TestServer.alice, admin: true)
        let office = Caller(userID: TestServer.alice, tokenDigest: TokenDigest.hex(of: admin))
        await Self.expectUnauthorized("a push under an admin token") {
            try await server.server.storage.push([issue], by: office, now: Timestamp.now())
        }
        await Self.expectUnauthorized("a pull under an admin token") {
            try await server.server.pull(PullRequest(cursor: nil, limit: 1), by: office, gzip: false)
        }
    }

    private static func expectUnauthorized<Result>(
        _ what: String, _ work: () async throws -> Result, sourceLocation: SourceLocation = #_sourceLocation
    ) async {
        do {
            _ = try await work()
            Issue.record("\(what) was worked on for a token revoked before its turn", sourceLocation: sourceLocation)
        } catch {
            #expect((error as? ServerError)?.httpStatus == 401, "\(what): \(error)", sourceLocation: sourceLocation)
        }
    }
}

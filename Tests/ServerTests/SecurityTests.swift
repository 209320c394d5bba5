@testable import OutpostServer
import Foundation
import OutpostFieldService
import OutpostFieldServiceTesting
import OutpostModels
import OutpostSchema
import OutpostSync
import OutpostWire
import Testing

@Suite("Security: tokens, project membership, versions", .fieldService)
struct SecurityTests {
    /// Every route of the protocol, with a body where one is needed, aimed at project B's records.
    static func routes(attachment: UUID) -> [(method: String, path: String, body: Data?)] {
        let pull = try! JSONEncoder().encode(PullRequest(cursor: nil, limit: 10, projects: [TestServer.projectB]))
        let push = try! JSONEncoder().encode(PushRequest(mutations: []))
        return [
            ("POST", "/push", push), ("POST", "/pull", pull),
            ("GET", "/media/\(attachment.uuidString.lowercased())/upload", nil),
            ("PUT", "/media/\(attachment.uuidString.lowercased())/upload", Data([1, 2, 3])),
            ("GET", "/projects/\(TestServer.projectB.uuidString.lowercased())/bundle?format=json", nil),
        ]
    }

    @Test("Without a token, or with an unknown one, every route but health is 401 with the error body", arguments: Backend.available)
    func unauthorized(_ backend: Backend) async throws {
        let server = try await TestServer.start(backend)
        for route in Self.routes(attachment: UUID()) {
            for token in [nil, "not-a-real-token"] {
                let answer = try await server.send(route.method, route.path, token: token, body: route.body)
                #expect(answer.status == 401, "\(route.method) \(route.path)")
                #expect(try JSONDecoder().decode(ErrorBody.self, from: answer.body).code == .unauthorized)
            }
        }
        #expect(try await server.answers200())
        await server.stop()
    }

    /// Attack 111, F3: `Outpost-Request-ID` was the framework's counter, so anyone, with no token, counted
    /// every request an instance took between two of their own, pushes to projects they may not see
    /// included. An id is random for each request, and the request's log line carries it.
    @Test("A request id counts nothing: ids of requests in a row, others' between them, are unrelated")
    func requestIDsCountNothing() async throws {
        let server = try await TestServer.start(.sqlite)
        defer { Task { await server.stop() } }
        var ids: [String] = []
        for round in 0..<6 {
            let answer = try await server.send("GET", "/health")
            ids.append(try #require(answer.headers["outpost-request-id"], "every answer names its request"))
            if round.isMultiple(of: 2) { _ = try await server.send("POST", "/pull", token: TestServer.bobToken, body: Data("{}".utf8)) }
        }
        #expect(Set(ids).count == ids.count, "\(ids)")
        #expect(ids.allSatisfy { $0.count == 32 && UInt128($0, radix: 16) != nil }, "128 bits in hex: \(ids)")
        // A counter's ids share their leading digits and differ by the requests between them; random
        // ones share a leading half with odds of one in 2^64.
        for (one, next) in zip(ids, ids.dropFirst()) {
            #expect(one.prefix(16) != next.prefix(16), "\(one) then \(next)")
        }
    }

    @Test("A member of project A reaches nothing of project B, and is answered as if it did not exist", arguments: Backend.available)
    func forbiddenAcrossProjects(_ backend: Backend) async throws {
        let server = try await TestServer.start(backend)
        let bob = server.transport(token: TestServer.bobToken)
        let bobsIssue = Sample.create(.issue, fields: Sample.issueFields(project: TestServer.projectB))
        let bytes = Data("photo".utf8)
        let attachment = Sample.create(.mediaAttachment, fields: Sample.attachmentFields(issue: bobsIssue.recordID, bytes: bytes))
        _ = try await bob.push(PushRequest(mutations: [bobsIssue, attachment]))

        for route in Self.routes(attachment: attachment.recordID) where route.path != "/push" {
            var headers: [String: String] = [:]
            if route.method == "PUT" {
                headers = ["Content-Range": "bytes 0-2/3", "Outpost-Media-SHA256": sha256Hex(bytes)]
            }
            let answer = try await server.send(
                route.method, route.path, token: TestServer.aliceToken, body: route.body, headers: headers)
            // A pull naming B is refused as naming a project that is not hers (unknown ones alike); the
            // media and bundle routes answer as for an attachment or a project that does not exist.
            let expected = route.path == "/pull" ? (403, ServerErrorCode.forbidden) : (404, ServerErrorCode.notFound)
            #expect(answer.status == expected.0, "\(route.method) \(route.path)")
            #expect(try JSONDecoder().decode(ErrorBody.self, from: answer.body).code == expected.1)
        }

        // Per mutation inside a push: editing, re-creating or linking to B's records is refused, as for
        // records that do not exist.
        let alice = server.transport(token: TestServer.aliceToken)
        let mutations = [
            Sample.update(.issue, id: bobsIssue.recordID, baseVersion: 1, fields: ["title": .text("mine now")]),
            Sample.create(.issue, id: bobsIssue.recordID, fields: Sample.issueFields(project: TestServer.projectA)),
            Sample.create(.issue, fields: Sample.issueFields(project: TestServer.projectB)),
            Sample.create(.comment, fields: [
                "issueID": .uuid(bobsIssue.recordID), "authorID": .uuid(UUID()), "body": .text("hello"),
            ]),
            Sample.update(.project, id: TestServer.projectB, baseVersion: 1, fields: ["name": .text("taken")]),
        ]
        let results = try await alice.push(PushRequest(mutations: mutations)).results
        #expect(results.map(\.outcome.rejectedCode) == Array(repeating: .notFound, count: mutations.count))
        // And Alice's pull never shows B's records.
        let page = try await alice.pull(PullRequest(cursor: nil, limit: 1000))
        #expect(!page.changes.contains { $0.recordID == bobsIssue.recordID || $0.recordID == TestServer.projectB })
        #expect(page.changes.contains { $0.recordID == TestServer.projectA })
        await server.stop()
    }

    @Test("A member of two projects cannot tie one project's records to the other's", arguments: Backend.available)
    func aRecordNamingAnotherProjectsRecordIsRefused(_ backend: Backend) async throws {
        let server = try await TestServer.start(backend)
        defer { Task { await server.stop() } }
        let carol = server.transport(token: TestServer.carolToken)
        // Carol's own member record in A (one per member and project).
        let memberOfA = try await server.server.memberRecordID(project: TestServer.projectA, user: TestServer.carol)
        var issueOfB = Sample.issueFields(project: TestServer.projectB)
        issueOfB["assigneeID"] = .uuid(memberOfA)
        let assignedAcross = Sample.create(.issue, fields: issueOfB)
        let plainIssueOfB = Sample.create(.issue, fields: Sample.issueFields(project: TestServer.projectB))
        let commentAcross = Sample.create(.comment, fields: [
            "issueID": .uuid(plainIssueOfB.recordID), "authorID": .uuid(memberOfA), "body": .text("Gate code 4471"),
        ])
        var issueOfA = Sample.issueFields(project: TestServer.projectA)
        issueOfA["assigneeID"] = .uuid(memberOfA)
        let assignedWithin = Sample.create(.issue, fields: issueOfA)
        let results = try await carol.push(PushRequest(mutations: [assignedAcross, plainIssueOfB, commentAcross, assignedWithin])).results
        #expect(results.map { $0.outcome.appliedVersion } == [nil, 1, nil, 1])
        #expect(results[0].outcome.rejectedCode == .invalidRequest)
        #expect(results[2].outcome.rejectedCode == .invalidRequest)
        // Nor can a record of B be moved into A (its children would then name across the boundary).
        let move = Sample.update(
            .issue, id: plainIssueOfB.recordID, baseVersion: 1,
            fields: ["projectID": .uuid(TestServer.projectA), "assigneeID": .null, "assetID": .null], clock: Sample.clock(120_000))
        #expect(try await carol.push(PushRequest(mutations: [move])).results[0].outcome.rejectedCode == .invalidRequest)
    }

    @Test("Money and membership are the office's: crew and viewers are refused, with why", arguments: Backend.available)
    func rolesDecideWhoMayWriteWhat(_ backend: Backend) async throws {
        let server = try await TestServer.start(backend)
        defer { Task { await server.stop() } }
        let bob = server.transport(token: TestServer.bobToken)  // crew in B
        let carol = server.transport(token: TestServer.carolToken)  // project manager in A and B
        let fee = Sample.create(.fee, fields: [
            "projectID": .uuid(TestServer.projectB), "name": .text("Disposal"), "amountCents": .integer(15_000),
            "isTaxable": .bool(false),
        ])
        let issue = Sample.create(.issue, fields: Sample.issueFields(project: TestServer.projectB))
        let results = try await bob.push(PushRequest(mutations: [fee, issue])).results
        #expect(results[0].outcome.rejectedCode == .forbidden, "a crew member cannot set a fee")
        #expect(results[1].outcome.appliedVersion == 1, "but records the field")
        #expect(try await carol.push(PushRequest(mutations: [
            Sample.create(.fee, id: fee.recordID, fields: fee.fields, key: UUID()),
        ])).results[0].outcome.appliedVersion == 1)

        // Bob cannot promote himself: his member record is the office's.
        let pulled = try await bob.pull(PullRequest(cursor: nil, limit: 1000)).changes
        let own = try #require(pulled.first { $0.entity == .member && $0.fields["userID"] == .uuid(TestServer.bob) })
        let promotion = Sample.update(.member, id: own.recordID, baseVersion: own.version, fields: ["role": .text("owner")],
            clock: Sample.clock(120_000))
        #expect(try await bob.push(PushRequest(mutations: [promotion])).results[0].outcome.rejectedCode == .forbidden)

        // A project a crew member creates on a device is theirs to run, money included.
        let ownProject = UUID()
        let created = try await bob.push(PushRequest(mutations: [
            Sample.create(.project, id: ownProject, fields: [
                "opportunityID": .null, "name": .text("Side job"), "number": .null, "address": .text(""),
                "status": .text("planned"), "startDay": .null,
            ]),
            Sample.create(.fee, fields: [
                "projectID": .uuid(ownProject), "name": .text("Permit"), "amountCents": .integer(9_000), "isTaxable": .bool(false),
            ]),
        ])).results
        #expect(created.allSatisfy { $0.outcome.appliedVersion == 1 }, "\(created)")
    }

    @Test("A removed member and a revoked token are refused from their next request on", arguments: Backend.available)
    func removalAndRevocationTakeEffectAtOnce(_ backend: Backend) async throws {
        let server = try await TestServer.start(backend)
        defer { Task { await server.stop() } }
        let carol = server.transport(token: TestServer.carolToken)
        let before = try await carol.push(PushRequest(mutations: [
            Sample.create(.issue, fields: Sample.issueFields(project: TestServer.projectA)),
        ])).results
        #expect(before[0].outcome.appliedVersion == 1)
        let aliceSees = try await server.transport(token: TestServer.aliceToken).pull(PullRequest(cursor: nil, limit: 1000)).changes
        let carolsMemberRecord = try #require(aliceSees.first {
            $0.entity == .member && $0.fields["userID"] == .uuid(TestServer.carol) && $0.fields["projectID"] == .uuid(TestServer.projectA)
        }?.recordID)
        #expect(try await server.server.removeMember(TestServer.carol, from: TestServer.projectA))
        let after = try await carol.push(PushRequest(mutations: [
            Sample.create(.issue, fields: Sample.issueFields(project: TestServer.projectA)),
        ])).results
        #expect(after[0].outcome.rejectedCode == .notFound, "as for a project that does not exist")
        let bundle = try await server.send("GET", "/projects/\(TestServer.projectA.uuidString.lowercased())/bundle", token: TestServer.carolToken)
        #expect(bundle.status == 404)
        // Alice, still a member, pulls the tombstone of Carol's member record.
        let pulled = try await server.transport(token: TestServer.aliceToken).pull(PullRequest(cursor: nil, limit: 1000)).changes
        #expect(pulled.contains { $0.entity == .member && $0.recordID == carolsMemberRecord && $0.isDeleted })
        // Carol keeps project B; a revoked token loses everything.
        #expect(try await carol.push(PushRequest(mutations: [
            Sample.create(.issue, fields: Sample.issueFields(project: TestServer.projectB)),
        ])).results[0].outcome.appliedVersion == 1)
        #expect(try await server.server.revokeToken(TestServer.carolToken))
        #expect(try await server.send("GET", "/projects/\(TestServer.projectB.uuidString.lowercased())/bundle", token: TestServer.carolToken).status == 401)
        // A new token, and a new member added by the operator, work at once.
        let fresh = try await server.server.issueToken(for: TestServer.carol)
        #expect(try await server.send("GET", "/projects/\(TestServer.projectB.uuidString.lowercased())/bundle", token: fresh).status == 200)
        try await server.server.addMember(.init(userID: TestServer.carol, name: "Carol", role: "crew", projects: [TestServer.projectA]))
        #expect(try await server.send("GET", "/projects/\(TestServer.projectA.uuidString.lowercased())/bundle", token: fresh).status == 200)
    }

    @Test("Unsupported protocol or schema versions get the codes the client pauses on", arguments: Backend.available)
    func versions(_ backend: Backend) async throws {
        let server = try await TestServer.start(backend)
        let missing = try await server.send("GET", "/health", versions: false)
        #expect(missing.status == 400)
        #expect(try JSONDecoder().decode(ErrorBody.self, from: missing.body).code == .unsupportedProtocolVersion)
        let old = server.transport(token: TestServer.aliceToken, schemaVersion: 99)
        await #expect(throws: TransportError.self) { _ = try await old.pull(PullRequest(cursor: nil, limit: 1)) }
        do {
            _ = try await old.pull(PullRequest(cursor: nil, limit: 1))
        } catch {
            #expect(error.code == .unsupportedVersion)
            #expect(error.serverCode == .unsupportedSchemaVersion)
        }
        let unknownRoute = try await server.send("GET", "/nowhere", token: TestServer.aliceToken)
        #expect(unknownRoute.status == 404)
        #expect(try JSONDecoder().decode(ErrorBody.self, from: unknownRoute.body).code == .notFound)
        await server.stop()
    }

    @Test("Tokens are stored as SHA-256 digests only, and loading the seed again changes nothing", arguments: Backend.available)
    func tokensHashedAndSeedIdempotent(_ backend: Backend) async throws {
        let server = try await TestServer.start(backend)
        let before = try await server.transport(token: TestServer.carolToken).pull(PullRequest(cursor: nil, limit: 100))
        try await server.server.load(TestServer.seed)
        let after = try await server.transport(token: TestServer.carolToken).pull(PullRequest(cursor: nil, limit: 100))
        #expect(after == before)
        #expect(before.changes.filter { $0.entity == .member }.count == 4)
        let digests = try await server.strings("SELECT token_sha256 FROM tokens")
        #expect(Set(digests) == Set([TestServer.aliceToken, TestServer.bobToken, TestServer.carolToken].map {
            sha256Hex(Data($0.utf8))
        }))
        let dump = try await server.strings("SELECT token_sha256 || user_id FROM tokens").joined()
        #expect(!dump.contains(TestServer.aliceToken))
        await server.stop()
    }
}

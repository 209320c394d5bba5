import Foundation
import OutpostFieldService
import OutpostFieldServiceTesting
import OutpostModels
import OutpostSchema
import OutpostSync
import OutpostWire
import Testing

/// What a deleted record leaves travelling: its id, version and deletion clock in pulls, nothing in bundles.
@Suite("Tombstones and bundles", .fieldService)
struct TombstoneTests {
    @Test("A deleted issue's text is not in the project's bundle, in either format", arguments: Backend.available)
    func bundlesLeaveTombstonesOut(_ backend: Backend) async throws {
        let server = try await TestServer.start(backend)
        defer { Task { await server.stop() } }
        let alice = server.transport(token: TestServer.aliceToken)
        let secret = "gate code 4471"
        let issue = Sample.create(.issue, fields: Sample.issueFields(project: TestServer.projectA, title: secret))
        _ = try await alice.push(PushRequest(mutations: [issue]))
        let deleted = try await alice.push(PushRequest(mutations: [
            PushMutation(idempotencyKey: UUID(), entity: .issue, operation: .delete, recordID: issue.recordID, baseVersion: 1,
                deletion: Sample.clock(5_000)),
        ])).results
        #expect(deleted.first?.outcome.appliedVersion == 2)
        for format in ["json", "xml"] {
            let bundle = try await server.send(
                "GET", "/projects/\(TestServer.projectA.uuidString.lowercased())/bundle?format=\(format)", token: TestServer.aliceToken)
            #expect(bundle.status == 200)
            #expect(bundle.body.range(of: Data(secret.utf8)) == nil, "the \(format) bundle carries the deleted text")
            #expect(bundle.body.range(of: Data(issue.recordID.uuidString.lowercased().utf8)) == nil, "a bundle leaves tombstones out")
        }
        // A device that held the issue learns of the delete from its pull, which still carries the tombstone.
        let page = try await alice.pull(PullRequest(cursor: nil, limit: 1_000))
        #expect(page.changes.first { $0.recordID == issue.recordID }?.isDeleted == true)
    }

    @Test("A deleted issue's text is not in any member's pull, a future member's included, in either clock form", arguments: Backend.available)
    func pullsCarryTombstonesWithoutContents(_ backend: Backend) async throws {
        let server = try await TestServer.start(backend)
        defer { Task { await server.stop() } }
        let alice = server.transport(token: TestServer.aliceToken)
        let secret = "gate code 4471"
        let issue = Sample.create(.issue, fields: Sample.issueFields(project: TestServer.projectA, title: secret))
        _ = try await alice.push(PushRequest(mutations: [issue]))
        _ = try await alice.push(PushRequest(mutations: [
            PushMutation(idempotencyKey: UUID(), entity: .issue, operation: .delete, recordID: issue.recordID, baseVersion: 1,
                deletion: Sample.clock(5_000)),
        ]))
        for (token, shared) in [(TestServer.aliceToken, true), (TestServer.aliceToken, false), (TestServer.carolToken, false)] {
            let answer = try await server.send(
                "POST", "/pull", token: token,
                body: try wireJSON(PullRequest(cursor: nil, limit: 1_000, acceptsSharedClock: shared)))
            #expect(answer.status == 200)
            #expect(answer.body.range(of: Data(secret.utf8)) == nil, "the pull carries the deleted text")
            let tombstone = try #require(try PullResponse(json: answer.body).changes.first { $0.recordID == issue.recordID })
            #expect(tombstone.isDeleted && tombstone.version == 2 && tombstone.deletion != nil)
            #expect(tombstone.fields.isEmpty && tombstone.clocks.isEmpty)
        }
        // A member who writes to the deleted record meets its last contents in the conflict's answer:
        // the device that merges needs them, and a member who may write could bring it back and read it.
        let stale = try await alice.push(PushRequest(mutations: [
            Sample.update(.issue, id: issue.recordID, baseVersion: 1, fields: ["status": .text("resolved")], clock: Sample.clock(-30_000)),
        ])).results
        guard case .conflict(let record) = stale.first?.outcome else {
            Issue.record("a stale edit of a tombstone is a conflict, got \(String(describing: stale.first?.outcome))")
            return
        }
        #expect(record.isDeleted && record.fields["title"] == .text(secret))
    }

    @Test("A member who may not write a record never gets its contents from a conflict, deleted or not", arguments: Backend.available)
    func aConflictAnswerIsOnlyForThoseWhoMayWrite(_ backend: Backend) async throws {
        let server = try await TestServer.start(backend)
        defer { Task { await server.stop() } }
        let carol = server.transport(token: TestServer.carolToken)  // project manager in B
        let secret = "Friends and family 40%"
        let fee = Sample.create(.fee, fields: [
            "projectID": .uuid(TestServer.projectB), "name": .text(secret), "amountCents": .integer(15_000),
            "isTaxable": .bool(false),
        ])
        let live = Sample.create(.fee, fields: [
            "projectID": .uuid(TestServer.projectB), "name": .text("Disposal"), "amountCents": .integer(9_000),
            "isTaxable": .bool(false),
        ])
        _ = try await carol.push(PushRequest(mutations: [fee, live]))
        _ = try await carol.push(PushRequest(mutations: [
            PushMutation(idempotencyKey: UUID(), entity: .fee, operation: .delete, recordID: fee.recordID, baseVersion: 1,
                deletion: Sample.clock(5_000)),
        ]))
        // Bob, crew in B (money is not his to write), learns the deleted fee's id from his pull and writes
        // to it on an old version, and to the live one.
        for (id, version) in [(fee.recordID, Int64(1)), (live.recordID, Int64(0))] {
            let answer = try await server.send(
                "POST", "/push", token: TestServer.bobToken,
                body: try wireJSON(PushRequest(mutations: [
                    Sample.update(.fee, id: id, baseVersion: version, fields: ["amountCents": .integer(1)], clock: Sample.clock(60_000)),
                ])))
            #expect(answer.body.range(of: Data(secret.utf8)) == nil, "a crew member read the deleted fee through a conflict")
            let outcome = try JSONDecoder().decode(PushResponse.self, from: answer.body).results.first?.outcome
            #expect(outcome?.rejectedCode == .forbidden, "\(String(describing: outcome))")
        }
    }
}

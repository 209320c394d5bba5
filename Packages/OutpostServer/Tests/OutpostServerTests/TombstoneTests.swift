import Foundation
import OutpostModels
import OutpostSync
import Testing

/// A deleted record's contents stay on the server: what travels is its id, version and deletion.
@Suite("Tombstones carry no contents")
struct TombstoneTests {
    @Test("A deleted issue's text no longer travels: not in pulls, not in bundles, not in a conflict's answer", arguments: Backend.available)
    func deletedContentStopsTravelling(_ backend: Backend) async throws {
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

        // A member's pull, and a future member's (Carol's, from nothing), in both clock forms.
        for (token, shared) in [(TestServer.aliceToken, true), (TestServer.carolToken, false)] {
            let answer = try await server.send(
                "POST", "/pull", token: token,
                body: try wireJSON(PullRequest(cursor: nil, limit: 1_000, acceptsSharedClock: shared)))
            #expect(answer.status == 200)
            #expect(answer.body.range(of: Data(secret.utf8)) == nil, "the pull carries the deleted text")
            let page = try PullResponse(json: answer.body)
            let tombstone = try #require(page.changes.first { $0.recordID == issue.recordID })
            #expect(tombstone.isDeleted && tombstone.version == 2)
            #expect(tombstone.fields.isEmpty && tombstone.clocks.isEmpty)
        }
        for format in ["json", "xml"] {
            let bundle = try await server.send(
                "GET", "/projects/\(TestServer.projectA.uuidString.lowercased())/bundle?format=\(format)", token: TestServer.aliceToken)
            #expect(bundle.status == 200)
            #expect(bundle.body.range(of: Data(secret.utf8)) == nil, "the \(format) bundle carries the deleted text")
            #expect(bundle.body.range(of: Data(issue.recordID.uuidString.lowercased().utf8)) == nil, "a bundle leaves tombstones out")
        }
        // A stale edit meets the tombstone: the conflict's answer names the deletion, not the text.
        let stale = try await alice.push(PushRequest(mutations: [
            Sample.update(.issue, id: issue.recordID, baseVersion: 1, fields: ["status": .text("resolved")], clock: Sample.clock(-30_000)),
        ])).results
        if case .conflict(let record) = stale.first?.outcome {
            #expect(record.isDeleted && record.fields.isEmpty)
        }
    }
}

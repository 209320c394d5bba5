import Foundation
import OutpostModels
import OutpostSync
import Testing

/// What a deleted record leaves travelling.
@Suite("Tombstones and bundles")
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
}

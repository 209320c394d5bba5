import Foundation
import OutpostFieldService
import OutpostFieldServiceTesting
import OutpostModels
import OutpostSchema
import OutpostServer
import OutpostSync
import OutpostWire
import Testing

/// In server-id mode a pulled reference names its parent's server id only when the parent is of the
/// record's own project: a reference to another project's record stays the client id it was pushed as,
/// exactly as a reference to a record the server does not hold. (An outside review found a member could
/// name another project's asset in an issue and read its server id back from the pull, learning that it
/// exists; and every member's device then held `"8"` in a uuid column, so the bundles they exported
/// no longer imported.)
@Suite(.fieldService) struct ServerIDReferenceTests {
    @Test("A reference to another project's record is pulled as the client id it was pushed as", arguments: Backend.available)
    func aReferenceAcrossProjectsIsNotTranslated(_ backend: Backend) async throws {
        let server = try await TestServer.start(backend, assignsServerIDs: true)
        let alice = server.transport(token: TestServer.aliceToken)  // project A only
        let bob = server.transport(token: TestServer.bobToken)  // project B only
        let asset = UUID()
        let assetFields: [String: FieldValue] = [
            "projectID": .uuid(TestServer.projectB), "name": .text("Boiler"), "qrCode": .text("QR-1"),
            "category": .text(""), "location": .text(""),
        ]
        let created = try await bob.push(PushRequest(mutations: [Sample.create(.asset, id: asset, fields: assetFields)]))
        #expect(created.results.first?.outcome.appliedVersion == 1)
        // Alice names Bob's asset (whose id she learned somehow) and an id no record has.
        var probe = Sample.issueFields(project: TestServer.projectA, title: "Probe")
        probe["assetID"] = .uuid(asset)
        var control = Sample.issueFields(project: TestServer.projectA, title: "Control")
        let nowhere = UUID()
        control["assetID"] = .uuid(nowhere)
        let issues = [Sample.create(.issue, fields: probe), Sample.create(.issue, fields: control)]
        let pushed = try await alice.push(PushRequest(mutations: issues))
        #expect(pushed.results.allSatisfy { $0.outcome.appliedVersion == 1 }, "\(pushed.results)")
        let pulled = try await alice.pull(PullRequest(cursor: nil, limit: 1000))
        let probeRecord = try #require(pulled.changes.first { $0.recordID == issues[0].recordID })
        let controlRecord = try #require(pulled.changes.first { $0.recordID == issues[1].recordID })
        #expect(probeRecord.fields["assetID"] == .uuid(asset), "the other project's asset is not told apart: \(String(describing: probeRecord.fields["assetID"]))")
        #expect(controlRecord.fields["assetID"] == .uuid(nowhere))
        // A parent of the record's own project is still named by its server id.
        #expect(probeRecord.fields["projectID"].map { if case .text(let text) = $0 { Int(text) != nil } else { false } } == true,
                "\(String(describing: probeRecord.fields["projectID"]))")
        await server.stop()
    }
}

/// A server database names the app whose records it holds; another app's server refuses it, naming
/// both, instead of serving those records under a schema they were not written in (an outside review
/// served a contractor-jobs database with `outpost serve` and back without a word).
@Suite(.fieldService) struct ServerDatabaseOwnerTests {
    @Test("Another app's server database is refused, naming both apps", arguments: Backend.available)
    func anotherAppsDatabaseIsRefused(_ backend: Backend) async throws {
        let server = try await TestServer.start(backend)
        // The first request prepares the database, naming it as this process's app's.
        _ = try await server.transport(token: TestServer.aliceToken).pull(PullRequest(cursor: nil, limit: 1))
        #expect(try await server.strings("SELECT value FROM server_settings WHERE name = 'app_schema'") == ["field-service"])
        try await server.execute("UPDATE server_settings SET value = 'contractor-jobs' WHERE name = 'app_schema'")
        do {
            let other = try SyncServer(configuration: server.server.configuration)
            _ = try await other.load(ServerSeed())
            Issue.record("a contractor-jobs database was served as a field-service one")
        } catch {
            #expect(error.code == .invalidConfiguration, "\(error)")
            #expect(error.message.contains("belongs to the app 'contractor-jobs', not to 'field-service'"), "\(error)")
        }
        await server.stop()
    }
}

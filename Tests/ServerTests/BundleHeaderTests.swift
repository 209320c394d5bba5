import Foundation
import OutpostFieldService
import OutpostFieldServiceTesting
import OutpostSchema
@testable import OutpostServer
import OutpostSync
import OutpostWire
import Testing

/// A bundle's header says when its newest change was made (`asOf`): read from the index of the
/// project's changes in order, not from every row of the project before the first byte goes out.
@Suite("A bundle's header", .fieldService)
struct BundleHeaderTests {
    @Test("A bundle's asOf is the newest updatedAt among its records, after creates and an edit", arguments: Backend.available)
    func asOfIsTheNewestChange(_ backend: Backend) async throws {
        let server = try await TestServer.start(backend)
        defer { Task { await server.stop() } }
        let alice = server.transport(token: TestServer.aliceToken)
        let issues = (0..<3).map { Sample.create(.issue, fields: Sample.issueFields(project: TestServer.projectA, title: "Sill \($0)")) }
        _ = try await alice.push(PushRequest(mutations: issues))
        try await Task.sleep(for: .milliseconds(20))
        let edit = Sample.update(.issue, id: issues[0].recordID, baseVersion: 1, fields: ["title": .text("Sill, edited")])
        #expect(try await alice.push(PushRequest(mutations: [edit])).results.first?.outcome.appliedVersion == 2)

        let answer = try await server.send("GET", "/projects/\(TestServer.projectA.uuidString.lowercased())/bundle", token: TestServer.aliceToken)
        #expect(answer.status == 200)
        let document = try #require(try JSONSerialization.jsonObject(with: answer.body) as? [String: Any])
        let asOf = try #require((document["asOf"] as? String).flatMap(Timestamp.date(from:)))
        let records = try #require(document["records"] as? [[String: Any]])
        let newest = try #require(records.compactMap { ($0["updatedAt"] as? String).flatMap(Timestamp.date(from:)) }.max())
        #expect(records.count >= 4, "the project, its members and the three issues")
        #expect(asOf == newest, "asOf \(asOf), newest record \(newest)")
        let edited = records.first { $0["id"] as? String == issues[0].recordID.uuidString.lowercased() }
        #expect((edited?["updatedAt"] as? String).flatMap(Timestamp.date(from:)) == newest, "the edit is the newest change")
    }

    /// Attack 115, F1: two pushes take their time before the write lock and their sequence under it, so
    /// the later change can carry the older time (PostgreSQL's instances wrote so under load). Read as
    /// the newest change's time, `asOf` was older than a record in the bundle.
    @Test("A bundle's asOf is the newest updatedAt even when a later change carries an older time", arguments: Backend.available)
    func asOfIsTheNewestTimeNotTheLastChangesTime(_ backend: Backend) async throws {
        let server = try await TestServer.start(backend)
        defer { Task { await server.stop() } }
        let storage = server.server.storage, alice = TestServer.caller(TestServer.alice)
        let later = Timestamp.now().addingTimeInterval(60), earlier = Timestamp.now().addingTimeInterval(30)
        let first = Sample.create(.issue, fields: Sample.issueFields(project: TestServer.projectA, title: "Stamped later"))
        let second = Sample.create(.issue, fields: Sample.issueFields(project: TestServer.projectA, title: "Stamped earlier"))
        #expect(try await storage.push([first], by: alice, now: later).first?.outcome.appliedVersion == 1)
        #expect(try await storage.push([second], by: alice, now: earlier).first?.outcome.appliedVersion == 1)
        let bundle = try await storage.bundle(project: TestServer.projectA, by: alice)
        #expect(bundle.asOf == Date(milliseconds: later.milliseconds), "asOf \(String(describing: bundle.asOf)), the newest record \(later)")
    }
}

@testable import OutpostServer
import Foundation
import OutpostConflicts
import OutpostFieldService
import OutpostFieldServiceTesting
import OutpostModels
import OutpostSchema
import OutpostStore
import OutpostSync
import OutpostWire
import Testing

/// A bundle FILE is its holder's word: an edited one put records the server never had on a device,
/// stored as synced and never replaced (attack 45 finding 3). The next sync reads the file's project
/// again from its beginning, and what that read does not bring goes.
@Suite("Bundle files: what the server does not hold goes at the next sync", .fieldService)
struct BundleFileWordTests {
    /// A genuine export of project A with two issues added that the server never had, ids returned.
    private static func plantedExport(from store: LocalStore, in directory: URL, name: String) throws -> (URL, planted: [UUID]) {
        let genuine = directory.appendingPathComponent("\(name)-genuine.json")
        _ = try store.exportBundle(project: TestServer.projectA, format: .json, to: genuine)
        var document = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: genuine)) as? [String: Any])
        var records = try #require(document["records"] as? [[String: Any]])
        let template = try #require(records.first { $0["entity"] as? String == "issue" })
        var planted: [UUID] = []
        for title in ["PLANTED: never on the server", "PLANTED: edited by its user"] {
            let id = UUID()
            var record = template
            record["id"] = id.uuidString.lowercased()
            record["version"] = 3
            var fields = try #require(record["fields"] as? [String: Any])
            fields["title"] = title
            record["fields"] = fields
            records.append(record)
            planted.append(id)
        }
        // Records no held parent places in a project: a comment on an issue nobody has, an opportunity
        // no project names (attack 48 findings 2 and 3).
        let member = try #require(records.first { $0["entity"] as? String == "member" })
        var orphan = template
        orphan["entity"] = "comment"
        orphan["id"] = UUID().uuidString.lowercased()
        orphan["fields"] = ["issueID": UUID().uuidString.lowercased(), "authorID": try #require(member["id"]), "body": "PLANTED comment"]
        var opportunity = template
        opportunity["entity"] = "opportunity"
        opportunity["id"] = UUID().uuidString.lowercased()
        opportunity["fields"] = ["name": "PLANTED opportunity", "customerName": "Nobody", "address": "1 Nowhere", "stage": "lead", "estimatedValueCents": 100]
        for record in [orphan, opportunity] {
            records.append(record)
            let id = try #require(record["id"] as? String)
            planted.append(try #require(UUID(uuidString: id)))
        }
        document["records"] = records
        let edited = directory.appendingPathComponent("\(name)-edited.json")
        try JSONSerialization.data(withJSONObject: document).write(to: edited)
        return (edited, planted)
    }

    @Test("A device that follows the project and a fresh one import an edited file: after one sync each holds what a device that never saw the file holds, plus the planted issue its user edited, sent as theirs")
    func plantedRecordsGoAtTheNextSync() async throws {
        let server = try await TestServer.start()
        defer { Task { await server.stop() } }
        func device(_ name: String, token: String = TestServer.aliceToken) throws -> (store: LocalStore, engine: SyncEngine) {
            let store = try LocalStore.open(at: server.directory.appendingPathComponent("\(name).sqlite").path)
            return (store, SyncEngine(store: store, transport: server.transport(token: token)))
        }
        let office = try device("office", token: TestServer.carolToken)
        let real = try await office.store.save(OutpostModels.Issue(projectID: TestServer.projectA, title: "Loose rail"))
        #expect(try await office.engine.sync().isComplete)
        let holder = try device("holder")
        #expect(try await holder.engine.sync().isComplete)
        let (file, planted) = try Self.plantedExport(from: holder.store, in: server.directory, name: "holder")

        let following = try device("following")
        #expect(try await following.engine.sync().isComplete)
        let fresh = try device("fresh")
        for (name, target, edits) in [("following", following, true), ("fresh", fresh, false)] {
            let summary = try target.store.importBundle(at: file)
            #expect(summary.byEntity["issue"]?.inserted ?? 0 >= 2, "\(name)")
            #expect(try target.store.rereadProjects() == [TestServer.projectA], "\(name): the file's project is read again")
            // Shown as synced, as the attack saw: nothing tells it apart before the read.
            #expect(try target.store.record(.issue, id: planted[0])?.sync.syncStatus == .synced)
            if edits {
                var copy = try #require(try target.store.fetch(OutpostModels.Issue.self, id: planted[1]))
                copy.details = "checked on site"
                _ = try await target.store.save(copy)
            }
            let report = try await target.engine.sync()
            #expect(report.isComplete, "\(name)")
            #expect(try target.store.record(.issue, id: planted[0]) == nil, "\(name): the planted issue is gone")
            #expect(try target.store.record(.comment, id: planted[2]) == nil, "\(name): the comment on no issue is gone")
            #expect(try target.store.record(.opportunity, id: planted[3]) == nil, "\(name): the opportunity is gone")
            #expect(try target.store.record(.issue, id: real.id) != nil, "\(name): the genuine issue stays")
            #expect(try target.store.rereadProjects().isEmpty)
            let status = try target.store.status()
            #expect(status.pendingChanges == 0 && status.failedChanges == 0, "\(name)")
            if edits {
                // The user's edit is not lost: the issue went to the server as this device's create.
                #expect(report.unheldImports == { var r = HistoryRebuildReport(); r.removed = 3; r.recreated = 1; return r }())
                let onServer = try await server.transport(token: TestServer.carolToken).pull(PullRequest(cursor: nil, limit: 1000))
                    .changes.first { $0.recordID == planted[1] }
                #expect(onServer?.version == 1, "sent as a create, never as the file's version 3")
                #expect(onServer?.fields["details"] == .text("checked on site"))
            } else {
                // The first fresh read removed the planted issue; the edited one reached the server above.
                #expect(try target.store.record(.issue, id: planted[1])?.sync.version == 1)
            }
        }
        // Each holds exactly the issues a device that never saw the file holds.
        let plain = try device("plain")
        #expect(try await plain.engine.sync().isComplete)
        func issues(_ store: LocalStore) throws -> Set<UUID> {
            Set(try store.fetchAll(OutpostModels.Issue.self, where: "projectID", equals: .uuid(TestServer.projectA)).map(\.id))
        }
        let expected = try issues(plain.store)
        #expect(expected.contains(planted[1]) && !expected.contains(planted[0]))
        for target in [following, fresh] { #expect(try issues(target.store) == expected) }
    }

    @Test("A read again whose first page ends where the device's cursor stood goes on: the cursor's text is the same, and the pull moved (attack 48 finding 1: every later sync was refused)")
    func aRereadEndingAtTheCursorGoesOn() async throws {
        let server = try await TestServer.start()
        defer { Task { await server.stop() } }
        let office = try LocalStore.open(at: server.directory.appendingPathComponent("office.sqlite").path)
        let officeEngine = SyncEngine(store: office, transport: server.transport(token: TestServer.carolToken))
        for n in 1...5 { _ = try await office.save(OutpostModels.Issue(projectID: TestServer.projectA, title: "Issue \(n)")) }
        #expect(try await officeEngine.sync().isComplete)
        // Alice's pull is cut after its first page (the connection drops); then she imports a file of the project.
        let store = try LocalStore.open(at: server.directory.appendingPathComponent("alice.sqlite").path)
        let transport = CutAfterPulls(base: server.transport(token: TestServer.aliceToken), pulls: 1)
        let engine = SyncEngine(store: store, transport: transport, pullLimit: 2, pullDepth: 1)
        #expect(try await engine.sync().isComplete == false)
        #expect(try store.pullCursor() != nil, "the first page was applied")
        let file = server.directory.appendingPathComponent("a.json")
        _ = try store.exportBundle(project: TestServer.projectA, format: .json, to: file)
        try store.importBundle(at: file)
        // The read again's first page is the page she applied: it ends where her cursor stands.
        let report = try await engine.sync()
        #expect(report.isComplete, "\(String(describing: report.lastTransportError))")
        #expect(try store.rereadProjects().isEmpty)
        let later = try await office.save(OutpostModels.Issue(projectID: TestServer.projectA, title: "Gate left open"))
        #expect(try await officeEngine.sync().isComplete)
        #expect(try await engine.sync().isComplete)
        #expect(try store.record(.issue, id: later.id) != nil, "she still hears of what the office writes next")
    }

    @Test("Files of more projects than one pull request names: one sync reads them all again and settles each (attack 49: the first said complete with a planted issue left)")
    func moreProjectsThanOneRequestNames() async throws {
        let server = try await TestServer.start()
        defer { Task { await server.stop() } }
        _ = try await server.transport(token: TestServer.carolToken).push(
            PushRequest(mutations: [Sample.create(.issue, fields: Sample.issueFields(project: TestServer.projectA))]))
        let store = try LocalStore.open(at: server.directory.appendingPathComponent("alice.sqlite").path)
        let engine = SyncEngine(store: store, transport: server.transport(token: TestServer.aliceToken))
        #expect(try await engine.sync().isComplete)
        let genuine = server.directory.appendingPathComponent("a.json")
        _ = try store.exportBundle(project: TestServer.projectA, format: .json, to: genuine)
        let document = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: genuine)) as? [String: Any])
        let records = try #require(document["records"] as? [[String: Any]])
        let project = try #require(records.first { $0["entity"] as? String == "project" })
        let issue = try #require(records.first { $0["entity"] as? String == "issue" })
        var planted: [UUID] = []
        for n in 0...SyncProtocol.maximumRereadProjects {
            // A project nobody has, with one issue: a file of it, as anyone may write one.
            let projectID = UUID(), issueID = UUID()
            var file = document
            file["projectID"] = projectID.uuidString.lowercased()
            var madeUp = project, plantedIssue = issue
            madeUp["id"] = projectID.uuidString.lowercased()
            plantedIssue["id"] = issueID.uuidString.lowercased()
            var fields = try #require(plantedIssue["fields"] as? [String: Any])
            fields["projectID"] = projectID.uuidString.lowercased()
            plantedIssue["fields"] = fields
            file["records"] = [madeUp, plantedIssue]
            let url = server.directory.appendingPathComponent("made-up-\(n).json")
            try JSONSerialization.data(withJSONObject: file).write(to: url)
            try store.importBundle(at: url)
            planted.append(issueID)
        }
        #expect(try store.rereadProjects().count == SyncProtocol.maximumRereadProjects + 1)
        let report = try await engine.sync()
        #expect(report.isComplete)
        #expect(try store.rereadProjects().isEmpty)
        #expect(try planted.allSatisfy { try store.record(.issue, id: $0) == nil }, "every planted issue is gone")
        #expect(report.unheldImports.removed == 2 * planted.count, "each project and its issue")
    }

    @Test("A pull naming projects to read again reads them from their beginning and names them all back; a project the caller is not in, or none at all, is named back the same way and reads nothing", arguments: Backend.available)
    func rereadProjectsAreReadFromTheirBeginning(_ backend: Backend) async throws {
        let server = try await TestServer.start(backend)
        defer { Task { await server.stop() } }
        let alice = server.transport(token: TestServer.aliceToken)
        let carol = server.transport(token: TestServer.carolToken)
        _ = try await carol.push(PushRequest(mutations: [Sample.create(.issue, fields: Sample.issueFields(project: TestServer.projectA))]))
        var cursor: String?
        var first: PullResponse
        repeat {
            first = try await alice.pull(PullRequest(cursor: cursor, limit: 1000))
            cursor = first.nextCursor
        } while first.hasMore
        #expect(try await alice.pull(PullRequest(cursor: cursor, limit: 1000)).changes.isEmpty)

        let again = try await alice.pull(PullRequest(cursor: cursor, limit: 1000, rereadProjects: [TestServer.projectA, TestServer.projectA]))
        #expect(again.rereadProjects == [TestServer.projectA], "named back once")
        #expect(again.changes.contains { $0.entity == .issue }, "project A read from its beginning")

        // Project B (Alice is not a member) and a made-up id: named back, nothing read, the same answer.
        let stranger = UUID()
        let theirs = try await alice.pull(PullRequest(cursor: cursor, limit: 1000, rereadProjects: [TestServer.projectB]))
        let madeUp = try await alice.pull(PullRequest(cursor: cursor, limit: 1000, rereadProjects: [stranger]))
        #expect(theirs.rereadProjects == [TestServer.projectB] && madeUp.rereadProjects == [stranger])
        #expect(theirs.changes.isEmpty && madeUp.changes.isEmpty)
        #expect(theirs.nextCursor == madeUp.nextCursor && theirs.leftProjects == madeUp.leftProjects)

        let tooMany = (0...SyncProtocol.maximumRereadProjects).map { _ in UUID() }
        await #expect(throws: TransportError.self) {
            _ = try await alice.pull(PullRequest(cursor: cursor, limit: 1000, rereadProjects: tooMany))
        }
    }
}

/// Passes everything to the server, but the connection drops at pull request `pulls + 1`, once.
actor CutAfterPulls: ForwardingTransport {
    let base: HTTPTransport
    private let pulls: Int
    private var made = 0

    init(base: HTTPTransport, pulls: Int) {
        self.base = base
        self.pulls = pulls
    }

    func pull(_ request: PullRequest) async throws(TransportError) -> PullResponse {
        made += 1
        if made == pulls + 1 { throw TransportError(.noConnection, request: "POST /pull", message: "the connection dropped") }
        return try await base.pull(request)
    }
}

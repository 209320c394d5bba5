@testable import OutpostServer
import Foundation
import OutpostFieldService
import OutpostFieldServiceTesting
import OutpostModels
import OutpostSchema
import OutpostStore
import OutpostSync
import OutpostWire
import Testing

/// A pull's cursor says how far each project was read, so a project a device joins, or first asks
/// for, comes from its beginning while the others go on where they were.
@Suite("A new member catches up: a project joined later arrives whole", .fieldService)
struct MembershipCatchUpTests {
    /// A record as a device keys it.
    struct Key: Hashable {
        var entity: EntityType
        var id: UUID
    }

    /// Every page from `cursor` to the end, newest state per record, and the cursor after the last.
    static func pullToTheEnd(_ transport: HTTPTransport, from cursor: String?, projects: [UUID]? = nil) async throws
        -> (records: [Key: ServerRecord], cursor: String?)
    {
        var cursor = cursor
        var records: [Key: ServerRecord] = [:]
        for _ in 0..<1_000 {
            let page = try await transport.pull(PullRequest(cursor: cursor, limit: 2, projects: projects))
            for change in page.changes { records[Key(entity: change.entity, id: change.recordID)] = change }
            cursor = page.nextCursor
            if !page.hasMore { return (records, cursor) }
        }
        Issue.record("the pull never ended")
        return (records, cursor)
    }

    /// What a record looks like to a device: which version, deleted or not.
    static func versions(_ records: [Key: ServerRecord]) -> [Key: String] {
        records.mapValues { "v\($0.version)\($0.isDeleted ? " deleted" : "")" }
    }

    @Test("A member added to a project later pulls its whole history, as a fresh device of hers would", arguments: Backend.available)
    func aMemberAddedLaterCatchesUp(_ backend: Backend) async throws {
        let server = try await TestServer.start(backend)
        defer { Task { await server.stop() } }
        let bob = server.transport(token: TestServer.bobToken)
        let alice = server.transport(token: TestServer.aliceToken)
        // Project B's history before Alice is in it: an issue edited twice, another created and deleted.
        let early = Sample.create(.issue, fields: Sample.issueFields(project: TestServer.projectB))
        let gone = Sample.create(.issue, fields: Sample.issueFields(project: TestServer.projectB))
        _ = try await bob.push(PushRequest(mutations: [early, gone]))
        _ = try await bob.push(PushRequest(mutations: [
            Sample.update(.issue, id: early.recordID, baseVersion: 1, fields: ["title": .text("Rail fixed")], clock: Sample.clock(1)),
            PushMutation(
                idempotencyKey: UUID(), entity: .issue, operation: .delete, recordID: gone.recordID, baseVersion: 1,
                deletion: Sample.clock(1)),
        ]))
        // Alice's device pulls to the end: project A only.
        let (before, cursor) = try await Self.pullToTheEnd(alice, from: nil)
        // Project A moves on, B gets one more issue, and then Alice joins B.
        _ = try await alice.push(PushRequest(mutations: [Sample.create(.issue, fields: Sample.issueFields(project: TestServer.projectA))]))
        let late = Sample.create(.issue, fields: Sample.issueFields(project: TestServer.projectB))
        _ = try await bob.push(PushRequest(mutations: [late]))
        try await server.server.addMember(.init(userID: TestServer.alice, name: "Alice", role: "foreman", projects: [TestServer.projectB]))

        // Her device goes on from its cursor; a fresh device of hers starts from nothing.
        let (caughtUp, _) = try await Self.pullToTheEnd(alice, from: cursor)
        let (fresh, _) = try await Self.pullToTheEnd(alice, from: nil)
        #expect(caughtUp[Key(entity: .project, id: TestServer.projectB)] != nil, "the project record itself arrives")
        #expect(caughtUp[Key(entity: .issue, id: early.recordID)]?.version == 2)
        #expect(caughtUp[Key(entity: .issue, id: late.recordID)] != nil)
        // What her device holds now is what the fresh one holds, record for record and version for version.
        #expect(Self.versions(before.merging(caughtUp) { $1 }) == Self.versions(fresh))
        #expect(fresh[Key(entity: .issue, id: gone.recordID)]?.isDeleted == true)
    }

    @Test("A device that pulled one project and then asks for all of them gets the others from their beginning", arguments: Backend.available)
    func aPullOfOneProjectThenAllCatchesUpTheOthers(_ backend: Backend) async throws {
        let server = try await TestServer.start(backend)
        defer { Task { await server.stop() } }
        let carol = server.transport(token: TestServer.carolToken)
        let inB = Sample.create(.issue, fields: Sample.issueFields(project: TestServer.projectB))
        let inA = Sample.create(.issue, fields: Sample.issueFields(project: TestServer.projectA))
        _ = try await carol.push(PushRequest(mutations: [inB, inA]))
        let (onlyA, cursor) = try await Self.pullToTheEnd(carol, from: nil, projects: [TestServer.projectA])
        #expect(onlyA[Key(entity: .issue, id: inA.recordID)] != nil)
        #expect(onlyA[Key(entity: .issue, id: inB.recordID)] == nil)
        let (rest, _) = try await Self.pullToTheEnd(carol, from: cursor)
        #expect(rest[Key(entity: .issue, id: inB.recordID)] != nil, "B's issue, older than the cursor, arrives")
        #expect(rest[Key(entity: .project, id: TestServer.projectB)] != nil)
        #expect(rest[Key(entity: .issue, id: inA.recordID)] == nil, "A is not sent again")
    }

    /// A bare number counted every current project, one joined since included, as read up to it, and a
    /// sealed cursor cut at its `:` is one: the joined project was never sent (attack 73, finding 1). It
    /// is refused 409 `unknown_cursor`, and a pull from the start brings everything.
    @Test("A cursor of one number (before per-project positions, or cut short) is refused 409, and a pull from the start reads everything", arguments: Backend.available)
    func aPlainNumberCursorIsRefused(_ backend: Backend) async throws {
        let server = try await TestServer.start(backend)
        defer { Task { await server.stop() } }
        let alice = server.transport(token: TestServer.aliceToken)
        let first = try await alice.pull(PullRequest(cursor: nil, limit: 1_000))
        let all = first.changes
        #expect(!all.isEmpty)
        let newest = try #require(all.map(\.sequence).max())
        let cut = String(first.nextCursor.prefix { $0 != ":" })
        for bare in ["0", String(newest), cut] {
            let error = try await #require(throws: TransportError.self, "\(bare)") {
                _ = try await alice.pull(PullRequest(cursor: bare, limit: 1_000, checkpoint: first.checkpoint))
            }
            #expect(error.status == 409 && error.serverCode == .unknownCursor, "\(bare): \(error)")
        }
        #expect(try await alice.pull(PullRequest(cursor: nil, limit: 1_000)).changes.count == all.count)
        let tooMany = "5:" + (0...PullCursor.maximumProjects).map { _ in UUID().uuidString.lowercased() }.joined(separator: ",")
        for bad in ["-1", "x", "5:zz", "5:\(TestServer.projectA.uuidString.lowercased())=-3", tooMany] {
            let answer = try await server.send(
                "POST", "/pull", token: TestServer.aliceToken, body: Data(#"{"cursor":"\#(bad)","limit":5}"#.utf8))
            #expect(answer.status == 400, "cursor \(bad.prefix(80))")
        }
    }

    @Test("A removed member's device is told at its next sync and keeps its unsent changes for export", arguments: Backend.available)
    func aRemovedMembersDeviceIsToldAndKeepsItsChanges(_ backend: Backend) async throws {
        let server = try await TestServer.start(backend)
        defer { Task { await server.stop() } }
        let device = try LocalStore.open(at: server.directory.appendingPathComponent("carol.sqlite").path)
        let engine = SyncEngine(store: device, transport: server.transport(token: TestServer.carolToken))
        #expect(try await engine.sync().isComplete)
        // Offline, Carol writes up an issue in project A; meanwhile the office takes her off A.
        let issue = EntityRecord(
            entity: .issue, id: UUID(), fields: Sample.issueFields(project: TestServer.projectA, title: "Loose stair rail"),
            sync: SyncMetadata(createdAt: Timestamp.now()))
        _ = try await device.save(issue)
        #expect(try await server.server.removeMember(TestServer.carol, from: TestServer.projectA))

        let report = try await engine.sync()
        #expect(report.leftProjects == [TestServer.projectA], "the sync says which project she left")
        #expect(try device.status().leftProjects == [TestServer.projectA], "and so does the status, after the run")
        // Her write is neither lost nor sent: it waits, whole, for her to hand it over.
        #expect(try device.record(.issue, id: issue.id)?["title"] == .text("Loose stair rail"))
        let unsent = try device.unsentChanges()
        #expect(unsent.map(\.recordID) == [issue.id])
        #expect(unsent.first?.fields["title"] == .text("Loose stair rail"))
        // A later sync tells no more, and once she is a member again the mark goes.
        #expect(try await engine.sync().leftProjects.isEmpty)
        try await server.server.addMember(.init(userID: TestServer.carol, name: "Carol", role: "projectManager", projects: [TestServer.projectA]))
        _ = try await engine.sync()
        #expect(try device.status().leftProjects.isEmpty)
    }

    /// A cursor names the caller's projects, and those it left since its last pull. One naming 100,000
    /// made-up projects (16 KB of gzip, the same id over and over) cost 1.6 debug CPU-seconds and was
    /// echoed whole in `leftProjects` (attack 45 finding 2). Past the caller's memberships by more than
    /// `PullCursor.maximumLeftAtOnce` it is refused before it is read; up to that, the projects left come
    /// back as left, as before.
    @Test("A cursor naming far more projects than the caller belongs to is refused 400; one naming the projects left since is read", arguments: Backend.available)
    func aCursorIsBoundByTheCallersProjects(_ backend: Backend) async throws {
        let server = try await TestServer.start(backend)
        defer { Task { await server.stop() } }
        let mine = TestServer.projectA.storageText
        func pull(_ cursor: String) async throws -> (status: Int, left: Int) {
            let body = try wireJSON(PullRequest(cursor: cursor, limit: 10))
            let answer = try await server.send("POST", "/pull", token: TestServer.aliceToken, body: body)
            let left = try? JSONDecoder().decode(PullResponse.self, from: answer.body).leftProjects.count
            return (answer.status, left ?? -1)
        }
        let left = (0..<PullCursor.maximumLeftAtOnce).map { _ in UUID().storageText }
        let allowed = try await pull("0:" + ([mine] + left).joined(separator: ","))
        #expect(allowed.status == 200 && allowed.left == PullCursor.maximumLeftAtOnce, "\(allowed)")
        for cursor in [
            "0:" + ([mine] + left + [UUID().storageText, UUID().storageText]).joined(separator: ","),
            "0:" + Array(repeating: "c0000000-0000-4000-8000-00000000000c=9", count: 100_000).joined(separator: ","),
        ] {
            let refused = try await pull(cursor)
            #expect(refused.status == 400, "\(cursor.count) bytes: \(refused)")
        }
    }
}

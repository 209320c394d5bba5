import Foundation
import OutpostFieldService
import OutpostFieldServiceTesting
import OutpostModels
import OutpostSchema
@testable import OutpostServer
import OutpostSync
import OutpostTesting
import OutpostWire
import Testing

/// A member of more projects than the SQLite backend's pull query takes arms for
/// (`SQLiteStorage.maximumArms`) is read by a walk of the change sequence. The walk checked every row
/// after the lowest position the cursor named against the member's projects, other projects' rows
/// included: a cursor naming one project at an old position made every page read the server's whole
/// history since (attack 113, F4). A page now starts on the member's next change and walks a bounded
/// window; what it must still do is what every pull does: bring each change once, and all of them.
@Suite("Pulls of a member of many projects", .fieldService)
struct PullManyProjectsTests {
    /// A server where Alice belongs to `extra` more projects than project A, every one a crew's; their ids.
    static func aliceInMany(_ backend: Backend, extra: Int = SQLiteStorage.maximumArms + 5) async throws
        -> (server: TestServer, projects: [UUID])
    {
        let server = try await TestServer.start(backend)
        var projects: [UUID] = []
        for index in 0..<extra {
            let project = UUID()
            #expect(try await server.server.createProject(.init(id: project, name: "Site \(index)"), by: "test operator"))
            try await server.server.addMember(TestServer.alice, to: project, role: Member.Role.crew.rawValue)
            projects.append(project)
        }
        return (server, projects)
    }

    /// Every page from `cursor` to the last, `limit` at a time.
    static func pullAll(_ transport: some SyncTransport, from cursor: String?, limit: Int) async throws
        -> (pages: [PullResponse], cursor: String?)
    {
        var pages: [PullResponse] = []
        var cursor = cursor
        repeat {
            let page = try await transport.pull(PullRequest(cursor: cursor, limit: limit))
            pages.append(page)
            cursor = page.nextCursor
            if pages.count > 10_000 { Issue.record("the pull went on past 10,000 pages"); break }
        } while pages.last?.hasMore == true
        return (pages, cursor)
    }

    @Test("A page walks from the member's next change and stops within its window: 300 other-project changes between two of Alice's are not read for one page")
    func aPageWalksABoundedWindow() async throws {
        let (server, _) = try await Self.aliceInMany(.sqlite)
        defer { Task { await server.stop() } }
        let alice = server.transport(token: TestServer.aliceToken), bob = server.transport(token: TestServer.bobToken)
        let caughtUp = try await Self.pullAll(alice, from: nil, limit: 500).cursor

        let first = Sample.create(.issue, fields: Sample.issueFields(project: TestServer.projectA, title: "Before"))
        _ = try await alice.push(PushRequest(mutations: [first]))
        let others = (0..<300).map { Sample.create(.issue, fields: Sample.issueFields(project: TestServer.projectB, title: "Bob's \($0)")) }
        #expect(try await bob.push(PushRequest(mutations: others)).results.allSatisfy { $0.outcome.appliedVersion == 1 })
        let second = Sample.create(.issue, fields: Sample.issueFields(project: TestServer.projectA, title: "After"))
        _ = try await alice.push(PushRequest(mutations: [second]))

        // Pages of 10 walk 200 rows at most: the first ends inside Bob's 300, the next starts on Alice's.
        let window = SQLiteStorage.walkedRowsPerPageRecord * 10
        #expect(window < others.count)
        let page = try await alice.pull(PullRequest(cursor: caughtUp, limit: 10))
        #expect(page.changes.map(\.recordID) == [first.recordID], "\(page.changes.map(\.recordID))")
        #expect(page.hasMore, "a page its window ended says more may follow")
        let next = try await alice.pull(PullRequest(cursor: page.nextCursor, limit: 10))
        #expect(next.changes.map(\.recordID) == [second.recordID], "\(next.changes.map(\.recordID))")
        #expect(!next.hasMore)
        // Caught up, nothing comes again.
        #expect(try await alice.pull(PullRequest(cursor: next.nextCursor, limit: 10)).changes.isEmpty)
    }

    @Test("Seeded: whatever the interleaving of other projects' changes and the page size, a member of many projects pulls each of their changes once, and every one",
          arguments: Backend.available, [UInt64(41), 4_211])
    func eachChangeOnceAndAll(_ backend: Backend, _ seed: UInt64) async throws {
        let (server, projects) = try await Self.aliceInMany(backend)
        defer { Task { await server.stop() } }
        var random = SeededGenerator(seed: seed)
        let alice = server.transport(token: TestServer.aliceToken), bob = server.transport(token: TestServer.bobToken)
        let carol = server.transport(token: TestServer.carolToken)
        var cursor = try await Self.pullAll(alice, from: nil, limit: 500).cursor
        // Alice writes in three of her projects; Carol in A too, and in B with Bob, where Alice is not.
        let hers = [TestServer.projectA] + projects.shuffled(using: &random).prefix(2)
        var expected: Set<UUID> = []
        for round in 0..<6 {
            for _ in 0..<Int.random(in: 1...8, using: &random) {
                let foreign = Int.random(in: 0..<3, using: &random) > 0
                let count = foreign ? Int.random(in: 1...120, using: &random) : Int.random(in: 1...6, using: &random)
                let project = foreign ? TestServer.projectB : hers.randomElement(using: &random)!
                let writer = foreign ? (Bool.random(using: &random) ? bob : carol) : (project == TestServer.projectA && Bool.random(using: &random) ? carol : alice)
                let issues = (0..<count).map { _ in Sample.create(.issue, fields: Sample.issueFields(project: project, title: "Round \(round)")) }
                #expect(try await writer.push(PushRequest(mutations: issues)).results.allSatisfy { $0.outcome.appliedVersion == 1 })
                if !foreign { expected.formUnion(issues.map(\.recordID)) }
            }
            let limit = Int.random(in: 1...15, using: &random)
            let pulled = try await Self.pullAll(alice, from: cursor, limit: limit)
            cursor = pulled.cursor
            let issues = pulled.pages.flatMap(\.changes).filter { $0.entity == .issue }.map(\.recordID)
            #expect(issues.count == Set(issues).count, "round \(round), pages of \(limit): a change came twice")
            for id in issues { #expect(expected.remove(id) != nil, "round \(round): \(id) is not one of Alice's projects' new changes") }
            #expect(expected.isEmpty, "round \(round), pages of \(limit): \(expected.count) changes never came")
            expected = []
        }
    }
}

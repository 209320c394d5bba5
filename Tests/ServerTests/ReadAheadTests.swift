@testable import OutpostServer
import Foundation
import OutpostFieldService
import OutpostFieldServiceTesting
import OutpostModels
import OutpostSchema
import OutpostSync
import OutpostWire
import Testing

/// The next page of a pull, read before it is asked for (`PreparedPulls`): served only when nothing
/// that decides what the caller may see has changed, and never at the cost of a change.
@Suite("Pull read-ahead", .fieldService)
struct ReadAheadTests {
    /// A server where Alice has pushed `ids` as issues of project A, and Carol's transport (projects A and B).
    private static func server(withIssues ids: [UUID], on backend: Backend) async throws -> (TestServer, HTTPTransport) {
        let server = try await TestServer.start(backend)
        _ = try await server.transport(token: TestServer.aliceToken).push(PushRequest(mutations: ids.map {
            Sample.create(.issue, id: $0, fields: Sample.issueFields(project: TestServer.projectA))
        }))
        return (server, server.transport(token: TestServer.carolToken))
    }

    @Test("Each pull gets the clock form it asked for, a page read ahead for the other form included", arguments: Backend.available)
    func clockFormFollowsTheRequest(_ backend: Backend) async throws {
        let (server, _) = try await Self.server(withIssues: (0..<8).map { _ in UUID() }, on: backend)
        /// How many of a raw answer's records carry `clock`, and how many `clocks`.
        func forms(_ request: PullRequest) async throws -> (shared: Int, perField: Int, page: PullResponse) {
            let answer = try await server.send("POST", "/pull", token: TestServer.carolToken, body: try wireJSON(request))
            #expect(answer.status == 200)
            let object = try #require(try JSONSerialization.jsonObject(with: answer.body) as? [String: Any])
            let changes = try #require(object["changes"] as? [[String: Any]])
            return (
                changes.filter { $0["clock"] != nil }.count, changes.filter { $0["clocks"] != nil }.count,
                try PullResponse(json: answer.body)
            )
        }
        let first = try await forms(PullRequest(cursor: nil, limit: 5))
        #expect(first.shared == 5 && first.perField == 0)
        #expect(await server.server.pagesReadAhead() == 1)
        // The page read ahead was written with shared clocks; a request for per-field clocks must not get it.
        let second = try await forms(PullRequest(cursor: first.page.nextCursor, limit: 5, acceptsSharedClock: false))
        #expect(second.shared == 0 && second.perField == second.page.changes.count && second.perField > 0)
        // A request body from before the option existed reads as not accepting it.
        let old = try await server.send(
            "POST", "/pull", token: TestServer.carolToken, body: Data(#"{"limit":5}"#.utf8))
        #expect(old.status == 200 && !String(decoding: old.body, as: UTF8.self).contains(#""clock":"#))
        await server.stop()
    }

    @Test("A page read ahead is not served once its caller has left the project", arguments: Backend.available)
    func leftProject(_ backend: Backend) async throws {
        let (server, carol) = try await Self.server(withIssues: (0..<8).map { _ in UUID() }, on: backend)
        let everything = try await carol.pull(PullRequest(cursor: nil, limit: 5))
        let projectA = try await carol.pull(PullRequest(cursor: nil, limit: 5, projects: [TestServer.projectA]))
        #expect(everything.hasMore && projectA.hasMore)
        #expect(await server.server.pagesReadAhead() == 2)

        try await server.execute("""
            DELETE FROM memberships
            WHERE user_id = '\(TestServer.carol.storageText)' AND project_id = '\(TestServer.projectA.storageText)'
            """)
        let next = try await carol.pull(PullRequest(cursor: everything.nextCursor, limit: 5))
        let ofProjectA = next.changes.filter {
            $0.recordID == TestServer.projectA || $0.fields["projectID"] == .uuid(TestServer.projectA)
        }
        #expect(ofProjectA.isEmpty, "the page read ahead, with project A's records, was served")
        let refused = try await server.send(
            "POST", "/pull", token: TestServer.carolToken,
            body: try wireJSON(PullRequest(cursor: projectA.nextCursor, limit: 5, projects: [TestServer.projectA])))
        #expect(refused.status == 403)
        let metrics = try await server.scrape()
        #expect(metrics.contains(#"outpost_pull_read_ahead_total{outcome="discarded"} 2"# + "\n"))
        await server.stop()
    }

    @Test("A page read ahead is not served after a write: the change comes once, at its new version", arguments: Backend.available)
    func writeAfterReadAhead(_ backend: Backend) async throws {
        let ids = (0..<10).map { _ in UUID() }
        let (server, carol) = try await Self.server(withIssues: ids, on: backend)
        let alice = server.transport(token: TestServer.aliceToken)
        let first = try await carol.pull(PullRequest(cursor: nil, limit: 5))
        #expect(await server.server.pagesReadAhead() == 1)

        // While the second page waits, one of its records changes and a new record is created.
        let waiting = try #require(ids.first { id in !first.changes.contains { $0.recordID == id } })
        let late = UUID()
        let results = try await alice.push(PushRequest(mutations: [
            Sample.update(.issue, id: waiting, baseVersion: 1, fields: ["title": .text("Sill replaced")]),
            Sample.create(.issue, id: late, fields: Sample.issueFields(project: TestServer.projectA)),
        ]))
        #expect(results.results.allSatisfy { $0.outcome.appliedVersion != nil })

        var changes = first.changes
        var cursor = first.nextCursor
        for _ in 0..<10 {
            let page = try await carol.pull(PullRequest(cursor: cursor, limit: 5))
            changes += page.changes
            cursor = page.nextCursor
            if !page.hasMore { break }
        }
        let metrics = try await server.scrape()
        #expect(metrics.contains(#"outpost_pull_read_ahead_total{outcome="discarded"} 1"# + "\n"))

        // Served, the page read before the update would have brought version 1 back first.
        #expect(changes.filter { $0.recordID == waiting }.map(\.version) == [2])
        #expect(changes.last { $0.recordID == waiting }?.fields["title"] == .text("Sill replaced"))
        #expect(Set(changes.filter { $0.entity == .issue }.map(\.recordID)) == Set(ids + [late]))
        #expect(Set(changes.map(\.recordID)).count == changes.count)
        #expect(zip(changes, changes.dropFirst()).allSatisfy { $0.sequence < $1.sequence })
        await server.stop()
    }

    /// Attack 111, F1: a page read ahead was served only while the server's newest change stood still,
    /// so a write anywhere discarded it, and the next page's time (7 against 14 ms, 13 against 79 ms on
    /// larger pages) told any reader, a viewer or anyone who made a project, when someone wrote in a
    /// project they may not see. What the page is read against is the newest change of the caller's
    /// own projects.
    @Test("A page read ahead is served after a write in a project its caller may not see", arguments: Backend.available)
    func aWriteElsewhereLeavesThePageReadAhead(_ backend: Backend) async throws {
        let ids = (0..<10).map { _ in UUID() }
        let (server, _) = try await Self.server(withIssues: ids, on: backend)
        let alice = server.transport(token: TestServer.aliceToken)
        let first = try await alice.pull(PullRequest(cursor: nil, limit: 5))
        #expect(first.hasMore)
        #expect(await server.server.pagesReadAhead() == 1)
        // Bob writes in project B, which Alice is no member of.
        let elsewhere = try await server.transport(token: TestServer.bobToken).push(PushRequest(mutations: [
            Sample.create(.issue, fields: Sample.issueFields(project: TestServer.projectB)),
        ]))
        #expect(elsewhere.results.first?.outcome.appliedVersion == 1)
        let second = try await alice.pull(PullRequest(cursor: first.nextCursor, limit: 5))
        #expect(Set((first.changes + second.changes).filter { $0.entity == .issue }.map(\.recordID)).isSuperset(of: ids.prefix(5)))
        let metrics = try await server.scrape()
        #expect(metrics.contains(#"outpost_pull_read_ahead_total{outcome="served"} 1"# + "\n"), "\(metrics)")
        #expect(!metrics.contains(#"outcome="discarded""#))
        await server.stop()
    }

    @Test("With nothing written, each next page is the one read ahead, and a different request reads its own", arguments: Backend.available)
    func servedOnlyToItsRequest(_ backend: Backend) async throws {
        let (server, carol) = try await Self.server(withIssues: (0..<12).map { _ in UUID() }, on: backend)
        let first = try await carol.pull(PullRequest(cursor: nil, limit: 5))
        let smaller = try await carol.pull(PullRequest(cursor: first.nextCursor, limit: 3))
        #expect(smaller.changes.count == 3, "a page read ahead for 5 records answered a request for 3")
        var pages = 1
        var cursor = first.nextCursor
        var hasMore = first.hasMore
        while hasMore, pages < 20 {
            let page = try await carol.pull(PullRequest(cursor: cursor, limit: 5))
            (cursor, hasMore, pages) = (page.nextCursor, page.hasMore, pages + 1)
        }
        let metrics = try await server.scrape()
        #expect(metrics.contains(#"outpost_pull_read_ahead_total{outcome="served"} \#(pages - 1)"# + "\n"))
        #expect(!metrics.contains(#"outcome="discarded""#))
        await server.stop()
    }

    /// Attack 128, F1: four paged pulls of one user at once locked that user out for good, and the server
    /// no longer stopped. Each request waited, in one of its user's two turns, for the page read ahead for
    /// it, whose read waited for a turn. The law: however many pulls one user runs at once, each reads
    /// every record, within a bound that measures the work and not a wait.
    @Test("One user's pulls at once each read every record, however many", arguments: [2, 4, 8])
    func concurrentPullsOfOneUserAllFinish(pulls: Int) async throws {
        let ids = (0..<60).map { _ in UUID() }
        let (server, carol) = try await Self.server(withIssues: ids, on: .sqlite)
        let finished = try await withThrowingTaskGroup(of: Int?.self) { group in
            for _ in 0..<pulls {
                group.addTask {
                    var cursor: String?, seen = Set<UUID>()
                    for _ in 0..<100 {
                        let page = try await carol.pull(PullRequest(cursor: cursor, limit: 3))
                        seen.formUnion(page.changes.filter { $0.entity == .issue }.map(\.recordID))
                        cursor = page.nextCursor
                        if !page.hasMore { break }
                    }
                    return seen.count
                }
            }
            group.addTask {
                try await Task.sleep(for: .seconds(60))
                return nil
            }
            var counts: [Int] = []
            for try await result in group {
                guard let count = result else { break }
                counts.append(count)
                if counts.count == pulls { break }
            }
            group.cancelAll()
            return counts
        }
        #expect(finished == Array(repeating: ids.count, count: pulls), "\(finished.count) of \(pulls) pulls finished within 60 s")
        await server.stop()
    }

    @Test("Read-ahead holds at most its number of pages and reads, and never serves an expired page")
    func bounds() async throws {
        let request = { (after: Int64) in
            PreparedPulls.Request(user: TestServer.alice, after: try! PullCursor(text: String(after)), limit: 5, projects: nil, gzip: true, sharedClock: true)
        }
        let answer = PreparedPulls.Answer(
            body: JSONBody([], gzip: false), records: 0, nextCursor: .start, hasMore: false,
            basis: PullBasis(memberships: [], newestSequence: 0))
        // Lifetimes far beyond the test: a busy parallel run can stall a task for half a minute.
        let bounded = PreparedPulls(maximumPages: 2, lifetime: .seconds(3600))
        for after in 0..<3 { await bounded.prepare(request(Int64(after))) { answer } }
        #expect(await bounded.settledCount() == 2)
        #expect(await bounded.take(request(0)) == nil, "the oldest page was not the one evicted")
        #expect(await bounded.take(request(2)) != nil)
        #expect(await bounded.take(request(2)) == nil, "a page is served once")

        let oneRead = PreparedPulls(maximumReads: 1, lifetime: .seconds(3600))
        let (gate, open) = AsyncStream.makeStream(of: Void.self)
        await oneRead.prepare(request(0)) {
            for await _ in gate {}
            return answer
        }
        await oneRead.prepare(request(1)) { answer }
        #expect(await oneRead.take(request(1)) == nil, "a second read started while the first was under way")
        open.finish()
        let first = await oneRead.take(request(0))
        #expect(await first?.value != nil)

        let expiring = PreparedPulls(lifetime: .zero)
        await expiring.prepare(request(0)) { answer }
        #expect(await expiring.take(request(0)) == nil)
    }
}

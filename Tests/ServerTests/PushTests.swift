import Foundation
import OutpostConflicts
import OutpostFieldService
import OutpostFieldServiceTesting
import OutpostModels
import OutpostSchema
import OutpostSync
import OutpostWire
import Testing

@Suite("Push: at most once, validated, resolved with the devices' policy", .fieldService)
struct PushTests {
    @Test("A batch gets one result per mutation; one bad mutation does not fail the others", arguments: Backend.available)
    func perMutationResults(_ backend: Backend) async throws {
        let server = try await TestServer.start(backend)
        let transport = server.transport(token: TestServer.aliceToken)
        let good = Sample.create(.issue, fields: Sample.issueFields(project: TestServer.projectA))
        var blank = Sample.issueFields(project: TestServer.projectA)
        blank["title"] = .text("  ")
        let invalid = Sample.create(.issue, fields: blank)
        let unknownField = Sample.create(.issue, fields: ["colour": .text("red")])
        let orphanUpdate = Sample.update(.issue, id: UUID(), baseVersion: 1, fields: ["title": .text("x")])
        // A control character XML cannot carry would break every XML bundle of the project for good.
        let unbundlable = Sample.create(.issue, fields: Sample.issueFields(project: TestServer.projectA, title: "bad\u{01}title"))
        // So would a text longer than a bundle's string limit: every pre-sync of the project refused.
        var long = Sample.issueFields(project: TestServer.projectA)
        long["details"] = .text(String(repeating: "x", count: EntityRecord.maximumTextBytes + 1))
        let oversized = Sample.create(.issue, fields: long)
        var longest = Sample.issueFields(project: TestServer.projectA)
        longest["details"] = .text(String(repeating: "é", count: EntityRecord.maximumTextBytes / 2))
        let atTheLimit = Sample.create(.issue, fields: longest)
        let batch = [good, invalid, unknownField, orphanUpdate, unbundlable, oversized, atTheLimit]
        let response = try await transport.push(PushRequest(mutations: batch))
        #expect(response.results.map(\.idempotencyKey) == batch.map(\.idempotencyKey))
        #expect(response.results[0].outcome.appliedVersion == 1)
        #expect(response.results[1].outcome.rejectedCode == .invalidRequest)
        #expect(response.results[2].outcome.rejectedCode == .invalidRequest)
        #expect(response.results[3].outcome.rejectedCode == .notFound)
        #expect(response.results[4].outcome.rejectedCode == .invalidRequest)
        if case .rejected(let reason) = response.results[4].outcome {
            #expect(reason.message.contains("U+0001"), "\(reason.message)")
        }
        #expect(response.results[5].outcome.rejectedCode == .invalidRequest)
        if case .rejected(let reason) = response.results[5].outcome {
            #expect(reason.message.contains("details") && reason.message.contains("1048576"), "\(reason.message)")
        }
        #expect(response.results[6].outcome.appliedVersion == 1, "exactly at the limit, in bytes, is taken")
        let page = try await transport.pull(PullRequest(cursor: nil, limit: 100, projects: [TestServer.projectA]))
        #expect(page.changes.filter { $0.entity == .issue }.map(\.recordID) == [good.recordID, atTheLimit.recordID])
        await server.stop()
    }

    @Test("Every answer names the shared clock; a push in that form applies as one with a clock per field", arguments: Backend.available)
    func sharedClockPushes(_ backend: Backend) async throws {
        let server = try await TestServer.start(backend)
        let transport = server.transport(token: TestServer.aliceToken)
        let issue = Sample.create(.issue, fields: Sample.issueFields(project: TestServer.projectA))
        let edit = Sample.update(.issue, id: issue.recordID, baseVersion: 1, fields: ["title": .text("Sill, cracked"), "status": .text("inProgress")])
        var folded = Sample.create(.issue, fields: Sample.issueFields(project: TestServer.projectA, title: "Folded"))
        folded.clocks["title"] = Sample.clock(500)
        let batch = PushRequest(mutations: [issue, edit, folded])
        let body = try batch.json(sharingClocks: true)
        #expect(String(decoding: body, as: UTF8.self).components(separatedBy: #""clock":"#).count == 3, "issue and edit share")
        let answer = try await server.send("POST", "/push", token: TestServer.aliceToken, body: body)
        #expect(answer.status == 200)
        #expect(answer.headers[SyncProtocol.acceptsHeader.lowercased()] == SyncProtocol.sharedClockForm)
        let results = try JSONDecoder().decode(PushResponse.self, from: answer.body).results
        #expect(results.map(\.outcome.appliedVersion) == [1, 2, 1])
        let page = try await transport.pull(PullRequest(cursor: nil, limit: 100, projects: [TestServer.projectA], acceptsSharedClock: false))
        let stored = Dictionary(uniqueKeysWithValues: page.changes.map { ($0.recordID, $0) })
        var expected = issue.clocks
        for (name, clock) in edit.clocks { expected[name] = clock }
        #expect(stored[issue.recordID]?.clocks == expected)
        #expect(stored[issue.recordID]?.fields["title"] == .text("Sill, cracked"))
        #expect(stored[folded.recordID]?.clocks == folded.clocks)
        await server.stop()
    }

    @Test("Replaying a whole batch gets duplicates carrying the original applied results, a refusal again, and writes nothing twice", arguments: Backend.available)
    func idempotentReplay(_ backend: Backend) async throws {
        let server = try await TestServer.start(backend, assignsServerIDs: true)
        let transport = server.transport(token: TestServer.aliceToken)
        let issue = Sample.create(.issue, fields: Sample.issueFields(project: TestServer.projectA))
        let edit = Sample.update(.issue, id: issue.recordID, baseVersion: 1, fields: ["title": .text("Sill, cracked")])
        var blank = Sample.issueFields(project: TestServer.projectA)
        blank["title"] = .text("")
        let rejected = Sample.create(.issue, fields: blank)
        let batch = PushRequest(mutations: [issue, edit, rejected])
        let first = try await transport.push(batch)
        let before = try await transport.pull(PullRequest(cursor: nil, limit: 1000))
        let second = try await transport.push(batch)
        // What applied comes back as a duplicate of its answer; a refusal applied nothing and is not
        // kept (any token could grow the disk with them), so it is refused anew, for the same reason.
        for (original, replay) in zip(first.results.prefix(2), second.results.prefix(2)) {
            #expect(replay.outcome == .duplicate(original: original.outcome))
        }
        #expect(second.results[2].outcome == first.results[2].outcome)
        #expect(first.results[2].outcome.appliedVersion == nil)
        guard case .applied(2, let serverID?) = first.results[1].outcome else {
            Issue.record("expected the edit applied at version 2 with a server id, got \(first.results[1].outcome)")
            return
        }
        #expect(Int(serverID) != nil)
        let after = try await transport.pull(PullRequest(cursor: nil, limit: 1000))
        #expect(after == before)
        let stored = try #require(after.changes.first { $0.recordID == issue.recordID })
        #expect(stored.version == 2)
        #expect(stored.fields["title"] == .text("Sill, cracked"))
        await server.stop()
    }

    /// Attack 92, F4: a key its user had used for one record, sent again with another record's change
    /// (a device whose queue was copied, a client that reuses keys), was answered as the first change's
    /// duplicate: the device took its write as saved, and it never was. A key names one change of one
    /// record: another record's change under it is refused, visibly, and nothing is written.
    @Test("An idempotency key sent again for another record is refused, not answered as the first change's duplicate", arguments: Backend.available)
    func aKeyNamesOneRecord(_ backend: Backend) async throws {
        let server = try await TestServer.start(backend, assignsServerIDs: true)
        let transport = server.transport(token: TestServer.aliceToken)
        let key = UUID()
        let first = Sample.create(.issue, fields: Sample.issueFields(project: TestServer.projectA), key: key)
        var fields = Sample.issueFields(project: TestServer.projectA)
        fields["title"] = .text("Another leak")
        let second = Sample.create(.issue, fields: fields, key: key)
        let original = try await transport.push(PushRequest(mutations: [first]))
        #expect(original.results.first?.outcome.appliedVersion == 1)
        let reused = try await transport.push(PushRequest(mutations: [second]))
        guard case .rejected(let reason)? = reused.results.first?.outcome else {
            Issue.record("expected the second record's change refused, got \(String(describing: reused.results.first?.outcome))")
            await server.stop()
            return
        }
        #expect(reason.code == .invalidRequest)
        #expect(reason.message.contains("another record"), "\(reason.message)")
        let pulled = try await transport.pull(PullRequest(cursor: nil, limit: 1000))
        #expect(!pulled.changes.contains { $0.recordID == second.recordID }, "the refused change was written")
        // The same change sent again is still its own duplicate.
        let replay = try await transport.push(PushRequest(mutations: [first]))
        #expect(replay.results.first?.outcome == .duplicate(original: original.results[0].outcome))
        await server.stop()
    }

    @Test("A stale base version gets a conflict with the server's record; a sequential change merges by field clocks", arguments: Backend.available)
    func conflictsAndMerge(_ backend: Backend) async throws {
        let server = try await TestServer.start(backend)
        let alice = server.transport(token: TestServer.aliceToken)
        let carol = server.transport(token: TestServer.carolToken)
        let issue = Sample.create(.issue, fields: Sample.issueFields(project: TestServer.projectA), clock: Sample.clock(0))
        _ = try await alice.push(PushRequest(mutations: [issue]))
        // Carol changes the title at version 1; Alice, also on version 1, changes the status.
        let carolEdit = Sample.update(
            .issue, id: issue.recordID, baseVersion: 1, fields: ["title": .text("Carol's title")], clock: Sample.clock(2000))
        #expect(try await carol.push(PushRequest(mutations: [carolEdit])).results[0].outcome.appliedVersion == 2)
        let aliceEdit = Sample.update(
            .issue, id: issue.recordID, baseVersion: 1, fields: ["status": .text("resolved")], clock: Sample.clock(1000))
        let conflict = try await alice.push(PushRequest(mutations: [aliceEdit])).results[0].outcome
        guard case .conflict(let serverRecord) = conflict else {
            Issue.record("expected a conflict, got \(conflict)")
            return
        }
        #expect(serverRecord.version == 2)
        #expect(serverRecord.fields["title"] == .text("Carol's title"))
        // Rebased on version 2 under a new key, fieldMerge keeps both edits.
        var rebased = aliceEdit
        rebased.idempotencyKey = UUID()
        rebased.baseVersion = 2
        #expect(try await alice.push(PushRequest(mutations: [rebased])).results[0].outcome.appliedVersion == 3)
        // An older clock on the same field loses under fieldMerge even on the current version, and is
        // answered as the conflict it is: `applied` would tell the client a value stood that did not.
        // Carol's clock less 1.5 s: `Sample.clock` reads the time anew, and a loaded machine takes seconds.
        let older = try #require(carolEdit.clocks["title"]).physicalMilliseconds - 1_500
        let olderClock = HybridTimestamp(physicalMilliseconds: older, counter: 0, node: Sample.node)
        let stale = Sample.update(
            .issue, id: issue.recordID, baseVersion: 3, fields: ["title": .text("old title")], clock: olderClock)
        guard case .conflict(let unchanged) = try await alice.push(PushRequest(mutations: [stale])).results[0].outcome else {
            Issue.record("a value that lost on the current version must not be answered applied")
            return
        }
        #expect(unchanged.version == 3 && unchanged.fields["title"] == .text("Carol's title"))
        // The same value with an older clock stands as it is: nothing lost, so applied.
        let sameValue = Sample.update(
            .issue, id: issue.recordID, baseVersion: 3, fields: ["title": .text("Carol's title")], clock: olderClock)
        #expect(try await alice.push(PushRequest(mutations: [sameValue])).results[0].outcome.appliedVersion == 4)
        // A delete stamped before a newer field clock on the current version does not stand either: the
        // record stays, and the answer says so instead of applied.
        let staleDelete = PushMutation(
            idempotencyKey: UUID(), entity: .issue, operation: .delete, recordID: issue.recordID, baseVersion: 4,
            fields: [:], clocks: [:], deletion: olderClock)
        guard case .conflict(let alive) = try await alice.push(PushRequest(mutations: [staleDelete])).results[0].outcome else {
            Issue.record("a delete that did not stand must not be answered applied")
            return
        }
        #expect(alive.version == 4 && alive.deletion == nil)
        // A create of a record the server holds conflicts; rebased on the server's version it resolves.
        var again = Sample.create(
            .issue, id: issue.recordID, fields: Sample.issueFields(project: TestServer.projectA, title: "Again"),
            clock: Sample.clock(3000))
        guard case .conflict(let current) = try await alice.push(PushRequest(mutations: [again])).results[0].outcome else {
            Issue.record("a create of an existing record must conflict")
            return
        }
        again.idempotencyKey = UUID()
        again.baseVersion = current.version
        #expect(try await alice.push(PushRequest(mutations: [again])).results[0].outcome.appliedVersion == 5)
        let page = try await alice.pull(PullRequest(cursor: nil, limit: 100))
        let stored = try #require(page.changes.first { $0.recordID == issue.recordID })
        #expect(stored.fields["title"] == .text("Again"))
        #expect(stored.fields["status"] == .text("open"))
        #expect(stored.version == 5)
        await server.stop()
    }

    @Test("An append-only record's edit is answered with the record as it stands; clocks far ahead of the server are refused", arguments: Backend.available)
    func refusals(_ backend: Backend) async throws {
        let server = try await TestServer.start(backend)
        // Carol, the project manager: a member record is the office's to write.
        let alice = server.transport(token: TestServer.carolToken)
        let issue = Sample.create(.issue, fields: Sample.issueFields(project: TestServer.projectA))
        let memberID = UUID()
        // For someone with no member record in A yet (Alice has one: a second is refused).
        let member = Sample.create(.member, id: memberID, fields: [
            "projectID": .uuid(TestServer.projectA), "userID": .uuid(UUID()), "name": .text("Dana"),
            "email": .text(""), "role": .text("crew"),
        ])
        let comment = Sample.create(.comment, fields: [
            "issueID": .uuid(issue.recordID), "authorID": .uuid(memberID), "body": .text("Photo attached"),
        ])
        let edit = Sample.update(.comment, id: comment.recordID, baseVersion: 1, fields: ["body": .text("changed")])
        let future = Sample.create(
            .issue, fields: Sample.issueFields(project: TestServer.projectA), clock: Sample.clock(60 * 60 * 1000))
        let results = try await alice.push(PushRequest(mutations: [issue, member, comment, edit, future])).results
        #expect(results.prefix(3).allSatisfy { $0.outcome.appliedVersion == 1 })
        // A conflict on its own version: the device merges it by the same strategy, keeps the original and
        // offers the attempted text (`DeletesAndRevivalsTests`).
        guard case .conflict(let original) = results[3].outcome else {
            Issue.record("an append-only edit is answered conflict, got \(results[3].outcome)")
            return
        }
        #expect(original.version == 1 && original.fields["body"] == .text("Photo attached"))
        #expect(results[4].outcome.rejectedCode == .clockAhead)
        await server.stop()
    }

    @Test("More mutations than the batch limit is 413 batch_too_large; an oversized body is 413 payload_too_large", arguments: Backend.available)
    func limits(_ backend: Backend) async throws {
        let server = try await TestServer.start(backend, maximumBatchSize: 3, maximumBodyBytes: 64 * 1024)
        let alice = server.transport(token: TestServer.aliceToken)
        let mutations = (0..<4).map { _ in Sample.create(.issue, fields: Sample.issueFields(project: TestServer.projectA)) }
        await #expect(throws: TransportError.self) { _ = try await alice.push(PushRequest(mutations: mutations)) }
        do {
            _ = try await alice.push(PushRequest(mutations: mutations))
        } catch {
            #expect(error.status == 413)
            #expect(error.serverCode == .batchTooLarge)
        }
        let huge = Data(repeating: UInt8(ascii: "a"), count: 200 * 1024)
        let answer = try await server.send("POST", "/pull", token: TestServer.aliceToken, body: huge)
        #expect(answer.status == 413)
        #expect(try JSONDecoder().decode(ErrorBody.self, from: answer.body).code == .payloadTooLarge)
        await server.stop()
    }
}

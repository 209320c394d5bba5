@testable import OutpostServer
import Foundation
import GRDB
import OutpostConflicts
import OutpostFieldService
import OutpostFieldServiceTesting
import OutpostSchema
import OutpostSync
import OutpostTesting
import OutpostWire
import Testing

/// Attacks 93 (F3) and 96 (F2): a key its user had used for one change of a record, sent again with
/// another change of the same record (other values, another field, another clock, a delete under an
/// update's key), was answered as the first change's duplicate. Its device took the second change as
/// saved, and the server never had it: a write lost without a word. A key names one change; the law,
/// walked over generated resends of creates, updates and deletes:
/// - the same change again (under any base version, in either clock form, a create sent again as an
///   update) is its own duplicate;
/// - anything that writes otherwise (a value, a field more or less, a clock, the operation, the delete's
///   clock) is refused as `invalid_request`, and the record stays as the first change left it.
@Suite("Idempotency keys: a key names one change", .fieldService)
struct IdempotencyKeyTests {
    /// How a resend differs from the change its key was first used for.
    enum Difference: CaseIterable {
        case none, baseVersion, sharedClockForm, createAsUpdate, value, extraField, missingField, clock, operation, deletionClock

        /// Whether the resend writes what the first change wrote, so its answer is the first one's.
        var isSameChange: Bool { [.none, .baseVersion, .sharedClockForm, .createAsUpdate].contains(self) }
    }

    /// `POST /push/answers` (attack 103, F1): what the server kept for a key goes only to the key's own
    /// user, only while they may see its record, and reads nothing into being. Any other key (another
    /// user's, one never sent, one answered a conflict, one of a project the caller left) is left out
    /// alike, so the answer tells nothing of what exists.
    @Test("A push's lost answer is told again only to its user, while they may see the record", arguments: Backend.available)
    func aLostAnswerIsToldOnlyToItsUser(_ backend: Backend) async throws {
        let server = try await TestServer.start(backend)
        let alice = server.transport(token: TestServer.aliceToken)
        let issue = Sample.create(.issue, fields: Sample.issueFields(project: TestServer.projectA))
        let bobsIssue = Sample.create(.issue, fields: Sample.issueFields(project: TestServer.projectB))
        _ = try await alice.push(PushRequest(mutations: [issue]))
        _ = try await server.transport(token: TestServer.bobToken).push(PushRequest(mutations: [bobsIssue]))
        let stale = Sample.update(.issue, id: issue.recordID, baseVersion: 0, fields: ["title": .text("Stale")])
        guard case .conflict = try await alice.push(PushRequest(mutations: [stale])).results.first?.outcome else {
            Issue.record("a change on an old version is answered conflict")
            return
        }
        func asked(_ token: String, _ keys: [UUID]) async throws -> (body: String, response: PushResponse) {
            let answer = try await server.send("POST", "/push/answers", token: token, body: try wireJSON(PushAnswersRequest(idempotencyKeys: keys)))
            #expect(answer.status == 200)
            return (String(decoding: answer.body, as: UTF8.self), try JSONDecoder().decode(PushResponse.self, from: answer.body))
        }

        let own = try await alice.pushAnswers(PushAnswersRequest(
            idempotencyKeys: [issue.idempotencyKey, bobsIssue.idempotencyKey, stale.idempotencyKey, UUID()]))
        #expect(own.results == [MutationResult(idempotencyKey: issue.idempotencyKey, outcome: .duplicate(original: .applied(version: 1, serverID: nil)))])
        let nothing = try await asked(TestServer.aliceToken, [UUID()]).body
        #expect(try await asked(TestServer.aliceToken, [bobsIssue.idempotencyKey]).body == nothing, "another user's key reads as none")
        #expect(try await asked(TestServer.aliceToken, [stale.idempotencyKey]).body == nothing)
        // Carol sees Alice's issue, but the key is Alice's.
        #expect(try await asked(TestServer.carolToken, [issue.idempotencyKey]).body == nothing)
        // Removed from the project: the record is no longer hers to learn of.
        #expect(try await server.server.removeMember(TestServer.alice, from: TestServer.projectA))
        #expect(try await asked(TestServer.aliceToken, [issue.idempotencyKey]).body == nothing)
        #expect(try await server.server.storedRecord(issue.recordID)?.version == 1, "asking applies nothing")
        await server.stop()
    }

    /// Attack 110, F1: a member removed from a project sent a key of a change they had made there again,
    /// and `/push` answered it `duplicate`, where `/push/answers` leaves it out, with a checkpoint at
    /// the record's newest change: polled, it told them each edit and delete the office made to it since,
    /// and by the checkpoints' gaps how much else the project wrote. Sent again, the change is answered
    /// as a change of a record they may not see is, and the checkpoint follows nothing of it.
    @Test("A key sent again by a member who left its project is answered as a record they may not see", arguments: Backend.available)
    func aKeySentAgainAfterLeavingIsAnsweredAsNone(_ backend: Backend) async throws {
        let server = try await TestServer.start(backend)
        defer { Task { await server.stop() } }
        let alice = server.transport(token: TestServer.aliceToken)
        let issue = Sample.create(.issue, fields: Sample.issueFields(project: TestServer.projectA))
        guard case .applied = try await alice.push(PushRequest(mutations: [issue])).results.first?.outcome else {
            Issue.record("a member's issue is applied")
            return
        }
        #expect(try await server.server.removeMember(TestServer.alice, from: TestServer.projectA))
        let unknown = try await alice.push(PushRequest(mutations: [
            Sample.update(.issue, id: issue.recordID, baseVersion: 1, fields: ["title": .text("After leaving")]),
        ]))
        let again = try await alice.push(PushRequest(mutations: [issue]))
        #expect(again.results.first?.outcome.rejectedCode == .notFound, "\(again.results)")
        #expect(again.results.first?.outcome == unknown.results.first?.outcome, "answered as any change of the record")
        #expect(again.checkpoint == unknown.checkpoint, "the checkpoint tells nothing of the project left")

        // The office edits the issue and deletes it; the key sent again tells her nothing of either.
        let carol = server.transport(token: TestServer.carolToken)
        let edit = Sample.update(.issue, id: issue.recordID, baseVersion: 1, fields: ["title": .text("The office's")])
        let delete = PushMutation(
            idempotencyKey: UUID(), entity: .issue, operation: .delete, recordID: issue.recordID, baseVersion: 2,
            deletion: Sample.clock(2000))
        for change in [edit, delete] {
            guard case .applied = try await carol.push(PushRequest(mutations: [change])).results.first?.outcome else {
                Issue.record("the office writes the issue")
                return
            }
            let later = try await alice.push(PushRequest(mutations: [issue]))
            #expect(later.results.first?.outcome.rejectedCode == .notFound, "\(later.results)")
            #expect(later.checkpoint == again.checkpoint, "the office's \(change.operation) shows in the checkpoint")
        }
        #expect(try await server.server.storedRecord(issue.recordID)?.version == 3)

        // Added back, she may see the project again, but the issue was deleted while she was away:
        // a change of it is answered as for nothing there (the late-joiner rule), and so is the key,
        // on both routes (attack 111, F4).
        _ = try await server.server.addMember(TestServer.alice, to: TestServer.projectA, role: "foreman")
        let back = try await alice.push(PushRequest(mutations: [issue]))
        #expect(back.results.first?.outcome.rejectedCode == .notFound, "\(back.results)")
        let asked = try await alice.pushAnswers(PushAnswersRequest(idempotencyKeys: [issue.idempotencyKey]))
        #expect(asked.results.isEmpty, "\(asked.results)")
    }

    @Test("A key sent again with another change of its record is refused; the same change is its duplicate", arguments: Backend.available)
    func aKeyNamesOneChange(_ backend: Backend) async throws {
        let server = try await TestServer.start(backend)
        let transport = server.transport(token: TestServer.aliceToken)
        let seed = UInt64.random(in: 0...UInt64.max)
        var random = SeededGenerator(seed: seed)
        for round in 0..<8 {
            // The change the key is first used for: a create, an update or a delete of an issue.
            let issue = Sample.create(.issue, fields: Sample.issueFields(project: TestServer.projectA), clock: Sample.clock(Int64(round)))
            var first = issue
            if round % 3 != 0 {
                #expect(try await transport.push(PushRequest(mutations: [issue])).results[0].outcome.appliedVersion == 1)
                first = round % 3 == 1
                    ? Sample.update(.issue, id: issue.recordID, baseVersion: 1, fields: ["title": .text("Sill, round \(round)"), "status": .text("inProgress")], clock: Sample.clock(2000 + Int64(round)))
                    : PushMutation(
                        idempotencyKey: UUID(), entity: .issue, operation: .delete, recordID: issue.recordID, baseVersion: 1,
                        deletion: Sample.clock(3000 + Int64(round)))
            }
            let original = try await transport.push(PushRequest(mutations: [first])).results[0].outcome
            #expect(original.appliedVersion != nil, "seed \(seed), round \(round): \(original)")
            let stored = try await record(issue.recordID, through: transport)
            for _ in 0..<4 {
                let difference = Difference.allCases.randomElement(using: &random)!
                let resend = Self.resend(of: first, differing: difference, using: &random)
                let outcome: MutationOutcome
                if difference == .sharedClockForm {
                    let answer = try await server.send(
                        "POST", "/push", token: TestServer.aliceToken,
                        body: try PushRequest(mutations: [resend]).json(sharingClocks: true))
                    #expect(answer.status == 200)
                    outcome = try JSONDecoder().decode(PushResponse.self, from: answer.body).results[0].outcome
                } else {
                    outcome = try await transport.push(PushRequest(mutations: [resend])).results[0].outcome
                }
                let context = "seed \(seed), round \(round), \(first.operation) resent with \(difference)"
                if difference.isSameChange {
                    #expect(outcome == .duplicate(original: original), "\(context): \(outcome)")
                } else {
                    #expect(outcome.rejectedCode == .invalidRequest, "\(context): \(outcome)")
                    if case .rejected(let reason) = outcome {
                        #expect(reason.message.contains("another change"), "\(context): \(reason.message)")
                    }
                }
                let now = try await record(issue.recordID, through: transport)
                #expect(now == stored, "\(context): the record moved")
            }
        }
        await server.stop()
    }

    /// A device that learned a parent's server id between a send and its resend names the parent by it
    /// in the resend: the same change, answered as its duplicate. Another parent is another change.
    @Test("The same change naming its parent by server id instead of client id is its duplicate; another parent is refused", arguments: Backend.available)
    func aParentNamedEitherWayIsTheSameChange(_ backend: Backend) async throws {
        let server = try await TestServer.start(backend, assignsServerIDs: true)
        let transport = server.transport(token: TestServer.aliceToken)
        func asset(_ name: String) -> PushMutation {
            Sample.create(.asset, fields: [
                "projectID": .uuid(TestServer.projectA), "name": .text(name), "qrCode": .text("QR-\(name)"),
                "category": .text(""), "location": .text(""),
            ])
        }
        let boiler = asset("Boiler"), pump = asset("Pump")
        let assets = try await transport.push(PushRequest(mutations: [boiler, pump])).results
        guard case .applied(1, let boilerServerID?) = assets[0].outcome, case .applied(1, let pumpServerID?) = assets[1].outcome else {
            Issue.record("expected both assets applied with server ids, got \(assets)")
            await server.stop()
            return
        }
        var fields = Sample.issueFields(project: TestServer.projectA)
        fields["assetID"] = .uuid(boiler.recordID)
        let issue = Sample.create(.issue, fields: fields)
        let original = try await transport.push(PushRequest(mutations: [issue])).results[0].outcome
        #expect(original.appliedVersion == 1)
        var byServerID = issue
        byServerID.fields["assetID"] = .text(boilerServerID)
        let again = try await transport.push(PushRequest(mutations: [byServerID])).results[0].outcome
        #expect(again == .duplicate(original: original), "\(again)")
        var otherParent = issue
        otherParent.fields["assetID"] = .text(pumpServerID)
        #expect(try await transport.push(PushRequest(mutations: [otherParent])).results[0].outcome.rejectedCode == .invalidRequest)
        await server.stop()
    }

    /// A key a server kept before it noted what each key's change wrote (schema step 11) has no digest:
    /// there is nothing to tell its change by, so it is answered as before, a duplicate whatever comes.
    @Test("A key kept before changes had digests is answered as its duplicate, as before")
    func aKeyKeptBeforeDigestsIsItsDuplicate() async throws {
        let server = try await TestServer.start(.sqlite)
        defer { Task { await server.stop() } }
        let transport = server.transport(token: TestServer.aliceToken)
        let issue = Sample.create(.issue, fields: Sample.issueFields(project: TestServer.projectA))
        let original = try await transport.push(PushRequest(mutations: [issue])).results[0].outcome
        let cleared = try await server.openFile().write { db in
            try db.execute(
                sql: "UPDATE applied_mutations SET change_digest = NULL WHERE idempotency_key = ?",
                arguments: [issue.idempotencyKey.uuidString.lowercased()])
            return db.changesCount
        }
        #expect(cleared == 1)
        var other = issue
        other.fields["title"] = .text("Another title")
        #expect(try await transport.push(PushRequest(mutations: [other])).results[0].outcome == .duplicate(original: original))
    }

    /// The record as the server holds it, through a pull from the start.
    private func record(_ id: UUID, through transport: HTTPTransport) async throws -> ServerRecord? {
        try await transport.pull(PullRequest(cursor: nil, limit: 1000)).changes.first { $0.recordID == id }
    }

    /// `first` sent again under its key, differing by `difference`.
    static func resend(of first: PushMutation, differing difference: Difference, using random: inout SeededGenerator) -> PushMutation {
        var resend = first
        let later = Sample.clock(9000 + Int64.random(in: 0..<1000, using: &random))
        switch difference {
        case .none, .sharedClockForm:
            break
        case .baseVersion:
            resend.baseVersion += Int64.random(in: 1...3, using: &random)
        case .createAsUpdate:
            // A device whose create's answer was lost sends it again as an update of the record it pulled.
            if first.operation == .create {
                resend.operation = .update
                resend.baseVersion = 1
            }
        case .value:
            if let name = first.fields.keys.sorted().randomElement(using: &random), name != "projectID" {
                resend.fields[name] = .text("changed \(Int.random(in: 0..<1000, using: &random))")
            } else {
                resend.fields["details"] = .text("changed")
                resend.clocks["details"] = later
            }
        case .extraField:
            let name = first.fields["details"] == nil ? "details" : "priority"
            resend.fields[name] = .text(name == "priority" ? "low" : "more detail")
            resend.clocks[name] = later
        case .missingField:
            if let name = first.fields.keys.sorted().filter({ $0 != "projectID" }).randomElement(using: &random) {
                resend.fields[name] = nil
                resend.clocks[name] = nil
            } else {
                resend.fields["details"] = .text("")
                resend.clocks["details"] = later
            }
        case .clock:
            if let name = first.clocks.keys.sorted().randomElement(using: &random) {
                resend.clocks[name] = later
            } else {
                resend.deletion = later
            }
        case .operation:
            switch first.operation {
            case .create, .update:
                resend.operation = .delete
                resend.deletion = later
            case .delete:
                resend.operation = .update
                resend.deletion = nil
                resend.fields["title"] = .text("Back again")
                resend.clocks["title"] = later
            }
        case .deletionClock:
            if first.deletion == nil {
                resend.operation = .delete
            }
            resend.deletion = later
        }
        return resend
    }
}

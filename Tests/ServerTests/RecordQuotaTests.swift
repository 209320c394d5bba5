import Foundation
import GRDB
import OutpostConflicts
import OutpostFieldService
import OutpostFieldServiceTesting
import OutpostMigrator
import OutpostSchema
@testable import OutpostServer
import OutpostTesting
import OutpostWire
import PostgresNIO
import Testing

/// Records have quotas, by project and by creator, as media does: one crew token pushing large texts
/// grew a database by 1.9 GB a minute until the disk was full and every project's pushes failed
/// (attack 118, F3). The bytes counted are kept by triggers (`record_usage`), so the law under test is
/// that they are always the bytes the records hold, whatever wrote them.
@Suite("Records quotas: by project and by creator, counted as stored", .fieldService)
struct RecordQuotaTests {
    /// Issues whose details take `bytes` bytes.
    static func issue(in project: UUID, bytes: Int) -> PushMutation {
        Sample.create(.issue, fields: Sample.issueFields(project: project).merging(["details": .text(String(repeating: "d", count: bytes))]) { _, new in new })
    }

    /// How many idempotency answers a member keeps, and how many more of theirs prune them, in the
    /// answer tests: the protocol's figures (20,000 and 1,024) lowered.
    static let fewAnswers = (kept: 40, interval: Int64(16))

    /// A server keeping `fewAnswers`.
    static func serverKeepingFewAnswers(_ backend: Backend) async throws -> TestServer {
        try await TestServer.start(backend) {
            $0.pushBounds.answersKeptPerUser = fewAnswers.kept
            $0.pushBounds.answerPruningInterval = fewAnswers.interval
        }
    }

    /// The idempotency answers the server holds for `user`.
    static func answersHeld(of user: UUID, on server: TestServer) async throws -> Int {
        let rows = try await server.strings("SELECT CAST(count(*) AS TEXT) FROM applied_mutations WHERE user_id = '\(user.storageText)'")
        return Int(rows.first ?? "") ?? -1
    }

    static func refusal(_ result: MutationResult?) -> ErrorBody? {
        guard case .rejected(let reason) = result?.outcome else { return nil }
        return reason
    }

    /// What `record_usage` counts, and what the records hold, as `holder id bytes` lines in one order.
    static func countedAndHeld(on server: TestServer, _ backend: Backend) async throws -> (counted: [String], held: [String]) {
        let size = backend == .postgres
            ? "(octet_length(fields)::bigint + octet_length(clocks)::bigint)" : "(length(CAST(fields AS BLOB)) + length(CAST(clocks AS BLOB)))"
        let text = backend == .postgres ? "::text" : ""
        let counted = try await server.strings(
            "SELECT holder || ' ' || id || ' ' || bytes\(text) FROM record_usage WHERE bytes <> 0 ORDER BY 1")
        let held = try await server.strings("""
            SELECT line FROM (
                SELECT 'project ' || project_id || ' ' || sum\(size)\(text) AS line FROM records WHERE project_id IS NOT NULL GROUP BY project_id
                UNION ALL
                SELECT 'writer ' || coalesce(written_by, owner_id) || ' ' || sum\(size)\(text) AS line FROM records
                GROUP BY coalesce(written_by, owner_id)
            ) AS lines ORDER BY 1
            """)
        return (counted, held)
    }

    @Test("Past its project's or its creator's records quota a change is refused, a change that adds nothing still goes", arguments: Backend.available)
    func changesPastAQuotaAreRefused(_ backend: Backend) async throws {
        let server = try await TestServer.start(backend) {
            $0.maximumRecordBytesPerProject = 150_000
            $0.maximumRecordBytesPerUser = 100_000
        }
        defer { Task { await server.stop() } }
        let alice = server.transport(token: TestServer.aliceToken)
        let carol = server.transport(token: TestServer.carolToken)

        // Alice's own issues, one push each, until her quota refuses one: nothing of it is stored.
        var hers: [PushMutation] = []
        var refused: (PushMutation, ErrorBody)?
        for _ in 0..<20 where refused == nil {
            let create = Self.issue(in: TestServer.projectA, bytes: 9_000)
            let result = try await alice.push(PushRequest(mutations: [create])).results.first
            if let reason = Self.refusal(result) { refused = (create, reason) } else { hers.append(create) }
        }
        let (refusedCreate, reason) = try #require(refused, "twenty issues of 9 KB passed a quota of 100 KB")
        #expect(hers.count >= 8 && hers.count <= 11, "\(hers.count) issues of 9 KB within 100 KB")
        #expect(reason.code == .payloadTooLarge && reason.message.contains("the records you wrote last"), "\(reason)")
        #expect(reason.message.contains("100000"), "\(reason.message)")
        let edit = Sample.update(.issue, id: refusedCreate.recordID, baseVersion: 1, fields: ["priority": .text("low")])
        #expect(try await alice.push(PushRequest(mutations: [edit])).results.first?.outcome.rejectedCode == .notFound)

        // At her quota, edits that add nothing go: a shorter text, a delete. Then the room they freed takes
        // the refused issue.
        for (index, create) in hers.prefix(2).enumerated() {
            let shorter = Sample.update(.issue, id: create.recordID, baseVersion: 1, fields: ["details": .text("short")], clock: Sample.clock(Int64(2_000 + index)))
            #expect(try await alice.push(PushRequest(mutations: [shorter])).results.first?.outcome.appliedVersion == 2)
        }
        let delete = PushMutation(
            idempotencyKey: UUID(), entity: .issue, operation: .delete, recordID: hers[2].recordID, baseVersion: 1,
            deletion: Sample.clock(3_000))
        #expect(try await alice.push(PushRequest(mutations: [delete])).results.first?.outcome.appliedVersion == 2)
        var again = refusedCreate
        again.idempotencyKey = UUID()
        #expect(try await alice.push(PushRequest(mutations: [again])).results.first?.outcome.appliedVersion == 1)

        // Carol's issues in project A meet the project's quota before her own.
        var carols = 0
        var projectRefusal: ErrorBody?
        for _ in 0..<20 where projectRefusal == nil {
            let result = try await carol.push(PushRequest(mutations: [Self.issue(in: TestServer.projectA, bytes: 9_000)])).results.first
            if let reason = Self.refusal(result) { projectRefusal = reason } else { carols += 1 }
        }
        let full = try #require(projectRefusal, "twenty more issues of 9 KB passed a project's quota of 150 KB")
        #expect(full.code == .payloadTooLarge && full.message.contains("this project's records"), "\(full)")
        #expect(carols >= 3 && carols <= 7, "\(carols) of Carol's issues beside Alice's 90 KB, within 150 KB")
        // Project B is another project: her issue there goes.
        let elsewhere = try await carol.push(PushRequest(mutations: [Self.issue(in: TestServer.projectB, bytes: 9_000)]))
        #expect(elsewhere.results.first?.outcome.appliedVersion == 1, "\(String(describing: elsewhere.results.first))")

        // One push of several: each is judged on what the ones before it left.
        let batch = (0..<4).map { _ in Self.issue(in: TestServer.projectB, bytes: 9_000) }
        let answers = try await carol.push(PushRequest(mutations: batch)).results
        let applied = answers.prefix { $0.outcome.appliedVersion == 1 }.count
        #expect((1...3).contains(applied) && answers.dropFirst(applied).allSatisfy { Self.refusal($0)?.code == .payloadTooLarge }, "\(answers.map(\.outcome))")
        let counts = try await Self.countedAndHeld(on: server, backend)
        #expect(counts.counted == counts.held)
    }

    /// A record's bytes count for whoever wrote it last: counted for its creator, Alice's edits of Carol's
    /// issue filled Carol's quota, Carol's next issue in a project Alice is not in was refused, and the
    /// refusal Alice got told her Carol's total across projects (attack 119, F2, F3).
    @Test("A member's edits of another's record count against the member, and tell them nothing of the other's total", arguments: Backend.available)
    func editsCountForWhoeverWroteLast(_ backend: Backend) async throws {
        let server = try await TestServer.start(backend) { $0.maximumRecordBytesPerUser = 100_000 }
        defer { Task { await server.stop() } }
        let alice = server.transport(token: TestServer.aliceToken)
        let carol = server.transport(token: TestServer.carolToken)
        let inA = Self.issue(in: TestServer.projectA, bytes: 40_000)
        for create in [inA, Self.issue(in: TestServer.projectB, bytes: 40_000)] {
            #expect(try await carol.push(PushRequest(mutations: [create])).results.first?.outcome.appliedVersion == 1)
        }
        let grow = Sample.update(.issue, id: inA.recordID, baseVersion: 1, fields: ["details": .text(String(repeating: "g", count: 85_000))])
        #expect(try await alice.push(PushRequest(mutations: [grow])).results.first?.outcome.appliedVersion == 2)
        // The grown issue is Alice's to count now: Carol has room for another 40 KB in project B.
        let again = try await carol.push(PushRequest(mutations: [Self.issue(in: TestServer.projectB, bytes: 40_000)]))
        #expect(again.results.first?.outcome.appliedVersion == 1, "\(String(describing: again.results.first))")
        // Past Alice's own quota her next growth is refused, naming her total, not Carol's.
        let carols = try await server.strings("SELECT CAST(bytes AS TEXT) FROM record_usage WHERE holder = 'writer' AND id = '\(TestServer.carol.storageText)'")
        let more = Sample.update(
            .issue, id: inA.recordID, baseVersion: 2, fields: ["details": .text(String(repeating: "h", count: 99_000))], clock: Sample.clock(5_000))
        let refused = Self.refusal(try await alice.push(PushRequest(mutations: [more])).results.first)
        #expect(refused?.code == .payloadTooLarge && refused?.message.contains("the records you wrote last") == true, "\(String(describing: refused))")
        #expect(carols.count == 1 && !(refused?.message.contains(carols[0]) ?? true), "\(carols) in \(String(describing: refused))")
        let counts = try await Self.countedAndHeld(on: server, backend)
        #expect(counts.counted == counts.held)
    }

    /// A change that adds no bytes leaves the record counted for its writer: taken over by a delete or a
    /// same-size edit, an office user who deleted a crew member's junk held it past their quota for good,
    /// and two members passed a record back and forth past both quotas (attack 120, N1).
    @Test("A delete, or an edit that adds no bytes, leaves a record counted for the member who wrote it", arguments: Backend.available)
    func changesAddingNothingLeaveTheWriter(_ backend: Backend) async throws {
        let server = try await TestServer.start(backend)
        defer { Task { await server.stop() } }
        let alice = server.transport(token: TestServer.aliceToken)
        let carol = server.transport(token: TestServer.carolToken)
        func total(_ user: UUID) async throws -> Int64 {
            let rows = try await server.strings("SELECT CAST(bytes AS TEXT) FROM record_usage WHERE holder = 'writer' AND id = '\(user.storageText)'")
            return rows.first.flatMap { Int64($0) } ?? 0
        }
        let junk = Self.issue(in: TestServer.projectA, bytes: 30_000), other = Self.issue(in: TestServer.projectA, bytes: 30_000)
        #expect(try await alice.push(PushRequest(mutations: [junk, other])).results.allSatisfy { $0.outcome.appliedVersion == 1 })
        let (alices, carols) = (try await total(TestServer.alice), try await total(TestServer.carol))
        let delete = PushMutation(
            idempotencyKey: UUID(), entity: .issue, operation: .delete, recordID: junk.recordID, baseVersion: 1, deletion: Sample.clock(3_000))
        let sameSize = Sample.update(.issue, id: other.recordID, baseVersion: 1, fields: ["details": .text(String(repeating: "s", count: 30_000))])
        let answers = try await carol.push(PushRequest(mutations: [delete, sameSize])).results
        #expect(answers.allSatisfy { $0.outcome.appliedVersion == 2 }, "\(answers.map(\.outcome))")
        #expect(try await total(TestServer.carol) == carols, "Carol took over what she deleted or rewrote to the same size")
        #expect(try await total(TestServer.alice) == alices)
        // One that adds bytes makes the record Carol's, whole.
        let longer = Sample.update(
            .issue, id: other.recordID, baseVersion: 2, fields: ["details": .text(String(repeating: "l", count: 30_010))], clock: Sample.clock(4_000))
        #expect(try await carol.push(PushRequest(mutations: [longer])).results.first?.outcome.appliedVersion == 3)
        #expect(try await total(TestServer.carol) > carols + 30_000)
        let counts = try await Self.countedAndHeld(on: server, backend)
        #expect(counts.counted == counts.held)
    }

    /// The rules measure a change as its backend stores it, to the byte: a quota of exactly what the
    /// record would take lets it in, one byte less refuses it. Texts that take more room once stored
    /// (quotes, backslashes, tabs and line feeds, accents, emoji) included.
    @Test("A quota's edge is the stored size of the record, to the byte", arguments: Backend.available)
    func theEdgeIsTheStoredSize(_ backend: Backend) async throws {
        let text = "say \"hi\" \\ tab\t line\n é e\u{301} 😀 </x> &"
        let create = Sample.create(.issue, fields: Sample.issueFields(project: TestServer.projectA, title: "Quote \"é\"").merging(["details": .text(text)]) { _, new in new })
        func held(on server: TestServer) async throws -> Int64 {
            let rows = try await server.strings("SELECT CAST(bytes AS TEXT) FROM record_usage WHERE holder = 'writer' AND id = '\(TestServer.alice.storageText)'")
            return rows.first.flatMap { Int64($0) } ?? 0
        }
        let measuring = try await TestServer.start(backend)
        let before = try await held(on: measuring)
        #expect(try await measuring.transport(token: TestServer.aliceToken).push(PushRequest(mutations: [create])).results.first?.outcome.appliedVersion == 1)
        let size = try await held(on: measuring) - before
        await measuring.stop()
        #expect(size > Int64(text.utf8.count))
        for (slack, applies) in [(Int64(-1), false), (0, true)] {
            let server = try await TestServer.start(backend) { $0.maximumRecordBytesPerUser = before + size + slack }
            #expect(try await held(on: server) == before, "the seed's bytes differ between servers")
            let result = try await server.transport(token: TestServer.aliceToken).push(PushRequest(mutations: [create])).results.first
            #expect((result?.outcome.appliedVersion == 1) == applies, "quota \(slack) from the record's \(size) bytes: \(String(describing: result))")
            await server.stop()
        }
    }

    /// Edits that add no bytes pass every records quota, and each applied one kept its idempotency answer
    /// for ever: one crew token grew a database by 85 MB a minute so (attack 119, F1). A member's newest
    /// answers are kept; an older key sent again is answered from the record as it stands (a conflict),
    /// never written twice, and another member's answers stay.
    @Test("Only a member's newest idempotency answers are kept, and an older key sent again writes nothing twice", arguments: Backend.available)
    func onlyTheNewestAnswersAreKept(_ backend: Backend) async throws {
        let (kept, interval) = Self.fewAnswers
        let server = try await Self.serverKeepingFewAnswers(backend)
        defer { Task { await server.stop() } }
        let alice = server.transport(token: TestServer.aliceToken)
        let carol = server.transport(token: TestServer.carolToken)
        let carols = Self.issue(in: TestServer.projectB, bytes: 10)
        #expect(try await carol.push(PushRequest(mutations: [carols])).results.first?.outcome.appliedVersion == 1)
        let issue = Self.issue(in: TestServer.projectA, bytes: 10)
        #expect(try await alice.push(PushRequest(mutations: [issue])).results.first?.outcome.appliedVersion == 1)
        var edits: [PushMutation] = []
        for round in 0..<12 {
            let batch = (0..<20).map { index in
                Sample.update(
                    .issue, id: issue.recordID, baseVersion: Int64(1 + round * 20 + index),
                    fields: ["title": .text(index % 2 == 0 ? "a" : "b")], clock: Sample.clock(Int64(10_000 + round * 100 + index)))
            }
            var answers: [MutationResult] = []
            for edit in batch { answers += try await alice.push(PushRequest(mutations: [edit])).results }
            #expect(answers.allSatisfy { $0.outcome.appliedVersion != nil }, "\(answers.map(\.outcome))")
            edits += batch
            try await Task.sleep(for: .milliseconds(2))  // answers of one instant are pruned together
        }
        let held = try await Self.answersHeld(of: TestServer.alice, on: server)
        #expect(held >= kept && held <= kept + Int(interval) + 1, "\(held) answers kept of 241")
        // The newest key is answered as the duplicate it is; the oldest, pruned, as the record stands now.
        let newest = try await alice.push(PushRequest(mutations: [edits.last!])).results.first?.outcome
        guard case .duplicate = newest else { Issue.record("the newest key: \(String(describing: newest))"); return }
        let oldest = try await alice.push(PushRequest(mutations: [edits.first!])).results.first?.outcome
        guard case .conflict(let record) = oldest else { Issue.record("the oldest key: \(String(describing: oldest))"); return }
        #expect(record.version == 241, "written again: version \(record.version)")
        // Carol's one answer is hers, not pruned with Alice's.
        guard case .duplicate = try await carol.push(PushRequest(mutations: [carols])).results.first?.outcome else {
            Issue.record("Carol's answer went with Alice's"); return
        }
        // Asked about keys, the server says whether one it leaves out may be one it let go: all of
        // Carol's answers are kept, some of Alice's are gone.
        #expect(try await carol.pushAnswers(PushAnswersRequest(idempotencyKeys: [UUID()])).keepsEveryAnswer == true)
        let alices = try await alice.pushAnswers(PushAnswersRequest(idempotencyKeys: [edits.first!.idempotencyKey]))
        #expect(alices.keepsEveryAnswer == false && alices.results.isEmpty)
    }

    /// Pruning went by the change sequence that every member's pushes move: a member whose pushes stopped
    /// one short of each multiple of the interval, another member's push crossing it, was never pruned,
    /// and grew a database by 128 MB a minute (attack 121, F2). It goes by the member's own applied
    /// answers, whoever else pushes between.
    @Test("A member's answers are pruned whoever else pushes between their pushes", arguments: Backend.available)
    func answersArePrunedWhoeverElsePushes(_ backend: Backend) async throws {
        let (kept, interval) = Self.fewAnswers
        let server = try await Self.serverKeepingFewAnswers(backend)
        defer { Task { await server.stop() } }
        let alice = server.transport(token: TestServer.aliceToken)
        let carol = server.transport(token: TestServer.carolToken)
        let issue = Self.issue(in: TestServer.projectA, bytes: 10)
        let created = try await alice.push(PushRequest(mutations: [issue])).results.first
        var sequence = try #require(created?.sequence)
        for index in 0..<200 {
            // Carol takes the sequence number that would have been Alice's multiple of the interval.
            if (sequence + 1) % interval == 0 {
                let carols = try await carol.push(PushRequest(mutations: [Self.issue(in: TestServer.projectB, bytes: 10)])).results.first
                sequence = try #require(carols?.sequence)
            }
            let edit = Sample.update(
                .issue, id: issue.recordID, baseVersion: Int64(1 + index), fields: ["title": .text(index % 2 == 0 ? "a" : "b")],
                clock: Sample.clock(Int64(20_000 + index)))
            let answer = try await alice.push(PushRequest(mutations: [edit])).results.first
            sequence = try #require(answer?.sequence, "\(String(describing: answer?.outcome))")
            if index % 16 == 15 { try await Task.sleep(for: .milliseconds(2)) }  // answers of one instant are pruned together
        }
        let held = try await Self.answersHeld(of: TestServer.alice, on: server)
        #expect(held >= kept && held <= kept + Int(interval) + 16, "\(held) of Alice's 201 answers kept")
    }

    /// The law: whatever writes records (creates, growing and shrinking edits, deletes, stale edits
    /// answered as conflicts, an operator adding and removing members), `record_usage` holds exactly the
    /// bytes the records hold, per project and per creator. Seeded; a failure names its seed.
    @Test("The bytes counted for each project and creator are the bytes their records hold, after any writes", arguments: Backend.available)
    func countedBytesFollowEveryWrite(_ backend: Backend) async throws {
        let server = try await TestServer.start(backend)
        defer { Task { await server.stop() } }
        let writers: [(token: String, projects: [UUID])] = [
            (TestServer.aliceToken, [TestServer.projectA]), (TestServer.bobToken, [TestServer.projectB]),
            (TestServer.carolToken, [TestServer.projectA, TestServer.projectB]),
        ]
        for seed in UInt64(1)...3 {
            var random = SeededGenerator(seed: seed)
            var held: [(id: UUID, token: String, version: Int64)] = []
            for step in 0..<24 {
                let writer = writers.randomElement(using: &random)!
                let clock = Sample.clock(Int64(seed * 100_000 + UInt64(step) * 10))
                let choice = Int.random(in: 0..<10, using: &random)
                switch held.isEmpty ? 0 : choice {
                case 0..<4:
                    let create = Self.issue(in: writer.projects.randomElement(using: &random)!, bytes: Int.random(in: 0...6_000, using: &random))
                    if try await server.transport(token: writer.token).push(PushRequest(mutations: [create])).results.first?.outcome.appliedVersion == 1 {
                        held.append((create.recordID, writer.token, 1))
                    }
                case 4..<7:
                    let index = Int.random(in: 0..<held.count, using: &random)
                    // Sometimes on a stale version: answered as a conflict, nothing written.
                    let stale = Bool.random(using: &random)
                    let edit = Sample.update(
                        .issue, id: held[index].id, baseVersion: stale ? held[index].version - 1 : held[index].version,
                        fields: ["details": .text(String(repeating: "e", count: Int.random(in: 0...6_000, using: &random)))], clock: clock)
                    let result = try await server.transport(token: held[index].token).push(PushRequest(mutations: [edit])).results.first
                    if let version = result?.outcome.appliedVersion { held[index].version = version }
                case 7:
                    let index = Int.random(in: 0..<held.count, using: &random)
                    let delete = PushMutation(
                        idempotencyKey: UUID(), entity: .issue, operation: .delete, recordID: held[index].id,
                        baseVersion: held[index].version, deletion: clock)
                    let result = try await server.transport(token: held[index].token).push(PushRequest(mutations: [delete])).results.first
                    if let version = result?.outcome.appliedVersion { held[index].version = version }
                case 8:
                    _ = try await server.server.addMember(.init(userID: TestServer.bob, name: "Bob", role: "crew", projects: [TestServer.projectA]))
                default:
                    _ = try await server.server.removeMember(TestServer.bob, from: TestServer.projectA)
                }
                let counts = try await Self.countedAndHeld(on: server, backend)
                #expect(counts.counted == counts.held, "seed \(seed), step \(step)")
                if counts.counted != counts.held { return }
            }
        }
    }

    /// A server upgraded in place counts the records it held before the step that keeps the counts: the
    /// step's own counting statements, run on a database whose counts are gone, count them again.
    @Test("The step that keeps the counts counts what a database held before it", arguments: Backend.available)
    func anUpgradeCountsWhatWasHeld(_ backend: Backend) async throws {
        let server = try await TestServer.start(backend)
        defer { Task { await server.stop() } }
        for index in 0..<6 {
            let token = [TestServer.aliceToken, TestServer.carolToken][index % 2]
            let project = index % 3 == 0 ? TestServer.projectA : (index % 2 == 1 ? TestServer.projectB : TestServer.projectA)
            _ = try await server.transport(token: token).push(PushRequest(mutations: [Self.issue(in: project, bytes: 100 * index)]))
        }
        let before = try await Self.countedAndHeld(on: server, backend)
        #expect(before.counted == before.held && before.counted.count >= 4)
        // As the step found them: no counts (its backfill runs again, as on a database of step 12).
        try await server.execute("DELETE FROM record_usage")
        let step = try #require((backend == .postgres ? PostgresSchema.steps : ServerSchema.steps).first { $0.version == 13 })
        let backfill = try #require(step.sql).components(separatedBy: ";\n").filter { $0.contains("INSERT INTO record_usage") && $0.contains("GROUP BY") }
        #expect(backfill.count == 2)
        for statement in backfill { try await server.execute(statement) }
        let after = try await Self.countedAndHeld(on: server, backend)
        #expect(after.counted == before.counted)
    }
}

@testable import OutpostStore
@testable import OutpostSync
import Foundation
import OutpostConflicts
import OutpostFieldService
import OutpostFieldServiceTesting
import OutpostModels
import OutpostSchema
import OutpostServerTesting
import OutpostTesting
import OutpostWire
import Testing

/// The engine against the reference server in process (`InProcessServer`), with a real store file in a temporary folder.
@Suite(.fieldService) struct SyncEngineTests {
    final class Device: Sendable {
        let folder: URL
        let store: LocalStore
        init() throws {
            folder = FileManager.default.temporaryDirectory.appendingPathComponent("outpost-engine-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            store = try LocalStore.open(at: folder.appendingPathComponent("device.sqlite").path)
        }
        deinit { try? FileManager.default.removeItem(at: folder) }
    }

    let now = Date(timeIntervalSince1970: 1_795_000_000)

    /// An opportunity → project → scope → item graph, a fee, and a clock-in/clock-out pair, all offline.
    func workOffline(on store: LocalStore) async throws -> (project: Project, scope: Scope, clockOut: TimeEntry) {
        let opportunity = try await store.save(Opportunity(name: "Kitchen", customerName: "Zoë"), now: now)
        let project = try await store.save(Project(opportunityID: opportunity.id, name: "Müller kitchen"), now: now)
        let scope = try await store.save(Scope(projectID: project.id, name: "Cabinets"), now: now)
        try await store.save(ScopeItem(scopeID: scope.id, name: "Base 36\"", quantity: 4, unit: "ea", unitPriceCents: 48_900), now: now)
        try await store.save(Fee(projectID: project.id, name: "Permit", amountCents: 35_000), now: now)
        let member = UUID()
        let clockIn = try await store.save(TimeEntry(projectID: project.id, memberID: member, kind: .clockIn, recordedAt: now), now: now)
        let clockOut = try await store.save(
            TimeEntry(projectID: project.id, memberID: member, kind: .clockOut, recordedAt: now.addingTimeInterval(28_800),
                      clockInID: clockIn.id), now: now)
        return (project, scope, clockOut)
    }

    @Test func anOfflineEstimateGraphSyncsParentsFirstWithServerAssignedIds() async throws {
        let device = try Device()
        let server = try await InProcessServer(assignsServerIDs: true)
        let (project, scope, clockOut) = try await workOffline(on: device.store)
        let engine = SyncEngine(store: device.store, transport: server, random: SeededGenerator(seed: 1))
        let report = try await engine.sync(now: { self.now })
        #expect(report.pushed == 7)
        #expect(report.isComplete)
        #expect(try device.store.status().pendingChanges == 0)
        #expect(try device.store.status().lastSuccessfulSync == now)

        // Every record got a server id, and the server holds references by those ids.
        #expect(try device.store.serverID(of: .project, clientID: project.id) != nil)
        // They travelled as server ids, which the server resolved to its records.
        #expect(try await server.record(scope.id)?.fields["projectID"] == .uuid(project.id))
        let clockIn = try #require(clockOut.clockInID)
        #expect(try device.store.serverID(of: .timeEntry, clientID: clockIn) != nil)
        #expect(try await server.record(clockOut.id)?.fields["clockInID"] == .uuid(clockIn), "the pair stays paired")
        #expect(try device.store.fetch(Scope.self, id: scope.id)?.sync.serverID != nil)

        // Pulling the graph back maps server ids to the device's ids again: nothing changes locally.
        let again = try await engine.sync(now: { self.now })
        // The device's own six writes come back as their versions only (`PullResponse.ownRecords`); what
        // the server wrote comes whole: the opportunity the project linked, and the creator's member record.
        #expect(again.pulled == 2, "the linked opportunity and the new project's member record, its creator's")
        #expect(try device.store.fetch(Scope.self, id: scope.id)?.projectID == project.id)
        #expect(try device.store.fetch(TimeEntry.self, id: clockOut.id)?.clockInID == clockOut.clockInID)
        #expect(try device.store.openConflicts().isEmpty)
    }

    /// A device short of space takes no page (attack 65 F3: endless valid pages filled the file at
    /// 40 MB/s), but what the user wrote still reaches the server, and the run ends saying why.
    @Test func aDeviceShortOfSpaceTakesNoPagesButStillSendsItsWrites() async throws {
        let device = try Device()
        let server = try await InProcessServer()
        let teammate = try await store(openedBeside: device, keepingFree: 0)
        let project = try await teammate.save(Project(opportunityID: UUID(), name: "Depot"), now: now)
        _ = try await SyncEngine(store: teammate, transport: server).sync(now: { self.now })
        let full = try await store(openedBeside: device, keepingFree: Int64.max / 2, name: "full.sqlite")
        let issue = try await full.save(OutpostModels.Issue(projectID: project.id, title: "Loose rail"), now: now)
        let engine = SyncEngine(store: full, transport: server, random: SeededGenerator(seed: 1))
        do {
            _ = try await engine.sync(now: { self.now })
            Issue.record("a full device's sync ended as if it had pulled")
        } catch {
            #expect(error.code == .storageFull, "\(error)")
        }
        #expect(try await server.record(issue.id)?.fields["title"] == .text("Loose rail"), "the write went out")
        #expect(try full.fetch(Project.self, id: project.id) == nil, "no page was taken")
        #expect(try full.pullCursor() == nil)
    }

    /// Attack 66 F3: on a device short of space, a push's conflict answer could not be merged (the
    /// merge was refused as a pulled page), so the batch's other acknowledgements were never recorded
    /// and the changes behind it never went. The merge of a conflict answer is not a page: it goes in.
    @Test func aConflictAnswerIsMergedOnADeviceShortOfSpace() async throws {
        let device = try Device()
        let server = try await InProcessServer()
        let office = try await store(openedBeside: device, keepingFree: 0)
        let project = try await office.save(Project(opportunityID: UUID(), name: "Depot"), now: now)
        let issue = try await office.save(OutpostModels.Issue(projectID: project.id, title: "Loose rail"), now: now)
        _ = try await SyncEngine(store: office, transport: server).sync(now: { self.now })
        let crewPath = device.folder.appendingPathComponent("crew.sqlite").path
        _ = try await SyncEngine(store: try LocalStore.open(at: crewPath, keepingFree: 0), transport: server).sync(now: { self.now })
        var edited = try #require(try office.fetch(OutpostModels.Issue.self, id: issue.id))
        edited.title = "Rail replaced"
        _ = try await office.save(edited, now: now.addingTimeInterval(1))
        _ = try await SyncEngine(store: office, transport: server).sync(now: { self.now.addingTimeInterval(1) })

        let crew = try LocalStore.open(at: crewPath, keepingFree: Int64.max / 2)
        var mine = try #require(try crew.fetch(OutpostModels.Issue.self, id: issue.id))
        mine.status = .inProgress
        _ = try await crew.save(mine, now: now.addingTimeInterval(2))
        let added = try await crew.save(OutpostModels.Issue(projectID: project.id, title: "Bolt sheared"), now: now.addingTimeInterval(2))
        let engine = SyncEngine(store: crew, transport: server, random: SeededGenerator(seed: 1))
        for _ in 0..<2 {
            do {
                _ = try await engine.sync(now: { self.now.addingTimeInterval(3) })
            } catch {
                #expect(error.code == .storageFull, "\(error)")
            }
        }
        let waiting = try crew.mutations()
        #expect(waiting.isEmpty, "every change went and was settled: \(waiting.map(\.lastError))")
        let held = try #require(try await server.record(issue.id))
        #expect(held.fields["status"] == .text("inProgress"))
        #expect(held.fields["title"] == .text("Rail replaced"))
        #expect(try await server.record(added.id) != nil)
    }

    private func store(openedBeside device: Device, keepingFree: Int64, name: String = "teammate.sqlite") async throws -> LocalStore {
        try LocalStore.open(at: device.folder.appendingPathComponent(name).path, keepingFree: keepingFree)
    }

    /// A device's own accepted writes come back on its next pull; they change nothing there, so
    /// `changes()` subscribers hear nothing of them (an app saw 150 "issue update" events after pushing
    /// 150 issues, with nothing new), while a teammate's edit in the same pull is heard.
    @Test func ownWritesPulledBackTellSubscribersNothing() async throws {
        let device = try Device()
        let server = try await InProcessServer()
        let project = try await server.newProject()
        let engine = SyncEngine(store: device.store, transport: server, random: SeededGenerator(seed: 9))
        var issues: [OutpostFieldService.Issue] = []
        for index in 0..<50 {
            issues.append(try await device.store.save(Issue(projectID: project, title: "Snag \(index)"), now: now))
        }
        let first = try await engine.sync(now: { self.now })
        #expect(first.pushed == 50 && first.isComplete)

        // A teammate edits one of them meanwhile.
        let held = try #require(try device.store.fetch(Issue.self, id: issues[7].id))
        let teammateClock = HybridTimestamp(
            physicalMilliseconds: Int64(now.timeIntervalSince1970 * 1000) + 30_000, counter: 0, node: NodeID(0x7E57))
        _ = try await server.apply(PushMutation(
            idempotencyKey: UUID(), entity: .issue, operation: .update, recordID: held.id, baseVersion: held.sync.version,
            fields: ["title": .text("Snag 7, re-opened")], clocks: ["title": teammateClock]))

        let changes = device.store.changes()
        let last = issues[0].id
        let heard = Task { () -> [StoreChange] in
            var heard: [StoreChange] = []
            for await change in changes {
                heard.append(change)
                if change.recordID == last, change.operation == .delete { break }
            }
            return heard
        }
        let again = try await engine.sync(now: { self.now.addingTimeInterval(60) })
        #expect(again.isComplete)
        #expect(try device.store.fetch(Issue.self, id: issues[7].id)?.title == "Snag 7, re-opened")
        // A write of this device's own after the pull ends what the test listens to.
        _ = try await device.store.delete(.issue, id: issues[0].id, now: now.addingTimeInterval(120))
        let told = await heard.value.filter { $0.operation != .delete }
        #expect(told.map(\.recordID) == [issues[7].id], "heard \(told.count): \(told.prefix(5))")
        #expect(try device.store.fetch(Issue.self, id: issues[3].id)?.sync.syncStatus == .synced)
    }

    @Test func aLostResponseIsResentAndAppliedOnce() async throws {
        let device = try Device()
        let server = try await InProcessServer()
        let issue = try await device.store.save(Issue(projectID: try await server.newProject(), title: "Leak"), now: now)
        await server.inject(.dropResponse, on: .push)
        let engine = SyncEngine(store: device.store, transport: server, random: SeededGenerator(seed: 2))
        let first = try await engine.sync(now: { self.now })
        #expect(first.retried == 1)
        #expect(try await server.record(issue.id)?.version == 1, "the server applied it before the answer was lost")

        // The next run asks what the server kept for the lost answer before it pulls, and is told the
        // write was applied: acknowledged (counted pushed), and nothing is sent twice.
        let before = await server.requests.count
        let second = try await engine.sync(now: { self.now.addingTimeInterval(60) })
        #expect(second.pushed == 1)
        #expect(await Array(server.requests.dropFirst(before)) == [.pushAnswers, .pull])
        #expect(try await server.record(issue.id)?.version == 1, "applied once")
        #expect(try device.store.status().pendingChanges == 0)
        #expect(try device.store.fetch(Issue.self, id: issue.id)?.sync.syncStatus == .synced)
    }

    /// Attack 121, F1: a change whose answer was lost, once the server keeps that answer no longer (it
    /// keeps a member's newest answers only), cannot be told from one the server never got. Its merge
    /// judged the teammate's edit made on top of it as concurrent, and under client wins sent the change
    /// again over it: the later edit was gone, with no conflict anywhere. A change the server may have
    /// taken does not win over a server change this device cannot place: the teammate's value stands,
    /// and the device's own is offered to its user as a conflict.
    @Test func aChangeWhoseAnswerIsGoneDoesNotWriteOverALaterEdit() async throws {
        let policy = ConflictPolicy(overriding: [.issue: .clientWins])
        let device = try Device()
        let server = try await InProcessServer(policy: policy, answersKept: (count: 2, pruningEvery: 1))
        let project = try await server.newProject()
        let engine = SyncEngine(store: device.store, transport: server, policy: policy, random: SeededGenerator(seed: 21))
        var issue = try await device.store.save(Issue(projectID: project, title: "Leak"), now: now)
        #expect(try await engine.sync(now: { self.now }).pushed == 1)
        // The device's edit reaches the server; its answer does not.
        issue.title = "Leak, device"
        issue = try await device.store.save(issue, now: now.addingTimeInterval(10))
        await server.inject(.dropResponse, on: .push)
        _ = try await engine.sync(now: { self.now.addingTimeInterval(20) })
        #expect(try await server.record(issue.id)?.fields["title"] == .text("Leak, device"))
        // Another device of the user writes over it, having seen it; then the user's other changes
        // leave the answer behind.
        let later = HybridTimestamp(
            physicalMilliseconds: Int64(now.timeIntervalSince1970 * 1000) + 30_000, counter: 0, node: NodeID(0x7E57))
        let version = try #require(try await server.record(issue.id)?.version)
        _ = try await server.apply(PushMutation(
            idempotencyKey: UUID(), entity: .issue, operation: .update, recordID: issue.id, baseVersion: version,
            fields: ["title": .text("Leak, teammate")], clocks: ["title": later]))
        for index in 0..<4 { try await server.create(Issue(projectID: project, title: "Other \(index)")) }

        _ = try await engine.sync(now: { self.now.addingTimeInterval(60) })
        _ = try await engine.sync(now: { self.now.addingTimeInterval(120) })
        #expect(try await server.record(issue.id)?.fields["title"] == .text("Leak, teammate"), "the later edit was written over")
        #expect(try device.store.fetch(Issue.self, id: issue.id)?.title == "Leak, teammate")
        let offered = try device.store.openConflicts().filter { $0.recordID == issue.id && $0.field == "title" }
        #expect(
            offered.contains { $0.losingSide == .client && $0.localValue == .text("Leak, device") },
            "the device's value was dropped unseen: \(offered)")
        #expect(try device.store.status().pendingChanges == 0)
    }

    /// The other side of `aChangeWhoseAnswerIsGoneDoesNotWriteOverALaterEdit`: a change whose request
    /// never reached a server that still keeps every answer it gave the user is one it never took (the
    /// server says so, `keepsEveryAnswer`), and merges by its strategy: under client wins it wins over a
    /// concurrent edit, which is offered instead.
    @Test func aChangeTheServerSaysItNeverTookStillWinsUnderClientWins() async throws {
        let policy = ConflictPolicy(overriding: [.issue: .clientWins])
        let device = try Device()
        let server = try await InProcessServer(policy: policy)
        let project = try await server.newProject()
        let engine = SyncEngine(store: device.store, transport: server, policy: policy, random: SeededGenerator(seed: 23))
        var issue = try await device.store.save(Issue(projectID: project, title: "Leak"), now: now)
        _ = try await engine.sync(now: { self.now })
        issue.title = "Leak, device"
        issue = try await device.store.save(issue, now: now.addingTimeInterval(10))
        await server.inject(.dropRequest, on: .push)
        _ = try await engine.sync(now: { self.now.addingTimeInterval(20) })
        let later = HybridTimestamp(
            physicalMilliseconds: Int64(now.timeIntervalSince1970 * 1000) + 30_000, counter: 0, node: NodeID(0x7E57))
        _ = try await server.apply(PushMutation(
            idempotencyKey: UUID(), entity: .issue, operation: .update, recordID: issue.id, baseVersion: 1,
            fields: ["title": .text("Leak, office")], clocks: ["title": later]))
        _ = try await engine.sync(now: { self.now.addingTimeInterval(60) })
        _ = try await engine.sync(now: { self.now.addingTimeInterval(120) })
        #expect(try await server.record(issue.id)?.fields["title"] == .text("Leak, device"), "client wins, the change never taken")
        let offered = try device.store.openConflicts().filter { $0.recordID == issue.id && $0.field == "title" }
        #expect(offered.contains { $0.losingSide == .server && $0.remoteValue == .text("Leak, office") }, "\(offered)")
    }

    /// The family of `aChangeWhoseAnswerIsGoneDoesNotWriteOverALaterEdit`, under every strategy an edit
    /// can meet (append only refuses edits): the device edits or deletes; its request reaches the server
    /// with the answer lost and then pruned (a cut connection, or the app killed while it was under way:
    /// attack 122, F1), or never reaches it; another device of the user edits or
    /// deletes the record (having seen the device's change when it reached the server, stamped before or
    /// after it, by the seed, when it did not). The laws: a change the server took does not move the
    /// server again (the later change stands, whatever the strategy); a change it never got is never
    /// dropped unseen (it stands on the server, or its user is offered it as a conflict); and the device
    /// ends as the server.
    @Test(arguments: [ConflictPolicyName.fieldMerge, .lastWriteWins, .serverWins, .manual, .clientWins])
    func aChangeWhoseAnswerIsGoneNeverUndoesALaterOne(_ name: ConflictPolicyName) async throws {
        let policy = ConflictPolicy(overriding: [.issue: ConflictStrategy(name)])
        var random = SeededGenerator(seed: 121)
        enum Fate: String { case answerLost = "answer lost and gone", killed = "app killed mid-push, answer gone", requestLost = "request lost" }
        for (deviceDeletes, teammateDeletes, fate) in [(false, false), (false, true), (true, false)].flatMap({ ops in
            [Fate.answerLost, .killed, .requestLost].map { (ops.0, ops.1, $0) }
        }) {
            let reached = fate != .requestLost
            let case_ = "device \(deviceDeletes ? "deletes" : "edits"), teammate \(teammateDeletes ? "deletes" : "edits"), \(fate.rawValue)"
            let device = try Device()
            let server = try await InProcessServer(policy: policy, answersKept: (count: 2, pruningEvery: 1))
            let project = try await server.newProject()
            let engine = SyncEngine(store: device.store, transport: server, policy: policy, random: SeededGenerator(seed: 22))
            var issue = try await device.store.save(Issue(projectID: project, title: "Leak"), now: now)
            _ = try await engine.sync(now: { self.now })
            if deviceDeletes {
                _ = try await device.store.delete(.issue, id: issue.id, now: now.addingTimeInterval(10))
            } else {
                issue.title = "Leak, device"
                issue = try await device.store.save(issue, now: now.addingTimeInterval(10))
            }
            if fate == .killed {
                // The run claims and sends the change; the app is killed before the answer, and its claim
                // is stale when the next run starts.
                let batch = try device.store.nextBatch(limit: 10, now: now.addingTimeInterval(20))
                _ = try await server.push(batch.request)
                try device.store.write { try $0.execute(sql: "UPDATE mutation_queue SET claim_expires_at = 1") }
            } else {
                await server.inject(reached ? .dropResponse : .dropRequest, on: .push)
                _ = try await engine.sync(now: { self.now.addingTimeInterval(20) })
            }
            let taken = try #require(try await server.record(issue.id))
            #expect((taken.version == 2) == reached, "\(case_): version \(taken.version)")
            // Stamped after the device's change when it saw it; when it did not, before or after it.
            let offset: Int64 = reached || Bool.random(using: &random) ? 30_000 : 5_000
            let stamp = HybridTimestamp(
                physicalMilliseconds: Int64(now.timeIntervalSince1970 * 1000) + offset, counter: 0, node: NodeID(0x7E57))
            let outcome = try await server.apply(
                teammateDeletes
                    ? PushMutation(
                        idempotencyKey: UUID(), entity: .issue, operation: .delete, recordID: issue.id, baseVersion: taken.version,
                        deletion: stamp)
                    : PushMutation(
                        idempotencyKey: UUID(), entity: .issue, operation: .update, recordID: issue.id, baseVersion: taken.version,
                        fields: ["title": .text("Leak, teammate")], clocks: ["title": stamp]))
            guard case .applied = outcome else { Issue.record("\(case_): the teammate's change: \(outcome)"); continue }
            for index in 0..<4 { try await server.create(Issue(projectID: project, title: "Other \(index)")) }
            let before = try #require(try await server.record(issue.id))

            _ = try await engine.sync(now: { self.now.addingTimeInterval(60) })
            _ = try await engine.sync(now: { self.now.addingTimeInterval(120) })
            let after = try #require(try await server.record(issue.id))
            if reached {
                #expect(
                    after.version == before.version && after.fields == before.fields && (after.deletion == nil) == (before.deletion == nil),
                    "\(case_): the device's change moved the server again: \(before.fields) -> \(after.fields)")
            }
            let offered = try device.store.openConflicts().filter { $0.recordID == issue.id && $0.losingSide == .client }
            if reached {
                // Taken at version 2: what came after it was made on top of it, and loses nothing of it.
            } else if deviceDeletes {
                #expect(after.deletion != nil || offered.contains { $0.field == nil }, "\(case_): the device's delete was dropped unseen")
            } else {
                #expect(
                    after.fields["title"] == .text("Leak, device") && after.deletion == nil
                        || offered.contains { $0.field == "title" && $0.localValue == .text("Leak, device") } || offered.contains { $0.field == nil },
                    "\(case_): the device's edit was dropped unseen: \(after.fields["title"] as Any), \(offered)")
            }
            let held = try #require(try device.store.record(.issue, id: issue.id))
            #expect(held.sync.isDeleted == (after.deletion != nil), "\(case_): the device and the server differ on the delete")
            if after.deletion == nil { #expect(held["title"] == after.fields["title"] ?? .null, "\(case_): the device and the server differ") }
            #expect(try device.store.status().pendingChanges == 0, "\(case_)")
        }
    }

    @Test func retriesFollowTheBackoffSchedule() async throws {
        let device = try Device()
        let server = try await InProcessServer()
        try await device.store.save(Issue(projectID: try await server.newProject(), title: "Leak"), now: now)
        await server.inject(.serverError(status: 503), on: .push, times: 3)
        let engine = SyncEngine(store: device.store, transport: server, random: SeededGenerator(seed: 3))
        var waits: [TimeInterval] = []
        var clock = now
        for _ in 0..<3 {
            _ = try await engine.sync(now: { [clock] in clock })
            let next = try #require(try device.store.mutations(status: .pending).first?.nextAttemptAt)
            waits.append(next.timeIntervalSince(clock))
            clock = next
        }
        // Equal jitter: each wait lies between half and all of 1 s, 2 s, 4 s.
        for (wait, nominal) in zip(waits, [1.0, 2.0, 4.0]) {
            #expect(wait >= nominal / 2 - 0.001 && wait <= nominal + 0.001, "waits \(waits)")
        }
        let report = try await engine.sync(now: { [clock] in clock })
        #expect(report.pushed == 1)
    }

    @Test func aRejectedMutationFailsAloneAndTheRestGoThrough() async throws {
        let device = try Device()
        let server = try await InProcessServer()
        let ghost = try await device.store.save(Issue(projectID: try await server.newProject(), title: "Never reached the server"), now: now)
        // Pretend its create was acknowledged, so the edit below reaches a server that has never seen it.
        let create = try #require(try device.store.claimMutations(limit: 1, now: now).first)
        try device.store.acknowledge(create, serverVersion: 1, serverID: nil, now: now)
        var edited = ghost
        edited.title = "Edited"
        try await device.store.save(edited, now: now)
        let fine = try await device.store.save(Issue(projectID: try await server.newProject(), title: "Fine"), now: now)

        let report = try await SyncEngine(store: device.store, transport: server, random: SeededGenerator(seed: 4)).sync(now: { self.now })
        #expect(report.failed == 1)
        #expect(report.pushed == 1)
        #expect(try await server.record(fine.id) != nil)
        #expect(try device.store.status().failedChanges == 1)
        #expect(try device.store.mutations(status: .failed).first?.lastError?.contains("not_found") == true)
    }

    @Test func unauthorizedPausesWithEverythingKept() async throws {
        let device = try Device()
        let server = try await InProcessServer()
        try await device.store.save(Issue(projectID: try await server.newProject(), title: "Leak"), now: now)
        await server.inject(.unauthorized, on: .push)
        let engine = SyncEngine(store: device.store, transport: server, random: SeededGenerator(seed: 5))
        let paused = try await engine.sync(now: { self.now })
        #expect(paused.pause == .credentialsRejected)
        #expect(try device.store.mutations(status: .pending).count == 1)
        #expect(try device.store.mutations(status: .pending).first?.attempts == 0)
        #expect(try await engine.sync(now: { self.now }).pushed == 0, "still paused")
        await engine.resume()
        #expect(try await engine.sync(now: { self.now }).pushed == 1)
    }

    @Test func anotherDevicesChangesArePulledInPagesAndMergedByField() async throws {
        let device = try Device(), other = try Device()
        let server = try await InProcessServer()
        let log = try await other.store.save(
            DailyLog(projectID: try await server.newProject(), authorID: UUID(), day: "2026-11-22", notes: "Rain", weather: "Wet"), now: now)
        for index in 0..<4 { try await other.store.save(Issue(projectID: log.projectID, title: "Issue \(index)"), now: now) }
        let otherEngine = SyncEngine(store: other.store, transport: server, random: SeededGenerator(seed: 6))
        _ = try await otherEngine.sync(now: { self.now })

        let engine = SyncEngine(store: device.store, transport: server, random: SeededGenerator(seed: 7), pullLimit: 2)
        let first = try await engine.sync(now: { self.now })
        #expect(first.pulled == 7, "the project, its creator's member record, the log and four issues")
        #expect(try device.store.fetchAll(Issue.self, where: "projectID", equals: .uuid(log.projectID)).count == 4)

        // Both edit the daily log offline: this device the weather, the other device the notes, later.
        var mine = try #require(try device.store.fetch(DailyLog.self, id: log.id))
        mine.weather = "Clearing"
        try await device.store.save(mine, now: now.addingTimeInterval(60))
        var theirs = log
        theirs.notes = "Rain all day"
        try await other.store.save(theirs, now: now.addingTimeInterval(120))
        _ = try await otherEngine.sync(now: { self.now.addingTimeInterval(121) })
        let merged = try await engine.sync(now: { self.now.addingTimeInterval(180) })
        #expect(merged.pushed == 1)
        #expect(merged.rebased <= 1)
        _ = try await otherEngine.sync(now: { self.now.addingTimeInterval(240) })

        let here = try #require(try device.store.fetch(DailyLog.self, id: log.id))
        let there = try #require(try other.store.fetch(DailyLog.self, id: log.id))
        #expect(here.notes == "Rain all day" && here.weather == "Clearing")
        #expect(there.notes == "Rain all day" && there.weather == "Clearing")
        #expect(try device.store.openConflicts().isEmpty, "different fields never conflict")
    }

    @Test func aZeroBudgetStopsBeforeTheFirstBatch() async throws {
        let device = try Device()
        let server = try await InProcessServer()
        try await device.store.save(Issue(projectID: try await server.newProject(), title: "Leak"), now: now)
        let report = try await SyncEngine(store: device.store, transport: server, random: SeededGenerator(seed: 8))
            .sync(budget: .zero, now: { self.now })
        #expect(report.stoppedForBudget)
        #expect(report.pushed == 0)
        #expect(try device.store.mutations(status: .pending).count == 1, "nothing half-done")
    }

    @Test func aConflictingChangeThatLosesIsNotPushedOverTheServer() async throws {
        let device = try Device()
        let server = try await InProcessServer()
        let engine = SyncEngine(store: device.store, transport: server, random: SeededGenerator(seed: 9))
        var discount = try await device.store.save(
            Discount(projectID: try await server.newProject(), name: "Promo", kind: .percentage, value: 1_000), now: now)
        _ = try await engine.sync(now: { self.now })
        // The office sets the amount; this device, offline and on a stale base, sets another.
        let officeStamp = HybridTimestamp(physicalMilliseconds: 1_795_000_100_000, counter: 0, node: NodeID(0xFEED))
        _ = try await server.apply(PushMutation(
            idempotencyKey: UUID(), entity: .discount, operation: .update, recordID: discount.id, baseVersion: 1,
            fields: ["value": .integer(500)], clocks: ["value": officeStamp]))
        discount.value = 2_000
        try await device.store.save(discount, now: now.addingTimeInterval(50))
        let report = try await engine.sync(now: { self.now.addingTimeInterval(200) })
        #expect(try await server.record(discount.id)?.fields["value"] == .integer(500), "server-wins: the office's amount stands")
        #expect(try device.store.fetch(Discount.self, id: discount.id)?.value == 500)
        #expect(try device.store.openConflicts().contains { $0.field == "value" && $0.localValue == .integer(2_000) })
        #expect(report.failed == 0)
        #expect(try device.store.status().pendingChanges == 0)
    }

    /// A run's report tells where its pull spent its time, so a slow sync can be told apart: waiting for
    /// pages (the server, the network) or applying them on this device. A server that takes 150 ms a
    /// page keeps the engine waiting for each page of 2 records, whose apply takes a few milliseconds.
    @Test func theReportSaysHowLongThePullWaitedAndApplied() async throws {
        let device = try Device()
        let server = try await InProcessServer()
        let project = try await server.newProject()
        let teammate = try await store(openedBeside: device, keepingFree: 0)
        for index in 0..<5 { try await teammate.save(Issue(projectID: project, title: "Snag \(index)"), now: now) }
        _ = try await SyncEngine(store: teammate, transport: server).sync(now: { self.now })

        let slow = SlowPulls(base: server, delay: .milliseconds(150))
        let engine = SyncEngine(store: device.store, transport: slow, pullLimit: 2)
        let clock = ContinuousClock()
        let started = clock.now
        let report = try await engine.sync(now: { self.now })
        let elapsed = clock.now - started
        #expect(report.isComplete && report.pulled >= 6, "\(report.pulled)")
        // The first page at least kept the engine waiting its 150 ms (its fetch began a moment before the
        // engine asked for it); each page of 2 records applied in far less than the next page took.
        #expect(report.pullWaiting >= .milliseconds(140), "\(report.pullWaiting)")
        #expect(report.pullApplying > .zero && report.pullApplying < report.pullWaiting, "\(report.pullApplying)")
        #expect(report.pullWaiting + report.pullApplying <= elapsed)
    }
}

/// The in-process server, each pull answered `delay` late.
private struct SlowPulls: ForwardingTransport {
    let base: InProcessServer
    let delay: Duration

    func pull(_ request: PullRequest) async throws(TransportError) -> PullResponse {
        try? await Task.sleep(for: delay)
        return try await base.pull(request)
    }
}

@testable import OutpostStore
@testable import OutpostSync
import Foundation
import OutpostConflicts
import OutpostFieldService
import OutpostModels
import OutpostSchema
import OutpostServerTesting
import OutpostTesting
import OutpostWire
import Testing

/// Paths the conflict model found when the reliability harness first checked real devices against it
/// (`outpost-reliability --scenario convergence`): each a seed whose server or conflicts tables differed
/// from the model, reduced here to the engine, a store and the server's own rules, answers lost on the way.
extension SyncEngineTests {
    /// The office writes a record through the server directly: a rename of `title` at `at`.
    func officeRenames(_ id: UUID, to title: String, baseVersion: Int64, at offset: Int64, on server: InProcessServer) async throws {
        _ = try await server.apply(PushMutation(
            idempotencyKey: UUID(), entity: .issue, operation: .update, recordID: id, baseVersion: baseVersion,
            fields: ["title": .text(title)], clocks: ["title": office(offset)]))
    }

    /// A change whose answer was lost, then met by a pull's merge (the office's newer title beat its
    /// own): what is left of it must not go out under its first key with other contents, since the server
    /// keeps what each key's change wrote and refuses the key with another change of the record. The
    /// device settles it (the pull shows its values on the server) and nothing stands failed.
    @Test func aChangeAPullRewroteAfterItsAnswerWasLostGoesOutUnderANewKey() async throws {
        let device = try Device()
        let server = try await InProcessServer()
        let engine = SyncEngine(store: device.store, transport: server, random: SeededGenerator(seed: 7))
        var issue = try await device.store.save(Issue(projectID: try await server.newProject(), title: "Leak"), now: now)
        _ = try await engine.sync(now: { self.now })
        issue = try #require(try device.store.fetch(Issue.self, id: issue.id))
        issue.title = "Leak, north wall"
        issue.details = "Behind the boiler"
        _ = try await device.store.save(issue, now: now.addingTimeInterval(10))
        await server.inject(.dropResponse, on: .push)
        _ = try await engine.sync(now: { self.now.addingTimeInterval(20) })
        #expect(try await server.record(issue.id)?.version == 2, "applied before its answer was lost")
        try await officeRenames(issue.id, to: "Leak, the office's word", baseVersion: 2, at: 100_000, on: server)
        for minutes in 1...3 {
            _ = try await engine.sync(now: { self.now.addingTimeInterval(Double(minutes) * 600) })
        }
        let status = try device.store.status()
        let failed = try device.store.mutations(status: .failed).map(\.lastError)
        #expect(status.failedChanges == 0, "\(failed)")
        #expect(status.pendingChanges == 0)
        let stored = try #require(try await server.record(issue.id))
        #expect(stored.fields["title"] == .text("Leak, the office's word"))
        #expect(stored.fields["details"] == .text("Behind the boiler"))
        #expect(try device.store.fetch(Issue.self, id: issue.id)?.title == "Leak, the office's word")
    }

    /// The same with a delete carrying an edit made before it: its answer lost, the office brings the
    /// record back with a newer write, and the pull's merge turns what is left of the delete into an
    /// update. Sent again under the delete's key it was another change of the record (refused); it must
    /// settle with nothing failed, and the edit stands on the server.
    @Test func aDeleteAPullRewroteAfterItsAnswerWasLostSettles() async throws {
        let device = try Device()
        let server = try await InProcessServer()
        let engine = SyncEngine(store: device.store, transport: server, random: SeededGenerator(seed: 8))
        var issue = try await device.store.save(Issue(projectID: try await server.newProject(), title: "Leak"), now: now)
        _ = try await engine.sync(now: { self.now })
        issue = try #require(try device.store.fetch(Issue.self, id: issue.id))
        issue.title = "Leak, north wall"
        _ = try await device.store.save(issue, now: now.addingTimeInterval(10))
        _ = try await device.store.delete(.issue, id: issue.id, now: now.addingTimeInterval(11))
        // Every push's answer lost, until the server holds the delete.
        for attempt in 0..<4 where try await server.record(issue.id)?.deletion == nil {
            await server.inject(.dropResponse, on: .push, times: 5)
            _ = try await engine.sync(now: { self.now.addingTimeInterval(20 + Double(attempt) * 60) })
        }
        let deleted = try #require(try await server.record(issue.id))
        #expect(deleted.deletion != nil, "applied before its answer was lost")
        _ = try await server.apply(PushMutation(
            idempotencyKey: UUID(), entity: .issue, operation: .update, recordID: issue.id, baseVersion: deleted.version,
            fields: ["details": .text("Still dripping")], clocks: ["details": office(100_000)]))
        for minutes in 1...3 {
            _ = try await engine.sync(now: { self.now.addingTimeInterval(Double(minutes) * 600) })
        }
        let failed = try device.store.mutations(status: .failed).map(\.lastError)
        #expect(failed.isEmpty, "\(failed)")
        #expect(try device.store.status().pendingChanges == 0)
        let stored = try #require(try await server.record(issue.id))
        let held = try device.store.fetch(Issue.self, id: issue.id)
        #expect(stored.deletion == nil ? held?.sync.isDeleted == false : held == nil || held?.sync.isDeleted == true,
                "the device and the server agree on whether it stands")
        if stored.deletion == nil { #expect(stored.fields["title"] == .text("Leak, north wall")) }
    }

    @Test func aRestoreWhoseConflictAnswerWasLostStillTakesTheServersNewestValues() async throws {
        // Seed 57: the restore's conflict answer was lost and answered again; the row stood at the
        // tombstone's version (a pull without contents), so the merge was taken as done and the restore
        // went out with the title this device held from before the delete, over the office's rename.
        let device = try Device()
        let server = try await InProcessServer()
        let engine = SyncEngine(store: device.store, transport: server, random: SeededGenerator(seed: 381))
        let issue = try await device.store.save(Issue(projectID: try await server.newProject(), title: "Loose rail"), now: now)
        _ = try await engine.sync(now: { self.now })
        try await officeRenames(issue.id, to: "Loose rail, north stairs", baseVersion: 1, at: 100_000, on: server)
        _ = try await server.apply(PushMutation(
            idempotencyKey: UUID(), entity: .issue, operation: .delete, recordID: issue.id, baseVersion: 2, deletion: office(200_000)))
        _ = try await engine.sync(now: { self.now.addingTimeInterval(300) })
        let tombstone = try #require(try device.store.fetch(Issue.self, id: issue.id))
        #expect(tombstone.sync.isDeleted)

        _ = try await device.store.save(tombstone, now: now.addingTimeInterval(400))
        await server.inject(.dropResponse, on: .push)
        _ = try await engine.sync(now: { self.now.addingTimeInterval(400) })
        let report = try await engine.sync(now: { self.now.addingTimeInterval(4_000) })
        #expect(report.isComplete)
        let onServer = try #require(try await server.record(issue.id))
        #expect(!onServer.isDeleted)
        #expect(onServer.fields["title"] == .text("Loose rail, north stairs"))
        #expect(try device.store.record(.issue, id: issue.id)?["title"] == .text("Loose rail, north stairs"))
        #expect(try device.store.openConflicts().isEmpty)
    }

    @Test func anEditThenADeleteUnderLastWriteWinsMeetingANewerServerWriteSettles() async throws {
        // Seed 39: the edit went out alone and lost to the office's newer write on its own version, so the
        // server answered conflict; the device, merging the edit and its later delete as one, judged its
        // delete newer and sent the edit again, at every try, until it failed.
        let policy = ConflictPolicy(overriding: [.issue: .lastWriteWins])
        let device = try Device()
        let server = try await InProcessServer(policy: policy)
        let engine = SyncEngine(store: device.store, transport: server, policy: policy, random: SeededGenerator(seed: 382))
        var issue = try await device.store.save(Issue(projectID: try await server.newProject(), title: "Loose rail"), now: now)
        _ = try await engine.sync(now: { self.now })
        issue = try #require(try device.store.fetch(Issue.self, id: issue.id))
        issue.details = "bolts sheared"
        _ = try await device.store.save(issue, now: now.addingTimeInterval(100))
        try await officeRenames(issue.id, to: "Loose rail, north stairs", baseVersion: 1, at: 200_000, on: server)
        #expect(try await device.store.delete(.issue, id: issue.id, now: now.addingTimeInterval(300)))

        let report = try await engine.sync(now: { self.now.addingTimeInterval(300) })
        #expect(report.isComplete && report.failed == 0)
        #expect(try device.store.status().failedChanges == 0 && device.store.status().pendingChanges == 0)
        #expect(try await server.record(issue.id)?.isDeleted == true, "the newest write, the delete, stands")
        // The office's rename, hidden by the newer delete, is offered on the device that settled it.
        #expect(try device.store.openConflicts().contains { $0.field == "title" && $0.losingValue == .text("Loose rail, north stairs") })
    }

    @Test func anEditMadeOnTopOfAChangeWhoseAnswerWasLostIsTheLaterWrite() async throws {
        // Seed 87 first: the device's note was applied and the answer lost; a pull brought the office's
        // newer note, and the merge (client wins) kept the device's. Sent again under its old key, the change
        // got the old answer (applied) and was closed: the device kept its note, the server the office's.
        // That fix sent the note again under a new key, over the office's. But the office wrote on version
        // 2, the device's own note: the later write, which must stand, with nothing offered (attack 103,
        // F1). The device asks what the server kept for the lost answer before it pulls.
        let device = try Device()
        let server = try await InProcessServer()
        let engine = SyncEngine(store: device.store, transport: server, random: SeededGenerator(seed: 383))
        var entry = try await device.store.save(
            TimeEntry(projectID: try await server.newProject(), memberID: UUID(), kind: .clockIn, recordedAt: now), now: now)
        _ = try await engine.sync(now: { self.now })
        entry = try #require(try device.store.fetch(TimeEntry.self, id: entry.id))
        entry.note = "left early"
        _ = try await device.store.save(entry, now: now.addingTimeInterval(100))
        await server.inject(.dropResponse, on: .push)
        _ = try await engine.sync(now: { self.now.addingTimeInterval(100) })
        #expect(try await server.record(entry.id)?.version == 2, "applied before the answer was lost")
        _ = try await server.apply(PushMutation(
            idempotencyKey: UUID(), entity: .timeEntry, operation: .update, recordID: entry.id, baseVersion: 2,
            fields: ["note": .text("office: approved")], clocks: ["note": office(200_000)]))

        let report = try await engine.sync(now: { self.now.addingTimeInterval(4_000) })
        #expect(report.isComplete)
        let onServer = try #require(try await server.record(entry.id))
        #expect(onServer.fields["note"] == .text("office: approved"), "the office wrote on top of the device's note")
        #expect(onServer.version == 3, "nothing sent again")
        #expect(try device.store.record(.timeEntry, id: entry.id)?.fields == onServer.fields)
        let offered = try device.store.openConflicts()
        #expect(offered.isEmpty, "\(offered)")
    }

    /// Attack 103, F1, under each strategy that takes edits: the device's change is applied with its
    /// answer lost; the office, having pulled it, edits the same field on that version. The office's edit
    /// is the later write: it stands on the server and the device, nothing is sent again, and nothing is
    /// offered as lost (the device's own value was taken, then written over by someone who saw it). Also
    /// against a server without `POST /push/answers` (404: older; 405 or 501: a gateway), to which the
    /// change goes again first (attack 105, F1: pulled first, client wins sent it again over the office's
    /// edit; attack 106, N1: on 405 or 501 the device stopped every run).
    @Test(arguments: [ConflictPolicyName.fieldMerge, .lastWriteWins, .serverWins, .manual, .clientWins], [nil, 404, 405, 501])
    func aLaterEditOverAChangeWhoseAnswerWasLostStands(strategy: ConflictPolicyName, routeMissingAs status: Int?) async throws {
        let (device, server, engine, issue) = try await anIssueRenamedWithTheAnswerLost(
            policy: ConflictPolicy(overriding: [.issue: ConflictStrategy(strategy)]), seed: 386)
        try await officeRenames(issue.id, to: "Loose rail, fixed", baseVersion: 2, at: 200_000, on: server)
        if let status { await server.inject(.httpError(status: status, code: .notFound, retryAfter: nil), on: .pushAnswers, times: 3) }

        for minutes in 1...2 {
            let report = try await engine.sync(now: { self.now.addingTimeInterval(Double(minutes) * 600) })
            #expect(report.isComplete && report.failed == 0)
        }
        let onServer = try #require(try await server.record(issue.id))
        #expect(onServer.fields["title"] == .text("Loose rail, fixed"))
        #expect(onServer.version == 3, "the device's change was not applied again")
        #expect(try device.store.record(.issue, id: issue.id)?["title"] == .text("Loose rail, fixed"))
        let offered = try device.store.openConflicts()
        #expect(offered.isEmpty, "\(offered)")
        #expect(try device.store.status().pendingChanges == 0)
    }

    /// A transport a team writes without `pushAnswers` (it predates the call, or its authors skipped it)
    /// cannot ask what the server kept, so the changes go again under their keys before the pull, as to a
    /// server without the route. Its default once answered "none": the engine then pulled first, and
    /// under client wins sent the device's value again over the office's later edit (attack 103, F1,
    /// reopened for every such transport).
    @Test func aTransportThatCannotAskSendsTheChangesAgainBeforeItPulls() async throws {
        let policy = ConflictPolicy(overriding: [.issue: ConflictStrategy(.clientWins)])
        let (device, server, _, issue) = try await anIssueRenamedWithTheAnswerLost(policy: policy, seed: 388)
        try await officeRenames(issue.id, to: "Loose rail, fixed", baseVersion: 2, at: 200_000, on: server)
        let engine = SyncEngine(
            store: device.store, transport: AskingNothing(base: server), policy: policy, random: SeededGenerator(seed: 389))

        let before = await server.requests.count
        let report = try await engine.sync(now: { self.now.addingTimeInterval(600) })
        #expect(report.isComplete && report.failed == 0)
        #expect(await Array(server.requests.dropFirst(before)).first == .push, "sent again before the pull")
        let onServer = try #require(try await server.record(issue.id))
        #expect(onServer.fields["title"] == .text("Loose rail, fixed"))
        #expect(onServer.version == 3, "the device's change was not applied again")
        #expect(try device.store.record(.issue, id: issue.id)?["title"] == .text("Loose rail, fixed"))
        #expect(try device.store.openConflicts().isEmpty)
    }

    /// A device whose rename of an issue ("Loose rail, north stairs") the server took at version 2, the
    /// answer lost on the way back.
    func anIssueRenamedWithTheAnswerLost(
        policy: ConflictPolicy = ConflictPolicy(), seed: UInt64
    ) async throws -> (Device, InProcessServer, SyncEngine, OutpostModels.Issue) {
        let device = try Device()
        let server = try await InProcessServer(policy: policy)
        let engine = SyncEngine(store: device.store, transport: server, policy: policy, random: SeededGenerator(seed: seed))
        var issue = try await device.store.save(Issue(projectID: try await server.newProject(), title: "Loose rail"), now: now)
        _ = try await engine.sync(now: { self.now })
        issue = try #require(try device.store.fetch(Issue.self, id: issue.id))
        issue.title = "Loose rail, north stairs"
        _ = try await device.store.save(issue, now: now.addingTimeInterval(100))
        await server.inject(.dropResponse, on: .push)
        _ = try await engine.sync(now: { self.now.addingTimeInterval(100) })
        #expect(try await server.record(issue.id)?.version == 2, "applied before the answer was lost")
        return (device, server, engine, issue)
    }

    /// While the server cannot say what it kept for a lost answer, the run stops before its pull, which
    /// would judge the change concurrent with anything written on top of it; the next run asks again. A
    /// server without the route (404) is sent the change again first.
    @Test func aRunWhoseQuestionAboutALostAnswerFailsDoesNotPull() async throws {
        var (device, server, engine, issue) = try await anIssueRenamedWithTheAnswerLost(seed: 387)
        try await officeRenames(issue.id, to: "Loose rail, fixed", baseVersion: 2, at: 200_000, on: server)

        await server.inject(.serverError(status: 503), on: .pushAnswers)
        let before = await server.requests.count
        let stopped = try await engine.sync(now: { self.now.addingTimeInterval(600) })
        #expect(!stopped.isComplete && stopped.lastTransportError?.status == 503)
        #expect(await Array(server.requests.dropFirst(before)) == [.pushAnswers], "neither pulled nor pushed")
        #expect(try device.store.openConflicts().isEmpty)

        let report = try await engine.sync(now: { self.now.addingTimeInterval(1_200) })
        #expect(report.isComplete && report.pushed == 1, "settled by the answer the server kept")
        #expect(try await server.record(issue.id)?.fields["title"] == .text("Loose rail, fixed"))
        #expect(try device.store.openConflicts().isEmpty)

        // A server without the route (404: older, in a rolling upgrade): the change goes again under its
        // key before the pull, answered as its duplicate, so the office's edit on top still stands (attack
        // 105, F1: pulled first, client wins sent the device's value again over it).
        issue = try #require(try device.store.fetch(Issue.self, id: issue.id))
        issue.details = "two posts loose"
        _ = try await device.store.save(issue, now: now.addingTimeInterval(1_300))
        await server.inject(.dropResponse, on: .push)
        _ = try await engine.sync(now: { self.now.addingTimeInterval(1_300) })
        let taken = try #require(try await server.record(issue.id))
        _ = try await server.apply(PushMutation(
            idempotencyKey: UUID(), entity: .issue, operation: .update, recordID: issue.id, baseVersion: taken.version,
            fields: ["details": .text("office: posts replaced")], clocks: ["details": office(1_500_000)]))
        await server.inject(.httpError(status: 404, code: .notFound, retryAfter: nil), on: .pushAnswers)
        let older = try await engine.sync(now: { self.now.addingTimeInterval(2_000) })
        #expect(older.isComplete && older.lastTransportError == nil)
        #expect(try device.store.status().pendingChanges == 0)
        let onServer = try #require(try await server.record(issue.id))
        #expect(onServer.fields["details"] == .text("office: posts replaced") && onServer.version == taken.version + 1)
        #expect(try device.store.record(.issue, id: issue.id)?["details"] == .text("office: posts replaced"))
        #expect(try device.store.openConflicts().isEmpty)
    }

    @Test func aDevicesOwnTakenEditDoesNotMakeItsLaterDeleteConcurrent() async throws {
        // Seed 140: the device's edit was applied with the answer lost; the pull brought it back, and the
        // merge took the device's own write for a concurrent office change: server wins then dropped the
        // device's later delete and offered it back as lost.
        let device = try Device()
        let server = try await InProcessServer()
        let engine = SyncEngine(store: device.store, transport: server, random: SeededGenerator(seed: 384))
        var asset = try await device.store.save(
            Asset(projectID: try await server.newProject(), name: "Boom lift", qrCode: "QR-1"), now: now)
        _ = try await engine.sync(now: { self.now })
        asset = try #require(try device.store.fetch(Asset.self, id: asset.id))
        asset.location = "Bay 3"
        _ = try await device.store.save(asset, now: now.addingTimeInterval(100))
        await server.inject(.dropResponse, on: .push)
        _ = try await engine.sync(now: { self.now.addingTimeInterval(100) })
        #expect(try await device.store.delete(.asset, id: asset.id, now: now.addingTimeInterval(200)))

        let report = try await engine.sync(now: { self.now.addingTimeInterval(4_000) })
        #expect(report.isComplete)
        #expect(try await server.record(asset.id)?.isDeleted == true)
        #expect(try device.store.openConflicts().isEmpty, "nothing lost: the device wrote both")
    }

    @Test func aStaleCopysRevivalTakenWithItsAnswerLostStillOffersTheDeleteOnce() async throws {
        // The write of a copy read before a pulled delete was applied with its answer lost; the pull that
        // brings it back must still offer the delete its user never saw, once.
        let device = try Device()
        let server = try await InProcessServer()
        let engine = SyncEngine(store: device.store, transport: server, random: SeededGenerator(seed: 385))
        let issue = try await device.store.save(Issue(projectID: try await server.newProject(), title: "Loose rail"), now: now)
        _ = try await engine.sync(now: { self.now })
        var screen = try #require(try device.store.fetch(Issue.self, id: issue.id))
        _ = try await server.apply(PushMutation(
            idempotencyKey: UUID(), entity: .issue, operation: .delete, recordID: issue.id, baseVersion: 1, deletion: office(100_000)))
        _ = try await engine.sync(now: { self.now.addingTimeInterval(200) })
        screen.details = "two more posts"
        _ = try await device.store.save(screen, now: now.addingTimeInterval(300))
        await server.inject(.dropResponse, on: .push)
        _ = try await engine.sync(now: { self.now.addingTimeInterval(300) })
        _ = try await engine.sync(now: { self.now.addingTimeInterval(4_000) })
        _ = try await engine.sync(now: { self.now.addingTimeInterval(8_000) })

        let onServer = try #require(try await server.record(issue.id))
        #expect(!onServer.isDeleted && onServer.fields["details"] == .text("two more posts"))
        #expect(try device.store.openConflicts().map(\.field) == [nil], "the delete, once")
    }
}

/// A transport written without `pushAnswers`: every other call goes to `base`, and the question takes
/// the protocol's default.
struct AskingNothing: SyncTransport {
    let base: InProcessServer

    func health() async throws(TransportError) -> HealthResponse { try await base.health() }
    func push(_ request: PushRequest) async throws(TransportError) -> PushResponse { try await base.push(request) }
    func pull(_ request: PullRequest) async throws(TransportError) -> PullResponse { try await base.pull(request) }
    func mediaUploadStatus(for attachmentID: UUID) async throws(TransportError) -> MediaUploadStatus {
        try await base.mediaUploadStatus(for: attachmentID)
    }
    func uploadMedia(_ chunk: MediaChunk) async throws(TransportError) -> MediaUploadStatus { try await base.uploadMedia(chunk) }
    func downloadBundle(project: UUID, format: BundleFormat, to destination: URL) async throws(TransportError) -> Int64 {
        try await base.downloadBundle(project: project, format: format, to: destination)
    }
    func downloadOriginal(of attachmentID: UUID, byteCount: Int64, appendingTo partial: URL)
        async throws(TransportError) -> OriginalDownload
    {
        try await base.downloadOriginal(of: attachmentID, byteCount: byteCount, appendingTo: partial)
    }
    var transferred: TransferCounts { get async { await base.transferred } }
}

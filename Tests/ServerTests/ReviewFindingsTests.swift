@testable import OutpostServer
import Foundation
import GRDB
import OutpostBundles
import OutpostConflicts
import OutpostFieldService
import OutpostFieldServiceTesting
import OutpostModels
import OutpostSchema
import OutpostStore
import OutpostSync
import OutpostTesting
import OutpostWire
import Testing

/// Paths an outside review found where a crew's write could be lost or silently overwritten although
/// every other test passed: a pre-sync import over unsynced edits, a device clock that once ran ahead,
/// a server that settled conflicts with another policy than the app, an acknowledgement that did
/// not survive a power loss, and a batch left in flight when an import held the file. Each runs the real engine against the real server on 127.0.0.1.
@Suite("Review findings: imports, clocks, policies and durability, end to end", .fieldService)
struct ReviewFindingsTests {
    func device(_ server: TestServer, _ name: String) throws -> LocalStore {
        try LocalStore.open(at: server.directory.appendingPathComponent("\(name).sqlite").path)
    }

    /// A crew member's device (Alice's) and the office's (Carol's), each with its engine, both holding one
    /// issue of project A the crew wrote.
    func crewAndOffice(
        _ server: TestServer
    ) async throws -> (LocalStore, LocalStore, SyncEngine, SyncEngine, OutpostModels.Issue) {
        let crew = try device(server, "crew")
        let office = try device(server, "office")
        let crewEngine = SyncEngine(store: crew, transport: server.transport(token: TestServer.aliceToken))
        let officeEngine = SyncEngine(store: office, transport: server.transport(token: TestServer.carolToken))
        let issue = try await crew.save(OutpostModels.Issue(projectID: TestServer.projectA, title: "Loose rail"))
        #expect(try await crewEngine.sync().isComplete)
        #expect(try await officeEngine.sync().isComplete)
        return (crew, office, crewEngine, officeEngine, issue)
    }

    @Test(
        "An office edit made while a crew member edited offline is still a conflict after the night's pre-sync import",
        arguments: [ConflictStrategy.serverWins, .clientWins, .manual])
    func anImportBeforeSyncStillSurfacesTheOfficesConcurrentEdit(_ strategy: ConflictStrategy) async throws {
        let policy = ConflictPolicy(overriding: [.discount: strategy])
        let server = try await TestServer.start(conflictPolicy: policy)
        defer { Task { await server.stop() } }
        let crew = try device(server, "crew")
        let office = try device(server, "office")
        // Money is the office's to change: both devices are the project manager's (her tablet and her laptop).
        let crewEngine = SyncEngine(store: crew, transport: server.transport(token: TestServer.carolToken), policy: policy)
        let officeEngine = SyncEngine(store: office, transport: server.transport(token: TestServer.carolToken), policy: policy)

        var discount = try await crew.save(Discount(projectID: TestServer.projectA, name: "Winter", kind: .fixedAmount, value: 100))
        #expect(try await crewEngine.sync().isComplete)
        #expect(try await officeEngine.sync().isComplete)

        // Offline, the crew member changes the value; the office changes it too.
        discount = try #require(try crew.fetch(Discount.self, id: discount.id))
        discount.value = 999
        _ = try await crew.save(discount)
        var officeCopy = try #require(try office.fetch(Discount.self, id: discount.id))
        officeCopy.value = 250
        _ = try await office.save(officeCopy)
        #expect(try await officeEngine.sync().isComplete)

        // The night's pre-sync brings the office's version, then the device syncs.
        let bundle = server.directory.appendingPathComponent("bundle.json")
        _ = try await server.transport(token: TestServer.carolToken).downloadBundle(
            project: TestServer.projectA, format: .json, to: bundle)
        let imported = try crew.importBundle(at: bundle)
        #expect(imported.total.refreshedAroundLocalChanges + imported.total.skippedLocallyModified == 1)
        let report = try await crewEngine.sync()
        #expect(report.isComplete)

        let serverValue = try #require(try await server.transport(token: TestServer.carolToken)
            .pull(PullRequest(cursor: nil, limit: 1000)).changes.last { $0.recordID == discount.id }?.fields["value"])
        let expected: FieldValue = strategy == .clientWins ? .integer(999) : .integer(250)
        #expect(serverValue == expected)
        #expect(try crew.fetch(Discount.self, id: discount.id)?.value == (strategy == .clientWins ? 999 : 250))
        let conflicts = try crew.openConflicts().filter { $0.recordID == discount.id && $0.field == "value" }
        #expect(conflicts.count == 1, "the value that lost is surfaced, not dropped")
        #expect(conflicts.first?.losingValue == (strategy == .clientWins ? .integer(250) : .integer(999)))
    }

    @Test("A device whose clock once ran a day ahead gets every write to the server once its date is right")
    func aDeviceWhoseClockWasOnceADayAheadGetsEveryWriteThrough() async throws {
        let server = try await TestServer.start()
        defer { Task { await server.stop() } }
        let path = server.directory.appendingPathComponent("crew.sqlite").path
        let dayAhead = Timestamp.now().addingTimeInterval(86_400)
        let early: OutpostModels.Issue
        do {
            let store = try LocalStore.open(at: path)
            early = try await store.save(OutpostModels.Issue(projectID: TestServer.projectA, title: "Written a day ahead"), now: dayAhead)
            // Syncing while the clock is wrong keeps the change and says why.
            let engine = SyncEngine(store: store, transport: server.transport(token: TestServer.aliceToken))
            let held = try await engine.sync(now: { dayAhead })
            #expect(held.heldForClock == 1)
            #expect(!held.isComplete)
            #expect(try store.status().failedChanges == 0)
            #expect(try store.status().clockWarning != nil)
        }
        // The date is corrected and the app starts again.
        let store = try LocalStore.open(at: path)
        var edited = try #require(try store.fetch(OutpostModels.Issue.self, id: early.id))
        edited.details = "edited after the date was fixed"
        _ = try await store.save(edited)
        let later = try await store.save(OutpostModels.Issue(projectID: TestServer.projectA, title: "Written on time"))
        let engine = SyncEngine(store: store, transport: server.transport(token: TestServer.aliceToken))
        let report = try await engine.sync()
        #expect(report.isComplete)
        #expect(report.restamped >= 1)
        #expect(report.failed == 0)
        #expect(try store.status().pendingChanges == 0)
        #expect(try store.status().clockWarning == nil)
        let onServer = try await server.transport(token: TestServer.carolToken).pull(PullRequest(cursor: nil, limit: 1000))
        let first = try #require(onServer.changes.last { $0.recordID == early.id })
        #expect(first.fields["details"] == .text("edited after the date was fixed"))
        #expect(onServer.changes.contains { $0.recordID == later.id })
        // The device and the server judge the record by the same clocks.
        let local = try #require(try store.record(.issue, id: early.id))
        #expect(local.fields == first.fields)
    }

    /// Attack 62, finding M3: one answer of a hostile server (or of someone in the middle) gave a record
    /// clocks at the end of time. An edit made while the device's date ran a day ahead was refused
    /// `clock_ahead`, and stamping it again could never go below those clocks: it waited for good, with
    /// a warning to check the server, though the server was honest again.
    @Test("A record a hostile answer stamped at the end of time, edited while the date ran ahead: the edit reaches the honest server")
    func anEditOfARecordAHostileAnswerStampedAtTheEndOfTimeGetsThrough() async throws {
        let server = try await TestServer.start()
        defer { Task { await server.stop() } }
        let crew = try device(server, "crew")
        let engine = SyncEngine(store: crew, transport: server.transport(token: TestServer.aliceToken))
        let issue = try await crew.save(OutpostModels.Issue(projectID: TestServer.projectA, title: "Loose rail"))
        #expect(try await engine.sync().isComplete)
        // What the hostile pull left: every clock of the record, local and the server's, at the end of time.
        try await DatabaseQueue(path: crew.path).write { db in
            // A clocks row, as a pull over a record held writes it: it stands over a clock the row keeps
            // (an acknowledged create's, v17 on).
            try db.execute(
                sql: "INSERT OR REPLACE INTO field_clocks (entity, record_id, clocks) VALUES ('issue', ?, '@ffffffffffff-0000-00000000000000ff')",
                arguments: [issue.id.storageText])
            #expect(db.changesCount == 1)
        }
        var edited = try #require(try crew.fetch(OutpostModels.Issue.self, id: issue.id))
        edited.details = "Bolt sheared"
        _ = try await crew.save(edited, now: Timestamp.now().addingTimeInterval(86_400))
        let report = try await engine.sync()
        #expect(report.isComplete, "\(report)")
        #expect(report.restamped == 1)
        #expect(try crew.status().pendingChanges == 0)
        #expect(try crew.status().clockWarning == nil)
        let onServer = try await server.transport(token: TestServer.carolToken).pull(PullRequest(cursor: nil, limit: 1000))
        #expect(onServer.changes.last { $0.recordID == issue.id }?.fields["details"] == .text("Bolt sheared"))
    }

    /// Attack 63, finding F1: after that hostile answer, a crew's edit made with the right date was
    /// stamped after the end-of-time clock it wrote over. A teammate's later edit of the same field, pulled
    /// before the crew's went out, lost to that stamp on the device; the honest server refused the stamp,
    /// and the change stamped again after every clock of the record beat the teammate's edit there too:
    /// silently overwritten. Stamped again, the edit takes its place by the time it was made.
    @Test("An edit that followed a hostile answer's clock does not overwrite a teammate's later edit once the server refuses that clock")
    func anEditThatFollowedAHostileClockDoesNotBeatALaterEdit() async throws {
        let server = try await TestServer.start()
        defer { Task { await server.stop() } }
        let (crew, office, crewEngine, officeEngine, issue) = try await crewAndOffice(server)
        try await DatabaseQueue(path: crew.path).write { db in
            // A clocks row, as a pull over a record held writes it: it stands over a clock the row keeps
            // (an acknowledged create's, v17 on).
            try db.execute(
                sql: "INSERT OR REPLACE INTO field_clocks (entity, record_id, clocks) VALUES ('issue', ?, '@ffffffffffff-0000-00000000000000ff')",
                arguments: [issue.id.storageText])
            #expect(db.changesCount == 1)
        }
        let editedAt = Timestamp.now()
        var crewCopy = try #require(try crew.fetch(OutpostModels.Issue.self, id: issue.id))
        crewCopy.details = "Bolt sheared"
        _ = try await crew.save(crewCopy, now: editedAt)
        var officeCopy = try #require(try office.fetch(OutpostModels.Issue.self, id: issue.id))
        officeCopy.details = "Rail replaced"
        _ = try await office.save(officeCopy, now: editedAt.addingTimeInterval(1))
        #expect(try await officeEngine.sync().isComplete)

        let report = try await crewEngine.sync()
        #expect(report.isComplete, "\(report)")
        #expect(try crew.status().pendingChanges == 0)
        let onServer = try await server.transport(token: TestServer.carolToken).pull(PullRequest(cursor: nil, limit: 1000))
        #expect(onServer.changes.last { $0.recordID == issue.id }?.fields["details"] == .text("Rail replaced"))
        #expect(try crew.fetch(OutpostModels.Issue.self, id: issue.id)?.details == "Rail replaced")
        // Not silently: the crew's value is kept as a conflict it lost, to bring back if the user wants.
        // (The local merge the refused stamp won is listed too, the teammate's value as the loser: it
        // stands now, and overriding it writes nothing. Attack 63 finding F2, left open.)
        let lost = try crew.openConflicts().filter { $0.recordID == issue.id && $0.field == "details" }
        #expect(lost.contains { $0.losingSide == .client && $0.losingValue == .text("Bolt sheared") }, "\(lost)")
        #expect(try await officeEngine.sync().isComplete)
        #expect(try office.fetch(OutpostModels.Issue.self, id: issue.id)?.details == "Rail replaced")
    }

    /// Attack 65, finding F2: a change that went out once (the server answered 503) is not folded into,
    /// so the user's newer edit of the field queued behind it. A teammate's edit in between made the
    /// server answer the first change `conflict`; the merge judged the record's waiting writes as one
    /// (the newer edit won), but the first change, older than the teammate's, went out alone again and
    /// met the same conflict eleven times, then failed, and the newer edit never left the device.
    @Test("A change sent once, a teammate's edit, then the user's newer edit of the field: the newer edit reaches the server")
    func aChangeSentOnceDoesNotHoldBackTheUsersNewerEdit() async throws {
        let server = try await TestServer.start()
        defer { Task { await server.stop() } }
        let (crew, office, crewEngine, officeEngine, issue) = try await crewAndOffice(server)
        var crewCopy = try #require(try crew.fetch(OutpostModels.Issue.self, id: issue.id))
        crewCopy.title = "Loose rail, north gate"
        _ = try await crew.save(crewCopy)
        // It went out, and the answer was a 503: sent, so the next write is queued behind it.
        try await DatabaseQueue(path: crew.path).write { db in
            try db.execute(sql: "UPDATE mutation_queue SET sent = 1 WHERE record_id = ?", arguments: [issue.id.storageText])
            #expect(db.changesCount == 1)
        }
        var officeCopy = try #require(try office.fetch(OutpostModels.Issue.self, id: issue.id))
        officeCopy.title = "Loose rail (office)"
        _ = try await office.save(officeCopy)
        #expect(try await officeEngine.sync().isComplete)
        crewCopy = try #require(try crew.fetch(OutpostModels.Issue.self, id: issue.id))
        crewCopy.title = "Loose rail, north gate, fixed"
        _ = try await crew.save(crewCopy)

        let report = try await crewEngine.sync()
        #expect(report.isComplete, "\(report)")
        #expect(try crew.status().pendingChanges == 0)
        #expect(try crew.status().failedChanges == 0)
        let onServer = try await server.transport(token: TestServer.carolToken).pull(PullRequest(cursor: nil, limit: 1000))
        #expect(onServer.changes.last { $0.recordID == issue.id }?.fields["title"] == .text("Loose rail, north gate, fixed"))
    }

    /// Attack 65, finding F1: a delete made offline, a teammate's edit, then the user's edit of the
    /// deleted copy, which brings it back. The merge judged the waiting writes as one (the record back),
    /// but the delete, older than the teammate's edit, went out alone and met a conflict at every try:
    /// it failed, and the edit that brought the record back never left the device.
    @Test("A delete, a teammate's edit, then the user's edit bringing the record back: the record comes back on the server with both edits")
    func aDeleteUndoneByALaterEditDoesNotHoldItBack() async throws {
        let server = try await TestServer.start()
        defer { Task { await server.stop() } }
        let (crew, office, crewEngine, officeEngine, issue) = try await crewAndOffice(server)
        let deletedCopy = try #require(try crew.fetch(OutpostModels.Issue.self, id: issue.id))
        #expect(try await crew.delete(.issue, id: issue.id))
        var officeCopy = try #require(try office.fetch(OutpostModels.Issue.self, id: issue.id))
        officeCopy.title = "Loose rail (office)"
        _ = try await office.save(officeCopy)
        #expect(try await officeEngine.sync().isComplete)
        var revived = deletedCopy
        revived.details = "Bolt sheared"
        _ = try await crew.save(revived)

        let report = try await crewEngine.sync()
        #expect(report.isComplete, "\(report)")
        #expect(try crew.status().pendingChanges == 0)
        #expect(try crew.status().failedChanges == 0)
        let onServer = try await server.transport(token: TestServer.carolToken).pull(PullRequest(cursor: nil, limit: 1000))
        let last = try #require(onServer.changes.last { $0.recordID == issue.id })
        #expect(last.deletion == nil)
        #expect(last.fields["details"] == .text("Bolt sheared"))
        #expect(last.fields["title"] == .text("Loose rail (office)"))
    }

    /// The family of attack 65's F1 and F2: seeded runs of a crew's edits and deletes of one record, with
    /// sends that were never answered between them (a change that went out is not folded into, so later
    /// writes queue behind it) and a teammate's edits between. Whatever went out unanswered, every write
    /// settles (none waits or fails), the two devices and the server end alike, and a field the crew wrote
    /// last of all ends with the crew's value on a record that stands.
    @Test("Seeded: writes queued behind sends never answered, a teammate's edits between: every write settles and the newest stands", arguments: 0..<4)
    func everyWriteSettlesWhateverWentOutUnanswered(seed: UInt64) async throws {
        var random = SeededGenerator(seed: seed)
        let server = try await TestServer.start()
        defer { Task { await server.stop() } }
        let (crew, office, crewEngine, officeEngine, issue) = try await crewAndOffice(server)
        var time = Timestamp.now()
        var copy = try #require(try crew.record(.issue, id: issue.id))
        var steps: [String] = []
        var last: (field: String, value: FieldValue)?
        for step in 0..<10 {
            time = time.addingTimeInterval(0.05)
            let field = Bool.random(using: &random) ? "title" : "details"
            switch Int.random(in: 0..<6, using: &random) {
            case 0, 1:
                // An edit of the copy the crew holds: of a deleted copy, it brings the record back.
                copy[field] = .text("crew \(step)")
                _ = try await crew.save(copy, now: time)
                copy = try #require(try crew.record(.issue, id: issue.id))
                last = (field, .text("crew \(step)"))
                steps.append("crew \(field) \(step)")
            case 2:
                if try await crew.delete(.issue, id: issue.id, now: time) { steps.append("crew delete"); last = nil }
            case 3, 4:
                #expect(try await officeEngine.sync().isComplete)
                guard var theirs = try office.record(.issue, id: issue.id), !theirs.sync.isDeleted else { continue }
                theirs[field] = .text("office \(step)")
                _ = try await office.save(theirs, now: time)
                #expect(try await officeEngine.sync().isComplete)
                if last?.field == field { last = nil }
                steps.append("office \(field) \(step)")
            default:
                // What waits went out, and no answer came: later writes queue behind it.
                try await DatabaseQueue(path: crew.path).write { db in
                    try db.execute(sql: "UPDATE mutation_queue SET sent = 1 WHERE status = 'pending'")
                }
                steps.append("sent, unanswered")
            }
        }
        #expect(try await crewEngine.sync().isComplete, "\(steps)")
        #expect(try await officeEngine.sync().isComplete, "\(steps)")
        #expect(try await crewEngine.sync().isComplete, "\(steps)")
        #expect(try crew.status().pendingChanges == 0 && crew.status().failedChanges == 0, "\(steps)")
        let onServer = try #require(
            try await server.transport(token: TestServer.carolToken).pull(PullRequest(cursor: nil, limit: 1000)).changes
                .last { $0.recordID == issue.id })
        let crewHolds = try #require(try crew.record(.issue, id: issue.id))
        let officeHolds = try #require(try office.record(.issue, id: issue.id))
        #expect(crewHolds.sync.isDeleted == (onServer.deletion != nil) && officeHolds.sync.isDeleted == crewHolds.sync.isDeleted, "\(steps)")
        if onServer.deletion == nil {
            for name in ["title", "details"] {
                #expect(crewHolds[name] == onServer.fields[name] && officeHolds[name] == onServer.fields[name], "\(name): \(steps)")
            }
            if let last { #expect(onServer.fields[last.field] == last.value, "the crew's last write: \(steps)") }
        }
    }

    @Test("A device whose conflict policy differs from its server's stops before it merges or pushes, with what differs")
    func aDeviceWithAnotherPolicyThanItsServerIsStoppedBeforeItMergesOrPushes() async throws {
        let manual = ConflictPolicy(overriding: [.issue: .manual])
        let server = try await TestServer.start(conflictPolicy: manual)
        defer { Task { await server.stop() } }
        let crew = try device(server, "crew")
        let office = try device(server, "office")
        let agreeing = SyncEngine(store: crew, transport: server.transport(token: TestServer.aliceToken), policy: manual)
        let officeEngine = SyncEngine(store: office, transport: server.transport(token: TestServer.carolToken), policy: manual)
        var issue = try await crew.save(OutpostModels.Issue(projectID: TestServer.projectA, title: "Loose rail"))
        #expect(try await agreeing.sync().isComplete)
        #expect(try await officeEngine.sync().isComplete)
        var officeCopy = try #require(try office.fetch(OutpostModels.Issue.self, id: issue.id))
        officeCopy.title = "Loose rail (office)"
        _ = try await office.save(officeCopy)
        #expect(try await officeEngine.sync().isComplete)
        issue = try #require(try crew.fetch(OutpostModels.Issue.self, id: issue.id))
        issue.title = "Loose rail (crew)"
        _ = try await crew.save(issue)

        // The app forgot its override: nothing is merged with the wrong strategy, nothing is pushed.
        let mismatched = SyncEngine(store: crew, transport: server.transport(token: TestServer.aliceToken))
        let refused = try await mismatched.sync()
        #expect(refused.pause == .conflictPolicyMismatch)
        #expect(refused.pushed == 0)
        #expect(refused.pulled == 0, "no page merged under the wrong policy")
        #expect(refused.conflictPolicyDifferences.contains { $0.hasPrefix("issue:") })
        #expect(try crew.status().pendingChanges == 1, "every change stays queued")
        #expect(try crew.openConflicts().isEmpty)
        #expect(try crew.record(.issue, id: issue.id)?.sync.version == 1)

        // With the server's policy, manual: the office's title stays, the crew's is an open conflict.
        #expect(try await agreeing.sync().isComplete)
        let onServer = try #require(try await server.transport(token: TestServer.carolToken)
            .pull(PullRequest(cursor: nil, limit: 1000)).changes.last { $0.recordID == issue.id })
        #expect(onServer.fields["title"] == .text("Loose rail (office)"))
        #expect(try crew.openConflicts().contains { $0.recordID == issue.id && $0.losingValue == .text("Loose rail (crew)") })
    }

    @Test("The server settles a push with its configured policy, the same as the device merged with")
    func theServerSettlesPushesWithItsConfiguredPolicy() async throws {
        let policy = ConflictPolicy(overriding: [.issue: .serverWins])
        let server = try await TestServer.start(conflictPolicy: policy)
        defer { Task { await server.stop() } }
        let crew = try device(server, "crew")
        let office = try device(server, "office")
        let crewEngine = SyncEngine(store: crew, transport: server.transport(token: TestServer.aliceToken), policy: policy)
        let officeEngine = SyncEngine(store: office, transport: server.transport(token: TestServer.carolToken), policy: policy)
        var issue = try await crew.save(OutpostModels.Issue(projectID: TestServer.projectA, title: "Loose rail"))
        #expect(try await crewEngine.sync().isComplete)
        #expect(try await officeEngine.sync().isComplete)
        issue = try #require(try crew.fetch(OutpostModels.Issue.self, id: issue.id))
        issue.title = "Loose rail, stairs"
        _ = try await crew.save(issue)
        var officeCopy = try #require(try office.fetch(OutpostModels.Issue.self, id: issue.id))
        officeCopy.details = "the office's note"
        _ = try await office.save(officeCopy)
        #expect(try await officeEngine.sync().isComplete)
        #expect(try await crewEngine.sync().isComplete)
        // Server wins (not the catalog's field merge): the crew's title lost on both sides, surfaced on the device.
        let onServer = try #require(try await server.transport(token: TestServer.carolToken)
            .pull(PullRequest(cursor: nil, limit: 1000)).changes.last { $0.recordID == issue.id })
        #expect(onServer.fields["title"] == .text("Loose rail"))
        #expect(try crew.record(.issue, id: issue.id)?.fields == onServer.fields)
        #expect(try crew.openConflicts().contains { $0.recordID == issue.id && $0.losingValue == .text("Loose rail, stairs") })
    }

    @Test("The SQLite server's acknowledgement survives a power loss: every commit is synced to disk")
    func theSQLiteServerSyncsEveryCommitBeforeItAnswers() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("outpost-durable-\(UUID())")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let storage = try SQLiteStorage(path: folder.appendingPathComponent("s.sqlite").path, assignsServerIDs: false)
        #expect(try await storage.writerSynchronousMode() == 2, "PRAGMA synchronous = FULL on the writer")
        #expect(ServerConfiguration(databasePath: "s.sqlite").durableCommits, "a configured server is durable unless told")
        let throwaway = try SQLiteStorage(
            path: folder.appendingPathComponent("t.sqlite").path, assignsServerIDs: false, durableCommits: false)
        #expect(try await throwaway.writerSynchronousMode() == 1, "NORMAL only when asked")
    }

    @Test("A batch whose push was lost while an import held the device's file goes back in line at the same engine's next run")
    func aBatchTheStoreCouldNotPutBackDuringAnImportIsSentByTheSameEngine() async throws {
        let server = try await TestServer.start()
        defer { Task { await server.stop() } }
        let path = server.directory.appendingPathComponent("crew.sqlite").path
        // The store waits 300 ms for another connection's write, not the minute an app's store waits.
        let crew = try LocalStore.open(at: path, busyTimeout: .milliseconds(300))
        var saved: [OutpostModels.Issue] = []
        for index in 0..<3 {
            saved.append(try await crew.save(OutpostModels.Issue(projectID: TestServer.projectA, title: "Issue \(index)")))
        }
        // The connection drops mid-push while an import on another connection holds the file's write lock,
        // past both the recording of the failure and the putting back of the batch.
        let importLock = WriteLock(path: path)
        let transport = LockingOnPush(base: server.transport(token: TestServer.aliceToken), lock: importLock)
        let engine = SyncEngine(store: crew, transport: transport)
        do {
            _ = try await engine.sync()
            Issue.record("the run recorded its failed push while another connection held the write lock")
        } catch {
            #expect(error.code == .databaseBusy, "\(error)")
        }
        #expect(try crew.mutations(status: .inFlight).count == 3, "claimed, and neither settled nor put back")
        importLock.release()

        // The import done, the same long-lived engine sends them: no restart, no five-minute lease.
        let next = try await engine.sync()
        #expect(next.recovered == 3)
        #expect(next.pushed == 3)
        #expect(next.isComplete)
        #expect(try crew.mutations(status: .inFlight).isEmpty)
        #expect(try crew.status().pendingChanges == 0)
        let onServer = try await server.transport(token: TestServer.aliceToken).pull(PullRequest(cursor: nil, limit: 1000)).changes
        for issue in saved { #expect(onServer.filter { $0.recordID == issue.id }.count == 1) }
    }
}

/// Another connection's write transaction on a device file (an import in another process), taken on a
/// thread of its own and held until `release()`.
final class WriteLock: Sendable {
    let path: String
    private let released = DispatchSemaphore(value: 0)

    init(path: String) { self.path = path }

    /// Returns once the lock is held.
    func take() async {
        let path = path, released = released
        await withCheckedContinuation { (held: CheckedContinuation<Void, Never>) in
            Thread {
                do {
                    let queue = try DatabaseQueue(path: path)
                    try queue.writeWithoutTransaction { db in
                        try db.execute(sql: "BEGIN IMMEDIATE")
                        held.resume()
                        released.wait()
                        try db.execute(sql: "COMMIT")
                    }
                } catch {
                    Issue.record("could not take the write lock: \(error)")
                    held.resume()
                }
            }.start()
        }
    }

    func release() { released.signal() }
}

/// Passes everything to the server but pushes: the first push takes `lock` and is lost on the way (no
/// connection), later ones go through.
actor LockingOnPush: ForwardingTransport {
    let base: HTTPTransport
    let lock: WriteLock
    private var pushes = 0

    init(base: HTTPTransport, lock: WriteLock) {
        self.base = base
        self.lock = lock
    }

    func push(_ request: PushRequest) async throws(TransportError) -> PushResponse {
        pushes += 1
        guard pushes > 1 else {
            await lock.take()
            throw TransportError(.noConnection, request: "POST /push", message: "the connection dropped")
        }
        return try await base.push(request)
    }
}

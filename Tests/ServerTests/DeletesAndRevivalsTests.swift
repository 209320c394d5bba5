@testable import OutpostServer
import Foundation
import OutpostBundles
import OutpostConflicts
import OutpostFieldService
import OutpostFieldServiceTesting
import OutpostModels
import OutpostSchema
import OutpostStore
import OutpostSync
import OutpostWire
import Testing

/// The paths an outside review found where a value still vanished with nothing surfaced: an old bundle
/// bringing back a deleted record, deletes hiding a concurrent edit under last write wins and client
/// wins, an append-only edit kept for ever, and stale copies saved over a delete. Each runs the real
/// engine against the real server on 127.0.0.1.
@Suite("Deletes, revivals and old copies, end to end", .fieldService)
struct DeletesAndRevivalsTests {

    /// A server and devices that all run `policy`: the office (Carol, project manager) and two crew
    /// devices of Alice (foreman), each its own store file.
    struct Crew {
        let server: TestServer
        let policy: ConflictPolicy

        static func start(_ policy: ConflictPolicy = ConflictPolicy()) async throws -> Crew {
            Crew(server: try await TestServer.start(conflictPolicy: policy), policy: policy)
        }

        func device(_ name: String, token: String = TestServer.aliceToken) throws -> (store: LocalStore, engine: SyncEngine) {
            let store = try LocalStore.open(at: server.directory.appendingPathComponent("\(name).sqlite").path)
            return (store, SyncEngine(store: store, transport: server.transport(token: token), policy: policy))
        }

        /// The record as the server holds it now (a tombstone comes without contents).
        func onServer(_ id: UUID) async throws -> ServerRecord? {
            try await server.transport(token: TestServer.carolToken).pull(PullRequest(cursor: nil, limit: 1000))
                .changes.last { $0.recordID == id }
        }

        func stop() async { await server.stop() }

        /// A crew whose issues settle by `strategy`, and devices A and B (Alice's) that both hold one
        /// issue, synced.
        static func twoDevicesHoldingAnIssue(
            _ strategy: ConflictPolicyName
        ) async throws -> (crew: Crew, a: (store: LocalStore, engine: SyncEngine), b: (store: LocalStore, engine: SyncEngine), issue: OutpostModels.Issue) {
            let crew = try await Crew.start(ConflictPolicy(overriding: [.issue: ConflictStrategy(strategy)]))
            let a = try crew.device("a"), b = try crew.device("b")
            let issue = try await a.store.save(OutpostModels.Issue(projectID: TestServer.projectA, title: "Loose rail"))
            #expect(try await a.engine.sync().isComplete)
            #expect(try await b.engine.sync().isComplete)
            return (crew, a, b, issue)
        }
    }

    @Test("An old bundle never brings back a record deleted before the device held it, nor does another device's old export")
    func anOldBundleNeverBringsBackARecordTheServerDeleted() async throws {
        let crew = try await Crew.start()
        defer { Task { await crew.stop() } }
        let office = try crew.device("office", token: TestServer.carolToken)
        let holder = try crew.device("holder")
        let issue = try await office.store.save(OutpostModels.Issue(projectID: TestServer.projectA, title: "Gate code 4471"))
        #expect(try await office.engine.sync().isComplete)
        #expect(try await holder.engine.sync().isComplete)

        // The night before, a bundle is downloaded, and a teammate exports the project.
        let bundle = crew.server.directory.appendingPathComponent("old-bundle.json")
        _ = try await crew.server.transport(token: TestServer.aliceToken).downloadBundle(
            project: TestServer.projectA, format: .json, to: bundle)
        let export = crew.server.directory.appendingPathComponent("old-export.json")
        _ = try holder.store.exportBundle(project: TestServer.projectA, format: .json, to: export)

        // The office deletes the issue; a new device syncs and learns of the delete of a record it never held.
        #expect(try await office.store.delete(.issue, id: issue.id))
        #expect(try await office.engine.sync().isComplete)
        for (name, file) in [("newcomer", bundle), ("another", export)] {
            let device = try crew.device(name)
            #expect(try await device.engine.sync().isComplete)
            #expect(try device.store.record(.issue, id: issue.id)?.sync.isDeleted ?? true)

            let summary = try device.store.importBundle(at: file)
            #expect(summary.byEntity["issue"]?.inserted ?? 0 == 0, "\(name): the import brought the deleted issue back")
            #expect(summary.byEntity["issue"]?.skippedOutdated == 1)
            #expect(try device.store.record(.issue, id: issue.id)?.sync.isDeleted ?? true)
            #expect(try await device.engine.sync().isComplete)
            #expect(try device.store.record(.issue, id: issue.id)?.sync.isDeleted ?? true)
            // Its own export carries nothing of it to anyone else.
            let onward = crew.server.directory.appendingPathComponent("\(name)-export.json")
            _ = try device.store.exportBundle(project: TestServer.projectA, format: .json, to: onward)
            #expect(try Data(contentsOf: onward).range(of: Data("Gate code 4471".utf8)) == nil)
        }
        #expect(try await crew.onServer(issue.id)?.isDeleted == true)
    }

    @Test("Last write wins: an edit beaten by a newer delete is surfaced on the device whose sync settled it")
    func lastWriteWinsSurfacesTheEditANewerDeleteHid() async throws {
        let crew = try await Crew.start(ConflictPolicy(overriding: [.issue: .lastWriteWins]))
        defer { Task { await crew.stop() } }
        let a = try crew.device("a"), b = try crew.device("b")
        let issue = try await a.store.save(OutpostModels.Issue(projectID: TestServer.projectA, title: "Loose rail"))
        #expect(try await a.engine.sync().isComplete)
        #expect(try await b.engine.sync().isComplete)

        // Offline: B edits the details, A deletes the issue 50 ms later.
        let start = Timestamp.now()
        var copy = try #require(try b.store.fetch(OutpostModels.Issue.self, id: issue.id))
        copy.details = "bolts sheared on the third post"
        _ = try await b.store.save(copy, now: start)
        #expect(try await a.store.delete(.issue, id: issue.id, now: start.addingTimeInterval(0.05)))
        for device in [b, a, b, a] { #expect(try await device.engine.sync().isComplete) }

        #expect(try await crew.onServer(issue.id)?.isDeleted == true)
        let surfaced = try a.store.openConflicts().filter { $0.recordID == issue.id && $0.field == "details" }
        #expect(surfaced.count == 1, "the edit the delete hid is in A's conflicts table")
        #expect(surfaced.first?.losingValue == .text("bolts sheared on the third post"))
        #expect(surfaced.first?.localValue == nil, "the winner is the delete, not the hidden value itself")
        #expect(try b.store.record(.issue, id: issue.id)?.sync.isDeleted == true)
    }

    @Test("Client wins: a note a crew member added to a clock-in is surfaced when a later delete removes it")
    func clientWinsSurfacesTheNoteADeleteRemoved() async throws {
        let crew = try await Crew.start()
        let aliceInA = try await crew.server.server.memberRecordID(project: TestServer.projectA, user: TestServer.alice)
        defer { Task { await crew.stop() } }
        let a = try crew.device("a"), b = try crew.device("b")
        let clockIn = try await a.store.save(TimeEntry(
            projectID: TestServer.projectA, memberID: aliceInA, kind: .clockIn, recordedAt: Timestamp.now()))
        #expect(try await a.engine.sync().isComplete)
        #expect(try await b.engine.sync().isComplete)

        let start = Timestamp.now()
        var copy = try #require(try b.store.fetch(TimeEntry.self, id: clockIn.id))
        copy.note = "left early for the inspection"
        _ = try await b.store.save(copy, now: start)
        #expect(try await a.store.delete(.timeEntry, id: clockIn.id, now: start.addingTimeInterval(0.05)))
        #expect(try await b.engine.sync().isComplete)
        #expect(try await a.engine.sync().isComplete)
        #expect(try await b.engine.sync().isComplete)

        let server = try #require(try await crew.onServer(clockIn.id))
        #expect(server.isDeleted && server.version == 3)
        let surfaced = try a.store.openConflicts().filter { $0.recordID == clockIn.id && $0.field == "note" }
        #expect(surfaced.map(\.losingValue) == [.text("left early for the inspection")])
    }

    @Test("Append only: an edited comment goes back to the original and the attempted text is offered; a later delete applies")
    func anEditOfAnAppendOnlyCommentIsSurfacedAndLetsALaterDeleteThrough() async throws {
        let crew = try await Crew.start()
        let aliceInA = try await crew.server.server.memberRecordID(project: TestServer.projectA, user: TestServer.alice)
        defer { Task { await crew.stop() } }
        let a = try crew.device("a"), b = try crew.device("b")
        let issue = try await a.store.save(OutpostModels.Issue(projectID: TestServer.projectA, title: "Loose rail"))
        let comment = try await a.store.save(Comment(issueID: issue.id, authorID: aliceInA, body: "A wrote this"))
        #expect(try await a.engine.sync().isComplete)
        #expect(try await b.engine.sync().isComplete)

        var edited = try #require(try b.store.fetch(Comment.self, id: comment.id))
        edited.body = "B edited body"
        _ = try await b.store.save(edited)
        let report = try await b.engine.sync()
        #expect(report.failed == 0)
        #expect(try b.store.status().failedChanges == 0)
        #expect(try b.store.fetch(Comment.self, id: comment.id)?.body == "A wrote this", "the original stays")
        let offered = try b.store.openConflicts().filter { $0.recordID == comment.id }
        #expect(offered.map(\.losingValue) == [.text("B edited body")], "the attempted text is offered")
        #expect(offered.first?.losingSide == .client)
        #expect(try await crew.onServer(comment.id)?.fields["body"] == .text("A wrote this"))

        // Another device deletes the comment: B follows.
        #expect(try await a.store.delete(.comment, id: comment.id))
        #expect(try await a.engine.sync().isComplete)
        #expect(try await b.engine.sync().isComplete)
        #expect(try b.store.record(.comment, id: comment.id)?.sync.isDeleted == true)
    }

    @Test("A copy read before another task's delete, saved unchanged, leaves the record deleted here and on the server")
    func anUnchangedCopySavedAfterALocalDeleteDoesNotUndoIt() async throws {
        let crew = try await Crew.start()
        defer { Task { await crew.stop() } }
        let a = try crew.device("a")
        let issue = try await a.store.save(OutpostModels.Issue(projectID: TestServer.projectA, title: "Loose rail"))
        #expect(try await a.engine.sync().isComplete)

        let screen = try #require(try a.store.fetch(OutpostModels.Issue.self, id: issue.id))
        #expect(try await a.store.delete(.issue, id: issue.id))
        let saved = try await a.store.save(screen)
        #expect(saved.sync.isDeleted, "the save returns the record as stored: deleted")
        #expect(try a.store.record(.issue, id: issue.id)?.sync.isDeleted == true)
        #expect(try a.store.mutations(status: .pending).map(\.operation) == [.delete])
        #expect(try await a.engine.sync().isComplete)
        #expect(try await crew.onServer(issue.id)?.isDeleted == true)
        #expect(try a.store.openConflicts().isEmpty)
    }

    @Test("A copy read before another task's delete and edited brings the record back with its edit, and the undone delete is surfaced")
    func anEditedCopySavedAfterALocalDeleteSurfacesTheDeleteItUndid() async throws {
        let crew = try await Crew.start()
        defer { Task { await crew.stop() } }
        let a = try crew.device("a")
        let issue = try await a.store.save(OutpostModels.Issue(projectID: TestServer.projectA, title: "Loose rail"))
        #expect(try await a.engine.sync().isComplete)

        var screen = try #require(try a.store.fetch(OutpostModels.Issue.self, id: issue.id))
        #expect(try await a.store.delete(.issue, id: issue.id))
        screen.details = "found two more loose posts"
        _ = try await a.store.save(screen)
        #expect(try await a.engine.sync().isComplete)
        let server = try #require(try await crew.onServer(issue.id))
        #expect(!server.isDeleted)
        #expect(server.fields["details"] == .text("found two more loose posts"))
        let surfaced = try a.store.openConflicts().filter { $0.recordID == issue.id }
        #expect(surfaced.count == 1 && surfaced.first?.field == nil, "the delete the save undid is offered back")
    }

    @Test("A copy read before a pulled delete revives the record with its user's edit over the newest values, never its stale ones")
    func aStaleCopySavedAfterAPulledDeleteKeepsTheOfficesNewerValues() async throws {
        let crew = try await Crew.start()
        defer { Task { await crew.stop() } }
        let office = try crew.device("office", token: TestServer.carolToken)
        let a = try crew.device("a"), b = try crew.device("b")
        let issue = try await office.store.save(OutpostModels.Issue(projectID: TestServer.projectA, title: "Loose rail"))
        for device in [office, a, b] { #expect(try await device.engine.sync().isComplete) }

        // B's screen reads v1. The office renames (v2), A deletes (v3), B pulls the tombstone.
        var screen = try #require(try b.store.fetch(OutpostModels.Issue.self, id: issue.id))
        let unchanged = screen
        var renamed = try #require(try office.store.fetch(OutpostModels.Issue.self, id: issue.id))
        renamed.title = "Loose rail, north stairs"
        _ = try await office.store.save(renamed)
        #expect(try await office.engine.sync().isComplete)
        #expect(try await a.engine.sync().isComplete)
        #expect(try await a.store.delete(.issue, id: issue.id))
        #expect(try await a.engine.sync().isComplete)
        #expect(try await b.engine.sync().isComplete)
        #expect(try b.store.record(.issue, id: issue.id)?.sync.isDeleted == true)

        // An unchanged stale copy brings nothing back.
        _ = try await b.store.save(unchanged)
        #expect(try b.store.record(.issue, id: issue.id)?.sync.isDeleted == true)
        #expect(try b.store.status().pendingChanges == 0)

        // An edited one brings the record back with its edit, over the office's newer title.
        screen.details = "the north stairs too"
        _ = try await b.store.save(screen)
        #expect(try await b.engine.sync().isComplete)
        let server = try #require(try await crew.onServer(issue.id))
        #expect(!server.isDeleted)
        #expect(server.fields["title"] == .text("Loose rail, north stairs"), "B's stale title went back over the office's")
        #expect(server.fields["details"] == .text("the north stairs too"))
        #expect(try b.store.record(.issue, id: issue.id)?.fields == server.fields)
        let surfaced = try b.store.openConflicts().filter { $0.recordID == issue.id }
        #expect(surfaced.map(\.field) == [nil], "only the delete the edit undid, once: \(surfaced)")
    }

    @Test("A record restored from a pulled tombstone comes back with the server's newest values, nothing surfaced")
    func aRestoreFromAPulledTombstoneBringsBackTheNewestValues() async throws {
        let crew = try await Crew.start()
        defer { Task { await crew.stop() } }
        let office = try crew.device("office", token: TestServer.carolToken)
        let b = try crew.device("b")
        let issue = try await office.store.save(OutpostModels.Issue(projectID: TestServer.projectA, title: "Loose rail"))
        for device in [office, b] { #expect(try await device.engine.sync().isComplete) }
        var renamed = try #require(try office.store.fetch(OutpostModels.Issue.self, id: issue.id))
        renamed.title = "Loose rail, north stairs"
        _ = try await office.store.save(renamed)
        #expect(try await office.engine.sync().isComplete)
        #expect(try await office.store.delete(.issue, id: issue.id))
        #expect(try await office.engine.sync().isComplete)
        #expect(try await b.engine.sync().isComplete)

        // B sees the issue deleted and restores it as it stands.
        let tombstone = try #require(try b.store.fetch(OutpostModels.Issue.self, id: issue.id))
        #expect(tombstone.sync.isDeleted)
        _ = try await b.store.save(tombstone)
        #expect(try await b.engine.sync().isComplete)
        let server = try #require(try await crew.onServer(issue.id))
        #expect(!server.isDeleted)
        #expect(server.fields["title"] == .text("Loose rail, north stairs"))
        #expect(try b.store.record(.issue, id: issue.id)?.fields == server.fields)
        #expect(try b.store.openConflicts().isEmpty)
    }

    /// A bundle is a file anyone may have edited: an attack raised its versions to the largest there is.
    /// The device then kept the bundle's copy over every later version the server sent (each looked
    /// older), and a record the server deleted came back for good. Versions an import writes are the
    /// bundle's word, not the server's: a pulled copy replaces them whatever their number, and no import
    /// brings back a record the server deleted (a pull does, if the server brought it back).
    @Test("A bundle with raised versions neither holds a record against the server's later edits nor brings back a deleted one")
    func aBundleWithRaisedVersionsNeverOutranksTheServer() async throws {
        let crew = try await Crew.start()
        defer { Task { await crew.stop() } }
        let office = try crew.device("office", token: TestServer.carolToken)
        let device = try crew.device("device")
        let kept = try await office.store.save(OutpostModels.Issue(projectID: TestServer.projectA, title: "Loose rail"))
        let doomed = try await office.store.save(OutpostModels.Issue(projectID: TestServer.projectA, title: "Gate code 4471"))
        let unseen = try await office.store.save(OutpostModels.Issue(projectID: TestServer.projectA, title: "Wet paint"))
        #expect(try await office.engine.sync().isComplete)
        let export = crew.server.directory.appendingPathComponent("export.json")
        _ = try office.store.exportBundle(project: TestServer.projectA, format: .json, to: export)
        // The office deletes two of them; the device syncs after one delete and before the other.
        #expect(try await office.store.delete(.issue, id: unseen.id))
        #expect(try await office.engine.sync().isComplete)
        #expect(try await device.engine.sync().isComplete)
        #expect(try await office.store.delete(.issue, id: doomed.id))
        #expect(try await office.engine.sync().isComplete)
        #expect(try await device.engine.sync().isComplete)

        // The export, edited: every version raised to the largest, one title changed.
        let forged = crew.server.directory.appendingPathComponent("forged.json")
        try Self.raiseVersions(of: export, to: forged, retitling: kept.id)
        let summary = try device.store.importBundle(at: forged)
        #expect(summary.byEntity["issue"]?.skippedOutdated == 3, "the versions the server gave stand")
        #expect(try device.store.record(.issue, id: kept.id)?.fields["title"] == .text("Loose rail"))
        for id in [doomed.id, unseen.id] {
            #expect(try device.store.record(.issue, id: id)?.sync.isDeleted ?? true)
        }
        // A device that takes the forged copy before its first sync (a pre-sync) holds it only until
        // the pull: the server's copies replace every one of them, deletes included.
        let presynced = try crew.device("presynced")
        #expect(try presynced.store.importBundle(at: forged).byEntity["issue"]?.inserted == 3)
        #expect(try presynced.store.record(.issue, id: kept.id)?.fields["title"] == .text("Forged"))
        #expect(try await presynced.engine.sync().isComplete)
        #expect(try presynced.store.record(.issue, id: kept.id)?.fields["title"] == .text("Loose rail"))
        #expect(try presynced.store.record(.issue, id: kept.id)?.sync.version == (try await crew.onServer(kept.id))?.version)

        // The office's next edit reaches the device, and the device's version is the server's again.
        var edited = try #require(try office.store.fetch(OutpostModels.Issue.self, id: kept.id))
        edited.title = "Loose rail, north stairs"
        _ = try await office.store.save(edited)
        #expect(try await office.engine.sync().isComplete)
        #expect(try await device.engine.sync().isComplete)
        #expect(try await presynced.engine.sync().isComplete)
        let server = try #require(try await crew.onServer(kept.id))
        for store in [device.store, presynced.store] {
            let held = try #require(try store.record(.issue, id: kept.id))
            #expect(held.fields["title"] == .text("Loose rail, north stairs"))
            #expect(held.sync.version == server.version)
        }
        for store in [device.store, presynced.store] {
            for id in [doomed.id, unseen.id] { #expect(try store.record(.issue, id: id)?.sync.isDeleted ?? true) }
        }

        // And an edit made on the device afterwards goes to the server.
        var mine = try #require(try device.store.fetch(OutpostModels.Issue.self, id: kept.id))
        mine.title = "Loose rail, fixed"
        _ = try await device.store.save(mine)
        #expect(try await device.engine.sync().isComplete)
        #expect(try await crew.onServer(kept.id)?.fields["title"] == .text("Loose rail, fixed"))
    }

    /// The same edited bundle, taken before a first sync, and an edit made on it: its base is the
    /// bundle's raised version, which made the change look based on everything the server took, and a
    /// role-based strategy let it overwrite the office's concurrent write unseen. Under every strategy
    /// the office's write stands or is surfaced on the device.
    @Test("An edit made on a copy with raised versions is judged concurrent: the office's write stands or is surfaced", arguments: ConflictPolicyName.allCases)
    func anEditOnARaisedVersionIsConcurrent(_ strategy: ConflictPolicyName) async throws {
        let crew = try await Crew.start(ConflictPolicy(overriding: [.issue: ConflictStrategy(strategy)]))
        defer { Task { await crew.stop() } }
        let (office, crewDevice, issue) = try await Self.crewEditsAPreSyncedCopy(
            in: crew, raised: true, officeEdit: { $0.title = "Office title" })
        _ = try await crewDevice.engine.sync()
        let server = try #require(try await crew.onServer(issue.id))
        // (Append only refuses the office's own edit, and surfaces it there.)
        let surfaced = try [crewDevice.store, office.store].contains { store in
            try store.openConflicts().contains { $0.losingValue == .text("Office title") }
        }
        #expect(server.fields["title"] == .text("Office title") || surfaced, "\(strategy): the office's title vanished unseen")
        #expect(try crewDevice.store.record(.issue, id: issue.id)?.sync.version == server.version)
    }

    /// An edit over a value the user saw in a pre-sync copy, merged with an office edit of another field:
    /// the copy's value that the edit replaced is no loss to surface (an attack found a conflict listed
    /// for it after every such edit, noise that buries real ones). Whether or not the copy was edited.
    @Test("An edit over a value seen in a pre-sync copy is no conflict when the office changed another field", arguments: [false, true])
    func anEditOverAPreSyncedValueSurfacesNothing(raised: Bool) async throws {
        let crew = try await Crew.start()
        defer { Task { await crew.stop() } }
        let (_, crewDevice, issue) = try await Self.crewEditsAPreSyncedCopy(
            in: crew, raised: raised, officeEdit: { $0.status = .inProgress })
        #expect(try await crewDevice.engine.sync().isComplete)
        let server = try #require(try await crew.onServer(issue.id))
        #expect(server.fields["title"] == .text("Crew title"))
        #expect(server.fields["status"] == .text("inProgress"))
        let conflicts = try crewDevice.store.openConflicts()
        #expect(conflicts.isEmpty, "\(conflicts)")
    }

    /// The office makes an issue, exports its project (with every version raised when `raised`), then
    /// edits the issue by `officeEdit` and syncs; a new crew device imports the export before its first
    /// sync, retitles the issue "Crew title" and syncs once.
    static func crewEditsAPreSyncedCopy(
        in crew: Crew, raised: Bool, officeEdit: (inout OutpostModels.Issue) -> Void
    ) async throws -> (office: (store: LocalStore, engine: SyncEngine), crew: (store: LocalStore, engine: SyncEngine), issue: OutpostModels.Issue) {
        let office = try crew.device("office", token: TestServer.carolToken)
        let issue = try await office.store.save(OutpostModels.Issue(projectID: TestServer.projectA, title: "Loose rail"))
        #expect(try await office.engine.sync().isComplete)
        let export = crew.server.directory.appendingPathComponent("export.json")
        _ = try office.store.exportBundle(project: TestServer.projectA, format: .json, to: export)
        if raised { try raiseVersions(of: export, to: export) }
        var edited = try #require(try office.store.fetch(OutpostModels.Issue.self, id: issue.id))
        officeEdit(&edited)
        _ = try await office.store.save(edited)
        #expect(try await office.engine.sync().isComplete)
        let device = try crew.device("crew")
        _ = try device.store.importBundle(at: export)
        var mine = try #require(try device.store.fetch(OutpostModels.Issue.self, id: issue.id))
        mine.title = "Crew title"
        _ = try await device.store.save(mine)
        _ = try await device.engine.sync()
        return (office, device, issue)
    }

    /// Writes `bundle` (JSON) to `destination` with every record's version raised to the largest there
    /// is, as an attacker edits a file; the title of `retitled`, if given, becomes "Forged".
    static func raiseVersions(of bundle: URL, to destination: URL, retitling retitled: UUID? = nil) throws {
        var document = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: bundle)) as? [String: Any])
        document["records"] = try #require(document["records"] as? [[String: Any]]).map { record in
            var raised = record
            raised["version"] = Int64.max
            if (record["id"] as? String) == retitled?.uuidString.lowercased(), var fields = record["fields"] as? [String: Any] {
                fields["title"] = "Forged"
                raised["fields"] = fields
            }
            return raised
        }
        try JSONSerialization.data(withJSONObject: document).write(to: destination)
    }
}

extension DeletesAndRevivalsTests {
    /// Attack 51's low finding: a crew member's device edits the foreman's daily log offline while the
    /// foreman deletes it. The server refuses the edit (crew writes only their own logs) before it
    /// compares versions, so no conflict answer brings the tombstone to merge: the device ends with the
    /// log deleted, the refused edit listed as failed, and no conflict saying the foreman's delete lost.
    @Test("A refused edit of a teammate's log deleted meanwhile leaves it deleted, with no conflict saying the delete lost")
    func aRefusedEditOfADeletedLogSurfacesNoLostDelete() async throws {
        let crew = try await Crew.start()
        defer { Task { await crew.stop() } }
        _ = try await crew.server.server.addMember(.init(userID: TestServer.bob, name: "Bob", role: "crew", projects: [TestServer.projectA]))
        let aliceInA = try await crew.server.server.memberRecordID(project: TestServer.projectA, user: TestServer.alice)
        let foreman = try crew.device("alice")
        let bob = try crew.device("bob", token: TestServer.bobToken)
        let log = try await foreman.store.save(
            DailyLog(projectID: TestServer.projectA, authorID: aliceInA, day: "2026-11-30", notes: "poured the east footing"))
        #expect(try await foreman.engine.sync().isComplete)
        #expect(try await bob.engine.sync().isComplete)

        var edited = try #require(try bob.store.fetch(DailyLog.self, id: log.id))
        edited.notes = "poured the east footing, and the west"
        try await bob.store.save(edited)
        #expect(try await foreman.store.delete(.dailyLog, id: log.id))
        #expect(try await foreman.engine.sync().isComplete)

        let report = try await bob.engine.sync()
        #expect(report.failed == 1 && report.conflictsSurfaced == 0, "\(report)")
        let held = try #require(try bob.store.record(.dailyLog, id: log.id))
        #expect(held.sync.isDeleted, "the foreman's delete stands on the crew's device too")
        let conflicts = try bob.store.openConflicts()
        #expect(conflicts.isEmpty, "\(conflicts)")
        #expect(try bob.store.unsentChanges().map(\.status) == [.failed], "the refused edit stays listed for its user")
        #expect(try await crew.onServer(log.id)?.deletion != nil)
    }
}

extension DeletesAndRevivalsTests {
    /// Attack 132, finding 6: a device deletes an issue, then restores it with an edit; the office
    /// deletes it too before the device syncs. Whatever settles the merge, the fields the restore only
    /// carried (sent so the server had a value newer than the delete for each, never touched by its
    /// user) are not conflicts: the device listed five "—" against "—" for them beside its real edit
    /// (append only). The edit itself, when it lost, is still surfaced.
    ///
    /// A restore with no edit has no value of its user's to surface: the restore itself is listed, once
    /// (`OpenConflict.Kind.restore`), and overriding it brings the record back to the server. It went
    /// unlisted under every strategy but append only, which listed each field it only carried instead.
    @Test("A restore that meets another delete surfaces what its user wrote, or the restore, never the fields it carried", arguments: ConflictPolicyName.allCases)
    func aRestoreMeetingAnotherDeleteSurfacesOnlyItsUsersFields(_ strategy: ConflictPolicyName) async throws {
        for edits in [true, false] {
            let crew = try await Crew.start(ConflictPolicy(overriding: [.issue: ConflictStrategy(strategy)]))
            let office = try crew.device("office", token: TestServer.carolToken)
            let device = try crew.device("device")
            let issue = try await office.store.save(OutpostModels.Issue(projectID: TestServer.projectA, title: "Loose rail"))
            #expect(try await office.engine.sync().isComplete)
            #expect(try await device.engine.sync().isComplete)

            #expect(try await device.store.delete(.issue, id: issue.id))
            var restored = try #require(try device.store.fetch(OutpostModels.Issue.self, id: issue.id))
            #expect(restored.sync.isDeleted)
            if edits { restored.status = .inProgress }
            try await device.store.save(restored)
            try await Task.sleep(for: .milliseconds(20))
            #expect(try await office.store.delete(.issue, id: issue.id))
            #expect(try await office.engine.sync().isComplete)
            for _ in 0..<2 { #expect(try await device.engine.sync().isComplete) }

            let surfaced = try device.store.openConflicts().filter { $0.recordID == issue.id }
            let carried = surfaced.filter { $0.field != nil && $0.field != "status" }
            #expect(carried.isEmpty, "\(strategy), edit \(edits): fields nobody edited listed as conflicts: \(carried)")
            let server = try #require(try await crew.onServer(issue.id))
            let held = try #require(try device.store.record(.issue, id: issue.id))
            #expect(held.sync.isDeleted == server.isDeleted, "\(strategy), edit \(edits): the device and the server disagree")
            if server.isDeleted, edits {
                #expect(surfaced.map(\.kind) == [.value], "\(strategy): \(surfaced)")
                #expect(surfaced.contains { $0.field == "status" && $0.losingValue == .text("inProgress") }, "\(strategy): \(surfaced)")
            } else if server.isDeleted {
                #expect(surfaced.map(\.kind) == [.restore] && surfaced.first?.losingSide == .client, "\(strategy): \(surfaced)")
                // Overriding it brings the record back, on the device and then on the server (append only
                // refuses any write to a deleted record: there it is listed again, as a restore).
                if let lost = surfaced.first {
                    try await device.store.resolveConflict(lost.id, choice: .override)
                    #expect(try device.store.record(.issue, id: issue.id)?.sync.isDeleted == false, "\(strategy)")
                    #expect(try await device.engine.sync().isComplete)
                    let after = try #require(try await crew.onServer(issue.id))
                    #expect(after.isDeleted == (strategy == .appendOnly), "\(strategy): \(after)")
                }
            }
            await crew.stop()
        }
    }

    /// Attack 133, finding 1: a device deletes an issue offline, then restores it with an edit; a teammate's
    /// edit reached the server first. Whatever the strategy, the device's own later restore superseded its
    /// delete: the record stays live on the server. Under server wins and manual, the merge dropped the
    /// restore's losing fields, and the delete queued before it, no longer followed by a write, went out
    /// alone on the server's version and was applied: the teammate's edit vanished under a delete, while
    /// the device showed the record live and nobody was told. (Append only refuses edits, the teammate's
    /// and the restore, and takes deletes: there the delete stands, everywhere alike.)
    @Test("A delete its own device then undid never reaches the server, whatever the strategy", arguments: ConflictPolicyName.allCases)
    func aDeleteUndoneOnItsDeviceNeverReachesTheServer(_ strategy: ConflictPolicyName) async throws {
        let (crew, a, b, issue) = try await Crew.twoDevicesHoldingAnIssue(strategy)
        defer { Task { await crew.stop() } }

        var renamed = try #require(try a.store.fetch(OutpostModels.Issue.self, id: issue.id))
        renamed.title = "Loose rail, north stairs"
        _ = try await a.store.save(renamed)
        #expect(try await a.engine.sync().isComplete)
        #expect(try await b.store.delete(.issue, id: issue.id))
        var restored = try #require(try b.store.fetch(OutpostModels.Issue.self, id: issue.id))
        restored.details = "bolts sheared"
        _ = try await b.store.save(restored)
        for device in [b, a, b] { #expect(try await device.engine.sync().isComplete) }

        // Append only takes deletes and refuses edits: A's rename was refused, B's delete went out before
        // its restore (one push, nothing to merge), and the restore, an edit, was refused and listed.
        let server = try #require(try await crew.onServer(issue.id))
        #expect(!server.isDeleted || strategy == .appendOnly, "\(strategy): the delete B undid reached the server")
        for device in [a, b] {
            let held = try #require(try device.store.record(.issue, id: issue.id))
            #expect(held.sync.isDeleted == server.isDeleted, "\(strategy): \(held) against \(server)")
            #expect(server.isDeleted || held.fields == server.fields, "\(strategy): \(held) against \(server)")
            #expect(try device.store.unsentChanges().isEmpty, "\(strategy)")
        }
        // B's edit stands, or is listed on B as the value that lost.
        let surfaced = try b.store.openConflicts().filter { $0.recordID == issue.id }
        #expect(server.fields["details"] == .text("bolts sheared")
            || surfaced.contains { $0.field == "details" && $0.losingValue == .text("bolts sheared") }, "\(strategy): \(surfaced)")
    }

    /// Review 138 of attack 133 F1's fix: on A, another task deletes an issue while a screen holds a copy
    /// read before, and its user then saves that copy edited (a write that brings the record back from a
    /// delete its user never saw); a teammate's edit reaches the server first. Wherever the record ends
    /// live, the delete did not stand and its user never saw it undone: it is listed on A, once. Under
    /// server wins and manual the merge dropped the stale write's values and the delete then went
    /// without a trace.
    @Test("A device's own unsent delete undone by a stale copy is listed once wherever the record ends live", arguments: ConflictPolicyName.allCases)
    func anOwnUnsentDeleteUndoneByAStaleCopyIsListedOnce(_ strategy: ConflictPolicyName) async throws {
        let (crew, a, b, issue) = try await Crew.twoDevicesHoldingAnIssue(strategy)
        defer { Task { await crew.stop() } }
        var renamed = try #require(try b.store.fetch(OutpostModels.Issue.self, id: issue.id))
        renamed.title = "Loose rail, north stairs"
        _ = try await b.store.save(renamed)
        #expect(try await b.engine.sync().isComplete)

        var screen = try #require(try a.store.fetch(OutpostModels.Issue.self, id: issue.id))
        #expect(try await a.store.delete(.issue, id: issue.id))
        screen.details = "bolts sheared"
        _ = try await a.store.save(screen)
        for device in [a, b, a] { #expect(try await device.engine.sync().isComplete) }

        let server = try #require(try await crew.onServer(issue.id))
        let held = try #require(try a.store.record(.issue, id: issue.id))
        #expect(held.sync.isDeleted == server.isDeleted, "\(strategy)")
        let deletes = try a.store.openConflicts().filter { $0.recordID == issue.id && $0.field == nil }
        if !server.isDeleted {
            #expect(deletes.count == 1 && deletes.first?.losingSide == .client, "\(strategy): \(deletes)")
        }
    }

    /// Attack 133, finding 4: B deletes an issue and syncs, then restores it raising its priority and
    /// syncs; A, on its copy from before the delete, deletes the issue and syncs. Where A's delete wins,
    /// what it hid from A is B's priority, nothing else: A listed a conflict for every field (the restore
    /// stamped them all anew), five of them "—" against "—". A server value the device holds the same is
    /// no conflict: the device saw it when it deleted (or wrote over) the record.
    @Test("A delete that wins over a restore lists only the values the restore changed", arguments: ConflictPolicyName.allCases)
    func aDeleteWinningOverARestoreListsOnlyWhatTheRestoreChanged(_ strategy: ConflictPolicyName) async throws {
        let (crew, a, b, issue) = try await Crew.twoDevicesHoldingAnIssue(strategy)
        defer { Task { await crew.stop() } }

        #expect(try await b.store.delete(.issue, id: issue.id))
        #expect(try await b.engine.sync().isComplete)
        var restored = try #require(try b.store.fetch(OutpostModels.Issue.self, id: issue.id))
        restored.priority = .high
        _ = try await b.store.save(restored)
        #expect(try await b.engine.sync().isComplete)
        try await Task.sleep(for: .milliseconds(20))
        #expect(try await a.store.delete(.issue, id: issue.id))
        for device in [a, b, a] { #expect(try await device.engine.sync().isComplete) }

        let listed = try a.store.openConflicts().filter { $0.recordID == issue.id && $0.field != nil }
        #expect(listed.allSatisfy { $0.field == "priority" }, "\(strategy): \(listed.map { "\($0.field ?? "") \($0.localValue.map { "\($0)" } ?? "—") / \($0.remoteValue.map { "\($0)" } ?? "—")" })")
        let server = try #require(try await crew.onServer(issue.id))
        if server.isDeleted, strategy != .appendOnly {
            #expect(listed.contains { $0.field == "priority" && $0.losingValue == .text("high") }, "\(strategy): the restore's priority went unlisted")
        }
    }

    /// Attack 52's unconfirmed low finding, with the real store: a device deletes an issue offline, the
    /// office edits it later, the device's sync surfaces its delete as lost and keeps the record; an
    /// edit made on the device then goes out once. Nothing stays queued, nothing fails, and the lost
    /// delete is surfaced once.
    @Test("A device's delete that lost to a newer edit finishes once surfaced, and a later edit goes out", arguments: ConflictPolicyName.allCases)
    func aLostDeleteFinishesOnceSurfaced(_ strategy: ConflictPolicyName) async throws {
        let crew = try await Crew.start(ConflictPolicy(overriding: [.issue: ConflictStrategy(strategy)]))
        defer { Task { await crew.stop() } }
        let office = try crew.device("office", token: TestServer.carolToken)
        let device = try crew.device("device")
        var issue = try await office.store.save(OutpostModels.Issue(projectID: TestServer.projectA, title: "Loose rail"))
        #expect(try await office.engine.sync().isComplete)
        #expect(try await device.engine.sync().isComplete)

        #expect(try await device.store.delete(.issue, id: issue.id))
        try await Task.sleep(for: .milliseconds(20))
        issue = try #require(try office.store.fetch(OutpostModels.Issue.self, id: issue.id))
        issue.title = "Loose rail, stairs"
        try await office.store.save(issue)
        #expect(try await office.engine.sync().isComplete)

        let first = try await device.engine.sync()
        #expect(first.failed == 0, "\(first)")
        if let held = try device.store.fetch(OutpostModels.Issue.self, id: issue.id), !held.sync.isDeleted {
            var edited = held
            edited.status = .inProgress
            try await device.store.save(edited)
            let second = try await device.engine.sync()
            #expect(second.failed == 0 && second.pushed == 1, "\(strategy): \(second)")
        }
        let unsent = try device.store.unsentChanges()
        #expect(unsent.isEmpty, "\(strategy): \(unsent)")
        let again = try await device.engine.sync()
        #expect(again.pushed == 0 && again.failed == 0 && again.conflictsSurfaced == 0, "\(strategy): \(again)")
    }
}

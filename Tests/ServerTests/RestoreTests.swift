@testable import OutpostServer
import Foundation
import GRDB
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

/// A server restored from a backup: every device ends with what a fresh device would hold, plus its
/// own writes the server lost, sent again (issue 39, finding 9). Each backend is backed up and restored
/// the way its operator would: `SyncServer.backUp` (the `outpost admin backup` command) and a file
/// copy for SQLite, `pg_dump` and `pg_restore` for PostgreSQL.
@Suite("A restored server: devices notice and rebuild, nothing lost", .fieldService)
struct RestoreTests {
    /// A backup of a running server, and its restore while the server is stopped.
    struct Backup {
        let server: TestServer
        let file: URL

        static func take(of server: TestServer) async throws -> Backup {
            let file = server.directory.appendingPathComponent("backup-\(UUID().uuidString)")
            if let postgres = server.postgres {
                try await Self.run("pg_dump", ["--format=custom", "--file=\(file.path)", postgres.url])
            } else {
                try await server.server.backUp(to: file.path)
            }
            return Backup(server: server, file: file)
        }

        /// Stops the server, puts the backup in place, starts it again.
        func restore() async throws -> TestServer {
            try await server.restarted {
                if let postgres = server.postgres {
                    try await Self.run("pg_restore", ["--clean", "--if-exists", "--single-transaction", "--dbname=\(postgres.url)", file.path])
                } else {
                    let database = server.databasePath
                    for suffix in ["-wal", "-shm"] { try? FileManager.default.removeItem(atPath: database + suffix) }
                    try FileManager.default.removeItem(atPath: database)
                    try FileManager.default.copyItem(atPath: file.path, toPath: database)
                }
            }
        }

        /// Runs a PostgreSQL client tool of the installed cluster's version.
        static func run(_ tool: String, _ arguments: [String]) async throws {
            let folders = (try? FileManager.default.contentsOfDirectory(atPath: "/usr/lib/postgresql")) ?? []
            guard let version = folders.sorted(by: { $0.compare($1, options: .numeric) == .orderedAscending }).last else {
                throw CancellationError()
            }
            // Not Foundation's Process: see SpawnedProgram. A lock wait of its own, as the server's sessions
            // have: with none, a restore waiting on a lock a session kept waits for ever, not fails.
            var environment = ProcessInfo.processInfo.environment
            environment["PGOPTIONS"] = "-c lock_timeout=60s"
            let finished = try await SpawnedProgram.run(
                "/usr/lib/postgresql/\(version)/bin/\(tool)", arguments: arguments, environment: environment)
            guard finished.status == 0, !finished.signaled else {
                throw ServerError(.databaseFailure, message: "\(tool): \(String(decoding: finished.errors, as: UTF8.self))")
            }
        }
    }

    /// Every live issue a store holds, by id: title and details.
    static func issues(in store: LocalStore, project: UUID = TestServer.projectA) throws -> [UUID: String] {
        let issues = try store.fetchAll(OutpostModels.Issue.self, where: "projectID", equals: .uuid(project))
        return Dictionary(uniqueKeysWithValues: issues.map { ($0.id, "\($0.title) / \($0.details)") })
    }

    @Test("Back up, push 5, sync, restore, the office pushes 3: the device holds the 3 and its own 5 sent again, as a fresh device does", arguments: Backend.available)
    func aRestoredServerIsNoticedAndNothingIsLost(_ backend: Backend) async throws {
        var server = try await TestServer.start(backend)
        let folder = server.directory
        func device(_ name: String, token: String = TestServer.aliceToken) throws -> (LocalStore, SyncEngine) {
            let store = try LocalStore.open(at: folder.appendingPathComponent("\(name).sqlite").path)
            return (store, SyncEngine(store: store, transport: server.transport(token: token)))
        }
        let (crew, crewEngine) = try device("crew")
        let (office, officeEngine) = try device("office", token: TestServer.carolToken)
        let early = try await crew.save(OutpostModels.Issue(projectID: TestServer.projectA, title: "Rail loose"))
        let teammates = try await office.save(OutpostModels.Issue(projectID: TestServer.projectA, title: "Order tiles"))
        #expect(try await crewEngine.sync().isComplete)
        #expect(try await officeEngine.sync().isComplete)
        #expect(try await crewEngine.sync().isComplete)

        let backup = try await Backup.take(of: server)

        // After the backup: five new issues and an edit from the crew, and an issue the office adds and
        // the crew pulls. The restore loses all of it.
        var five: [UUID] = []
        for index in 1...5 {
            five.append(try await crew.save(OutpostModels.Issue(projectID: TestServer.projectA, title: "Crack \(index)")).id)
        }
        var edited = early
        edited.details = "Second floor, east stair"
        _ = try await crew.save(edited)
        let lostToTheCrew = try await office.save(OutpostModels.Issue(projectID: TestServer.projectA, title: "Lost on the server"))
        #expect(try await crewEngine.sync().isComplete)
        #expect(try await officeEngine.sync().isComplete)
        #expect(try await crewEngine.sync().isComplete)
        #expect(try Self.issues(in: crew)[lostToTheCrew.id] != nil)

        server = try await backup.restore()
        defer { Task { [server] in await server.stop() } }
        // The office's laptop is set up again after the restore; it pushes three issues.
        let (newOffice, newOfficeEngine) = try device("office-after", token: TestServer.carolToken)
        var three: [UUID] = []
        for index in 1...3 {
            three.append(try await newOffice.save(OutpostModels.Issue(projectID: TestServer.projectA, title: "Office \(index)")).id)
        }
        #expect(try await newOfficeEngine.sync().isComplete)

        let (crewAgain, crewAgainEngine) = (crew, SyncEngine(store: crew, transport: server.transport(token: TestServer.aliceToken)))
        let report = try await crewAgainEngine.sync()
        #expect(report.historyChanged, "the device noticed the restore")
        #expect(report.isComplete)
        #expect(report.rebuilt?.recreated == 5, "its five issues the server lost go again")
        #expect(report.rebuilt?.removed == 1, "the office's issue the server lost is gone, as on a fresh device")
        #expect(report.resent == 1, "its edit the server lost goes again")
        let held = try Self.issues(in: crewAgain)
        for id in three + five + [early.id, teammates.id] { #expect(held[id] != nil) }
        #expect(held[lostToTheCrew.id] == nil)
        #expect(held[early.id] == "Rail loose / Second floor, east stair")
        #expect(try crewAgain.status().pendingChanges == 0)
        let conflicts = try crewAgain.openConflicts()
        #expect(conflicts.isEmpty, "nothing changed concurrently: nothing to surface \(conflicts)")
        _ = try await crewAgainEngine.sync()
        #expect(try crewAgain.verifyAudit().isIntact)

        // A fresh device holds the same records, value for value.
        let (fresh, freshEngine) = try device("fresh")
        #expect(try await freshEngine.sync().isComplete)
        #expect(try Self.issues(in: fresh) == held)
        #expect(held.count == 10)
    }

    @Test("Restored mid-work: an edit beside a waiting one, a delete, a teammate's issue edited and commented on: every device ends as a fresh one plus its own writes", arguments: Backend.available)
    func restoredMidWorkEveryOwnWriteComesBack(_ backend: Backend) async throws {
        var server = try await TestServer.start(backend)
        let folder = server.directory
        func store(_ name: String) throws -> LocalStore {
            try LocalStore.open(at: folder.appendingPathComponent("\(name).sqlite").path)
        }
        func sync(_ store: LocalStore, token: String) async throws -> SyncReport {
            try await SyncEngine(store: store, transport: server.transport(token: token)).sync()
        }
        let crew = try store("crew"), office = try store("office")
        let aliceInA = try await server.server.memberRecordID(project: TestServer.projectA, user: TestServer.alice)
        var railing = try await crew.save(OutpostModels.Issue(projectID: TestServer.projectA, title: "Railing"))
        let drain = try await crew.save(OutpostModels.Issue(projectID: TestServer.projectA, title: "Drain"))
        #expect(try await sync(crew, token: TestServer.aliceToken).isComplete)
        #expect(try await sync(office, token: TestServer.carolToken).isComplete)
        let backup = try await Backup.take(of: server)

        // After the backup, all taken by the server: an edit, a delete, the office's new issue the crew
        // edits. Then, unsent: another edit of the first issue and a comment on the office's issue.
        railing.title = "Railing, east stair"
        railing = try await crew.save(railing)
        #expect(try await crew.delete(.issue, id: drain.id))
        let gate = try await office.save(OutpostModels.Issue(projectID: TestServer.projectA, title: "Gate"))
        #expect(try await sync(office, token: TestServer.carolToken).isComplete)
        #expect(try await sync(crew, token: TestServer.aliceToken).isComplete)
        var crewsGate = try #require(try crew.fetch(OutpostModels.Issue.self, id: gate.id))
        crewsGate.details = "Hinge bent"
        _ = try await crew.save(crewsGate)
        #expect(try await sync(crew, token: TestServer.aliceToken).isComplete)
        railing.priority = .critical
        _ = try await crew.save(railing)
        let note = try await crew.save(OutpostModels.Comment(issueID: gate.id, authorID: aliceInA, body: "Ordered a hinge"))

        server = try await backup.restore()
        defer { Task { [server] in await server.stop() } }
        // The crew's device notices first (it re-creates the office's issue for its comment), then the office's.
        let crewReport = try await sync(crew, token: TestServer.aliceToken)
        #expect(crewReport.historyChanged)
        #expect(try await sync(office, token: TestServer.carolToken).historyChanged)
        for _ in 0..<2 {
            #expect(try await sync(crew, token: TestServer.aliceToken).isComplete)
            #expect(try await sync(office, token: TestServer.carolToken).isComplete)
        }
        for device in [crew, office] {
            #expect(try device.status().pendingChanges == 0)
            #expect(try device.mutations(status: .failed).isEmpty)
        }
        let held = try Self.issues(in: crew)
        #expect(held[railing.id] == "Railing, east stair / ", "the title taken before the restore and lost by it came back")
        #expect(try crew.fetch(OutpostModels.Issue.self, id: railing.id)?.priority == .critical)
        #expect(held[drain.id] == nil, "the delete stands")
        #expect(held[gate.id] == "Gate / Hinge bent")
        #expect(try crew.fetch(OutpostModels.Comment.self, id: note.id)?.body == "Ordered a hinge")
        let fresh = try store("fresh")
        #expect(try await sync(fresh, token: TestServer.carolToken).isComplete)
        #expect(try Self.issues(in: fresh) == held)
        #expect(try Self.issues(in: office) == held)
        #expect(try fresh.fetch(OutpostModels.Comment.self, id: note.id) != nil)
        #expect(try fresh.record(.issue, id: drain.id)?.sync.isDeleted ?? true)
        let conflicts = try crew.openConflicts()
        #expect(conflicts.isEmpty, "nothing changed concurrently: \(conflicts)")
    }

    /// A project a member made from their device after the backup, which a teammate's device holds: the
    /// teammate's rebuild keeps it without sending it, and it comes back as its author's. Sent again as the
    /// parent of the teammate's issue, it was that teammate's create on the restored server, so they owned
    /// it and its real owner was locked out: whichever device synced first took the project (attack 86, F2).
    /// The teammate's issue waits, kept, until the project and their membership are back.
    @Test("A teammate's project the server lost comes back as its author's, never as the first device's to sync", arguments: Backend.available)
    func aLostProjectComesBackAsItsAuthors(_ backend: Backend) async throws {
        var server = try await TestServer.start(backend)
        let folder = server.directory
        let bob = try LocalStore.open(at: folder.appendingPathComponent("bob.sqlite").path)
        let alice = try LocalStore.open(at: folder.appendingPathComponent("alice.sqlite").path)
        func sync(_ store: LocalStore, _ token: String) async throws -> SyncReport {
            try await SyncEngine(store: store, transport: server.transport(token: token)).sync()
        }
        let backup = try await Backup.take(of: server)
        let project = try await bob.save(OutpostModels.Project(name: "Birch Lane"))
        #expect(try await sync(bob, TestServer.bobToken).isComplete)
        #expect(try await server.server.members(of: project.id).map(\.role) == ["owner"])
        _ = try await server.server.addMember(TestServer.alice, to: project.id, role: "crew", by: "test operator")
        _ = try await server.server.addMember(TestServer.carol, to: project.id, role: "projectManager", by: "test operator")
        #expect(try await sync(alice, TestServer.aliceToken).isComplete)
        let issue = try await alice.save(OutpostModels.Issue(projectID: project.id, title: "Gate sticks"))
        #expect(try await sync(alice, TestServer.aliceToken).isComplete)
        // Carol, an office member, renames it offline: an edit of hers, not her project (attack 87, 1).
        let carol = try LocalStore.open(at: folder.appendingPathComponent("carol.sqlite").path)
        #expect(try await sync(carol, TestServer.carolToken).isComplete)
        var renamed = try #require(try carol.fetch(OutpostModels.Project.self, id: project.id))
        renamed.name = "Birch Lane, phase 2"
        _ = try await carol.save(renamed)

        server = try await backup.restore()
        defer { Task { [server] in await server.stop() } }
        let first = try await sync(alice, TestServer.aliceToken)
        #expect(first.historyChanged)
        #expect(try await server.server.members(of: project.id).isEmpty, "no one owns the project the server lost")
        // Kept, not lost: the project and the issue, which waits.
        #expect(try alice.record(.project, id: project.id) != nil)
        #expect(try Self.issues(in: alice, project: project.id)[issue.id] != nil)
        #expect(try alice.unsentChanges().map(\.recordID) == [issue.id])
        _ = try await sync(carol, TestServer.carolToken)
        #expect(try await server.server.members(of: project.id).isEmpty, "nor does the member who renamed it")
        #expect(try carol.unsentChanges().map(\.recordID) == [project.id], "her rename waits")

        // Bob's device sends his project again: his, with him its owner. The office adds Alice back, and her
        // issue, retried, lands.
        #expect(try await sync(bob, TestServer.bobToken).historyChanged)
        #expect(try await server.server.members(of: project.id).map { [$0.userID: $0.role] } == [[TestServer.bob: "owner"]])
        _ = try await server.server.addMember(TestServer.alice, to: project.id, role: "crew", by: "test operator")
        _ = try await server.server.addMember(TestServer.carol, to: project.id, role: "projectManager", by: "test operator")
        _ = try alice.retryFailedMutations()
        _ = try carol.retryFailedMutations()
        #expect(try await sync(alice, TestServer.aliceToken).isComplete)
        #expect(try alice.unsentChanges().isEmpty)
        #expect(try await sync(carol, TestServer.carolToken).isComplete)
        #expect(try carol.unsentChanges().isEmpty)
        #expect(try await sync(bob, TestServer.bobToken).isComplete)
        #expect(try Self.issues(in: bob, project: project.id)[issue.id] != nil)
        #expect(try bob.fetch(OutpostModels.Project.self, id: project.id)?.name == "Birch Lane, phase 2", "her rename landed")
        #expect(try await server.server.members(of: project.id).first { $0.userID == TestServer.bob }?.role == "owner")
    }

    @Test("A change the server refused stays one failed change through a restore", arguments: Backend.available)
    func aRefusedChangeStaysOneThroughARestore(_ backend: Backend) async throws {
        var server = try await TestServer.start(backend)
        let store = try LocalStore.open(at: server.directory.appendingPathComponent("bob.sqlite").path)
        let discount = try await store.save(
            OutpostModels.Discount(projectID: TestServer.projectB, name: "Friends", kind: .percentage, value: 500))
        #expect(try await SyncEngine(store: store, transport: server.transport(token: TestServer.bobToken)).sync().failed == 1)
        let backup = try await Backup.take(of: server)
        // Carol's issue in Bob's project, which his device pulls, is lost by the restore.
        _ = try await server.transport(token: TestServer.carolToken).push(
            PushRequest(mutations: [Sample.create(.issue, fields: Sample.issueFields(project: TestServer.projectB))]))
        _ = try await SyncEngine(store: store, transport: server.transport(token: TestServer.bobToken)).sync()
        server = try await backup.restore()
        defer { Task { [server] in await server.stop() } }
        let report = try await SyncEngine(store: store, transport: server.transport(token: TestServer.bobToken)).sync()
        #expect(report.historyChanged)
        let failed = try store.mutations(status: .failed)
        #expect(failed.map(\.recordID) == [discount.id], "\(failed)")
        #expect(try store.unsentChanges().count == 1)
    }

    @Test("The checkpoint names the caller's own changes: other projects' writes never move it", arguments: Backend.available)
    func theCheckpointTellsNothingOfOtherProjects(_ backend: Backend) async throws {
        let server = try await TestServer.start(backend)
        defer { Task { await server.stop() } }
        let alice = server.transport(token: TestServer.aliceToken), bob = server.transport(token: TestServer.bobToken)
        _ = try await bob.push(PushRequest(mutations: [Sample.create(.issue, fields: Sample.issueFields(project: TestServer.projectB))]))
        let first = try await bob.pull(PullRequest(cursor: nil, limit: 100))
        let checkpoint = try #require(first.checkpoint)
        var newest: Int64 = 0
        for _ in 0..<3 {
            let answer = try await alice.push(
                PushRequest(mutations: [Sample.create(.issue, fields: Sample.issueFields(project: TestServer.projectA))]))
            #expect(answer.checkpoint != checkpoint, "Alice is told of her own change")
            newest = try #require(answer.results.first?.sequence)
        }
        let again = try await bob.pull(PullRequest(cursor: first.nextCursor, limit: 100, checkpoint: checkpoint))
        #expect(again.changes.isEmpty)
        #expect(again.checkpoint == checkpoint, "nothing Bob may see changed, so nothing he is told changed")
        // Nor does a cursor Bob makes up: at, below or past the server's newest change, the answer is the
        // same. (It once named the cursor's position when the history held it and nothing past it: some
        // forty pulls found the newest change of the whole server, Alice's writes included, and the answer
        // named a change of hers; attack finding 1 of stop 50.) Past Bob's own checkpoint an unsealed
        // cursor is refused, whatever the server's newest change (`CursorSeal`).
        for sent in [checkpoint, nil] as [String?] {
            var answers: Set<String> = []
            for position in [newest - 1, newest, newest + 1, newest + 1_000] {
                do {
                    let forged = try await bob.pull(PullRequest(
                        cursor: "\(position):\(TestServer.projectB.storageText)", limit: 100, checkpoint: sent))
                    #expect(forged.changes.isEmpty)
                    answers.insert(forged.checkpoint ?? "none")
                } catch {
                    answers.insert("refused \(error.status ?? 0) \(error.serverCode?.rawValue ?? "")")
                }
            }
            #expect(answers == ["refused 409 unknown_cursor"], "\(answers)")
        }
        let fresh = try await bob.pull(PullRequest(cursor: nil, limit: 100))
        #expect(fresh.checkpoint == checkpoint)
        // A push that applies nothing tells nothing either.
        let refused = try await bob.push(PushRequest(
            mutations: [Sample.create(.issue, fields: Sample.issueFields(project: TestServer.projectA))], checkpoint: checkpoint))
        #expect(refused.checkpoint == checkpoint)
        // A commit that wrote Bob's change and others' he may not see: his checkpoint holds only for his
        // change's own sequence, so trying the commit's other sequences tells him nothing of theirs.
        let batch = try await server.transport(token: TestServer.carolToken).push(PushRequest(mutations: [
            Sample.create(.issue, fields: Sample.issueFields(project: TestServer.projectB)),
        ] + (0..<5).map { _ in Sample.create(.issue, fields: Sample.issueFields(project: TestServer.projectA)) }))
        #expect(batch.results.allSatisfy { $0.outcome.appliedVersion == 1 })
        let shared = try #require(try await bob.pull(PullRequest(cursor: first.nextCursor, limit: 100, checkpoint: checkpoint)).checkpoint)
        let sharedParts = shared.split(separator: ".")
        let sharedSequence = try #require(Int64(sharedParts[0]))
        for other in (sharedSequence + 1)...(sharedSequence + 5) {
            let error = try await #require(throws: TransportError.self) {
                _ = try await bob.pull(PullRequest(cursor: nil, limit: 1, checkpoint: "\(other).\(sharedParts[1])"))
            }
            #expect(error.status == 409, "sequence \(other) of the same commit")
        }
        // Only text the server writes is taken. (A mark of digits alone reads the same in capitals: one
        // in about 1,850 runs made that case the valid checkpoint itself, and the test failed.)
        let sequence = try #require(checkpoint.split(separator: ".").first)
        let mark = try #require(checkpoint.split(separator: ".").last)
        let capitals = mark.uppercased() == mark ? [] : ["\(sequence).\(mark.uppercased())"]
        for text in ["00\(sequence).\(mark)", "+\(sequence).\(mark)"] + capitals {
            let error = try await #require(throws: TransportError.self) {
                _ = try await bob.pull(PullRequest(cursor: nil, limit: 1, checkpoint: text))
            }
            #expect(error.status == 400, "\(text)")
        }
    }

    /// Second attack on issue 39: a bundle carried no checkpoint, so a device whose import took it past
    /// its checkpoint was not told of a restore that lost what the bundle brought. A bundle's header now
    /// carries the checkpoint of its snapshot, which the device asks the server to confirm.
    @Test("A bundle imported before a restore: the record the server lost is removed at the next sync", arguments: Backend.available)
    func aBundleImportedBeforeARestore(_ backend: Backend) async throws {
        var server = try await TestServer.start(backend)
        let office = server.transport(token: TestServer.carolToken)
        let kept = Sample.create(.issue, fields: Sample.issueFields(project: TestServer.projectA))
        _ = try await office.push(PushRequest(mutations: [kept]))
        let backup = try await Backup.take(of: server)
        let lost = Sample.create(.issue, fields: Sample.issueFields(project: TestServer.projectA))
        _ = try await office.push(PushRequest(mutations: [lost]))
        let bundle = server.directory.appendingPathComponent("presync.json")
        _ = try await server.transport(token: TestServer.aliceToken).downloadBundle(project: TestServer.projectA, format: .json, to: bundle)
        let store = try LocalStore.open(at: server.directory.appendingPathComponent("presynced.sqlite").path)
        _ = try store.importBundle(at: bundle)
        #expect(try store.importedCheckpoints().count == 1, "the bundle's checkpoint waits for the server")
        server = try await backup.restore()
        defer { Task { [server] in await server.stop() } }
        let report = try await SyncEngine(store: store, transport: server.transport(token: TestServer.aliceToken)).sync()
        #expect(report.isComplete && report.historyChanged)
        #expect(try store.record(.issue, id: lost.recordID) == nil, "a fresh device does not hold it")
        #expect(try store.record(.issue, id: kept.recordID) != nil)
        #expect(try store.importedCheckpoints().isEmpty)
    }

    /// The same with the order the device's own checkpoint cannot tell: the device syncs past the
    /// bundle, then imports it (or a teammate's export made from it); the restore lost what the bundle
    /// brought, and the device's own checkpoint, newer, still holds after the restore's new changes.
    @Test("An old bundle and a teammate's export imported after syncing past them still have their lost records removed",
          arguments: Backend.available)
    func anOldCopyImportedAfterSyncingPastIt(_ backend: Backend) async throws {
        var server = try await TestServer.start(backend)
        let office = server.transport(token: TestServer.carolToken)
        _ = try await office.push(PushRequest(mutations: [Sample.create(.issue, fields: Sample.issueFields(project: TestServer.projectA))]))
        let backup = try await Backup.take(of: server)
        let lost = Sample.create(.issue, fields: Sample.issueFields(project: TestServer.projectA))
        _ = try await office.push(PushRequest(mutations: [lost]))
        let alice = server.transport(token: TestServer.aliceToken)
        let bundle = server.directory.appendingPathComponent("presync.xml")
        _ = try await alice.downloadBundle(project: TestServer.projectA, format: .xml, to: bundle)
        // A teammate imports the bundle and exports it on, before any sync: the export carries the
        // bundle's checkpoint as well as the teammate's own (none yet).
        let teammate = try LocalStore.open(at: server.directory.appendingPathComponent("teammate.sqlite").path)
        _ = try teammate.importBundle(at: bundle)
        let export = server.directory.appendingPathComponent("teammate-export.json")
        try teammate.exportBundle(project: TestServer.projectA, format: .json, to: export)

        server = try await backup.restore()
        defer { Task { [server] in await server.stop() } }
        let restored = server.transport(token: TestServer.aliceToken)
        // The restored server takes more changes than it lost, so the device's own checkpoint, taken
        // after them, is one the restored history holds.
        for _ in 0..<3 {
            _ = try await server.transport(token: TestServer.carolToken)
                .push(PushRequest(mutations: [Sample.create(.issue, fields: Sample.issueFields(project: TestServer.projectA))]))
        }
        for (name, file) in [("bundle", bundle), ("export", export)] {
            let store = try LocalStore.open(at: server.directory.appendingPathComponent("\(name).sqlite").path)
            #expect(try await SyncEngine(store: store, transport: restored).sync().isComplete)
            _ = try store.importBundle(at: file)
            #expect(try store.record(.issue, id: lost.recordID) != nil, "\(name): imported as the copy has it")
            let report = try await SyncEngine(store: store, transport: restored).sync()
            #expect(report.isComplete && report.historyChanged, "\(name)")
            #expect(try store.record(.issue, id: lost.recordID) == nil, "\(name): a fresh device does not hold it")
            let fresh = try LocalStore.open(at: server.directory.appendingPathComponent("fresh-\(name).sqlite").path)
            _ = try await SyncEngine(store: fresh, transport: restored).sync()
            #expect(try Self.issues(in: store) == Self.issues(in: fresh), "\(name)")
        }
    }

    /// Attack 88, finding 1: a pre-synced device whose first sync brought nothing new was answered the
    /// checkpoint "0", its cursor standing at the bundle's position, and the bundle's checkpoint was
    /// forgotten once confirmed. A restore to before the bundle's newest record went unnoticed: the
    /// device kept the lost record, and the restored server's first new change, whose sequence the
    /// cursor had passed, never came. The family: the bundle pre-synced, imported as a file, or pre-synced
    /// with its first sync cut between the confirmation of the bundle's checkpoint and its first page
    /// (the restore then comes before any page: its position was left out and its record kept); changes
    /// between the bundle and the first sync (0 or 1; with none, two syncs that bring nothing), changes
    /// the restored server takes (0 or 2); each ends as a fresh device does.
    @Test("A pre-synced device whose syncs brought nothing new still notices a restore that lost what its bundle held",
          arguments: Backend.available)
    func aPresyncedDeviceNoticesARestoreWhenNothingCameSince(_ backend: Backend) async throws {
        // The device syncs the pre-synced project only, as `outpost presync` leaves it: a project it
        // reads from the beginning would move its checkpoint past the bundle's anyway.
        let only: Set<UUID> = [TestServer.projectA]
        let modes = ["pre-synced", "a file imported", "pre-synced, its first sync cut after the confirmation"]
        let cases = modes.flatMap { mode in [0, 1].flatMap { before in [0, 2].map { (mode, before, $0) } } }
        for (mode, before, after) in cases {
            let (fromServer, cut) = (mode != modes[1], mode == modes[2])
            let label = "\(mode), \(before) between the bundle and the first sync, \(after) after the restore"
            var server = try await TestServer.start(backend)
            func push(_ count: Int) async throws {
                for _ in 0..<count {
                    _ = try await server.transport(token: TestServer.carolToken)
                        .push(PushRequest(mutations: [Sample.create(.issue, fields: Sample.issueFields(project: TestServer.projectA))]))
                }
            }
            try await push(1)
            let backup = try await Backup.take(of: server)
            let lost = Sample.create(.issue, fields: Sample.issueFields(project: TestServer.projectA))
            _ = try await server.transport(token: TestServer.carolToken).push(PushRequest(mutations: [lost]))
            let bundle = server.directory.appendingPathComponent("presync.json")
            _ = try await server.transport(token: TestServer.aliceToken).downloadBundle(project: TestServer.projectA, format: .json, to: bundle)
            let store = try LocalStore.open(at: server.directory.appendingPathComponent("presynced.sqlite").path)
            _ = try store.importBundle(at: bundle, fromServer: fromServer, project: TestServer.projectA)
            try await push(before)
            if cut {
                for checkpoint in try store.importedCheckpoints() { try store.confirmImportedCheckpoint(checkpoint) }
            }
            for _ in 0..<(cut ? 0 : before == 0 ? 2 : 1) {
                let report = try await SyncEngine(
                    store: store, transport: server.transport(token: TestServer.aliceToken), projects: only).sync()
                #expect(report.isComplete && !report.historyChanged, "\(label)")
            }
            #expect(try store.record(.issue, id: lost.recordID) != nil, "\(label)")
            server = try await backup.restore()
            try await push(after)
            let report = try await SyncEngine(
                store: store, transport: server.transport(token: TestServer.aliceToken), projects: only).sync()
            #expect(report.isComplete && report.historyChanged, "\(label): the restore is noticed")
            #expect(try store.record(.issue, id: lost.recordID) == nil, "\(label): a fresh device does not hold it")
            let fresh = try LocalStore.open(at: server.directory.appendingPathComponent("fresh.sqlite").path)
            _ = try await SyncEngine(store: fresh, transport: server.transport(token: TestServer.aliceToken)).sync()
            #expect(try Self.issues(in: store) == Self.issues(in: fresh), "\(label): as a fresh device")
            #expect(try Self.issues(in: store).count == 1 + after, "\(label)")
            await server.stop()
        }
    }

    /// A bundle of the history the server still holds costs one small request and rebuilds nothing.
    @Test("A bundle of the history the server holds is confirmed and forgotten; nothing is rebuilt", arguments: Backend.available)
    func aBundleOfTheHeldHistoryIsConfirmed(_ backend: Backend) async throws {
        let server = try await TestServer.start(backend)
        defer { Task { await server.stop() } }
        let office = server.transport(token: TestServer.carolToken)
        _ = try await office.push(PushRequest(mutations: [Sample.create(.issue, fields: Sample.issueFields(project: TestServer.projectA))]))
        let bundle = server.directory.appendingPathComponent("held.json")
        let alice = server.transport(token: TestServer.aliceToken)
        _ = try await alice.downloadBundle(project: TestServer.projectA, format: .json, to: bundle)
        let text = try String(contentsOf: bundle, encoding: .utf8)
        #expect(text.contains("\"formatVersion\": 2") && text.contains("\"checkpoints\": [\""))
        let store = try LocalStore.open(at: server.directory.appendingPathComponent("held.sqlite").path)
        _ = try store.importBundle(at: bundle)
        let report = try await SyncEngine(store: store, transport: alice).sync()
        #expect(report.isComplete && !report.historyChanged && report.rebuilt == nil)
        #expect(try store.importedCheckpoints().isEmpty)
    }

    /// Second attack on issue 39: a finished upload moved no change sequence, so a restore to a backup
    /// taken before it was not noticed and the original was not sent again. A finished upload now takes
    /// a change sequence, whose checkpoint its answer carries.
    @Test("An original uploaded after the backup is sent again after the restore", arguments: Backend.available)
    func anUploadFinishedAfterTheBackup(_ backend: Backend) async throws {
        var server = try await TestServer.start(backend)
        let folder = server.directory
        let photo = folder.appendingPathComponent("IMG_0002.jpg")
        try Data((0..<20_000).map { UInt8(truncatingIfNeeded: $0) }).write(to: photo)
        let device = try LocalStore.open(at: folder.appendingPathComponent("photos.sqlite").path)
        let issue = try await device.save(OutpostModels.Issue(projectID: TestServer.projectA, title: "Cracked sill"))
        let attachment = try await device.attach(
            MediaAttachment(
                issueID: issue.id, kind: .photo, fileName: photo.lastPathComponent, contentType: "image/jpeg",
                byteSize: 0, sha256: "", capturedAt: Timestamp.now()),
            originalAt: photo)
        func sync(media: Bool) async throws -> SyncReport {
            try await SyncEngine(store: device, transport: server.transport(token: TestServer.aliceToken))
                .sync(conditions: SyncConditions(mediaRequested: media))
        }
        #expect(try await sync(media: false).pushed == 2)
        let backup = try await Backup.take(of: server)
        #expect(try await sync(media: true).mediaUploaded == 1)
        // The answer that says the file is whole names the change its finishing took, the status too
        // (for a device whose answer to the last chunk was lost), and the device holds it as its own.
        let finished = try await server.transport(token: TestServer.aliceToken).mediaUploadStatus(for: attachment.id)
        let checkpoint = try #require(finished.checkpoint)
        #expect(try device.historyCheckpoint() == checkpoint)
        server = try await backup.restore()
        defer { Task { [server] in await server.stop() } }
        let afterRestore = try await sync(media: true)
        #expect(afterRestore.historyChanged && afterRestore.mediaUploaded == 1)
        let status = try await server.transport(token: TestServer.aliceToken).mediaUploadStatus(for: attachment.id)
        #expect(status.complete, "the original reached the restored server again")
    }

    @Test("A push with a checkpoint the restored history does not hold is refused 409 history_changed, nothing applied", arguments: Backend.available)
    func aPushFromTheLostHistoryIsRefused(_ backend: Backend) async throws {
        var server = try await TestServer.start(backend)
        let alice = server.transport(token: TestServer.aliceToken)
        let backup = try await Backup.take(of: server)
        let first = try await alice.push(PushRequest(mutations: [Sample.create(.issue, fields: Sample.issueFields(project: TestServer.projectA))]))
        let checkpoint = try #require(first.checkpoint)
        #expect(try await alice.pull(PullRequest(cursor: nil, limit: 10, checkpoint: checkpoint)).checkpoint == checkpoint)
        server = try await backup.restore()
        defer { Task { [server] in await server.stop() } }
        let restored = server.transport(token: TestServer.aliceToken)
        // A change on the restored server takes the same sequence number with another mark.
        _ = try await restored.push(PushRequest(mutations: [Sample.create(.issue, fields: Sample.issueFields(project: TestServer.projectA))]))
        let late = Sample.create(.issue, fields: Sample.issueFields(project: TestServer.projectA))
        for attempt in [
            { _ = try await restored.push(PushRequest(mutations: [late], checkpoint: checkpoint)) },
            { _ = try await restored.pull(PullRequest(cursor: nil, limit: 10, checkpoint: checkpoint)) },
        ] as [() async throws -> Void] {
            let error = try await #require(throws: TransportError.self) { try await attempt() }
            #expect(error.status == 409)
            #expect(error.serverCode == .historyChanged)
        }
        #expect(try await server.strings("SELECT id FROM records WHERE id = '\(late.recordID.storageText)'").isEmpty)
        // Text the server never wrote is a bad request, not a changed history.
        let bad = try await #require(throws: TransportError.self) {
            _ = try await restored.pull(PullRequest(cursor: nil, limit: 10, checkpoint: "12.not-a-mark"))
        }
        #expect(bad.status == 400)
    }

    /// Attack 69, finding 3: a record the office deleted, which the crew's device had pulled deleted,
    /// came back live on the server and every other device after the crew's rebuild (a restore, or a
    /// checkpoint the server never gave): the rebuild sent the crew's values from before the delete
    /// again, and the client-wins clock-in took them over the delete (field merge kept the delete but
    /// opened a false conflict). Values a device holds under a delete it saw are not its to send again.
    @Test("A record deleted elsewhere that the device pulled deleted stays deleted through its rebuild, with no conflict",
          arguments: ["restore", "unknown checkpoint"])
    func aDeleteTheDeviceSawIsNotUndoneByItsRebuild(_ cause: String) async throws {
        var server = try await TestServer.start(.sqlite)
        let folder = server.directory
        let store = { (name: String) throws -> LocalStore in try LocalStore.open(at: folder.appendingPathComponent(name + ".sqlite").path) }
        let crew = try store("crew"), office = try store("office")
        func sync(_ device: LocalStore, token: String) async throws -> SyncReport {
            try await SyncEngine(store: device, transport: server.transport(token: token)).sync()
        }
        let aliceInA = try await server.server.memberRecordID(project: TestServer.projectA, user: TestServer.alice)
        let clockIn = try await crew.save(OutpostModels.TimeEntry(
            projectID: TestServer.projectA, memberID: aliceInA, kind: .clockIn, recordedAt: Date(), note: "Gate 3"))
        let issue = try await crew.save(OutpostModels.Issue(projectID: TestServer.projectA, title: "Loose rail"))
        let kept = try await crew.save(OutpostModels.Issue(projectID: TestServer.projectA, title: "Cracked tile"))
        #expect(try await sync(crew, token: TestServer.aliceToken).isComplete)
        #expect(try await sync(office, token: TestServer.carolToken).isComplete)
        #expect(try await office.delete(.timeEntry, id: clockIn.id))
        #expect(try await office.delete(.issue, id: issue.id))
        #expect(try await sync(office, token: TestServer.carolToken).isComplete)
        #expect(try await sync(crew, token: TestServer.aliceToken).isComplete)
        #expect(try crew.record(.timeEntry, id: clockIn.id)?.sync.isDeleted ?? true)
        let backup = try await Backup.take(of: server)
        _ = try await office.save(OutpostModels.Issue(projectID: TestServer.projectA, title: "Order tiles"))
        #expect(try await sync(office, token: TestServer.carolToken).isComplete)
        #expect(try await sync(crew, token: TestServer.aliceToken).isComplete)

        if cause == "restore" {
            server = try await backup.restore()
        } else {
            try await DatabaseQueue(path: crew.path).write { db in
                try db.execute(sql: "UPDATE sync_state SET value = '999.0123456789abcdef' WHERE key = 'history_checkpoint'")
                #expect(db.changesCount == 1)
            }
        }
        defer { Task { [server] in await server.stop() } }
        let rebuilt = try await sync(crew, token: TestServer.aliceToken)
        #expect(rebuilt.historyChanged, "\(rebuilt)")
        for _ in 0..<2 {
            #expect(try await sync(crew, token: TestServer.aliceToken).isComplete)
            #expect(try await sync(office, token: TestServer.carolToken).isComplete)
        }
        let fresh = try store("fresh")
        #expect(try await sync(fresh, token: TestServer.carolToken).isComplete)
        for (name, device) in [("crew", crew), ("office", office), ("fresh", fresh)] {
            #expect(try device.record(.timeEntry, id: clockIn.id)?.sync.isDeleted ?? true, "\(name) holds the clock-in live")
            #expect(try device.record(.issue, id: issue.id)?.sync.isDeleted ?? true, "\(name) holds the issue live")
            #expect(try device.fetch(OutpostModels.Issue.self, id: kept.id)?.title == "Cracked tile", "\(name)")
            let conflicts = try device.openConflicts()
            #expect(conflicts.isEmpty, "\(name): \(conflicts)")
            #expect(try device.status().pendingChanges == 0, "\(name)")
        }
    }

    /// Attack 60, findings 1b and 1c: a damaged pull cursor or history checkpoint on the device was
    /// refused 400 on every run, forever, and the device's writes never left it.
    @Test("A damaged cursor or checkpoint on the device: the next sync starts over from the beginning and sends the waiting edit",
          arguments: ["cursor", "checkpoint", "both"])
    func aDamagedPositionStartsOver(_ damaged: String) async throws {
        let server = try await TestServer.start(.sqlite)
        defer { Task { [server] in await server.stop() } }
        let folder = server.directory
        let crew = try LocalStore.open(at: folder.appendingPathComponent("crew.sqlite").path)
        let engine = SyncEngine(store: crew, transport: server.transport(token: TestServer.aliceToken))
        let office = try LocalStore.open(at: folder.appendingPathComponent("office.sqlite").path)
        let officeEngine = SyncEngine(store: office, transport: server.transport(token: TestServer.carolToken))
        let first = try await crew.save(OutpostModels.Issue(projectID: TestServer.projectA, title: "Rail loose"))
        #expect(try await engine.sync().isComplete)
        try await DatabaseQueue(path: crew.path).write { db in
            if damaged != "checkpoint" { try db.execute(sql: "UPDATE sync_cursors SET cursor = 'not a cursor'") }
            if damaged != "cursor" {
                try db.execute(sql: "UPDATE sync_state SET value = '12.not-a-mark' WHERE key = 'history_checkpoint'")
            }
            #expect(db.changesCount >= 1)
        }
        var edited = first
        edited.details = "Bolt sheared"
        _ = try await crew.save(edited)
        _ = try await office.save(OutpostModels.Issue(projectID: TestServer.projectA, title: "Order tiles"))
        #expect(try await officeEngine.sync().isComplete)
        let report = try await engine.sync()
        #expect(report.isComplete, "\(report)")
        #expect(report.lastTransportError == nil, "\(report)")
        #expect(report.pushed == 1)
        #expect(try await officeEngine.sync().isComplete)
        #expect(try Self.issues(in: office)[first.id] == "Rail loose / Bolt sheared")
        #expect(Set(try Self.issues(in: crew).values) == ["Rail loose / Bolt sheared", "Order tiles / "])
        #expect(try await engine.sync().isComplete)
    }

    /// A client that sends its cursor and no checkpoint (as the API allows) was answered checkpoint `0`
    /// and its cursor taken as it was: after a restore it went on from positions the restored history
    /// reused, and never got the changes written at them, while keeping the records the restore lost
    /// (attack 96, finding 1). A cursor now carries, under its seal, the checkpoint its answer gave: a
    /// history that no longer holds it is `history_changed`, whatever the request's checkpoint, and an
    /// answer's checkpoint is never older than its cursor's.
    @Test("A cursor sent without a checkpoint: its answer's checkpoint is the cursor's, and a restore that lost it is history_changed", arguments: Backend.available)
    func aCursorAloneStillNoticesARestore(_ backend: Backend) async throws {
        var server = try await TestServer.start(backend)
        var office = try LocalStore.open(at: server.directory.appendingPathComponent("office.sqlite").path)
        var officeEngine = SyncEngine(store: office, transport: server.transport(token: TestServer.carolToken))
        func officeWrites(_ count: Int, _ name: String) async throws {
            for index in 1...count {
                _ = try await office.save(OutpostModels.Issue(projectID: TestServer.projectA, title: "\(name) \(index)"))
            }
            #expect(try await officeEngine.sync().isComplete)
        }
        /// Alice's pulls to the end from `cursor`, never sending a checkpoint: the status of the first
        /// refused, or the last cursor and checkpoint.
        func pullToTheEnd(from cursor: String?) async throws -> (status: Int, cursor: String?, checkpoint: String?) {
            var cursor = cursor, checkpoint: String?
            while true {
                let answer = try await server.send(
                    "POST", "/pull", token: TestServer.aliceToken, body: try wireJSON(PullRequest(cursor: cursor, limit: 2)))
                guard answer.status == 200 else { return (answer.status, cursor, checkpoint) }
                let page = try #require(try JSONSerialization.jsonObject(with: answer.body) as? [String: Any])
                cursor = page["nextCursor"] as? String
                checkpoint = page["checkpoint"] as? String
                guard page["hasMore"] as? Bool == true else { return (200, cursor, checkpoint) }
            }
        }
        try await officeWrites(3, "Before")
        let first = try await pullToTheEnd(from: nil)
        #expect(first.status == 200)
        let again = try await pullToTheEnd(from: first.cursor)
        #expect(again.checkpoint == first.checkpoint, "a pull with nothing new is answered the cursor's checkpoint, not 0")
        #expect(again.checkpoint != "0")

        let backup = try await Backup.take(of: server)
        try await officeWrites(3, "Lost")
        let beforeRestore = try await pullToTheEnd(from: first.cursor)
        #expect(beforeRestore.status == 200)

        server = try await backup.restore()
        defer { Task { [server] in await server.stop() } }
        // The restored server writes again at the sequences the lost changes had, and past them (from
        // the office's laptop set up again).
        office = try LocalStore.open(at: server.directory.appendingPathComponent("office-after.sqlite").path)
        officeEngine = SyncEngine(store: office, transport: server.transport(token: TestServer.carolToken))
        try await officeWrites(4, "After")
        #expect(try await pullToTheEnd(from: beforeRestore.cursor).status == 409, "the cursor's history is gone")
        // A cursor from before the lost changes is still of this history, and reads on.
        let older = try await pullToTheEnd(from: first.cursor)
        #expect(older.status == 200)
    }

    /// Attack 97: with its cursor and no checkpoint, a client named as its own the sequences its pushes
    /// had taken before a restore. The restored server had written others' changes at those sequences,
    /// and sent them as the client's own (versions only, ids it never held) while its cursor moved past
    /// them for good. Own sequences past the request's checkpoint (its own, its cursor's, a bundle's)
    /// are no one's own: their changes come whole.
    @Test("Own sequences past the request's checkpoint are not taken as the caller's: after a restore, others' changes at them come whole", arguments: Backend.available)
    func ownSequencesPastTheCheckpointComeWhole(_ backend: Backend) async throws {
        var server = try await TestServer.start(backend)
        let alice = server.transport(token: TestServer.aliceToken)
        var cursor: String?
        repeat {
            let page = try await alice.pull(PullRequest(cursor: cursor, limit: 500))
            cursor = page.nextCursor
            if !page.hasMore { break }
        } while true
        let backup = try await Backup.take(of: server)
        let pushed = try await alice.push(PushRequest(mutations: (1...3).map { index in
            Sample.create(.issue, fields: Sample.issueFields(project: TestServer.projectA, title: "Lost \(index)"))
        }))
        let own = pushed.results.compactMap(\.sequence).map(String.init)
        #expect(own.count == 3)

        server = try await backup.restore()
        defer { Task { [server] in await server.stop() } }
        let office = server.transport(token: TestServer.carolToken)
        let creates = (1...3).map { index in
            Sample.create(.issue, fields: Sample.issueFields(project: TestServer.projectA, title: "Office \(index)"))
        }
        let written = try await office.push(PushRequest(mutations: creates))
        #expect(written.results.compactMap(\.sequence).map(String.init) == own, "the restored history wrote at the same sequences")
        let page = try await server.transport(token: TestServer.aliceToken).pull(PullRequest(cursor: cursor, limit: 500, ownSequences: own))
        #expect(page.ownRecords.isEmpty, "\(page.ownRecords)")
        #expect(Set(page.changes.map(\.recordID)) == Set(creates.map(\.recordID)), "the office's three come whole")
        // Nor does a bundle position raise the bound (attack 98): a position of a project the cursor does
        // not name yet, made after the restore, is newer than every own sequence, and is another
        // project's. Own sequences are bounded by the request's and its cursor's checkpoints alone.
        _ = try await server.server.addMember(.init(userID: TestServer.alice, name: "Alice", role: "crew", projects: [TestServer.projectB]))
        let inB = try await office.push(PushRequest(mutations: [
            Sample.create(.issue, fields: Sample.issueFields(project: TestServer.projectB, title: "Office in B"))
        ]))
        let position = TestServer.projectB.storageText + "=" + (try #require(inB.checkpoint))
        let withPosition = try await server.transport(token: TestServer.aliceToken).pull(
            PullRequest(cursor: cursor, limit: 500, bundlePositions: [position], ownSequences: own))
        #expect(withPosition.ownRecords.isEmpty, "\(withPosition.ownRecords)")
        #expect(Set(creates.map(\.recordID)).isSubset(of: Set(withPosition.changes.map(\.recordID))), "the office's three come whole")
    }
}

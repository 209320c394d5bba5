@testable import ContractorJobs
import Foundation
import Outpost
import OutpostBundles
import OutpostMigrationTesting
import OutpostMigrator
import OutpostServer
import OutpostTesting
import Testing

/// The contractor job app, end to end on its own schema: offline work, sync with its own server,
/// conflicts, bundles and migration paths. (One suite, run serially: the steps share nothing, but
/// each starts a server, and two at once only slow each other.)
@Suite(.serialized) struct ContractorJobsTests {
    /// A job with notes and a video, made offline, syncs whole: every record gets an integer server id,
    /// a note goes up only after its job has one, and the video's file follows its record.
    @Test func aJobMadeOfflineSyncsWithIntegerServerIDs() async throws {
        let server = try await JobsServer()
        defer { Task { await server.stop() } }
        let lena = try server.device("lena", token: "lena-token")
        let job = try await lena.save(Job(name: "Kitchen refit", address: "4 Birch Lane"))
        // Lena's crew record is the server's to write (the creator leads the job): notes, written as it,
        // come once it has arrived.
        let clip = server.folder.appendingPathComponent("walkthrough.mp4")
        try Data(repeating: 0x2a, count: 300_000).write(to: clip)
        let video = try await lena.attach(Video(jobID: job.id, fileName: "walkthrough.mp4"), fileAt: clip)
        #expect(video.byteSize == 300_000 && video.sha256.count == 64)
        #expect(try lena.fetch(Job.self, id: job.id)?.sync.serverID == nil, "offline: nothing has a server id yet")

        let first = try await lena.sync()
        #expect(first.pushed >= 2, "\(first)")
        // The server wrote Lena's crew record with the job (its creator leads it): the next pull brings it.
        _ = try await lena.sync()
        let synced = try #require(try lena.fetch(Job.self, id: job.id))
        #expect(Int(synced.sync.serverID ?? "") != nil, "the job has an integer server id: \(String(describing: synced.sync.serverID))")
        let member = try #require(try lena.records(CrewMember.self, where: "jobID", is: .uuid(job.id)).first)
        #expect(member.userID == JobsServer.lead && member.role == "lead", "the creator leads the job")

        // Two notes written offline: each names the job by the id the server gave it.
        let notes = [
            try await lena.save(Note(jobID: job.id, authorID: member.id, body: "Old units out; wall is damp behind the sink.")),
            try await lena.save(Note(jobID: job.id, authorID: member.id, body: "Plumber booked for Thursday.")),
        ]
        // The video's file goes up once the connection is judged good, or when the user asks: here, asked.
        _ = try await lena.sync(conditions: SyncConditions(mediaRequested: true))
        for note in notes {
            let stored = try #require(try lena.fetch(Note.self, id: note.id))
            #expect(Int(stored.sync.serverID ?? "") != nil && stored.sync.syncStatus == .synced)
        }
        let status = try await lena.status()
        #expect(status.pendingChanges == 0 && status.pendingMediaUploads == 0 && status.failedChanges == 0, "\(status)")
    }

    /// A video recorded on a job made in the same offline session waits for the job's server id: its
    /// create is queued depending on the job's, goes up after it, and the server numbers it after the job.
    @Test func aChildWaitsForItsJobsServerID() async throws {
        let server = try await JobsServer()
        defer { Task { await server.stop() } }
        let lena = try server.device("lena", token: "lena-token")
        let job = try await lena.save(Job(name: "Garage"))
        let clip = server.folder.appendingPathComponent("roof.mp4")
        try Data(repeating: 7, count: 1_000).write(to: clip)
        let video = try await lena.attach(Video(jobID: job.id, fileName: "roof.mp4"), fileAt: clip)
        let queued = try lena.store.unsentChanges()
        let videoCreate = try #require(queued.first { $0.recordID == video.id })
        #expect(videoCreate.dependsOn == [job.id], "the video's create waits for its job: \(videoCreate.dependsOn)")
        let report = try await lena.sync()
        #expect(report.failed == 0, "\(report)")
        let jobID = try #require(Int(try lena.store.serverID(of: Job.entityType, clientID: job.id) ?? ""))
        let videoID = try #require(Int(try lena.store.serverID(of: Video.entityType, clientID: video.id) ?? ""))
        #expect(videoID > jobID, "the video went up after its job (\(videoID) after \(jobID))")
    }

    /// Two devices change a job's status at once: both end with the same status, and the device whose
    /// value lost is told (an open conflict naming the field), never silently overwritten.
    @Test func aConflictOnAJobsStatusIsSurfacedToTheLoser() async throws {
        let server = try await JobsServer()
        defer { Task { await server.stop() } }
        let lena = try server.device("lena", token: "lena-token")
        let hugo = try server.device("hugo", token: "hugo-token")
        let job = try await lena.save(Job(name: "Bathroom"))
        _ = try await lena.sync()
        let added = try await server.server.addMember(.init(userID: JobsServer.hand, name: "Hugo", projects: [job.id]))
        #expect(added[job.id] == .added("hand"))
        _ = try await hugo.sync()
        var mine = try #require(try lena.fetch(Job.self, id: job.id))
        var theirs = try #require(try hugo.fetch(Job.self, id: job.id))
        mine.status = .inProgress
        theirs.status = .done
        _ = try await lena.save(mine)
        _ = try await hugo.save(theirs)
        _ = try await lena.sync()
        _ = try await hugo.sync()
        _ = try await lena.sync()
        let final = try #require(try lena.fetch(Job.self, id: job.id)).status
        #expect(try hugo.fetch(Job.self, id: job.id)?.status == final, "both devices end with one status")
        let conflicts = try lena.openConflicts() + hugo.openConflicts()
        #expect(conflicts.count == 1, "\(conflicts)")
        #expect(conflicts.first?.entity == Job.entityType && conflicts.first?.field == "status", "\(conflicts)")
    }

    /// A job's XML bundle: the XSD generated from this app's schema validates it (xmllint), and a new
    /// device imports it without asking the server for the records.
    @Test func anXMLBundleIsValidatedByItsGeneratedXSDAndImported() async throws {
        let server = try await JobsServer()
        defer { Task { await server.stop() } }
        let lena = try server.device("lena", token: "lena-token")
        let job = try await lena.save(Job(name: "Loft"))
        _ = try await lena.sync()
        _ = try await lena.sync()
        let member = try #require(try lena.records(CrewMember.self, where: "jobID", is: .uuid(job.id)).first)
        _ = try await lena.save(Note(jobID: job.id, authorID: member.id, body: "Joists sound; insulation missing."))
        _ = try await lena.sync()
        let bundle = server.folder.appendingPathComponent("loft.xml")
        let exported = try lena.store.exportBundle(project: job.id, format: .xml, to: bundle)
        #expect(exported == 3)
        let xsd = server.folder.appendingPathComponent("jobs.xsd")
        try BundleSchema.xsd(for: ContractorJobs.schema).write(to: xsd, atomically: true, encoding: .utf8)
        let lint = try await SpawnedProgram.run("/usr/bin/xmllint", arguments: ["--noout", "--schema", xsd.path, bundle.path])
        #expect(lint.status == 0, "\(String(decoding: lint.errors, as: UTF8.self))")
        let newcomer = try server.device("newcomer", token: "lena-token")
        let summary = try newcomer.importBundle(at: bundle)
        #expect(summary.total.inserted == 3, "\(summary)")
        #expect(try newcomer.fetch(Job.self, id: job.id)?.name == "Loft")
    }

    /// The app's migration path, by the product every team runs: shipped steps never change
    /// (`steps.txt`), and files of every earlier version full of edge-case rows upgrade to the latest keeping every value.
    @Test func theMigrationPathHolds() throws {
        // The source file, not a copy in the build: a new step is recorded there, to be committed.
        let checksums = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("steps.txt")
        try MigrationPathCheck(migrator: Migrator(steps: ContractorJobs.steps, syncedTables: ["jobs", "crew_members", "notes", "videos"]), checksums: checksums).run()
    }

    /// A file Outpost made before apps named their schemas (the field-service app's, then the only one)
    /// is refused by this app, which does not adopt such files, saying why.
    @Test func aFileOfAnotherAppIsRefused() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("jobs-foreign-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let legacy = folder.appendingPathComponent("field.sqlite").path
        let sqlite = try await SpawnedProgram.run("/usr/bin/sqlite3", arguments: [legacy, "CREATE TABLE migrator_ledger (version INTEGER PRIMARY KEY, name TEXT NOT NULL, checksum TEXT NOT NULL, applied_at TEXT NOT NULL); INSERT INTO migrator_ledger VALUES (1, 'field app 1.0', 'x', 'then');"])
        try #require(sqlite.status == 0, "\(String(decoding: sqlite.errors, as: UTF8.self))")
        do {
            _ = try Device(path: legacy, app: ContractorJobs.app)
            Issue.record("a field-service file opened as a contractor-jobs one")
        } catch {
            #expect("\(error)".contains("before apps named their schemas") && "\(error)".contains("not for 'contractor-jobs'"), "\(error)")
        }
    }
}

import Foundation
import Outpost
import OutpostFieldService
import OutpostFieldServiceTesting
import OutpostModels  // the qualified names the tests use
import OutpostSchema  // Timestamp
import OutpostSync
import OutpostTesting
import Testing
import OutpostServerTesting

/// The facade end to end against the reference server in process (`InProcessServer`): the brief's workflows, sync, status, conflicts.
@Suite(.fieldService) struct DeviceTests {
    final class Folder: Sendable {
        let url: URL
        init() throws {
            url = FileManager.default.temporaryDirectory.appendingPathComponent("outpost-device-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        }
        func path(_ name: String) -> String { url.appendingPathComponent(name).path }
        deinit { try? FileManager.default.removeItem(at: url) }
    }

    @Test func aFieldDayOfflineThenOneSync() async throws {
        let folder = try Folder()
        let server = try await InProcessServer(assignsServerIDs: true)
        let device = try Device(path: folder.path("a.sqlite"), transport: server)
        let member = UUID()

        let opportunity = try await device.save(Opportunity(name: "Kitchen remodel", customerName: "Ana Silva"))
        let project = try await device.save(Project(opportunityID: opportunity.id, name: "Silva kitchen"))
        let clockIn = try await device.clockIn(member: member, project: project.id)
        let clockOut = try await device.clockOut(of: clockIn)
        try await device.save(DailyLog(projectID: project.id, authorID: member, day: "2026-11-22", notes: "Demo done"))
        let scope = try await device.save(Scope(projectID: project.id, name: "Cabinets"))
        try await device.save(ScopeItem(scopeID: scope.id, name: "Base cabinet", quantity: 3, unit: "ea", unitPriceCents: 42_000))
        let issue = try await device.save(Issue(projectID: project.id, title: "Water damage under sink"))
        try await device.comment(on: issue, by: member, "Photo attached")
        let photoFile = folder.url.appendingPathComponent("sink.jpg")
        try Data(repeating: 0xAB, count: 5_000).write(to: photoFile)
        let photo = try await device.attachPhoto(to: issue, fileAt: photoFile)

        var status = try await device.status()
        #expect(status.pendingChanges == 10)
        #expect(status.pendingMediaUploads == 1)
        #expect(try device.records(Issue.self, where: "projectID", is: .uuid(project.id)).map(\.id) == [issue.id])
        let list = try device.list(Issue.self, where: "projectID", is: .uuid(project.id))
        #expect(list.ids == [issue.id])
        #expect(try list.fetch(0..<1).map { $0?.title } == ["Water damage under sink"])

        let report = try await device.sync(conditions: SyncConditions(mediaRequested: true))
        #expect(report.pushed == 10)
        #expect(report.mediaUploaded == 1, "\(report)")
        #expect(await server.mediaData(for: photo.id)?.count == 5_000)
        status = try await device.status()
        #expect(status.pendingChanges == 0)
        #expect(status.pendingMediaUploads == 0)
        #expect(status.lastSuccessfulSync != nil)
        #expect(try device.fetch(TimeEntry.self, id: clockIn.id)?.sync.serverID != nil)
        // The reference went as the clock-in's server id, which the server resolved to its record.
        #expect(try await server.record(clockOut.id)?.fields["clockInID"] == .uuid(clockIn.id))
    }

    @Test func aLostStatusChangeIsOfferedForOverride() async throws {
        let folder = try Folder()
        let server = try await InProcessServer()
        let a = try Device(path: folder.path("a.sqlite"), transport: server)
        let b = try Device(path: folder.path("b.sqlite"), transport: server)
        let issue = try await a.save(Issue(projectID: try await server.newProject(), title: "Loose handrail"))
        try await a.sync()
        try await b.sync()

        var mine = try #require(try a.fetch(OutpostModels.Issue.self, id: issue.id))
        mine.status = .resolved
        try await a.save(mine)
        var theirs = try #require(try b.fetch(OutpostModels.Issue.self, id: issue.id))
        theirs.status = .inProgress
        // Strictly later than a's change: two devices' writes in one millisecond are ordered by counter,
        // then node, not by which came later.
        try await b.store.save(theirs, now: Timestamp.now().addingTimeInterval(0.010))
        try await b.sync()
        try await a.sync()

        let conflicts = try a.openConflicts()
        #expect(conflicts.count == 1)
        #expect(conflicts.first?.field == "status")
        #expect(conflicts.first?.losingSide == .client)
        try await a.resolve(try #require(conflicts.first), choice: .override)
        try await a.sync()
        try await b.sync()
        #expect(try b.fetch(OutpostModels.Issue.self, id: issue.id)?.status == .resolved)
        #expect(try a.openConflicts().isEmpty)
    }

    /// The "pre-sync this project" button: the server's bundle lands on the device, with the import's
    /// progress reported up to the last record.
    @Test func preSyncImportsTheServersBundleAndReportsProgress() async throws {
        let folder = try Folder()
        let server = try await InProcessServer()
        let project = try await server.newProject(name: "Müller kitchen")
        for index in 1...6 {
            try await server.create(Issue(projectID: project, title: "Punch item \(index)"))
        }
        let device = try Device(path: folder.path("presync.sqlite"), transport: server)
        // The importer reports from its own thread; a stream's continuation takes values from any.
        let (reports, report) = AsyncStream<ImportProgress>.makeStream()
        let summary = try await device.preSync(project: project) { report.yield($0) }
        report.finish()
        var last: ImportProgress?
        for await progress in reports { last = progress }
        #expect(summary.total.inserted > 5)
        #expect(last?.records == summary.total.records)
        #expect(try device.fetch(Project.self, id: project)?.name == "Müller kitchen")
    }

    @Test func withoutAServerSyncSaysSo() async throws {
        let folder = try Folder()
        let device = try Device(path: folder.path("offline.sqlite"))
        await #expect(throws: OutpostError.self) { try await device.sync() }
        #expect(try await device.status().connectivity == .offline)
    }
}

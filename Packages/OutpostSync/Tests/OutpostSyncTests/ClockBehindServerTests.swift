import Foundation
import OutpostConflicts
import OutpostModels
import OutpostStore
import OutpostWire
import Testing
@testable import OutpostSync
import OutpostServerTesting

/// A change pushed on the server's current version whose clocks are older than the server's for the
/// same fields: a client stamping by its own time after another wrote within the allowance ahead, or a
/// device that learnt the record from a bundle, which carries no clocks. The write must stand, or its
/// loss must be told: never `applied` and then quietly replaced by the next pull.
@Suite struct ClockBehindServerTests {
    let node = NodeID(0x0FF1CE)

    func officeRename(_ issue: UUID, to title: String, on server: InProcessServer, aheadBy milliseconds: Int64) async throws {
        let clock = HybridTimestamp(
            physicalMilliseconds: Int64(Timestamp.now().timeIntervalSince1970 * 1000) + milliseconds, counter: 0, node: node)
        let base = try #require(try await server.record(issue)).version
        let outcome = try await server.apply(PushMutation(
            idempotencyKey: UUID(), entity: .issue, operation: .update, recordID: issue, baseVersion: base,
            fields: ["title": .text(title)], clocks: ["title": clock]))
        guard case .applied = outcome else { throw TransportError(.invalidResponse, request: "apply", message: "\(outcome)") }
    }

    @Test func anEditMadeAfterAPreSyncImportIsNotAcknowledgedAndThenLost() async throws {
        let device = try SyncEngineTests.Device()
        let server = try await InProcessServer()
        let project = try await server.newProject()
        let issue = Issue(projectID: project, title: "Loose rail")
        try await server.create(issue)
        // The office renames it with a clock four minutes ahead, inside the server's five-minute allowance.
        try await officeRename(issue.id, to: "Loose rail, stairs", on: server, aheadBy: 240_000)
        // The night's pre-sync brings the office's title; a bundle carries no clocks.
        let bundle = device.folder.appendingPathComponent("project.json")
        _ = try await server.downloadBundle(project: project, format: .json, to: bundle)
        _ = try device.store.importBundle(at: bundle)
        // Having read the office's title, the user renames it.
        var copy = try #require(try device.store.fetch(Issue.self, id: issue.id))
        #expect(copy.title == "Loose rail, stairs")
        copy.title = "Loose rail, stairs, level 2"
        _ = try await device.store.save(copy)

        let engine = SyncEngine(store: device.store, transport: server)
        #expect(try await engine.sync().isComplete)
        #expect(try await engine.sync().isComplete)
        let onServer = try #require(try await server.record(issue.id)).fields["title"]
        let onDevice = try #require(try device.store.fetch(Issue.self, id: issue.id)).title
        #expect(onServer == .text(onDevice), "device and server agree")
        if onDevice != "Loose rail, stairs, level 2" {
            #expect(
                try device.store.openConflicts().contains { $0.losingValue == .text("Loose rail, stairs, level 2") },
                "the user's rename lost and is in no conflicts table")
        }
    }

    @Test func aConflictAnsweredOnTheVersionTheChangeWasMadeOnIsMergedAndSettles() async throws {
        let device = try SyncEngineTests.Device()
        let server = try await InProcessServer()
        let project = try await server.newProject()
        let issue = Issue(projectID: project, title: "Loose rail")
        try await server.create(issue)
        try await officeRename(issue.id, to: "Loose rail, stairs", on: server, aheadBy: 240_000)
        // The device holds the server's version 2, but not the clock the server holds for its title (as
        // after an import): it believes the title was written a second ago.
        let current = try #require(try await server.record(issue.id))
        var believed = try current.versionedRecord
        let aSecondAgo = HybridTimestamp(
            physicalMilliseconds: Int64(Timestamp.now().timeIntervalSince1970 * 1000) - 1_000, counter: 0, node: node)
        believed = try VersionedRecord(record: believed.record, clocks: believed.clocks.mapValues { _ in aSecondAgo })
        let projectRecord = try #require(try await server.record(project))
        // At the server's cursor, so the next pull does not bring version 2 again before the push.
        let cursor = try await server.pull(PullRequest(cursor: nil, limit: 1000)).nextCursor
        try await device.store.applyPulledPage(PulledPage(changes: [try projectRecord.versionedRecord, believed], cursor: cursor))
        var copy = try #require(try device.store.fetch(Issue.self, id: issue.id))
        copy.title = "Loose rail, stairs, level 2"
        _ = try await device.store.save(copy)

        // The rename is stamped now, before the server's clock: the server answers it as a conflict on
        // version 2, the version it was made on. The device merges, surfaces what lost, and settles.
        let engine = SyncEngine(store: device.store, transport: server)
        let first = try await engine.sync()
        #expect(first.isComplete)
        #expect(try await engine.sync().isComplete)
        #expect(try device.store.mutations(status: .inFlight).isEmpty)
        #expect(try device.store.mutations(status: .pending).isEmpty)
        #expect(try device.store.mutations(status: .failed).isEmpty)
        let onServer = try #require(try await server.record(issue.id)).fields["title"]
        let onDevice = try #require(try device.store.fetch(Issue.self, id: issue.id)).title
        #expect(onServer == .text(onDevice), "device and server agree")
        #expect(onDevice == "Loose rail, stairs")
        #expect(try device.store.openConflicts().contains { $0.losingValue == .text("Loose rail, stairs, level 2") })
    }

    @Test func aDeleteAnsweredAsAConflictOnItsOwnVersionBringsTheRecordBackAndSettles() async throws {
        let device = try SyncEngineTests.Device()
        let server = try await InProcessServer()
        let project = try await server.newProject()
        let issue = Issue(projectID: project, title: "Loose rail")
        try await server.create(issue)
        try await officeRename(issue.id, to: "Loose rail, stairs", on: server, aheadBy: 240_000)
        let current = try #require(try await server.record(issue.id))
        let aSecondAgo = HybridTimestamp(
            physicalMilliseconds: Int64(Timestamp.now().timeIntervalSince1970 * 1000) - 1_000, counter: 0, node: node)
        let believed = try VersionedRecord(
            record: try current.versionedRecord.record, clocks: try current.versionedRecord.clocks.mapValues { _ in aSecondAgo })
        let cursor = try await server.pull(PullRequest(cursor: nil, limit: 1000)).nextCursor
        let projectRecord = try #require(try await server.record(project))
        try await device.store.applyPulledPage(PulledPage(changes: [try projectRecord.versionedRecord, believed], cursor: cursor))
        // The user deletes the issue; the delete is stamped before the office's rename.
        _ = try await device.store.delete(.issue, id: issue.id)

        let engine = SyncEngine(store: device.store, transport: server)
        #expect(try await engine.sync().isComplete)
        #expect(try await engine.sync().isComplete)
        #expect(try device.store.mutations(status: .inFlight).isEmpty)
        #expect(try device.store.mutations(status: .pending).isEmpty)
        #expect(try device.store.mutations(status: .failed).isEmpty)
        let onServer = try #require(try await server.record(issue.id))
        #expect(onServer.deletion == nil, "the rename is newer than the delete")
        let onDevice = try #require(try device.store.fetch(Issue.self, id: issue.id), "the record is back on the device")
        #expect(onDevice.title == "Loose rail, stairs")
        #expect(try device.store.openConflicts().contains { $0.recordID == issue.id && $0.losingSide == .client })
    }
}

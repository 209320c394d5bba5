@testable import OutpostSync
import Foundation
import OutpostConflicts
import OutpostFieldService
import OutpostFieldServiceTesting
import OutpostModels
import OutpostSchema
import OutpostServerTesting
import OutpostStore
import OutpostWire
import Testing

/// A change pushed on the server's current version whose clocks are older than the server's for the
/// same fields: a client stamping by its own time after another wrote within the allowance ahead, or a
/// device that learnt the record from a bundle, which carries no clocks. The write must stand, or its
/// loss must be told: never `applied` and then quietly replaced by the next pull.
@Suite(.fieldService) struct ClockBehindServerTests {
    let node = NodeID(0x0FF1CE)

    /// A server holding an issue the office renamed to "Loose rail, stairs" with a clock four minutes
    /// ahead, inside the server's five-minute allowance (version 2), and a fresh device.
    func issueTheOfficeRenamedAhead() async throws -> (SyncEngineTests.Device, InProcessServer, project: UUID, issue: UUID) {
        let server = try await InProcessServer()
        let project = try await server.newProject()
        let issue = Issue(projectID: project, title: "Loose rail")
        try await server.create(issue)
        let clock = HybridTimestamp(
            physicalMilliseconds: Int64(Timestamp.now().timeIntervalSince1970 * 1000) + 240_000, counter: 0, node: node)
        let outcome = try await server.apply(PushMutation(
            idempotencyKey: UUID(), entity: .issue, operation: .update, recordID: issue.id, baseVersion: 1,
            fields: ["title": .text("Loose rail, stairs")], clocks: ["title": clock]))
        guard case .applied = outcome else { throw TransportError(.invalidResponse, request: "apply", message: "\(outcome)") }
        return (try SyncEngineTests.Device(), server, project, issue.id)
    }

    @Test func anEditMadeAfterAPreSyncImportIsNotAcknowledgedAndThenLost() async throws {
        let (device, server, project, issue) = try await issueTheOfficeRenamedAhead()
        // The night's pre-sync brings the office's title; a bundle carries no clocks.
        let bundle = device.folder.appendingPathComponent("project.json")
        _ = try await server.downloadBundle(project: project, format: .json, to: bundle)
        _ = try device.store.importBundle(at: bundle)
        // Having read the office's title, the user renames it.
        var copy = try #require(try device.store.fetch(Issue.self, id: issue))
        #expect(copy.title == "Loose rail, stairs")
        copy.title = "Loose rail, stairs, level 2"
        _ = try await device.store.save(copy)

        let engine = SyncEngine(store: device.store, transport: server)
        #expect(try await engine.sync().isComplete)
        #expect(try await engine.sync().isComplete)
        let onServer = try #require(try await server.record(issue)).fields["title"]
        let onDevice = try #require(try device.store.fetch(Issue.self, id: issue)).title
        #expect(onServer == .text(onDevice), "device and server agree")
        if onDevice != "Loose rail, stairs, level 2" {
            #expect(
                try device.store.openConflicts().contains { $0.losingValue == .text("Loose rail, stairs, level 2") },
                "the user's rename lost and is in no conflicts table")
        }
    }

    /// An issue the office renamed four minutes ahead (version 2), held by a device that does not know
    /// that clock (as after an import): it believes the title was written a second ago. The device is
    /// at the server's cursor, so its next pull does not bring version 2 again before it pushes.
    func deviceHoldingTheRenameWithoutItsClock() async throws -> (SyncEngineTests.Device, InProcessServer, issue: UUID) {
        let (device, server, project, issue) = try await issueTheOfficeRenamedAhead()
        let current = try #require(try await server.record(issue)).versionedRecord
        let aSecondAgo = HybridTimestamp(
            physicalMilliseconds: Int64(Timestamp.now().timeIntervalSince1970 * 1000) - 1_000, counter: 0, node: node)
        let believed = try VersionedRecord(record: current.record, clocks: current.clocks.mapValues { _ in aSecondAgo })
        let projectRecord = try #require(try await server.record(project)).versionedRecord
        let cursor = try await server.pull(PullRequest(cursor: nil, limit: 1000)).nextCursor
        try await device.store.applyPulledPage(PulledPage(changes: [projectRecord, believed], cursor: cursor))
        return (device, server, issue)
    }

    /// Two runs, and nothing left in flight, pending or failed.
    func syncUntilSettled(_ device: SyncEngineTests.Device, with server: InProcessServer) async throws {
        let engine = SyncEngine(store: device.store, transport: server)
        #expect(try await engine.sync().isComplete)
        #expect(try await engine.sync().isComplete)
        #expect(try device.store.mutations(status: .inFlight).isEmpty)
        #expect(try device.store.mutations(status: .pending).isEmpty)
        #expect(try device.store.mutations(status: .failed).isEmpty)
    }

    @Test func aConflictAnsweredOnTheVersionTheChangeWasMadeOnIsMergedAndSettles() async throws {
        let (device, server, issue) = try await deviceHoldingTheRenameWithoutItsClock()
        var copy = try #require(try device.store.fetch(Issue.self, id: issue))
        copy.title = "Loose rail, stairs, level 2"
        _ = try await device.store.save(copy)

        // The rename is stamped now, before the server's clock: the server answers it as a conflict on
        // version 2, the version it was made on. The device merges, surfaces what lost, and settles.
        try await syncUntilSettled(device, with: server)
        let onServer = try #require(try await server.record(issue)).fields["title"]
        let onDevice = try #require(try device.store.fetch(Issue.self, id: issue)).title
        #expect(onServer == .text(onDevice), "device and server agree")
        #expect(onDevice == "Loose rail, stairs")
        #expect(try device.store.openConflicts().contains { $0.losingValue == .text("Loose rail, stairs, level 2") })
    }

    @Test func aDeleteAnsweredAsAConflictOnItsOwnVersionBringsTheRecordBackAndSettles() async throws {
        let (device, server, issue) = try await deviceHoldingTheRenameWithoutItsClock()
        // The user deletes the issue; the delete is stamped before the office's rename.
        _ = try await device.store.delete(.issue, id: issue)

        try await syncUntilSettled(device, with: server)
        #expect(try #require(try await server.record(issue)).deletion == nil, "the rename is newer than the delete")
        let onDevice = try #require(try device.store.fetch(Issue.self, id: issue), "the record is back on the device")
        #expect(onDevice.title == "Loose rail, stairs")
        #expect(try device.store.openConflicts().contains { $0.recordID == issue && $0.losingSide == .client })
    }
}

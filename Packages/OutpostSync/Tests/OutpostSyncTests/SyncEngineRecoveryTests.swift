import Foundation
import OutpostConflicts
import OutpostModels
import OutpostStore
import Testing
@testable import OutpostSync
import OutpostTesting

/// The engine on the paths a review found lossy or stuck: references named by server ids that arrive
/// before their parent, overriding a delete, a conflict answered again after a crash, a malformed
/// record in a pulled page, and edits queued while an earlier one of the same record was in flight.
extension SyncEngineTests {
    /// The office's stamp for writes made "on another device" through `InMemoryTransport.apply`.
    func office(_ offset: Int64) -> HybridTimestamp {
        HybridTimestamp(physicalMilliseconds: 1_795_000_000_000 + offset, counter: 0, node: NodeID(0xFEED))
    }

    /// The wire form of a queued mutation, as the engine would send it (no server-id rewriting needed here).
    func wire(_ mutation: Mutation) -> PushMutation {
        let operation: PushMutation.Operation =
            switch mutation.operation {
            case .create: .create
            case .update: .update
            case .delete: .delete
            }
        return PushMutation(
            idempotencyKey: mutation.idempotencyKey, entity: mutation.entity, operation: operation,
            recordID: mutation.recordID, baseVersion: mutation.baseVersion, fields: mutation.fields,
            clocks: mutation.clocks, deletion: mutation.deletion)
    }

    @Test func anAcknowledgedEditMovesTheNextEditOfTheRecordOntoTheNewVersion() async throws {
        let device = try Device()
        let server = InMemoryTransport()
        let engine = SyncEngine(store: device.store, transport: server, random: SeededGenerator(seed: 28))
        var issue = try await device.store.save(Issue(projectID: UUID(), title: "Leak"), now: now)
        _ = try await engine.sync(now: { self.now })
        issue = try #require(try device.store.fetch(Issue.self, id: issue.id))
        issue.title = "Leak under the sink"
        try await device.store.save(issue, now: now.addingTimeInterval(10))
        // The first edit goes out; while it is in flight the user edits again (queued separately).
        let first = try #require(try device.store.claimMutations(limit: 1, now: now.addingTimeInterval(11)).first)
        issue.title = "Leak under the sink, fixed"
        try await device.store.save(issue, now: now.addingTimeInterval(12))
        guard case .applied(let version, _) = await server.apply(wire(first)) else { Issue.record("not applied"); return }
        try device.store.acknowledge(first, serverVersion: version, serverID: nil, now: now.addingTimeInterval(13))
        #expect(try device.store.mutations(status: .pending).map(\.baseVersion) == [2])

        let report = try await engine.sync(now: { self.now.addingTimeInterval(20) })
        #expect(report.rebased == 0, "no spurious conflict")
        #expect(report.pushed == 1)
        #expect(try device.store.openConflicts().isEmpty, "this device's own acknowledged title is not a conflict")
        #expect(await server.record(issue.id)?.fields["title"] == .text("Leak under the sink, fixed"))
    }
}

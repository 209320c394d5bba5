@testable import OutpostSync
import Foundation
import OutpostConflicts
import OutpostFieldService
import OutpostFieldServiceTesting
import OutpostModels
import OutpostSchema
import OutpostServerTesting
import OutpostStore
import OutpostTesting
import OutpostWire
import Testing

/// Refusals that say nothing about a single mutation (a whole request refused), a conflict whose server
/// record this build cannot store, and failed changes put back in line.
@Suite(.fieldService) struct SyncEngineRefusalTests {
    typealias Device = SyncEngineTests.Device
    let now = Date(timeIntervalSince1970: 1_795_000_000)

    func issues(_ count: Int, on store: LocalStore, server: InProcessServer) async throws -> [OutpostModels.Issue] {
        var saved: [OutpostModels.Issue] = []
        let project = try await server.newProject()
        for index in 0..<count {
            saved.append(try await store.save(Issue(projectID: project, title: "Issue \(index)"), now: now))
        }
        return saved
    }

    @Test func aBatchOverTheServersLimitIsSentInHalves() async throws {
        let device = try Device()
        let server = try await InProcessServer(maximumBatchSize: 2)
        let saved = try await issues(5, on: device.store, server: server)
        let report = try await SyncEngine(store: device.store, transport: server, random: SeededGenerator(seed: 11))
            .sync(now: { self.now })
        #expect(report.failed == 0)
        #expect(report.pushed == 5)
        #expect(report.isComplete)
        for issue in saved { #expect(try await server.record(issue.id) != nil) }
    }

    /// A server refuses a push of more fields and clocks than `PushRequest.maximumFieldsPerBatch` (413,
    /// attack 84 F4); an app whose records declare hundreds of fields fills that with far fewer than 500.
    /// The engine sends such a batch as fewer mutations at once, sized to the bound, with no refusal met.
    @Test func aBatchOfWideRecordsIsSizedToTheFieldsAPushHolds() async throws {
        let device = try Device()
        let server = try await InProcessServer()
        let saved = try await issues(12, on: device.store, server: server)
        let probe = try device.store.nextBatch(limit: 1, now: now)
        let perIssue = probe.request.fieldsAndClocks
        try device.store.putBack(probe.mutations)
        // Room for three issues' fields and clocks, not four.
        let engine = SyncEngine(
            store: device.store, transport: server, random: SeededGenerator(seed: 14), fieldsPerBatch: perIssue * 4 - 1)
        let report = try await engine.sync(now: { self.now })
        #expect(report.pushed == 12 && report.failed == 0 && report.isComplete)
        let requests = await server.requests
        #expect(requests.filter { $0 == .push }.count == 4, "\(requests)")
        for issue in saved { #expect(try await server.record(issue.id) != nil) }
    }

    @Test func aWholeRequestRefusedForOneMutationAloneFailsOnlyIt() async throws {
        let device = try Device()
        let server = try await InProcessServer()
        let saved = try await issues(3, on: device.store, server: server)
        // The batch of three is refused, then the first mutation sent alone: it alone is too large.
        await server.inject(.httpError(status: 413, code: .payloadTooLarge, retryAfter: nil), on: .push, times: 2)
        let engine = SyncEngine(store: device.store, transport: server, random: SeededGenerator(seed: 12))
        let report = try await engine.sync(now: { self.now })
        #expect(report.failed == 1)
        #expect(report.pushed == 2)
        // One pull, then three pushes: the batch, the culprit alone, the other two together again.
        #expect(await server.transferred.requests == 4)
        #expect(try await server.record(saved[0].id) == nil)
        #expect(try await server.record(saved[1].id) != nil)
        #expect(try await server.record(saved[2].id) != nil)
        #expect(try device.store.fetch(Issue.self, id: saved[0].id)?.sync.syncStatus == .failed)
        #expect(try device.store.mutations(status: .inFlight).isEmpty)

        // Its cause gone, the user retries: it goes under a new key and lands.
        let failedKey = try #require(try device.store.mutations(status: .failed).first?.idempotencyKey)
        #expect(try device.store.retryFailedMutations() == 1)
        let retried = try #require(try device.store.mutations(status: .pending).first)
        #expect(retried.idempotencyKey != failedKey && retried.attempts == 0)
        #expect(try device.store.fetch(Issue.self, id: saved[0].id)?.sync.syncStatus == .pending)
        let again = try await engine.sync(now: { self.now })
        #expect(again.pushed == 1 && again.failed == 0)
        #expect(try await server.record(saved[0].id) != nil)
        #expect(try device.store.status().failedChanges == 0)
        #expect(try device.store.fetch(Issue.self, id: saved[0].id)?.sync.syncStatus == .synced)
    }

    @Test func aConflictWhoseServerRecordCannotBeStoredFailsTheChangeInsteadOfOverwriting() async throws {
        let device = try Device()
        let base = try await InProcessServer()
        let issue = try await device.store.save(Issue(projectID: try await base.newProject(), title: "Leak"), now: now)
        let first = try await SyncEngine(store: device.store, transport: base, random: SeededGenerator(seed: 13))
            .sync(now: { self.now })
        #expect(first.pushed == 1)
        var edited = try #require(try device.store.fetch(Issue.self, id: issue.id))
        edited.title = "Leak under the sink"
        try await device.store.save(edited, now: now.addingTimeInterval(1))

        // A newer app wrote the issue since, with a field this build does not know.
        let stored = try #require(try await base.record(issue.id))
        var newer = stored
        newer.version = stored.version + 1
        newer.fields["estimatedHours"] = .integer(3)
        newer.clocks["estimatedHours"] = HybridTimestamp(
            physicalMilliseconds: Int64(now.timeIntervalSince1970 * 1000) + 2_000, counter: 0, node: NodeID(0xBEEF))
        let transport = ConflictingTransport(base: base, serverRecord: newer)
        let report = try await SyncEngine(store: device.store, transport: transport, random: SeededGenerator(seed: 14))
            .sync(now: { self.now.addingTimeInterval(2) })
        #expect(report.rebased == 0)
        #expect(report.failed == 1)
        #expect(await transport.pushes == 1, "the change is not sent again over a record it was never merged with")
        let failed = try #require(try device.store.mutations(status: .failed).first)
        #expect(failed.lastError?.contains("update the app") == true)
        #expect(try await base.record(issue.id)?.fields["title"] == .text("Leak"))
    }

    @Test func aConflictWhoseServerRecordDoesNotReadFailsTheChangeAndLeavesNothingInFlight() async throws {
        let device = try Device()
        let base = try await InProcessServer()
        let issue = try await device.store.save(Issue(projectID: try await base.newProject(), title: "Leak"), now: now)
        var broken = ServerRecord(
            sequence: 9, entity: .issue, recordID: issue.id, version: 4, fields: issue.record.fields, clocks: [:],
            createdAt: now, updatedAt: now)
        broken.clocks = [:]  // values without clocks: nothing to merge them by
        let transport = ConflictingTransport(base: base, serverRecord: broken)
        let report = try await SyncEngine(store: device.store, transport: transport, random: SeededGenerator(seed: 15))
            .sync(now: { self.now })
        #expect(report.storeError == nil)
        #expect(report.failed == 1)
        #expect(try device.store.mutations(status: .inFlight).isEmpty)
        #expect(try device.store.mutations(status: .failed).count == 1)
    }
}

/// Serves everything from `base`, but answers every push mutation with a conflict carrying `serverRecord`.
actor ConflictingTransport: ForwardingTransport {
    let base: InProcessServer
    let serverRecord: ServerRecord
    private(set) var pushes = 0

    init(base: InProcessServer, serverRecord: ServerRecord) {
        self.base = base
        self.serverRecord = serverRecord
    }

    func push(_ request: PushRequest) async throws(TransportError) -> PushResponse {
        pushes += 1
        return PushResponse(results: request.mutations.map {
            MutationResult(idempotencyKey: $0.idempotencyKey, outcome: .conflict(serverRecord: serverRecord))
        })
    }
    func pull(_ request: PullRequest) async throws(TransportError) -> PullResponse {
        PullResponse(changes: [], nextCursor: request.cursor ?? "0", hasMore: false)
    }
}

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

/// `Outpost-Conflict-Policy` and `--conflict-policy`: one text form, read back exactly, and a typo
/// refused where a person typed it rather than run as another policy.
@Suite(.fieldService) struct ConflictPolicyTextTests {
    @Test func aPolicyReadsBackFromItsText() {
        let policy = ConflictPolicy(overriding: [.issue: .manual, .discount: .clientWins])
        let text = SyncProtocol.conflictPolicyText(policy)
        #expect(text == "discount=clientWins,issue=manual")
        #expect(SyncProtocol.conflictPolicy(fromText: text) == policy)
        #expect(SyncProtocol.conflictPolicyText(ConflictPolicy()) == "default")
        #expect(SyncProtocol.conflictPolicy(fromText: "default") == ConflictPolicy())
    }

    @Test(arguments: ["isue=manual", "ISSUE=manual", "bogus=manual", "issue=manual,issue=clientWins"])
    func aTypedPolicyWithAnUnknownOrRepeatedEntityIsRefused(_ text: String) {
        #expect(SyncProtocol.conflictPolicy(fromText: text, strict: true) == nil)
    }

    @Test(arguments: ["issue=bogus", "issue=MANUAL", "issue=", "=manual", "issue"])
    func aPolicyWithAnUnknownStrategyIsUnreadable(_ text: String) {
        #expect(SyncProtocol.conflictPolicy(fromText: text) == nil)
    }

    @Test func aServersEntityThisAppDoesNotKnowIsSkipped() {
        #expect(SyncProtocol.conflictPolicy(fromText: "issue=manual,punchListItem=serverWins")
            == ConflictPolicy(overriding: [.issue: .manual]))
    }
}

/// A wrapper around a transport (faults, logging, timing) must not hide what the server says about
/// itself: the reliability harness's wrappers once dropped the server's policy, so its runs never
/// compared policies at all.
@Suite(.fieldService) struct ForwardingTransportTests {
    /// Counts pushes and passes everything else on.
    actor CountingPushes: ForwardingTransport {
        let base: InProcessServer
        private(set) var pushes = 0
        init(base: InProcessServer) { self.base = base }
        func push(_ request: PushRequest) async throws(TransportError) -> PushResponse {
            pushes += 1
            return try await base.push(request)
        }
    }

    @Test func aWrapperThatReplacesOnlyPushStillCarriesTheServersPolicy() async throws {
        let device = try SyncEngineTests.Device()
        let server = try await InProcessServer(policy: ConflictPolicy(overriding: [.issue: .serverWins]))
        try await device.store.save(Issue(projectID: try await server.newProject(), title: "Loose rail"))
        let wrapper = CountingPushes(base: server)
        #expect(await wrapper.serverConflictPolicyText == "issue=serverWins")
        let report = try await SyncEngine(store: device.store, transport: wrapper).sync()
        #expect(report.pause == .conflictPolicyMismatch)
        #expect(report.conflictPolicyDifferences.count == 1)
        #expect(await wrapper.pushes == 0, "stopped before it pushed")
    }
}

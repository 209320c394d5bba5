@testable import OutpostServer
import Foundation
import Outpost
import OutpostFieldService
import OutpostFieldServiceTesting
import OutpostModels
import OutpostSync
import OutpostWire
import Testing

/// A server bounds the bundle downloads under way (`SyncServer.maximumConcurrentBundlesPerCaller`) and
/// answers one past them 503 with `Retry-After`: "try again shortly". `outpost presync` and an app's
/// "pre-sync" button failed at once on it (attack 113, F5); `Device.preSync` now asks again after the
/// wait the server names, a few times, before it tells the caller.
@Suite("A pre-sync asks a busy server again", .fieldService)
struct PreSyncBusyTests {
    @Test("A pre-sync that meets 503 while the member's bundle downloads are all under way waits the Retry-After, then imports once one has ended")
    func aPreSyncWaitsOutABusyServer() async throws {
        let server = try await TestServer.start(.sqlite)
        defer { Task { await server.stop() } }
        // A bundle of some 8 MB, more than loopback's socket buffers hold: a download that reads nothing
        // past its status line stays under way.
        let alice = server.transport(token: TestServer.aliceToken)
        let details = String(repeating: "Measured twice, photographed, marked for the plasterer. ", count: 350)
        for batch in 0..<8 {
            let issues = (0..<50).map { index in
                var fields = Sample.issueFields(project: TestServer.projectA, title: "Wall \(batch)-\(index)")
                fields["details"] = .text(details)
                return Sample.create(.issue, fields: fields)
            }
            #expect(try await alice.push(PushRequest(mutations: issues)).results.allSatisfy { $0.outcome.appliedVersion == 1 })
        }
        let path = "/projects/\(TestServer.projectA.uuidString.lowercased())/bundle"
        var held: [RawConnection] = []
        for _ in 0..<SyncServer.maximumConcurrentBundlesPerCaller {
            let connection = try RawConnection(port: server.port, receiveBuffer: 64 * 1024)
            connection.sendGET(path, token: TestServer.aliceToken)
            #expect(await connection.answerStatus() == 200)
            held.append(connection)
        }
        let busy = try await server.send("GET", path, token: TestServer.aliceToken)
        #expect(busy.status == 503 && busy.headers["retry-after"] != nil, "Alice's bundle downloads are all under way")

        let device = try NothingTwiceTests.device("alice-busy", on: server)
        let started = ContinuousClock.now
        let preSync = Task { try await device.preSync(project: TestServer.projectA) }
        // The downloads under way end (their client hangs up) while the pre-sync waits.
        try await Task.sleep(for: .seconds(1))
        held.removeAll()
        let summary = try await preSync.value
        #expect(summary.total.inserted > 400, "\(summary)")
        #expect(ContinuousClock.now - started >= .seconds(2), "the pre-sync was answered at once, not after the wait the server named")
        #expect(try await device.sync().pulled == 0, "the pre-synced device pulls nothing it holds")
    }
}

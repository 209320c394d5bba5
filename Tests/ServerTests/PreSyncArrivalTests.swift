@testable import OutpostServer
import Foundation
import GRDB
import Outpost
import OutpostFieldService
import OutpostFieldServiceTesting
import OutpostModels
import OutpostStore
import OutpostSync
import OutpostWire
import Testing

/// `Device.preSync` imports a bundle while it downloads (`BundleArrival`), against the real server: the
/// same records as a sync brings, and a download cut part way (here by the device's own size limit,
/// past the first megabyte, once the import has begun) rolls the import back and is thrown as the
/// transport's error.
@Suite("Pre-sync imports while the bundle arrives, and a cut download leaves the store as it was", .fieldService)
struct PreSyncArrivalTests {
    /// Issues of about 3.5 KB each: a bundle of some 1.4 MB, past the megabyte after which a fast
    /// download lets the import begin.
    static let issues = 400

    @Test(arguments: Backend.available)
    func aPreSyncWhileArrivingMatchesASyncAndACutOneWritesNothing(_ backend: Backend) async throws {
        let server = try await TestServer.start(backend)
        let writer = try NothingTwiceTests.device("alice-writer", on: server)
        let details = String(repeating: "Photographed, measured and marked for the plasterer. ", count: 66)
        for index in 0..<Self.issues {
            try await writer.save(OutpostModels.Issue(projectID: TestServer.projectA, title: "Wall \(index)", details: details))
        }
        #expect(try await writer.sync().pushed == Self.issues)
        let bundle = server.directory.appendingPathComponent("measured.json")
        let size = try await server.transport(token: TestServer.aliceToken).downloadBundle(
            project: TestServer.projectA, format: .json, to: bundle)
        #expect(size > 1 << 20, "the bundle (\(size) bytes) is too small for the import to begin before it is whole")

        let presynced = try NothingTwiceTests.device("alice-presynced", on: server)
        let summary = try await presynced.preSync(project: TestServer.projectA)
        #expect(summary.total.inserted == summary.total.records && summary.total.records > Self.issues, "\(summary)")
        let reference = try NothingTwiceTests.device("alice-reference", on: server)
        try await reference.sync()
        #expect(try NothingTwiceTests.issues(on: presynced).sorted { $0.id < $1.id } == NothingTwiceTests.issues(on: reference).sorted { $0.id < $1.id })
        #expect(try await presynced.sync().pulled == 0)

        // The device refuses the bundle once it passes its limit, a little under the whole: the import
        // that began on the first megabyte rolls back.
        var configuration = HTTPTransport.Configuration(baseURL: server.baseURL, schemaVersion: 7, requestTimeout: TestServer.requestTimeout)
        configuration.maximumBundleBytes = size - 64 * 1024
        let limited = try Device(
            path: server.directory.appendingPathComponent("alice-limited.sqlite").path, app: .fieldService,
            transport: HTTPTransport(configuration: configuration, token: TestServer.aliceToken))
        let kept = try await limited.save(OutpostModels.Issue(projectID: TestServer.projectA, title: "Written before the pre-sync"))
        do {
            try await limited.preSync(project: TestServer.projectA)
            Testing.Issue.record("a bundle past the device's limit was imported")
        } catch {
            guard case .transport = error else {
                Testing.Issue.record("expected the transport's error, got \(error)")
                return
            }
        }
        #expect(try NothingTwiceTests.issues(on: limited).map(\.id) == [kept.id])
        #expect(try limited.store.bundlePositions().isEmpty)
    }
}

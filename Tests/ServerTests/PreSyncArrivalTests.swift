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
import Synchronization
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

    /// A server that answers a pre-sync of project A with project B's bundle (broken, or hostile) is
    /// refused: the device holds none of B's records and no position for either (attack 57: it exited
    /// 0, with 20,000 records of the other project and its position stored).
    @Test func aBundleOfAnotherProjectIsRefused() async throws {
        let server = try await TestServer.start(.sqlite)
        let writer = try NothingTwiceTests.device("alice-writer", on: server)
        try await writer.save(OutpostModels.Issue(projectID: TestServer.projectA, title: "Of project A"))
        try await writer.sync()
        let bundle = server.directory.appendingPathComponent("a.json")
        _ = try await server.transport(token: TestServer.aliceToken).downloadBundle(project: TestServer.projectA, format: .json, to: bundle)
        // Project A's bundle made over into one of another project: its header and its records name that one.
        let other = UUID()
        let text = try String(contentsOf: bundle, encoding: .utf8)
            .replacingOccurrences(of: TestServer.projectA.uuidString.lowercased(), with: other.uuidString.lowercased())
        let transport = StallingTransport(base: server.transport(token: TestServer.aliceToken), bundle: Data(text.utf8), stall: .zero)
        let device = try Device(
            path: server.directory.appendingPathComponent("alice-other.sqlite").path, app: .fieldService, transport: transport)
        do {
            try await device.preSync(project: TestServer.projectA)
            Testing.Issue.record("a bundle of another project was imported")
        } catch {
            guard case .bundle(let error) = error, error.code == .outsideProject else {
                Testing.Issue.record("expected outsideProject, got \(error)")
                return
            }
        }
        #expect(try device.records(OutpostModels.Issue.self, where: "projectID", is: .uuid(other)).isEmpty)
        #expect(try device.store.bundlePositions().isEmpty)
    }

    /// A link that slows once the import has begun does not keep the device's write lock: after its
    /// waiting budget the import gives way, a save goes through while the download is stalled, and the
    /// whole bundle imports once it has arrived.
    @Test func aStalledDownloadLetsTheDeviceWriteAndStillImports() async throws {
        let server = try await TestServer.start(.sqlite)
        let writer = try NothingTwiceTests.device("alice-writer", on: server)
        let details = String(repeating: "Photographed, measured and marked for the plasterer. ", count: 66)
        for index in 0..<Self.issues {
            try await writer.save(OutpostModels.Issue(projectID: TestServer.projectA, title: "Wall \(index)", details: details))
        }
        try await writer.sync()
        let bundle = server.directory.appendingPathComponent("prefetched.json")
        _ = try await server.transport(token: TestServer.aliceToken).downloadBundle(project: TestServer.projectA, format: .json, to: bundle)
        let stall = Duration.seconds(12)
        let transport = StallingTransport(base: server.transport(token: TestServer.aliceToken), bundle: try Data(contentsOf: bundle), stall: stall)
        let stallEnded = transport.stallEnded
        let device = try Device(
            path: server.directory.appendingPathComponent("alice-stalled.sqlite").path, app: .fieldService, transport: transport)
        let presync = Task { try await device.preSync(project: TestServer.projectA, format: .json) }
        // Past the import's waiting budget (2 s) into the stall: the write lock is free again.
        try await Task.sleep(for: .seconds(4))
        let saved = try await device.save(OutpostModels.Issue(projectID: TestServer.projectA, title: "Written during the stall"))
        // Saved while the link was still stalled, not once the rest had come and the import had finished
        // (measured against the stall's end rather than a fixed time: a busy host delays both alike).
        #expect(stallEnded.value == nil, "a save waited on an import that waited on the link")
        let summary = try await presync.value
        #expect(summary.total.inserted == summary.total.records, "\(summary)")
        let reference = try NothingTwiceTests.device("alice-reference", on: server)
        try await reference.sync()
        let held = try NothingTwiceTests.issues(on: device).map(\.id)
        #expect(Set(held) == Set(try NothingTwiceTests.issues(on: reference).map(\.id) + [saved.id]))
    }
}

/// A transport whose bundle download writes its first megabyte and a half at once, then stalls for
/// `stall` before the rest: a link that was fast, then slowed (the bytes are fetched beforehand).
struct StallingTransport: ForwardingTransport {
    let base: HTTPTransport
    let bundle: Data
    let stall: Duration
    /// When the stall ended; nil until then.
    let stallEnded = Moment()

    /// An instant noted once, read from any task.
    final class Moment: Sendable {
        private let instant = Mutex<ContinuousClock.Instant?>(nil)
        func mark() { instant.withLock { $0 = .now } }
        var value: ContinuousClock.Instant? { instant.withLock { $0 } }
    }

    func downloadBundle(
        project: UUID, format: BundleFormat, into destination: URL, written: @escaping @Sendable (Int64) -> Void
    ) async throws(TransportError) -> Int64 {
        let first = min(bundle.count - 1, 3 << 19)
        do {
            try bundle.prefix(first).write(to: destination)
            written(Int64(first))
            try await Task.sleep(for: stall)
            stallEnded.mark()
            // Appended to the same file: the import's reader holds it open.
            let handle = try FileHandle(forWritingTo: destination)
            defer { try? handle.close() }
            try handle.seekToEnd()
            try handle.write(contentsOf: bundle.dropFirst(first))
            written(Int64(bundle.count))
        } catch {
            throw TransportError(.noConnection, request: "GET bundle", message: "\(error)", underlying: error)
        }
        return Int64(bundle.count)
    }
}

@testable import OutpostSync
import Foundation
import OutpostFieldService
import OutpostFieldServiceTesting
import OutpostModels
import OutpostSchema
import OutpostServerTesting
import OutpostStore
import OutpostTesting
import OutpostWire
import Testing

/// Photos' original files: after structured data, only when allowed, resumed instead of restarted.
@Suite(.fieldService) struct MediaSyncTests {
    let now = Date(timeIntervalSince1970: 1_795_000_000)

    /// An issue with a photo whose original is `size` bytes of seeded noise.
    func issueWithPhoto(on device: SyncEngineTests.Device, size: Int, server: InProcessServer) async throws -> (MediaAttachment, Data) {
        var generator = SeededGenerator(seed: UInt64(size))
        let bytes = Data((0..<size).map { _ in UInt8.random(in: 0...255, using: &generator) })
        let file = device.folder.appendingPathComponent("IMG_0001.jpg")
        try bytes.write(to: file)
        let issue = try await device.store.save(Issue(projectID: try await server.newProject(), title: "Cracked sill"), now: now)
        let photo = try await device.store.attach(
            MediaAttachment(issueID: issue.id, kind: .photo, fileName: "IMG_0001.jpg", contentType: "image/jpeg",
                            byteSize: 0, sha256: "", capturedAt: now),
            originalAt: file, now: now)
        return (photo, bytes)
    }

    @Test func theOriginalFollowsItsRecordWhenAskedFor() async throws {
        let device = try SyncEngineTests.Device()
        let server = try await InProcessServer()
        let (photo, bytes) = try await issueWithPhoto(on: device, size: 10_000, server: server)
        #expect(photo.byteSize == 10_000, "measured from the file")
        #expect(try device.store.status().pendingMediaUploads == 1)

        let engine = SyncEngine(store: device.store, transport: server, random: SeededGenerator(seed: 3), mediaChunkSize: 4_096)
        let report = try await engine.sync(conditions: SyncConditions(mediaRequested: true), now: { self.now })
        #expect(report.pushed == 2, "the issue and the attachment record went first")
        #expect(report.mediaUploaded == 1)
        #expect(report.mediaBytesUploaded == 10_000)
        #expect(await server.mediaData(for: photo.id) == bytes)
        #expect(try device.store.status().pendingMediaUploads == 0)
    }

    @Test func withoutAGoodConnectionMediaIsHeldBackAndStructuredDataStillFlows() async throws {
        let device = try SyncEngineTests.Device()
        let server = try await InProcessServer()
        let (photo, _) = try await issueWithPhoto(on: device, size: 2_000, server: server)
        let engine = SyncEngine(store: device.store, transport: server, random: SeededGenerator(seed: 4))
        let report = try await engine.sync(conditions: SyncConditions(isMetered: true), now: { self.now })
        #expect(report.pushed == 2)
        #expect(report.mediaHeldBack == 1)
        #expect(await server.mediaData(for: photo.id) == nil)
        #expect(try device.store.status().pendingMediaUploads == 1, "still waiting, not dropped")
    }

    @Test(arguments: [(Int64(50_000), false, false), (-1, false, false), (0, true, false), (10_000, true, true)])
    func aServerClaimingImpossibleUploadProgressNeitherCrashesTheDeviceNorLosesThePhoto(
        received: Int64, complete: Bool, otherAttachment: Bool
    ) async throws {
        let device = try SyncEngineTests.Device()
        let server = try await InProcessServer()
        let (photo, _) = try await issueWithPhoto(on: device, size: 10_000, server: server)
        // The records go to a well-behaved server first; the original waits for a good connection.
        _ = try await SyncEngine(store: device.store, transport: server).sync(now: { self.now })
        let wire = { (value: any Encodable) in String(decoding: try WireCoding.encoder().encode(value), as: UTF8.self) }
        let hostile = try await LocalHTTPServer(routes: [
            "POST /v1/pull": .init(body: try wire(PullResponse(changes: [], nextCursor: "c-9", hasMore: false))),
            "GET /v1/media/\(photo.id.uuidString.lowercased())/upload": .init(body: try wire(MediaUploadStatus(
                attachmentID: otherAttachment ? UUID() : photo.id, receivedBytes: received, totalBytes: 10_000,
                complete: complete))),
        ])
        defer { hostile.stop() }
        let transport = HTTPTransport(configuration: .init(baseURL: hostile.baseURL, schemaVersion: 5), token: "t1")
        let engine = SyncEngine(store: device.store, transport: transport)
        for _ in 0..<2 {
            let report = try await engine.sync(conditions: SyncConditions(mediaRequested: true), now: { self.now })
            #expect(report.mediaUploaded == 0)
            #expect(report.lastTransportError?.code == .invalidResponse)
        }
        #expect(try device.store.pendingMediaUploads().map(\.attachmentID) == [photo.id], "kept for a later try")
    }

    @Test func aCutUploadResumesWhereTheServerStands() async throws {
        let device = try SyncEngineTests.Device()
        let server = try await InProcessServer()
        let (photo, bytes) = try await issueWithPhoto(on: device, size: 10_000, server: server)
        let engine = SyncEngine(store: device.store, transport: server, random: SeededGenerator(seed: 5), mediaChunkSize: 4_096)
        // The structured push goes through; the first chunk lands but its answer is lost.
        _ = try await engine.sync(now: { self.now })
        await server.inject(.dropResponse, on: .mediaUpload)
        let cut = try await engine.sync(conditions: SyncConditions(mediaRequested: true), now: { self.now })
        #expect(cut.mediaUploaded == 0)
        #expect(cut.lastTransportError != nil)
        #expect(await server.mediaData(for: photo.id)?.count == 4_096, "the server kept the chunk it got")

        let resumed = try await engine.sync(conditions: SyncConditions(mediaRequested: true), now: { self.now })
        #expect(resumed.mediaUploaded == 1)
        #expect(resumed.mediaBytesUploaded == 10_000 - 4_096, "only the rest was sent again")
        #expect(await server.mediaData(for: photo.id) == bytes)
    }

    @Test func aMissingOriginalFailsThatUploadOnly() async throws {
        let device = try SyncEngineTests.Device()
        let server = try await InProcessServer()
        let (photo, _) = try await issueWithPhoto(on: device, size: 100, server: server)
        try FileManager.default.removeItem(at: device.store.mediaFolder.appendingPathComponent(photo.id.uuidString.lowercased()))
        let engine = SyncEngine(store: device.store, transport: server, random: SeededGenerator(seed: 6))
        let report = try await engine.sync(conditions: SyncConditions(mediaRequested: true), now: { self.now })
        #expect(report.pushed == 2)
        #expect(report.mediaFailed == 1)
        #expect(try device.store.status().pendingMediaUploads == 0)
    }

    /// The connection returns while a run started offline still hangs on a request that will time out:
    /// that run ends without sending anything, and must not have swallowed the reconnect's sync.
    @Test func aReconnectDuringARunningSyncStillSyncsOnceThatRunEnds() async throws {
        let device = try SyncEngineTests.Device()
        let server = try await InProcessServer()
        let issue = try await device.store.save(Issue(projectID: try await server.newProject(), title: "Loose rail"), now: now)
        let monitor = ConnectivityMonitor(transport: server)
        let hangingPull = DamagingTransport(base: server, timingOutPull: 1)
        let engine = SyncEngine(store: device.store, transport: hangingPull, random: SeededGenerator(seed: 8))
        let follower = Task { await engine.syncOnReconnect(of: monitor) }
        defer { follower.cancel() }
        await server.inject(.dropRequest, on: .health)
        #expect(await monitor.checkNow() == .offline)

        let hanging = Task { try await engine.sync(now: { self.now }) }
        while await hangingPull.pulls < 1 { try await Task.sleep(for: .milliseconds(5)) }
        // Checked again until it answers, as in the test above: one check may meet the server's 3 s
        // database probe on a loaded host and say offline (a clean-clone run beside a build did).
        #expect(await eventually(within: .seconds(60)) { await monitor.checkNow().isOnline }, "back online while the run hangs")
        let ended = try await hanging.value
        #expect(ended.lastTransportError?.code == .timedOut && ended.pushed == 0)
        #expect(await eventually(within: .seconds(60)) { (try? await server.record(issue.id)) != nil },
            "the reconnect's sync ran once the hanging run ended")
        await monitor.stop()
    }

    @Test func aReturningConnectionStartsASync() async throws {
        let device = try SyncEngineTests.Device()
        let server = try await InProcessServer()
        let issue = try await device.store.save(Issue(projectID: try await server.newProject(), title: "Loose rail"), now: now)
        let monitor = ConnectivityMonitor(transport: server)
        let engine = SyncEngine(store: device.store, transport: server, random: SeededGenerator(seed: 7))
        let follower = Task { await engine.syncOnReconnect(of: monitor) }
        defer { follower.cancel() }

        await server.inject(.dropRequest, on: .health)
        #expect(await monitor.checkNow() == .offline)
        #expect(try await server.record(issue.id) == nil, "offline: nothing sent")
        // Checked again until it answers: the server's health probes its database within 3 s and
        // answers 503 past that (a load balancer's readiness), which a full test run on two cores
        // reached once, so one check said offline for a host that was only slow.
        #expect(await eventually(within: .seconds(60)) { await monitor.checkNow().isOnline })
        #expect(await eventually(within: .seconds(60)) { (try? await server.record(issue.id)) != nil },
            "the connection came back and a sync ran")
        await monitor.stop()
    }
}


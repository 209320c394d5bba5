import Foundation
import OutpostFieldService
import OutpostFieldServiceTesting
import OutpostModels
import OutpostSchema
import OutpostStore
import OutpostSync
import OutpostWire
import Testing

/// An `HTTPTransport` that writes down every call in order and can cut the connection at a chosen
/// chunk: that chunk reaches the server, which keeps it, but its answer never comes back, so the device
/// is left one chunk behind the server, the case a resumed upload has to get right.
actor RecordingTransport: ForwardingTransport {
    enum Call: Equatable {
        /// A push, with the records the server answered `applied` for.
        case push(applied: Set<UUID>)
        case uploadStatus(receivedBytes: Int64)
        /// A chunk sent: where it starts and how long it is.
        case chunk(offset: Int64, length: Int)
    }

    let base: HTTPTransport
    /// Which chunk (1-based) loses its answer; nil never cuts.
    private let cutAtChunk: Int?
    private var chunksSent = 0
    private(set) var calls: [Call] = []

    init(_ base: HTTPTransport, cutAtChunk: Int? = nil) {
        self.base = base
        self.cutAtChunk = cutAtChunk
    }

    var chunks: [(offset: Int64, length: Int)] {
        calls.compactMap { if case .chunk(let offset, let length) = $0 { (offset, length) } else { nil } }
    }

    func push(_ request: PushRequest) async throws(TransportError) -> PushResponse {
        let response = try await base.push(request)
        let ids = Dictionary(request.mutations.map { ($0.idempotencyKey, $0.recordID) }, uniquingKeysWith: { first, _ in first })
        calls.append(.push(applied: Set(response.results.compactMap { result in
            if case .applied = result.outcome { ids[result.idempotencyKey] } else { nil }
        })))
        return response
    }

    func mediaUploadStatus(for attachmentID: UUID) async throws(TransportError) -> MediaUploadStatus {
        let status = try await base.mediaUploadStatus(for: attachmentID)
        calls.append(.uploadStatus(receivedBytes: status.receivedBytes))
        return status
    }

    func uploadMedia(_ chunk: MediaChunk) async throws(TransportError) -> MediaUploadStatus {
        calls.append(.chunk(offset: chunk.offset, length: chunk.data.count))
        let status = try await base.uploadMedia(chunk)
        chunksSent += 1
        if chunksSent == cutAtChunk {
            throw TransportError(.noConnection, request: "PUT /media", message: "connection cut after the server took the chunk")
        }
        return status
    }
}

@Suite("End to end: the engine's media phase against the real server", .fieldService)
struct EngineMediaEndToEndTests {
    static let chunkSize = 16 * 1024

    @Test("An issue and its photo created offline sync; the photo goes after its record, survives a cut and resumes from the server's offset", arguments: Backend.available)
    func photoUploadResumesAfterCut(_ backend: Backend) async throws {
        let server = try await TestServer.start(backend)
        let folder = server.directory
        // A photo of 100,000 bytes: seven 16 KiB chunks, the last one short.
        var generator = SystemRandomNumberGenerator()
        let bytes = Data((0..<100_000).map { _ in UInt8.random(in: 0...255, using: &generator) })
        let photo = folder.appendingPathComponent("IMG_0001.jpg")
        try bytes.write(to: photo)

        // Offline: the issue, then the photo attached to it. The store keeps its own copy.
        let device = try LocalStore.open(at: folder.appendingPathComponent("device.sqlite").path)
        let issue = try await device.save(OutpostModels.Issue(
            projectID: TestServer.projectA, title: "Cracked sill", details: "East window", priority: .high))
        let attachment = try await device.attach(
            MediaAttachment(
                issueID: issue.id, kind: .photo, fileName: photo.lastPathComponent, contentType: "image/jpeg",
                byteSize: 0, sha256: "", capturedAt: Timestamp.now()),
            originalAt: photo)
        #expect(attachment.byteSize == Int64(bytes.count))
        #expect(attachment.sha256 == sha256Hex(bytes))
        try FileManager.default.removeItem(at: photo)  // the camera roll is cleaned; the store's copy remains
        // The server does not know the attachment yet, so its file is not ready to go.
        #expect(try device.pendingMediaUploads().isEmpty)

        // First run: structured data, then chunks until the connection drops after the third chunk
        // reached the server.
        let cut = RecordingTransport(server.transport(token: TestServer.aliceToken), cutAtChunk: 3)
        let first = try await SyncEngine(store: device, transport: cut, mediaChunkSize: Self.chunkSize)
            .sync(conditions: SyncConditions(mediaRequested: true))
        #expect(first.pushed == 2)
        #expect(first.failed == 0)
        #expect(first.mediaUploaded == 0)
        #expect(first.lastTransportError?.code == .noConnection)
        let firstCalls = await cut.calls
        let firstMedia = try #require(firstCalls.firstIndex { if case .push = $0 { false } else { true } })
        let acknowledged = firstCalls[..<firstMedia].reduce(into: Set<UUID>()) {
            if case .push(let applied) = $1 { $0.formUnion(applied) }
        }
        #expect(acknowledged == [issue.id, attachment.id], "both records acknowledged before any media call")
        #expect(firstCalls[firstMedia] == .uploadStatus(receivedBytes: 0))
        #expect(firstCalls[firstMedia...].allSatisfy { if case .push = $0 { false } else { true } })
        #expect(await cut.chunks.map { $0.offset } == [0, 16_384, 32_768])
        #expect(try device.status().pendingChanges == 0)

        // The device saved progress up to the last answer it got; the server holds one chunk more.
        let held = Int64(3 * Self.chunkSize)
        let pending = try #require(try device.pendingMediaUploads().first)
        #expect(pending.attachmentID == attachment.id)
        #expect(pending.uploadedBytes == Int64(2 * Self.chunkSize))
        let observer = server.transport(token: TestServer.aliceToken)
        #expect(try await observer.mediaUploadStatus(for: attachment.id).receivedBytes == held)

        // Next run (the app relaunched, a new connection): it asks the server where it stands and
        // sends only what the server lacks.
        let resumed = RecordingTransport(server.transport(token: TestServer.aliceToken))
        let second = try await SyncEngine(store: device, transport: resumed, mediaChunkSize: Self.chunkSize)
            .sync(conditions: SyncConditions(mediaRequested: true))
        #expect(second.pushed == 0)
        #expect(second.mediaUploaded == 1)
        #expect(second.mediaFailed == 0)
        #expect(second.mediaBytesUploaded == Int64(bytes.count) - held)
        let secondCalls = await resumed.calls
        #expect(secondCalls.first { if case .uploadStatus = $0 { true } else { false } } == .uploadStatus(receivedBytes: held))
        let resent = await resumed.chunks
        #expect(resent.map { $0.offset } == [held, held + 16_384, held + 32_768, held + 49_152])
        #expect(resent.reduce(0) { $0 + $1.length } == bytes.count - Int(held))

        // The server received every byte exactly once (its counter of media bytes taken in), and its
        // file is the photo, byte for byte.
        let mediaBytes = try await server.scrape().split(separator: "\n")
            .first { $0.hasPrefix("outpost_media_bytes_total ") }
            .flatMap { Int($0.split(separator: " ").last ?? "") }
        #expect(mediaBytes == bytes.count)
        let stored = try Data(contentsOf: URL(fileURLWithPath: server.server.configuration.mediaDirectory)
            .appendingPathComponent(attachment.id.uuidString.lowercased()))
        #expect(stored == bytes)
        #expect(sha256Hex(stored) == attachment.sha256)
        let status = try await observer.mediaUploadStatus(for: attachment.id)
        #expect(status.complete)
        #expect(status.receivedBytes == Int64(bytes.count))
        #expect(try device.pendingMediaUploads().isEmpty)
        #expect(try device.status().pendingMediaUploads == 0)
        await server.stop()
    }
}

import Foundation
import OutpostModels
@testable import OutpostServer
import OutpostSync
import Testing

/// The media folder cannot be filled by one project or one member, and a deleted attachment's file goes.
@Suite("Media quotas and deleted attachments' files")
struct MediaQuotaTests {
    /// Pushes an issue of project A with one attachment per file, as Alice; returns the attachments' ids.
    static func attachments(_ files: [Data], on server: TestServer, token: String = TestServer.aliceToken)
        async throws -> [UUID]
    {
        let issue = Sample.create(.issue, fields: Sample.issueFields(project: TestServer.projectA))
        let attachments = files.map { Sample.create(.mediaAttachment, fields: Sample.attachmentFields(issue: issue.recordID, bytes: $0)) }
        let results = try await server.transport(token: token).push(PushRequest(mutations: [issue] + attachments)).results
        #expect(results.allSatisfy { $0.outcome.appliedVersion == 1 }, "\(results)")
        return attachments.map(\.recordID)
    }

    /// Uploads `bytes` in one chunk; the status and the error code, if any.
    static func upload(_ bytes: Data, to attachment: UUID, on server: TestServer, token: String = TestServer.aliceToken)
        async throws -> (status: Int, code: ServerErrorCode?)
    {
        let answer = try await server.send(
            "PUT", "/media/\(attachment.uuidString.lowercased())/upload", token: token, body: bytes,
            headers: ["Content-Range": "bytes 0-\(bytes.count - 1)/\(bytes.count)", "Outpost-Media-SHA256": sha256Hex(bytes)])
        return (answer.status, try? JSONDecoder().decode(ErrorBody.self, from: answer.body).code)
    }

    @Test("A project's media past its quota is refused, and deleting an attachment drops its file and frees its room", arguments: Backend.available)
    func aProjectQuotaHoldsAndADeletedAttachmentsFileGoes(_ backend: Backend) async throws {
        let server = try await TestServer.start(backend) { $0.maximumMediaBytesPerProject = 10 }
        defer { Task { await server.stop() } }
        let first = Data("photo1".utf8), second = Data("photo2".utf8)
        let ids = try await Self.attachments([first, second], on: server)
        #expect(try await Self.upload(first, to: ids[0], on: server).status == 200)
        let refused = try await Self.upload(second, to: ids[1], on: server)
        #expect(refused.status == 413 && refused.code == .payloadTooLarge, "6 + 6 bytes past a 10-byte quota")

        // The first attachment is deleted: its file goes with the next sweep, and the second fits.
        let deleted = try await server.transport(token: TestServer.aliceToken).push(PushRequest(mutations: [
            PushMutation(idempotencyKey: UUID(), entity: .mediaAttachment, operation: .delete, recordID: ids[0], baseVersion: 1,
                deletion: Sample.clock(5_000)),
        ])).results
        #expect(deleted.first?.outcome.appliedVersion == 2)
        let file = server.server.media.fileURL(of: ids[0])
        #expect(FileManager.default.fileExists(atPath: file.path))
        await server.server.media.sweep(now: Timestamp.now())
        #expect(!FileManager.default.fileExists(atPath: file.path), "a deleted attachment's file is not kept")
        #expect(try await Self.upload(second, to: ids[1], on: server).status == 200)
    }

    @Test("One member's media past their quota is refused, while another member's goes", arguments: Backend.available)
    func aMemberQuotaHolds(_ backend: Backend) async throws {
        let server = try await TestServer.start(backend) { $0.maximumMediaBytesPerUser = 10 }
        defer { Task { await server.stop() } }
        let files = [Data("photo1".utf8), Data("photo2".utf8)]
        let alices = try await Self.attachments(files, on: server)
        #expect(try await Self.upload(files[0], to: alices[0], on: server).status == 200)
        #expect(try await Self.upload(files[1], to: alices[1], on: server).code == .payloadTooLarge)
        let carols = try await Self.attachments([files[1]], on: server, token: TestServer.carolToken)
        #expect(try await Self.upload(files[1], to: carols[0], on: server, token: TestServer.carolToken).status == 200)
    }
}

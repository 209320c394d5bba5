import Foundation
import OutpostFieldService
import OutpostFieldServiceTesting
import OutpostModels
import OutpostSchema
@testable import OutpostServer
import OutpostSync
import OutpostWire
import Testing

/// A file's chunk is let in by the uploader's token and role when it arrives, and its state is saved
/// when the database's writer takes it: a last chunk waiting behind other writes while the office
/// revoked the phone's token or removed its member still completed the file, for every teammate to
/// download (attack 115, F2). Access is asked again in the transaction that saves the chunk, for every
/// way an office ends it.
@Suite("An upload whose access ended while it waited", .fieldService)
struct UploadAfterAccessEndsTests {
    /// Each way the office ends an uploader's right to add a file, and the answer the upload then gets.
    enum Ending: String, CaseIterable, CustomTestStringConvertible {
        case tokenRevoked, tokenExpired, memberRemoved, roleMadeViewer, projectArchived
        var testDescription: String { rawValue }

        /// The status the uploader gets: 401 for a token gone, 404 for a project no longer theirs (as for
        /// one never theirs), 403 for a role that writes nothing, 409 for an archived project.
        var status: Int {
            switch self {
            case .tokenRevoked, .tokenExpired: 401
            case .memberRemoved: 404
            case .roleMadeViewer: 403
            case .projectArchived: 409
            }
        }

        /// Whether the same user, through a token the office left, may finish the upload afterwards.
        var userKeepsAccess: Bool { self == .tokenRevoked || self == .tokenExpired }

        func apply(on server: TestServer, phone: String) async throws {
            switch self {
            case .tokenRevoked: #expect(try await server.server.revokeToken(phone))
            case .tokenExpired: try await server.execute("UPDATE tokens SET expires_at = 1 WHERE expires_at IS NOT NULL")
            case .memberRemoved: #expect(try await server.server.removeMember(TestServer.alice, from: TestServer.projectA))
            case .roleMadeViewer:
                try await server.server.addMember(TestServer.alice, to: TestServer.projectA, role: Member.Role.viewer.rawValue)
            case .projectArchived: #expect(try await server.server.archiveProject(TestServer.projectA))
            }
        }
    }

    @Test("A chunk let in before its uploader's access ended saves nothing: the server's check and the storage's own, in the transaction that saves it; the file is not complete for anyone",
          arguments: Backend.available, Ending.allCases)
    func nothingSavedAfterAccessEnds(_ backend: Backend, _ ending: Ending) async throws {
        let server = try await TestServer.start(backend)
        defer { Task { await server.stop() } }
        let bytes = Data((0..<100_000).map { UInt8(truncatingIfNeeded: $0 &* 13) })
        let digest = sha256Hex(bytes)
        let id = try #require(try await MediaQuotaTests.attachments([bytes], on: server).first)
        let phone = try await server.server.issueToken(
            for: TestServer.alice, expiresAt: ending == .tokenExpired ? Date().addingTimeInterval(3600) : nil)
        // Let in as the route lets a request in when it arrives; the first chunk lands.
        let uploader = try await server.server.caller(bearing: phone)
        let first = try ContentRange(header: "bytes 0-59999/100000")
        let started = try await server.server.receiveMedia(bytes.prefix(60_000), range: first, sha256: digest, for: id, by: uploader)
        #expect(started.receivedBytes == 60_000 && !started.complete)

        try await ending.apply(on: server, phone: phone)

        // The last chunk, through the server as a waiting request meets it...
        let last = try ContentRange(header: "bytes 60000-99999/100000")
        await Self.expectRefused(ending, "the last chunk") {
            try await server.server.receiveMedia(bytes.suffix(from: 60_000), range: last, sha256: digest, for: id, by: uploader)
        }
        // ...and the storage's save, as a chunk past the server's checks meets it in its transaction.
        let finished = MediaUploadState(totalBytes: 100_000, receivedBytes: 100_000, sha256: digest, complete: true)
        await Self.expectRefused(ending, "the storage's save of the finished state") {
            try await server.server.storage.setMediaUpload(finished, for: id, now: Timestamp.now(), uploadedBy: uploader)
        }
        let unfinished = MediaUploadState(totalBytes: 100_000, receivedBytes: 80_000, sha256: digest, complete: false)
        await Self.expectRefused(ending, "the storage's save of a chunk") {
            try await server.server.storage.setMediaUpload(unfinished, for: id, now: Timestamp.now(), uploadedBy: uploader)
        }

        // Nothing of it was saved: a teammate finds no original, and the server holds what it held, on
        // its disk too (the refused chunk's bytes are not kept until a next chunk that may never come).
        let held = try await server.server.storage.mediaUpload(id)
        #expect(held?.receivedBytes == 60_000 && held?.complete == false, "\(String(describing: held))")
        let part = server.server.media.partURL(of: id)
        #expect((try? FileManager.default.attributesOfItem(atPath: part.path)[.size] as? Int) == 60_000, "the part file keeps the refused chunk's bytes")
        #expect(!FileManager.default.fileExists(atPath: server.server.media.fileURL(of: id).path))
        do {
            _ = try await server.server.mediaOriginal(of: id, by: TestServer.caller(TestServer.carol))
            Issue.record("a teammate downloaded a file whose upload was refused")
        } catch {
            #expect(error.httpStatus == 404, "\(error)")
        }
        guard ending.userKeepsAccess else { return }
        // The user's other token finishes the same upload from where the server stands.
        let resumed = try await server.server.receiveMedia(
            bytes.suffix(from: 60_000), range: last, sha256: digest, for: id, by: TestServer.caller(TestServer.alice))
        #expect(resumed.complete)
        let original = try await server.server.mediaOriginal(of: id, by: TestServer.caller(TestServer.carol))
        #expect(try Data(contentsOf: URL(fileURLWithPath: original.path)) == bytes)
    }

    private static func expectRefused<Result>(
        _ ending: Ending, _ what: String, _ work: () async throws -> Result, sourceLocation: SourceLocation = #_sourceLocation
    ) async {
        do {
            _ = try await work()
            Issue.record("\(what) was saved after \(ending.rawValue)", sourceLocation: sourceLocation)
        } catch {
            #expect((error as? ServerError)?.httpStatus == ending.status, "\(what): \(error)", sourceLocation: sourceLocation)
        }
    }
}

@testable import OutpostServer
import Foundation
import GRDB
import OutpostFieldService
import OutpostFieldServiceTesting
import OutpostModels
import OutpostStore
import OutpostSync
import OutpostWire
import Testing

/// Attack 71, finding 2: a cursor whose positions were damaged on the device (`999…`) was answered with
/// empty pages for ever, and every sync said it was complete: the device never got another record.
/// Every cursor the server writes is sealed (`CursorSeal`); one whose seal does not verify is refused
/// `unknown_cursor`, and the engine pulls everything again.
@Suite("Sealed cursors: a damaged cursor is refused, and the device catches up", .fieldService)
struct SealedCursorTests {
    @Test("A cursor damaged on the device is refused and the next sync brings everything, the new record too", arguments: Backend.available)
    func aDamagedCursorIsRefusedAndTheDeviceCatchesUp(_ backend: Backend) async throws {
        let server = try await TestServer.start(backend)
        defer { Task { await server.stop() } }
        let path = server.directory.appendingPathComponent("crew.sqlite").path
        let store = try LocalStore.open(at: path)
        let engine = SyncEngine(store: store, transport: server.transport(token: TestServer.aliceToken))
        _ = try await engine.sync()
        let cursor = try #require(try store.pullCursor())
        let (body, tag) = CursorSeal.parts(of: cursor)
        #expect(tag != nil, "every cursor the server writes is sealed: \(cursor)")

        // The device's stored cursor is damaged: every position past anything the server holds (its
        // checkpoint, after `!`, left as it was).
        let positions = body.prefix { $0 != "!" }, sealedCheckpoint = body.drop { $0 != "!" }
        let damaged = positions.replacingOccurrences(of: #"[0-9]{1,18}(?=[:,]|$)"#, with: "999999999999999999", options: .regularExpression)
            + sealedCheckpoint + "~" + (tag ?? "")
        #expect(damaged != cursor)
        try await DatabaseQueue(path: path).write { db in
            try db.execute(sql: "UPDATE sync_cursors SET cursor = ?", arguments: [damaged])
        }
        let transport = server.transport(token: TestServer.aliceToken)
        let refused = try await #require(throws: TransportError.self) {
            _ = try await transport.pull(PullRequest(cursor: damaged, limit: 10))
        }
        #expect(refused.status == 409 && refused.serverCode == .unknownCursor, "\(refused)")

        // A teammate writes after the damage; the crew's next sync must bring it.
        let teammate = try LocalStore.open(at: server.directory.appendingPathComponent("office.sqlite").path)
        let issue = try await teammate.save(OutpostModels.Issue(projectID: TestServer.projectA, title: "Written after the damage"))
        _ = try await SyncEngine(store: teammate, transport: server.transport(token: TestServer.carolToken)).sync()
        _ = try await engine.sync()
        #expect(try store.fetch(OutpostModels.Issue.self, id: issue.id)?.title == "Written after the damage")
        let healed = try #require(try store.pullCursor())
        #expect(CursorSeal.parts(of: healed).tag != nil && healed != damaged)
    }

    @Test("A cursor without a seal (written before servers sealed them) is read with the checkpoint it came with, and its next cursor is sealed; another server's seal is refused", arguments: Backend.available)
    func anUnsealedCursorIsReadAndAnotherServersSealRefused(_ backend: Backend) async throws {
        let server = try await TestServer.start(backend)
        defer { Task { await server.stop() } }
        let alice = server.transport(token: TestServer.aliceToken)
        let first = try await alice.pull(PullRequest(cursor: nil, limit: 1))
        #expect(first.hasMore)
        let (sealedBody, tag) = CursorSeal.parts(of: first.nextCursor)
        // An older server's cursor: positions alone, no checkpoint and no seal.
        let body = sealedBody.prefix { $0 != "!" }
        #expect(sealedBody == body + "!" + (first.checkpoint ?? ""), "a cursor carries its answer's checkpoint")
        let sealed = try await alice.pull(PullRequest(cursor: first.nextCursor, limit: 1_000))
        let unsealed = try await alice.pull(PullRequest(cursor: String(body), limit: 1_000, checkpoint: first.checkpoint))
        #expect(sealed.changes == unsealed.changes && !sealed.changes.isEmpty)
        #expect(unsealed.nextCursor == sealed.nextCursor && CursorSeal.parts(of: unsealed.nextCursor).tag != nil)
        // The same cursor sealed by another server (another key) is not this one's.
        let other = try await TestServer.start(backend)
        defer { Task { await other.stop() } }
        let foreign = try await other.transport(token: TestServer.aliceToken).pull(PullRequest(cursor: nil, limit: 1)).nextCursor
        #expect(CursorSeal.parts(of: foreign).body.prefix { $0 != "!" } == body && CursorSeal.parts(of: foreign).tag != tag)
        for text in [
            foreign, String(sealedBody) + "~0000000000000000", String(sealedBody) + "~" + String((tag ?? "").reversed()),
            String(sealedBody),  // a checkpoint without its seal: damaged
        ] {
            let error = try await #require(throws: TransportError.self) {
                _ = try await alice.pull(PullRequest(cursor: text, limit: 10))
            }
            #expect(error.status == 409 && error.serverCode == .unknownCursor, "\(text): \(error)")
        }
    }

    /// Attack 72, finding 1: an unsealed cursor was read whatever its numbers, then sealed on the next
    /// page, so `999999:<project>` set on the device made it miss that project's changes for good, and
    /// a sealed cursor whose tag was all digits became such a cursor by one damaged byte (`~` to `=`).
    /// An unsealed cursor is read only up to the checkpoint sent with it.
    @Test("An unsealed cursor past the checkpoint sent with it is refused: a damaged one, and a sealed one whose ~ became =", arguments: Backend.available)
    func anUnsealedCursorPastItsCheckpointIsRefused(_ backend: Backend) async throws {
        let server = try await TestServer.start(backend)
        defer { Task { await server.stop() } }
        let alice = server.transport(token: TestServer.aliceToken)
        let first = try await alice.pull(PullRequest(cursor: nil, limit: 1_000))
        let checkpoint = try #require(first.checkpoint)
        let newest = try #require(Int64(checkpoint.split(separator: ".")[0]))
        let project = TestServer.projectA.storageText
        let (sealedBody, tag) = CursorSeal.parts(of: first.nextCursor)
        let body = sealedBody.prefix { $0 != "!" }  // an older server's cursor had no checkpoint
        let digits = String((tag ?? "").unicodeScalars.map { Character(String($0.value % 10)) })
        for damaged in [
            "999999:\(project)", "\(newest + 1):\(project)", "\(newest):\(project)=\(newest + 1)",
            String(body) + "=" + digits, String(newest + 1),
        ] {
            for sent in [checkpoint, nil] as [String?] {
                let error = try await #require(throws: TransportError.self, "\(damaged)") {
                    _ = try await alice.pull(PullRequest(cursor: damaged, limit: 10, checkpoint: sent))
                }
                #expect(error.status == 409 && error.serverCode == .unknownCursor, "\(damaged): \(error)")
            }
        }
        // Today's cursor whose `~` became `=`: outside the document's pattern (its checkpoint's mark runs
        // on), refused as well, and the device pulls everything again as for any unknown cursor.
        let error = try await #require(throws: TransportError.self) {
            _ = try await alice.pull(PullRequest(cursor: String(sealedBody) + "=" + digits, limit: 10))
        }
        #expect(error.status == 400 && error.serverCode == .unknownCursor, "\(error)")
        // At the checkpoint, an unsealed cursor reads on from there.
        let atCheckpoint = try await alice.pull(PullRequest(cursor: "\(newest):\(project)", limit: 10, checkpoint: checkpoint))
        #expect(atCheckpoint.changes.isEmpty && CursorSeal.parts(of: atCheckpoint.nextCursor).tag != nil)
    }
}

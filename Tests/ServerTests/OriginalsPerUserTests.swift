import Foundation
@testable import OutpostServer
import Testing

/// A member's original downloads under way are bounded, as their bundle downloads are: one member who
/// opened 24 at once (each a file streamed at its client's pace) made everyone else's requests 28 times
/// slower over loopback (attack 113, F6). Past `SyncServer.maximumConcurrentOriginalsPerCaller` a download
/// is refused with 503 and Retry-After, which clients treat as "try again shortly"; other members are not.
@Suite("Original downloads per member", .fieldService)
struct OriginalsPerUserTests {
    @Test("A member's downloads past the bound get 503 with Retry-After while theirs stream; another member's comes whole; once theirs end, theirs come again")
    func aMembersDownloadsAreBounded() async throws {
        let server = try await TestServer.start()
        defer { Task { await server.stop() } }
        let size = 24 << 20
        let photo = try #require(try await OriginalsTests.alicesPhotos(1, size: size, on: server).first)
        let path = "/media/\(photo.attachment.id.uuidString.lowercased())"
        // Carol's downloads that read nothing past the status line: each stays under way.
        var stopped: [RawConnection] = []
        for _ in 0..<SyncServer.maximumConcurrentOriginalsPerCaller {
            let connection = try RawConnection(port: server.port, receiveBuffer: 64 * 1024)
            connection.sendGET(path, token: TestServer.carolToken)
            #expect(await connection.answerStatus() == 200)
            stopped.append(connection)
        }
        let refused = try await server.send(
            "GET", "/media/\(photo.attachment.id.uuidString.lowercased())", token: TestServer.carolToken)
        #expect(refused.status == 503, "one download past Carol's bound")
        #expect(refused.headers["retry-after"] != nil)
        // Alice is not held back by Carol's downloads.
        let alices = try RawConnection(port: server.port, receiveBuffer: 64 * 1024)
        alices.sendGET(path, token: TestServer.aliceToken)
        let received = await alices.readSteadily(chunk: 256 * 1024, pause: .milliseconds(1))
        #expect(Data(received.suffix(size)) == photo.bytes, "Alice's original came whole")
        // Carol's stalled downloads end (their client hangs up): her places come back.
        stopped.removeAll()
        var status = 0
        for _ in 0..<100 where status != 200 {
            try await Task.sleep(for: .milliseconds(100))
            let again = try RawConnection(port: server.port, receiveBuffer: 64 * 1024)
            again.sendGET(path, token: TestServer.carolToken)
            status = await again.answerStatus() ?? 0
        }
        #expect(status == 200, "Carol downloads again once her stalled downloads ended")
    }
}

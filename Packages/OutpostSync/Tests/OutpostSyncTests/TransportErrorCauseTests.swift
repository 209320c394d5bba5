import Foundation
import OutpostModels
import OutpostWire
import Testing
@testable import OutpostSync

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A `TransportError` keeps the error that caused it as a value, not only as text.
@Suite struct TransportErrorCauseTests {
    @Test func aServerThatIsGoneLeavesURLLoadingsError() async throws {
        // A port that was just listening and is closed now: the connection is refused.
        let server = try LocalHTTPServer(routes: [:])
        let baseURL = server.baseURL
        server.stop()
        let transport = HTTPTransport(
            configuration: .init(baseURL: baseURL, schemaVersion: 5, requestTimeout: .seconds(5)), token: "t1")
        let error = try await #require(throws: TransportError.self) { try await transport.health() }
        #expect(error.code == .noConnection)
        let cause = try #require(error.underlying as? URLError, "the cause is \(String(describing: error.underlying))")
        #expect(cause.code == .cannotConnectToHost)
        #expect(error.message == cause.localizedDescription, "the message is as before")

        let destination = FileManager.default.temporaryDirectory.appendingPathComponent("outpost-cause-\(UUID().uuidString).xml")
        let download = try await #require(throws: TransportError.self) {
            try await transport.downloadBundle(project: UUID(), format: .xml, to: destination)
        }
        #expect(download.underlying is URLError, "the cause is \(String(describing: download.underlying))")
    }
}

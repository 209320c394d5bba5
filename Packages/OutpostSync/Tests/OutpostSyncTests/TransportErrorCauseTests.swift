@testable import OutpostSync
import Foundation
import OutpostFieldService
import OutpostFieldServiceTesting
import OutpostModels
import OutpostSchema
import OutpostWire
import Testing

/// A `TransportError` keeps the error that caused it as a value, not only as text.
@Suite(.fieldService) struct TransportErrorCauseTests {
    @Test func aServerThatIsGoneLeavesTheHTTPClientsError() async throws {
        // A port nothing listens on: the connection is refused. Held bound meanwhile (a stopped server's
        // port was once given to another test's server at once, which answered instead).
        let refused = try RefusedPort()
        defer { refused.close() }
        let baseURL = URL(string: "http://127.0.0.1:\(refused.port)/v1/")!
        let transport = HTTPTransport(
            configuration: .init(baseURL: baseURL, schemaVersion: 5, requestTimeout: .seconds(30), transferTimeout: .seconds(3_600)),
            token: "t1")
        // Refused, not waited out: the client does not retry the connection until its timeout (the
        // sync engine's retry policy does that). Judged by the outcome, not a clock: under the full
        // suite a test waits its turn on the cooperative pool for minutes, so the whole-exchange
        // deadline is set past any run (once, at 300 s, it fired before the refusal was read).
        let error = try await #require(throws: TransportError.self) { try await transport.health() }
        #expect(error.code == .noConnection)
        let cause = try #require(error.underlying, "no cause was kept")
        #expect("\(cause)".contains("refused") || "\(cause)".contains("ECONNREFUSED"), "the cause is \(cause)")
        #expect(error.message == "\(cause)", "the message is the cause's")

        let destination = FileManager.default.temporaryDirectory.appendingPathComponent("outpost-cause-\(UUID().uuidString).xml")
        let download = try await #require(throws: TransportError.self) {
            try await transport.downloadBundle(project: UUID(), format: .xml, to: destination)
        }
        #expect(download.code == .noConnection && download.underlying != nil, "\(download)")
    }
}

/// A port on 127.0.0.1 bound but never listened on, so connecting is refused, and no other socket of
/// this process or another can take it while it is held.
final class RefusedPort: Sendable {
    let port: Int
    private let descriptor: Int32

    init() throws {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        self.descriptor = descriptor
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(descriptor, $0, length) == 0 && getsockname(descriptor, $0, &length) == 0
            }
        }
        guard descriptor >= 0, bound else { throw CocoaError(.fileWriteUnknown) }
        port = Int(UInt16(bigEndian: address.sin_port))
    }

    func close() {
        _ = Glibc.close(descriptor)
    }
}


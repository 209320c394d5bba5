@testable import OutpostServer
import Foundation
import OutpostFieldServiceTesting
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// A plain TCP connection to the test server, for clients no HTTP library would be: one that trickles
/// its headers, or one that just holds a connection open.
final class RawConnection {
    private let socket: Int32

    init(port: Int) throws {
        socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(socket, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else { throw CocoaError(.fileReadNoPermission) }
        // Reads give up after a second, so a check never hangs.
        var timeout = timeval(tv_sec: 1, tv_usec: 0)
        setsockopt(socket, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    }

    deinit { close(socket) }

    func send(_ text: String) {
        _ = text.withCString { Glibc.send(socket, $0, strlen($0), Int32(MSG_NOSIGNAL)) }
    }

    /// Whether the server has closed the connection (a read sees the end, or a reset).
    func isClosedByServer() -> Bool {
        var byte: UInt8 = 0
        let read = recv(socket, &byte, 1, 0)
        return read == 0 || (read < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
    }
}

@Suite("Slow and stalled clients are cut off", .fieldService)
struct SlowClientTests {
    @Test("A client that trickles its headers, or never sends any, is closed after the idle timeout")
    func aClientThatNeverFinishesItsHeadersIsClosed() async throws {
        let server = try await TestServer.start(idleTimeoutSeconds: 1)
        defer { Task { await server.stop() } }
        let silent = try RawConnection(port: server.port)
        let trickling = try RawConnection(port: server.port)
        trickling.send("GET /v1/health HTTP/1.1\r\n")
        var closed = (silent: false, trickling: false)
        for _ in 0..<6 {
            trickling.send("X-Slow: a\r\n")
            try await Task.sleep(for: .milliseconds(500))
            if !closed.silent { closed.silent = silent.isClosedByServer() }
            if !closed.trickling { closed.trickling = trickling.isClosedByServer() }
            if closed.silent && closed.trickling { break }
        }
        #expect(closed.silent)
        #expect(closed.trickling)
        // A real request still gets its answer.
        let (status, _, _) = try await server.send("GET", "/health")
        #expect(status == 200)
    }

    @Test("A client with a valid token sending its body a byte at a time is closed, and others are served")
    func aBodyTrickledByteByByteIsCutOff() async throws {
        let server = try await TestServer.start()
        defer { Task { await server.stop() } }
        let trickling = try RawConnection(port: server.port)
        trickling.send(
            "POST /push HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \(TestServer.aliceToken)\r\n"
                + "Outpost-Protocol-Version: 1\r\nOutpost-Schema-Version: 7\r\nContent-Type: application/json\r\n"
                + "Content-Length: 1000000\r\n\r\n")
        var closed = false
        let started = ContinuousClock.now
        while !closed, ContinuousClock.now - started < .seconds(20) {
            trickling.send("{")
            closed = trickling.isClosedByServer()  // waits up to a second
        }
        #expect(closed)
        #expect(ContinuousClock.now - started < .seconds(18), "closed soon after the grace period")
        #expect(try await server.send("GET", "/health").status == 200)
    }

    @Test("Connections past the server's limit are closed as they arrive")
    func connectionsPastTheLimitAreClosed() async throws {
        let server = try await TestServer.start(maximumConnections: 3)
        defer { Task { await server.stop() } }
        let held = try (0..<3).map { _ in try RawConnection(port: server.port) }
        // Until the server holds all three: on a loaded machine its event loops admit them late, and
        // an extra one admitted first would take a held one's place.
        let started = ContinuousClock.now
        while server.server.openConnections.current < 3, ContinuousClock.now - started < .seconds(20) {
            try await Task.sleep(for: .milliseconds(10))
        }
        #expect(server.server.openConnections.current == 3)
        let extra = try RawConnection(port: server.port)
        #expect(extra.isClosedByServer())
        #expect(held.allSatisfy { !$0.isClosedByServer() }, "the first three stay open")
    }
}

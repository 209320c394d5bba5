@testable import OutpostSync
import Foundation
import OutpostFieldService
import OutpostFieldServiceTesting
import OutpostModels
import OutpostSchema
import OutpostWire
import Testing

/// HTTPTransport against a scripted server on 127.0.0.1.
@Suite(.fieldService) struct HTTPTransportTests {
    private static func json(_ value: some Encodable) throws -> String {
        String(decoding: try WireCoding.encoder().encode(value), as: UTF8.self)
    }

    /// A transport to `server`. Its silence bound is a minute unless a test is about that bound: a python3
    /// server beside a CPU-bound process once waited longer than 5 s for the core (issue 41, item 7).
    private func transport(_ server: LocalHTTPServer, timeout: Duration = .seconds(60)) -> HTTPTransport {
        HTTPTransport(
            configuration: .init(baseURL: server.baseURL, schemaVersion: 5, requestTimeout: timeout), token: "t1")
    }

    @Test func everyRequestCarriesTheVersionsAndTheToken() async throws {
        let health = HealthResponse(minimumSchemaVersion: 1, maximumSchemaVersion: 5, serverTime: Date(timeIntervalSince1970: 0))
        let server = try await LocalHTTPServer(routes: ["GET /v1/health": .init(body: try Self.json(health))])
        defer { server.stop() }
        #expect(try await transport(server).health() == health)
        let request = try #require(try await server.requests().first)
        #expect(request.method == "GET" && request.path == "/v1/health")
        #expect(request.header("Outpost-Protocol-Version") == "1")
        #expect(request.header("Outpost-Schema-Version") == "5")
        #expect(request.header("Authorization") == "Bearer t1")
        #expect(request.header("Accept-Encoding")?.contains("gzip") == true)
    }

    @Test func largeBodiesTravelCompressedBothWaysAndAreCountedAsSent() async throws {
        let small = PushRequest(mutations: [Fixtures.createIssue()])
        let large = PushRequest(mutations: (0..<150).map { _ in Fixtures.createIssue() })
        let results = PushResponse(results: large.mutations.map {
            MutationResult(idempotencyKey: $0.idempotencyKey, outcome: .applied(version: 1, serverID: "12345"))
        })
        let body = try Self.json(results)
        #expect(body.utf8.count > SyncProtocol.compressionThreshold)
        let server = try await LocalHTTPServer(routes: ["POST /v1/push": .init(body: body, gzip: true)])
        defer { server.stop() }
        let client = transport(server)
        #expect(try await client.push(large) == results)
        // The scripted answer is the large batch's: 150 results for one mutation are refused as read.
        await #expect(throws: TransportError.self) { try await client.push(small) }
        let requests = try await server.requests()
        #expect(requests.map { $0.header("Content-Encoding") } == ["gzip", nil])
        let received = try WireCoding.decoder().decode(PushRequest.self, from: Data(requests[0].body.utf8))
        #expect(received == large)
        #expect(requests[0].wireLength < requests[0].body.utf8.count / 2)
        let counts = await client.transferred
        #expect(counts.requests == 2)
        #expect(counts.bytesSent == Int64(requests[0].wireLength + requests[1].wireLength))
        #expect(counts.bytesReceived > 0 && counts.bytesReceived < Int64(body.utf8.count) / 2, "counted as compressed")
    }

    @Test func aServerThatRefusesGzipGetsPlainBodiesFromThenOn() async throws {
        let server = try await LocalHTTPServer(
            routes: ["POST /v1/push": .init(body: try Self.json(PushResponse(results: [])))], refuseGzip: true)
        defer { server.stop() }
        let client = transport(server)
        let large = PushRequest(mutations: (0..<60).map { _ in Fixtures.createIssue() })
        _ = try await client.push(large)
        _ = try await client.push(large)
        let encodings = try await server.requests().map { $0.header("Content-Encoding") }
        #expect(encodings == ["gzip", nil, nil])
    }

    /// A push sends each mutation's one clock once only after a response named the form: never to a
    /// server that did not, nor when the configuration turns it off.
    @Test func aPushSharesClocksOnlyOnceTheServerSaysItReadsThem() async throws {
        let answer = LocalHTTPServer.Response(
            body: try Self.json(PushResponse(results: [])), headers: [SyncProtocol.acceptsHeader: "gzip-bodies, shared-clock"])
        let batch = PushRequest(mutations: [Fixtures.createIssue(), Fixtures.createIssue()])
        let naming = try await LocalHTTPServer(routes: ["POST /v1/push": answer])
        let silent = try await LocalHTTPServer(routes: ["POST /v1/push": .init(body: try Self.json(PushResponse(results: [])))])
        defer { naming.stop(); silent.stop() }
        let turnedOff = HTTPTransport(
            configuration: .init(baseURL: naming.baseURL, schemaVersion: 5, sharesClocks: false), token: "t1")
        for client in [transport(naming), transport(silent), turnedOff] {
            _ = try await client.push(batch)
            _ = try await client.push(batch)
        }
        let bodies = try await naming.requests().map(\.body) + silent.requests().map(\.body)
        #expect(bodies.count == 6)
        let sharing = bodies.map { $0.contains(#""clock":"#) && !$0.contains(#""clocks""#) }
        #expect(sharing == [false, true, false, false, false, false])
        for body in bodies { #expect(try PushRequest(json: Data(body.utf8)) == batch) }
    }

    /// A server that named the form but refuses a batch in it (an instance of a fleet mid-upgrade)
    /// gets that batch again with clocks per field, and every later one so, whatever it says after.
    @Test func aServerThatRefusesSharedClocksGetsClocksPerFieldFromThenOn() async throws {
        let results = PushResponse(results: [])
        let server = try await LocalHTTPServer(
            routes: [
                "POST /v1/push": .init(body: try Self.json(results), headers: [SyncProtocol.acceptsHeader: "shared-clock"])
            ],
            refuseSharedClock: true)
        defer { server.stop() }
        let client = transport(server)
        let batch = PushRequest(mutations: [Fixtures.createIssue()])
        for _ in 0..<3 { #expect(try await client.push(batch) == results) }
        let sharing = try await server.requests().map { $0.body.contains(#""clock":"#) }
        #expect(sharing == [false, true, false, false])
        #expect(await client.transferred.requests == 4)
    }

    /// A 400 that the same batch with a clock per field gets too was not about the form, which is kept;
    /// a batch with no mutation to share goes once, as it is, whatever the answer.
    @Test func aRefusalThatIsNotAboutTheSharedClockKeepsIt() async throws {
        let names = [SyncProtocol.acceptsHeader: SyncProtocol.sharedClockForm]
        let health = HealthResponse(minimumSchemaVersion: 1, maximumSchemaVersion: 5, serverTime: Date(timeIntervalSince1970: 0))
        let server = try await LocalHTTPServer(routes: [
            "GET /v1/health": .init(body: try Self.json(health), headers: names),
            "POST /v1/push": .init(status: 400, body: try Self.json(Fixtures.errorBody), headers: names),
        ])
        defer { server.stop() }
        let client = transport(server)
        _ = try await client.health()
        var folded = Fixtures.createIssue()
        folded.clocks["title"] = Fixtures.clock(5)
        for batch in [[folded], [Fixtures.createIssue()], [Fixtures.createIssue()]] {
            await #expect(throws: TransportError.self) { try await client.push(PushRequest(mutations: batch)) }
        }
        let pushes = try await server.requests().filter { $0.path == "/v1/push" }.map { $0.body.contains(#""clock":"#) }
        #expect(pushes == [false, true, false, true, false])
    }

    @Test func errorResponsesAreClassifiedWithTheServersCodeAndMessage() async throws {
        func error(_ status: Int, _ code: String, headers: [String: String] = [:]) -> LocalHTTPServer.Response {
            .init(status: status, body: #"{"code":"\#(code)","message":"m \#(code)"}"#, headers: headers)
        }
        let server = try await LocalHTTPServer(routes: [
            "GET /v1/health": error(503, "unavailable", headers: ["Retry-After": "7"]),
            "POST /v1/push": error(400, "unsupported_schema_version"),
            "POST /v1/pull": error(401, "unauthorized"),
            "GET /v1/media/\(Fixtures.projectID.uuidString.lowercased())/upload": error(403, "forbidden"),
            "PUT /v1/media/\(Fixtures.projectID.uuidString.lowercased())/upload": error(422, "checksum_mismatch"),
        ])
        defer { server.stop() }
        let client = transport(server)
        var errors: [TransportError] = []
        do { _ = try await client.health() } catch { errors.append(error) }
        do { _ = try await client.push(PushRequest(mutations: [])) } catch { errors.append(error) }
        do { _ = try await client.pull(PullRequest(cursor: nil, limit: 1)) } catch { errors.append(error) }
        do { _ = try await client.mediaUploadStatus(for: Fixtures.projectID) } catch { errors.append(error) }
        let chunk = MediaChunk(attachmentID: Fixtures.projectID, offset: 0, totalBytes: 3, sha256: "ab", data: Data([1, 2, 3]))
        do { _ = try await client.uploadMedia(chunk) } catch { errors.append(error) }
        #expect(errors.map(\.code) == [.serverFailure, .unsupportedVersion, .unauthorized, .forbidden, .rejected])
        #expect(errors.map(\.status) == [503, 400, 401, 403, 422])
        #expect(errors.map(\.serverCode) == [.unavailable, .unsupportedSchemaVersion, .unauthorized, .forbidden, .checksumMismatch])
        #expect(errors[0].retryAfter == .seconds(7) && errors[4].message == "m checksum_mismatch")
        #expect(errors[1].request == "POST /push")
    }

    @Test func aRenewedTokenIsUsedAndTheCountsAreKept() async throws {
        let server = try await LocalHTTPServer(routes: ["POST /v1/pull": .init(body: try Self.json(
            PullResponse(changes: [Fixtures.serverRecord], nextCursor: "42", hasMore: false)))])
        defer { server.stop() }
        let client = transport(server)
        let page = try await client.pull(PullRequest(cursor: "7", limit: 50))
        #expect(page.changes == [Fixtures.serverRecord])
        await client.renewToken("t2")
        _ = try await client.pull(PullRequest(cursor: "42", limit: 50))
        let requests = try await server.requests()
        #expect(requests.map { $0.header("Authorization") } == ["Bearer t1", "Bearer t2"])
        #expect(requests[1].body.contains(#""cursor":"42""#))
        #expect(await client.transferred.requests == 2)
    }

    @Test func mediaChunksCarryTheirRangeAndDigest() async throws {
        let id = UUID()
        let path = "/v1/media/\(id.uuidString.lowercased())/upload"
        let status = MediaUploadStatus(attachmentID: id, receivedBytes: 4, totalBytes: 10, complete: false)
        let server = try await LocalHTTPServer(routes: [
            "GET \(path)": .init(body: try Self.json(status)), "PUT \(path)": .init(body: try Self.json(status)),
        ])
        defer { server.stop() }
        let client = transport(server)
        #expect(try await client.mediaUploadStatus(for: id) == status)
        let digest = String(repeating: "a", count: 64)
        let chunk = MediaChunk(attachmentID: id, offset: 4, totalBytes: 10, sha256: digest, data: Data([0, 1, 0xff]))
        #expect(try await client.uploadMedia(chunk) == status)
        let put = try #require(try await server.requests().last)
        #expect(put.method == "PUT" && put.header("Content-Range") == "bytes 4-6/10")
        #expect(put.header(SyncProtocol.mediaDigestHeader) == digest)
        #expect(put.header("Content-Type") == "application/octet-stream" && put.wireLength == 3)
    }

    @Test func bundlesStreamToAFile() async throws {
        let body = String(repeating: "<issue id=\"1\"/>\n", count: 10_000)
        let path = "/v1/projects/\(Fixtures.projectID.uuidString.lowercased())/bundle"
        let server = try await LocalHTTPServer(routes: ["GET \(path)": .init(body: body, headers: ["Content-Type": "application/xml"])])
        defer { server.stop() }
        let destination = URL(fileURLWithPath: "/tmp/sync-bundle-\(UUID().uuidString).xml")
        defer { try? FileManager.default.removeItem(at: destination) }
        let size = try await transport(server).downloadBundle(project: Fixtures.projectID, format: .xml, to: destination)
        #expect(size == Int64(body.utf8.count))
        #expect(try String(contentsOf: destination, encoding: .utf8) == body)
        #expect(try await server.requests().first?.path == path + "?format=xml")
    }

    @Test func unreadableAnswersSilenceAndNoServerAreTransient() async throws {
        let server = try await LocalHTTPServer(routes: [
            "GET /v1/health": .init(body: "<html>captive portal</html>", headers: ["Content-Type": "text/html"]),
            "POST /v1/pull": .init(body: "{}", delaySeconds: 3),
        ])
        // Only the silence is judged by a short bound: a busy host may hold the other answers past a second.
        let client = transport(server), impatient = transport(server, timeout: .seconds(1))
        var codes: [TransportError.Code] = []
        do { _ = try await client.health() } catch { codes.append(error.code) }
        do { _ = try await impatient.pull(PullRequest(cursor: nil, limit: 1)) } catch { codes.append(error.code) }
        server.stop()
        do { _ = try await client.health() } catch { codes.append(error.code) }
        #expect(codes == [.invalidResponse, .timedOut, .noConnection])
    }

    /// A server address no connection can be made to (a port past 65535, none, no host) is refused before
    /// a byte is sent, as a clear `rejected`: a mistyped `--server http://127.0.0.1:70000` crashed
    /// `outpost sync` in the HTTP client's address code (attack 101).
    @Test(arguments: ["http://127.0.0.1:70000", "https://example.com:99999", "http://127.0.0.1:0", "https:///v1", "ftp://127.0.0.1:8080"])
    func anAddressNoConnectionCanBeMadeToIsRefused(address: String) async throws {
        var configuration = HTTPTransport.Configuration(baseURL: URL(string: address)!, schemaVersion: 1)
        configuration.allowsPlainHTTP = true
        let client = HTTPTransport(configuration: configuration, token: "t")
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("never-\(UUID().uuidString)")
        do {
            _ = try await client.pull(PullRequest(cursor: nil, limit: 1))
            Issue.record("\(address) was reached")
        } catch {
            #expect(error.code == .rejected && error.message.contains("server address"), "\(address): \(error)")
        }
        do {
            _ = try await client.downloadOriginal(of: UUID(), byteCount: 10, appendingTo: file)
            Issue.record("\(address) was reached for a download")
        } catch {
            #expect(error.code == .rejected, "\(address): \(error)")
        }
        #expect(await client.transferred.requests == 0, "\(address): a request went out")
        #expect(!FileManager.default.fileExists(atPath: file.path))
    }

    /// Plain HTTP carries the token and the records unencrypted: refused to any machine but this one,
    /// before a byte is sent, unless the app opts in; a name that merely starts like a loopback address
    /// is not one.
    @Test func plainHTTPReachesOnlyLoopbackUnlessAllowed() async throws {
        for address in ["http://10.0.0.5:8080", "http://127.example.com", "http://localhost.example.com", "http://[fe80::1]:80", "http://192.0.2.1:9"] {
            let client = HTTPTransport(configuration: .init(baseURL: URL(string: address)!, schemaVersion: 1), token: "t")
            do {
                _ = try await client.health()
                Issue.record("\(address) was reached over plain HTTP")
            } catch {
                #expect(error.code == .rejected && error.message.contains("plain HTTP"), "\(address): \(error)")
            }
            #expect(await client.transferred.requests == 0, "\(address): a request went out")
        }
        // Opted in, the request goes out (to an address that never answers: a timeout, not a refusal).
        var configuration = HTTPTransport.Configuration(baseURL: URL(string: "http://192.0.2.1:9")!, schemaVersion: 1, requestTimeout: .seconds(1))
        configuration.allowsPlainHTTP = true
        let allowed = HTTPTransport(configuration: configuration, token: "t")
        do {
            _ = try await allowed.health()
            Issue.record("192.0.2.1 answered")
        } catch {
            #expect(error.code != .rejected, "\(error)")
        }
    }
}

@testable import OutpostServer
import Foundation
import OutpostFieldService
import OutpostFieldServiceTesting
import OutpostModels
import OutpostSchema
import OutpostSync
import OutpostTesting
import OutpostWire
import Testing

@Suite("Compression: gzip both ways above 10 KB, negotiated by headers", .fieldService)
struct CompressionTests {
    @Test("A gzip request body is read; a large answer is gzip for clients that accept it and plain otherwise", arguments: Backend.available)
    func gzipBothWays(_ backend: Backend) async throws {
        let server = try await TestServer.start(backend)
        let mutations = (0..<40).map { _ in Sample.create(.issue, fields: Sample.issueFields(project: TestServer.projectA)) }
        let plain = try wireJSON(PushRequest(mutations: mutations))
        #expect(plain.count > SyncProtocol.compressionThreshold)
        let pushed = try await server.send(
            "POST", "/push", token: TestServer.aliceToken, body: Gzip.compress(plain),
            headers: ["Content-Encoding": "gzip", "Content-Type": "application/json"])
        #expect(pushed.status == 200)
        let results = try JSONDecoder().decode(PushResponse.self, from: pushed.body).results
        #expect(results.allSatisfy { $0.outcome.appliedVersion == 1 })

        let corrupt = try await server.send(
            "POST", "/push", token: TestServer.aliceToken, body: Data([0x1f, 0x8b, 1, 2, 3]),
            headers: ["Content-Encoding": "gzip"])
        #expect(corrupt.status == 400)

        let pull = try JSONEncoder().encode(PullRequest(cursor: nil, limit: 1000))
        // URL loading would inflate a gzip answer on its own; "identity" in the raw request keeps it
        // from asking, so the test sees the bytes the server sent.
        let compressed = try await server.send(
            "POST", "/pull", token: TestServer.aliceToken, body: pull, headers: ["Accept-Encoding": "gzip"])
        let uncompressed = try await server.send(
            "POST", "/pull", token: TestServer.aliceToken, body: pull, headers: ["Accept-Encoding": "identity"])
        #expect(compressed.status == 200 && uncompressed.status == 200)
        #expect(uncompressed.headers["content-encoding"] == nil)
        #expect(uncompressed.body.count > SyncProtocol.compressionThreshold)
        #expect(compressed.headers["content-encoding"] == "gzip")
        // Either form varies by the request's Accept-Encoding, for caches in between (attack 128, F2).
        #expect(compressed.headers["vary"] == "Accept-Encoding" && uncompressed.headers["vary"] == "Accept-Encoding")
        var inflated = compressed.body
        if compressed.body.first == 0x1f, case .complete(let plain) = Gzip.inflate(compressed.body, limit: 1 << 24) {
            inflated = plain
        }
        #expect(inflated == uncompressed.body)

        // The real transport: compressed push, and a page it decodes either way.
        let transport = server.transport(token: TestServer.aliceToken)
        let more = (0..<40).map { _ in Sample.create(.issue, fields: Sample.issueFields(project: TestServer.projectA)) }
        #expect(try await transport.push(PushRequest(mutations: more)).results.allSatisfy { $0.outcome.appliedVersion == 1 })
        #expect(try await transport.pull(PullRequest(cursor: nil, limit: 1000)).changes.count == 80 + 3)

        // A bundle goes gzip-compressed as it streams, to a client that accepts it (URL loading inflates
        // it; a body that was not gzip would fail that), and plain otherwise: the same records either way.
        // 1,200 more issues make it several batches, so compressed parts go out before the last.
        for _ in 0..<3 {
            let batch = (0..<400).map { _ in Sample.create(.issue, fields: Sample.issueFields(project: TestServer.projectA)) }
            #expect(try await transport.push(PushRequest(mutations: batch)).results.allSatisfy { $0.outcome.appliedVersion == 1 })
        }
        let bundlePath = "/projects/\(TestServer.projectA.uuidString.lowercased())/bundle?format=json"
        func bundleBytesSent() async throws -> Int {
            let text = try await server.scrape()
            let line = text.split(separator: "\n").first { $0.hasPrefix("outpost_bundle_bytes_total ") }
            return line.flatMap { $0.split(separator: " ").last.flatMap { Int($0) } } ?? 0
        }
        let before = try await bundleBytesSent()
        let gzipBundle = try await server.send("GET", bundlePath, token: TestServer.aliceToken, headers: ["Accept-Encoding": "gzip"])
        let afterGzip = try await bundleBytesSent()
        let plainBundle = try await server.send("GET", bundlePath, token: TestServer.aliceToken, headers: ["Accept-Encoding": "identity"])
        // The server counts what went on the wire: the plain bundle whole, the compressed one far smaller.
        #expect(try await bundleBytesSent() - afterGzip == plainBundle.body.count)
        #expect(afterGzip - before > 0 && afterGzip - before < plainBundle.body.count / 4)
        #expect(gzipBundle.status == 200 && plainBundle.status == 200)
        #expect(gzipBundle.headers["content-encoding"] == "gzip" && plainBundle.headers["content-encoding"] == nil)
        func records(_ body: Data) throws -> NSArray? {
            (try JSONSerialization.jsonObject(with: body) as? NSDictionary)?["records"] as? NSArray
        }
        let plainRecords = try #require(try records(plainBundle.body))
        #expect(plainRecords.count == 1_280 + 3)
        #expect(try records(gzipBundle.body) == plainRecords)

        await server.stop()
    }

    /// The law of the answers' compressor (`PageCompression`, libdeflate): what it gives is one gzip
    /// member that zlib (the device's inflater) turns back into the very bytes, whatever their size and
    /// content, from many answers at once (its compressors are shared between them).
    @Test("A compressed answer inflates with zlib to the very bytes, for any size and content, from many answers at once")
    func compressedAnswersInflateToTheirBytes() async throws {
        for seed in UInt64(1)...3 {
            var random = SeededGenerator(seed: seed)
            let words = ["\"changes\":", "{\"text\":\"", "issue", "0B5E55ED-", "\"version\":", ",", "}", " "]
            let bodies: [[UInt8]] = (0..<24).map { index in
                let size = [0, 1, 2, SyncProtocol.compressionThreshold, 3 << 20][index % 5] + Int.random(in: 0..<4096, using: &random)
                // Half JSON-like (what answers are), half random bytes (libdeflate stores those).
                return index.isMultiple(of: 2)
                    ? Array((0..<size).lazy.map { _ in words.randomElement(using: &random)! }.joined().utf8.prefix(size))
                    : (0..<size).map { _ in UInt8.random(in: 0...255, using: &random) }
            }
            let inflated = await withTaskGroup(of: (Int, Data?).self) { group in
                for (index, body) in bodies.enumerated() {
                    group.addTask {
                        let gzip = PageCompression.gzip(body)
                        guard Gzip.isCompressed(gzip), case .complete(let plain) = Gzip.inflate(gzip, limit: 8 << 20) else { return (index, nil) }
                        return (index, plain)
                    }
                }
                var results = [Data?](repeating: nil, count: bodies.count)
                for await (index, plain) in group { results[index] = plain }
                return results
            }
            for (index, body) in bodies.enumerated() {
                #expect(inflated[index] == Data(body), "seed \(seed), body \(index) of \(body.count) bytes")
            }
        }
    }
}

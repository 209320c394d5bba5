@testable import OutpostWire
import Foundation
import OutpostConflicts
import OutpostFieldService
import OutpostFieldServiceTesting
import OutpostModels
import OutpostSchema
import OutpostTesting
import Testing

@Suite(.fieldService) struct WireFormatTests {
    private func roundTrip<Value: Codable & Equatable>(_ value: Value) throws -> Value {
        try WireCoding.decoder().decode(Value.self, from: WireCoding.encoder().encode(value))
    }

    private func json(_ value: some Encodable) throws -> [String: Any] {
        try #require(JSONSerialization.jsonObject(with: WireCoding.encoder().encode(value)) as? [String: Any])
    }

    @Test func mutationCarriesFieldValuesInTheirOneKeyFormAndEncodedClocks() throws {
        let mutation = Fixtures.createIssue()
        let object = try json(mutation)
        let fields = try #require(object["fields"] as? [String: Any])
        #expect((fields["title"] as? [String: String]) == ["text": "Cracked sill"])
        #expect((fields["latitude"] as? [String: Double]) == ["real": 45.5])
        #expect(fields["assigneeID"] is NSNull)
        let clocks = try #require(object["clocks"] as? [String: String])
        #expect(clocks["title"] == Fixtures.clock(1_770_000_000_000).encoded)
        #expect(object["operation"] as? String == "create")
        #expect(object["deletion"] == nil)
        #expect(try roundTrip(mutation) == mutation)
    }

    @Test func mutationFromAVersionedChange() throws {
        let record = EntityRecord(
            entity: .issue, id: UUID(), fields: ["title": .text("A"), "status": .text("open")],
            sync: SyncMetadata(serverID: "5", createdAt: Date(timeIntervalSince1970: 0)))
        let versioned = VersionedRecord(record: record, stampedAt: Fixtures.clock(10))
            .updating(["title": .text("B")], at: Fixtures.clock(20))
        let mutation = PushMutation(
            idempotencyKey: UUID(), operation: .update, change: versioned.change(of: ["title"]), baseVersion: 2)
        #expect(mutation.fields == ["title": .text("B")])
        #expect(mutation.clocks == ["title": Fixtures.clock(20)])
        #expect(mutation.serverID == "5" && mutation.recordID == record.id && mutation.entity == .issue)
    }

    @Test func everyOutcomeRoundTripsAndADuplicateNamesItsOriginal() throws {
        for outcome in Fixtures.outcomes + [.duplicate(original: .applied(version: 4, serverID: nil))] {
            let result = MutationResult(idempotencyKey: UUID(), outcome: outcome)
            #expect(try roundTrip(result) == result)
        }
        let duplicate = MutationResult(idempotencyKey: UUID(), outcome: .duplicate(original: .applied(version: 4, serverID: "9")))
        let object = try json(duplicate)
        #expect(object["status"] as? String == "duplicate")
        let original = try #require(object["original"] as? [String: Any])
        #expect(original["status"] as? String == "applied" && original["version"] as? Int == 4)
        #expect(duplicate.outcome.unwrapped == .applied(version: 4, serverID: "9"))
    }

    @Test func unknownStatusesAndNestedDuplicatesAreRefusedNotGuessed() {
        let bad = [
            #"{"idempotencyKey":"\#(UUID())","status":"maybe"}"#,
            #"{"idempotencyKey":"\#(UUID())","status":"duplicate","original":{"status":"duplicate","original":{"status":"applied","version":1}}}"#,
            #"{"idempotencyKey":"\#(UUID())","status":"applied"}"#,
        ]
        for text in bad {
            #expect(throws: DecodingError.self) { try WireCoding.decoder().decode(MutationResult.self, from: Data(text.utf8)) }
        }
    }

    @Test func tombstoneCarriesTheDeletedFlagWithItsClock() throws {
        let object = try json(Fixtures.serverRecord)
        #expect(object["deleted"] as? Bool == true)
        #expect(object["deletion"] as? String == Fixtures.clock(1_770_000_000_500, counter: 2).encoded)
        #expect(try roundTrip(Fixtures.serverRecord) == Fixtures.serverRecord)
        var live = Fixtures.serverRecord
        live.deletion = nil
        #expect(try json(live)["deleted"] as? Bool == false)
        var text = String(decoding: try WireCoding.encoder().encode(live), as: UTF8.self)
        text = text.replacingOccurrences(of: #""deleted":false"#, with: #""deleted":true"#)
        #expect(throws: DecodingError.self) { try WireCoding.decoder().decode(ServerRecord.self, from: Data(text.utf8)) }
    }

    @Test func unknownErrorCodesStillDecode() throws {
        let body = try WireCoding.decoder().decode(
            ErrorBody.self, from: Data(#"{"code":"quota_exceeded","message":"later"}"#.utf8))
        #expect(body.code == ServerErrorCode(rawValue: "quota_exceeded"))
        #expect(!ServerErrorCode.all.contains(body.code))
    }

    @Test func healthTimeTravelsAsATimestamp() throws {
        let health = HealthResponse(
            minimumSchemaVersion: 1, maximumSchemaVersion: 5, serverTime: Date(timeIntervalSince1970: 1_770_000_000.123))
        #expect(try json(health)["serverTime"] as? String == "2026-02-02T02:40:00.123Z")
        #expect(try roundTrip(health) == health)
    }

    @Test func contentRangeNamesTheChunksBytes() {
        let id = UUID()
        #expect(MediaChunk(attachmentID: id, offset: 0, totalBytes: 10, sha256: "", data: Data(count: 4)).contentRange
            == "bytes 0-3/10")
        #expect(MediaChunk(attachmentID: id, offset: 4, totalBytes: 10, sha256: "", data: Data(count: 6)).contentRange
            == "bytes 4-9/10")
        #expect(MediaChunk(attachmentID: id, offset: 0, totalBytes: 0, sha256: "", data: Data()).contentRange
            == "bytes */0")
    }

    @Test func gzipRoundTripsAndShrinksJSON() throws {
        let body = try WireCoding.encoder().encode(PushRequest(mutations: (0..<100).map { _ in Fixtures.createIssue() }))
        let compressed = Gzip.compress(body)
        #expect(Gzip.isCompressed(compressed) && !Gzip.isCompressed(body))
        #expect(compressed.count < body.count / 2)
        #expect(Gzip.decompress(compressed) == body)
        #expect(Gzip.decompress(compressed.prefix(compressed.count / 2)) == nil)
        #expect(Gzip.decompress(Gzip.compress(Data())) == Data())
    }

    /// A member written a piece at a time, cut anywhere, inflates to the pieces joined; over 64 KB of
    /// output at once, and no piece at all, included. Seeded, so a failure names its seed.
    @Test func aGzipStreamInflatesToItsPiecesJoined() throws {
        let json = try WireCoding.encoder().encode(PushRequest(mutations: (0..<400).map { _ in Fixtures.createIssue() }))
        for seed in UInt64(1)...20 {
            var random = SeededGenerator(seed: seed)
            var noise = [UInt8](repeating: 0, count: Int.random(in: 0...200_000, using: &random))
            for index in noise.indices { noise[index] = UInt8.random(in: 0...255, using: &random) }
            let input = [UInt8](json) + noise
            let stream = GzipStream()
            var output: [UInt8] = [], offset = 0
            while offset < input.count {
                let end = min(input.count, offset + Int.random(in: 0...90_000, using: &random))
                output += stream.compress(Array(input[offset..<end]))
                offset = end
            }
            output += stream.finish()
            #expect(Gzip.isCompressed(Data(output)), "seed \(seed)")
            #expect(Gzip.decompress(Data(output)) == Data(input), "seed \(seed)")
        }
        let empty = GzipStream()
        #expect(Gzip.decompress(Data(empty.finish())) == Data())
        let plain = GzipStream()
        #expect(Gzip.decompress(Data(plain.compress(Array(json)) + plain.finish())) == json)
        #expect(Gzip.compress(json).count < json.count / 4)
    }

    /// The law a device's bomb guard reads a download by (`maximumInflationRatio`, 200): past the first
    /// MiB, no prefix of the wire inflates to more than 200 times its bytes. A project with one member's
    /// 1 MiB text of a repeated letter made a bundle no device could pre-sync (attack 118, F1). Seeded
    /// bodies of such texts between plain records and noise, in pieces of seeded sizes, read back 4 KiB
    /// of wire at a time: every prefix keeps the law, and the whole inflates to what went in.
    @Test func noPrefixOfAGzipStreamInflatesPastADevicesGuard() throws {
        let json = [UInt8](try WireCoding.encoder().encode(PushRequest(mutations: (0..<50).map { _ in Fixtures.createIssue() })))
        /// `pieces` compressed one at a time, read back 4 KiB of wire at a time as a device does.
        func check(_ pieces: [[UInt8]], _ label: String) throws {
            let stream = GzipStream()
            var wire: [UInt8] = []
            for piece in pieces { wire += stream.compress(piece) }
            wire += stream.finish()
            let reader = GunzipStream(limit: 1 << 30)
            var inflated: [UInt8] = [], worst = 0.0
            for start in stride(from: 0, to: wire.count, by: 4_096) {
                let end = min(wire.count, start + 4_096)
                try wire[start..<end].withUnsafeBytes { bytes in try reader.inflate(bytes) { inflated += $0 } }
                if reader.inflatedCount > 1 << 20 { worst = max(worst, Double(reader.inflatedCount) / Double(end)) }
            }
            try reader.finish()
            #expect(worst <= 200, "\(label): a prefix inflated \(Int(worst)) times its wire bytes")
            #expect(inflated == Array(pieces.joined()), "\(label)")
        }
        // As the server writes a bundle, a record at a time: a small header, then a whole 1 MiB text.
        let letter = [UInt8](repeating: UInt8(ascii: "a"), count: 1 << 20)
        try check([Array("{\"project\":1,\"records\":[".utf8), letter, json], "a bundle's shape")
        try check([letter, letter, letter, json], "texts only")
        for seed in UInt64(1)...12 {
            var random = SeededGenerator(seed: seed)
            var input: [UInt8] = []
            for _ in 0..<Int.random(in: 2...6, using: &random) {
                switch Int.random(in: 0..<3, using: &random) {
                case 0: input += [UInt8](repeating: UInt8(ascii: "x"), count: Int.random(in: 1...(1 << 20), using: &random))
                case 1: input += json
                default: input += (0..<Int.random(in: 0...100_000, using: &random)).map { _ in UInt8.random(in: 0...255, using: &random) }
                }
            }
            var pieces: [[UInt8]] = [], offset = 0
            while offset < input.count {
                let end = min(input.count, offset + Int.random(in: 1...(3 << 20), using: &random))
                pieces.append(Array(input[offset..<end]))
                offset = end
            }
            try check(pieces, "seed \(seed)")
        }
    }

    /// A gzip body is its members one after another (RFC 1952): read whole (a request's body, on the
    /// server) or as it arrives (a download, on the device), every member is inflated and any byte after
    /// the last is refused. The server read only the first member and dropped what followed, junk or a
    /// second member, where the device read them all (attack 81). Cut at seeded places, the stream
    /// inflates to what the whole read gives.
    @Test func aGzipBodyReadsEveryMemberAndRefusesBytesAfterThemWholeOrStreamed() throws {
        let first = Data(String(repeating: "first member. ", count: 5_000).utf8)
        let second = Data("second member".utf8)
        func streamed(_ body: Data, cutSeed: UInt64) -> Gzip.Inflation {
            var random = SeededGenerator(seed: cutSeed)
            let stream = GunzipStream(limit: 1 << 30)
            var output = Data(), offset = 0
            do {
                while offset < body.count {
                    let end = min(body.count, offset + Int.random(in: 0...4_000, using: &random))
                    try body[offset..<end].withUnsafeBytes { bytes in try stream.inflate(bytes) { output.append(contentsOf: $0) } }
                    offset = end
                }
                try stream.finish()
            } catch {
                return .corrupt
            }
            return .complete(output)
        }
        let cases: [(body: Data, expected: Gzip.Inflation)] = [
            (Gzip.compress(first), .complete(first)),
            (Gzip.compress(first) + Gzip.compress(second), .complete(first + second)),
            (Gzip.compress(Data()) + Gzip.compress(first) + Gzip.compress(Data()), .complete(first)),
            (Gzip.compress(first) + Data("JUNKJUNK".utf8), .corrupt),
            (Gzip.compress(first) + Gzip.compress(second).dropLast(3), .corrupt),
            (Gzip.compress(first).dropLast(1), .corrupt),
        ]
        for (index, (body, expected)) in cases.enumerated() {
            #expect(Gzip.inflate(body, limit: 1 << 30) == expected, "case \(index), whole")
            for seed in UInt64(1)...5 {
                #expect(streamed(body, cutSeed: seed) == expected, "case \(index), streamed with cut seed \(seed)")
            }
        }
    }

    /// A primed stream inflates back only against the dictionary it was made with, within its limit,
    /// and is smaller than the data when the dictionary resembles it.
    @Test func primedDeflateRoundTripsOnlyWithItsDictionary() {
        let dictionary = Data(#"{"priority":"high","projectID":"7d3c0e52-9a33-4c2b-8f0e-1b2a3c4d5e6f","status":"open","title":"Cracked beam"}"#.utf8)
        let data = Data(#"{"priority":"high","projectID":"7d3c0e52-9a33-4c2b-8f0e-1b2a3c4d5e6f","status":"open","title":"Leaking pipe"}"#.utf8)
        let primed = PrimedDeflate.compress(data, dictionary: dictionary)
        #expect(primed.count * 3 < data.count, "\(primed.count) bytes of \(data.count)")
        #expect(PrimedDeflate.inflate(primed, dictionary: dictionary, limit: 1000) == .complete(data))
        #expect(PrimedDeflate.inflate(primed, dictionary: Data("something else entirely".utf8), limit: 1000) != .complete(data))
        #expect(PrimedDeflate.inflate(primed, dictionary: dictionary, limit: 20) == .exceedsLimit)
        #expect(PrimedDeflate.inflate(primed + Data([1, 2]), dictionary: dictionary, limit: 1000) == .corrupt)
    }

    /// Attack 65 F5: a hostile answer's 20 MiB value, quoted by the decoder that refused it, was repeated
    /// whole in the sync's report. A message keeps its beginning and says how much it left out.
    @Test func aTransportErrorKeepsABoundedMessage() {
        let error = TransportError(.invalidResponse, request: "POST /pull", message: "bad: " + String(repeating: "A", count: 20 << 20))
        #expect(error.message.count < ReportedMessage.maximumCharacters + 40)
        #expect(error.message.hasPrefix("bad: AAA"))
        #expect(error.message.hasSuffix("more characters)"))
        #expect(TransportError(.invalidResponse, request: "POST /pull", message: "short").message == "short")
    }

    /// Attack 66 F6: a hostile server's refusal of one change with a 1 MB message was stored whole with
    /// the change and printed by `outpost unsent` (5 MB). Read by either reader, it is bounded.
    @Test func aRefusalsMessageIsBoundedAsItIsRead() throws {
        let long = String(repeating: "R", count: 1 << 20)
        let json = Data(#"{"code":"invalid_request","message":"\#(long)"}"#.utf8)
        let decoded = try JSONDecoder().decode(ErrorBody.self, from: json)
        #expect(decoded.message.count < ReportedMessage.maximumCharacters + 40)
        let answer = Data(#"{"results":[{"idempotencyKey":"\#(UUID().uuidString)","status":"rejected","reason":{"code":"invalid_request","message":"\#(long)"}}]}"#.utf8)
        let read = try PushResponse(wire: answer)
        guard case .rejected(let reason) = try #require(read.results.first).outcome.unwrapped else {
            Issue.record("not read as a refusal")
            return
        }
        #expect(reason.message.count < ReportedMessage.maximumCharacters + 40)
    }
}

@testable import OutpostWire
import Foundation
import OutpostConflicts
import OutpostFieldService
import OutpostFieldServiceTesting
import OutpostModels
import OutpostSchema
import OutpostTesting
import Testing

/// `PullResponse(json:)` must read exactly what `JSONDecoder` reads: the same value for every
/// document the server writes, and never a value for a document `JSONDecoder` refuses.
@Suite(.fieldService) struct WireReaderTests {
    private static func randomText(_ random: inout SeededGenerator) -> String {
        let pieces = ["a", "Leak", " ", "\"", "\\", "\n", "\t", "\u{01}", "é", "😀", "/", "中", "\u{7F}"]
        return (0..<Int.random(in: 0...8, using: &random)).map { _ in pieces.randomElement(using: &random)! }.joined()
    }

    private static func randomValue(_ random: inout SeededGenerator) -> FieldValue {
        switch Int.random(in: 0..<9, using: &random) {
        case 0: .null
        case 1: .bool(Bool.random(using: &random))
        case 2: .integer([Int64.min, Int64.max, 0, -1, Int64.random(in: -1_000_000...1_000_000, using: &random)].randomElement(using: &random)!)
        case 3: .real([0.1, -2.5e-8, 1e300, 45.5, Double(Int.random(in: -1000...1000, using: &random)) / 7].randomElement(using: &random)!)
        case 4: .text(randomText(&random))
        case 5: .date(Date(timeIntervalSince1970: Double(Int64.random(in: 0...2_000_000_000_000, using: &random)) / 1000))
        case 6: .uuid(UUID())
        case 7: .blob(Data((0..<Int.random(in: 0...6, using: &random)).map { _ in UInt8.random(in: 0...255, using: &random) }))
        default: .text(String(repeating: "x", count: Int.random(in: 0...40, using: &random)))
        }
    }

    private static func randomClock(_ random: inout SeededGenerator) -> HybridTimestamp {
        HybridTimestamp(
            physicalMilliseconds: Int64.random(in: 0...4_000_000_000_000, using: &random),
            counter: UInt16.random(in: 0...UInt16.max, using: &random), node: NodeID(random.next()))
    }

    static func randomPage(seed: UInt64) -> PullResponse {
        var random = SeededGenerator(seed: seed)
        let entities = EntityType.allCases
        let changes = (0..<Int.random(in: 0...6, using: &random)).map { index -> ServerRecord in
            var fields: [String: FieldValue] = [:], clocks: [String: HybridTimestamp] = [:]
            // Most records share one write's clock across fields, which the reader parses once.
            let shared = randomClock(&random)
            for _ in 0..<Int.random(in: 0...6, using: &random) {
                let name = ["title", "status", "ä", "a\"b", "notes", "count"].randomElement(using: &random)!
                fields[name] = randomValue(&random)
                clocks[name] = Bool.random(using: &random) ? shared : randomClock(&random)
            }
            return ServerRecord(
                sequence: Int64(index) + Int64.random(in: 0...1 << 40, using: &random),
                entity: entities.randomElement(using: &random)!, recordID: UUID(),
                serverID: Bool.random(using: &random) ? String(Int.random(in: 1...99_999, using: &random)) : nil,
                version: Int64.random(in: 1...1_000, using: &random), fields: fields, clocks: clocks,
                deletion: Bool.random(using: &random) ? randomClock(&random) : nil,
                createdAt: Date(timeIntervalSince1970: Double(Int64.random(in: 0...2_000_000_000_000, using: &random)) / 1000),
                updatedAt: Date(timeIntervalSince1970: Double(Int64.random(in: 0...2_000_000_000_000, using: &random)) / 1000))
        }
        return PullResponse(changes: changes, nextCursor: String(random.next()), hasMore: Bool.random(using: &random))
    }

    /// `data` cut short, with a byte changed or with a byte inserted (by `seed`, at a place it picks).
    static func damaged(_ data: Data, seed: UInt64) -> [UInt8] {
        let bytes = Array("{}[],:\"\\0123456789-+.eEtrufalsn xé\n".utf8)
        var random = SeededGenerator(seed: seed)
        var damaged = [UInt8](data)
        let position = Int.random(in: 0..<max(damaged.count, 1), using: &random)
        switch seed % 3 {
        case 0: damaged.removeSubrange(min(position, damaged.count)...)
        case 1 where !damaged.isEmpty: damaged[position] = bytes.randomElement(using: &random)!
        default: damaged.insert(bytes.randomElement(using: &random)!, at: min(position, damaged.count))
        }
        return damaged
    }

    static func randomBatch(seed: UInt64) -> PushRequest {
        var random = SeededGenerator(seed: seed)
        let page = randomPage(seed: seed)
        return PushRequest(mutations: page.changes.map { record in
            PushMutation(
                idempotencyKey: UUID(), entity: record.entity,
                operation: PushMutation.Operation.allCases.randomElement(using: &random)!, recordID: record.recordID,
                serverID: record.serverID, baseVersion: record.version, fields: record.fields, clocks: record.clocks,
                deletion: record.deletion, createdAt: Bool.random(using: &random) ? record.createdAt : nil)
        })
    }

    /// Push batches, both ways: what `json()` writes `JSONDecoder` reads back, and what `JSONEncoder`
    /// writes `PushRequest(json:)` reads; damaged batches it accepts, `JSONDecoder` accepts alike.
    @Test func pushBatchesAreWrittenAndReadAsTheFoundationCodersDo() throws {
        for seed in UInt64(1)...300 {
            let batch = Self.randomBatch(seed: seed)
            #expect(try WireCoding.decoder().decode(PushRequest.self, from: batch.json()) == batch, "seed \(seed)")
            #expect(try PushRequest(json: WireCoding.encoder().encode(batch)) == batch, "seed \(seed)")
        }
        for seed in UInt64(1)...1_000 {
            let data = Self.damaged(try Self.randomBatch(seed: seed % 40 + 1).json(), seed: seed)
            guard let read = try? PushRequest(json: Data(data)) else { continue }
            let decoded = try? WireCoding.decoder().decode(PushRequest.self, from: Data(data))
            #expect(decoded == read, "seed \(seed)")
        }
    }

    /// `randomBatch(seed:)` with one clock on every field of every other mutation, as one local write
    /// gives them: the mutations a push may send with a shared clock.
    static func randomBatchSharingClocks(seed: UInt64) -> PushRequest {
        var batch = randomBatch(seed: seed)
        for index in batch.mutations.indices where index.isMultiple(of: 2) {
            guard let first = batch.mutations[index].clocks.first?.value else { continue }
            batch.mutations[index].clocks = batch.mutations[index].clocks.mapValues { _ in first }
        }
        return batch
    }

    /// A batch written with shared clocks reads back as the same batch, by both readers. A mutation
    /// carries `clock` exactly when one clock is on all its fields, and then no `clocks`; the batch is
    /// never longer. Damaged batches in that form: what the reader accepts, `JSONDecoder` accepts alike.
    @Test func pushBatchesWithSharedClocksReadAsTheSameBatch() throws {
        var shared = 0, perField = 0
        for seed in UInt64(1)...300 {
            let batch = Self.randomBatchSharingClocks(seed: seed)
            let data = try batch.json(sharingClocks: true)
            #expect(try PushRequest(json: data) == batch, "seed \(seed)")
            #expect(try WireCoding.decoder().decode(PushRequest.self, from: data) == batch, "seed \(seed)")
            #expect(data.count <= (try batch.json()).count, "seed \(seed)")
            let objects = try #require(try JSONSerialization.jsonObject(with: data) as? [String: [[String: Any]]])["mutations"]
            for (mutation, object) in zip(batch.mutations, try #require(objects)) {
                let sharing = mutation.sharedClock != nil
                #expect(object["clock"] != nil && object["clocks"] == nil || !sharing, "seed \(seed)")
                #expect(object["clock"] == nil && object["clocks"] != nil || sharing, "seed \(seed)")
                if sharing { shared += 1 } else { perField += 1 }
            }
        }
        #expect(shared > 100 && perField > 100)
        var accepted = 0
        for seed in UInt64(1)...1_000 {
            let data = Self.damaged(try Self.randomBatchSharingClocks(seed: seed % 40 + 1).json(sharingClocks: true), seed: seed)
            guard let read = try? PushRequest(json: Data(data)) else { continue }
            accepted += 1
            let decoded = try? WireCoding.decoder().decode(PushRequest.self, from: Data(data))
            #expect(decoded == read, "seed \(seed)")
        }
        #expect(accepted > 0)
    }

    /// The shared clock is one every field carries and no other name: fields without a clock, a clock
    /// naming no field, two clocks or no fields at all keep the long form.
    @Test func aMutationSharesItsClockOnlyWhenEveryFieldCarriesIt() {
        let one = Fixtures.clock(1), two = Fixtures.clock(2)
        func mutation(_ fields: [String], _ clocks: [String: HybridTimestamp]) -> PushMutation {
            PushMutation(
                idempotencyKey: UUID(), entity: .issue, operation: .update, recordID: UUID(), baseVersion: 1,
                fields: Dictionary(uniqueKeysWithValues: fields.map { ($0, FieldValue.text($0)) }), clocks: clocks)
        }
        #expect(mutation(["title", "status"], ["title": one, "status": one]).sharedClock == one)
        #expect(mutation(["title"], ["title": two]).sharedClock == two)
        #expect(mutation(["title", "status"], ["title": one, "status": two]).sharedClock == nil)
        #expect(mutation(["title", "status"], ["title": one]).sharedClock == nil)
        #expect(mutation(["title"], ["status": one]).sharedClock == nil)
        #expect(mutation(["title"], ["title": one, "status": one]).sharedClock == nil)
        #expect(mutation([], [:]).sharedClock == nil)
    }

    /// A mutation's `clocks` beside its `clock` names the fields with another clock, as in a pulled
    /// record; a mutation with neither, or with `clock` null, is refused by both readers.
    @Test func readsAMutationsOtherClocksBesideItsSharedOneAndRefusesNeither() throws {
        let shared = Fixtures.clock(1_770_000_000_000), other = Fixtures.clock(1_770_000_000_900)
        let text = String(decoding: try PushRequest(mutations: [Fixtures.createIssue()]).json(sharingClocks: true), as: UTF8.self)
        let sharedMember = #""clock":"\#(shared.encoded)","#
        #expect(text.contains(sharedMember) && !text.contains(#""clocks""#))
        let withOther = text.replacingOccurrences(of: sharedMember, with: sharedMember + #""clocks":{"title":"\#(other.encoded)"},"#)
        let neither = text.replacingOccurrences(of: sharedMember, with: "")
        let nullClock = text.replacingOccurrences(of: sharedMember, with: #""clock":null,"#)
        #expect(withOther != text && neither != text && nullClock != text)
        var expected = Fixtures.createIssue().clocks
        expected["title"] = other
        #expect(try PushRequest(json: Data(withOther.utf8)).mutations.first?.clocks == expected)
        #expect(try WireCoding.decoder().decode(PushRequest.self, from: Data(withOther.utf8)).mutations.first?.clocks == expected)
        for wrong in [neither, nullClock] {
            #expect(throws: JSONReaderError.self) { try PushRequest(json: Data(wrong.utf8)) }
            #expect(throws: DecodingError.self) { try WireCoding.decoder().decode(PushRequest.self, from: Data(wrong.utf8)) }
        }
    }

    @Test func readsEveryPageTheEncoderWritesAsJSONDecoderDoes() throws {
        for seed in UInt64(1)...300 {
            let page = Self.randomPage(seed: seed)
            let data = try WireCoding.encoder().encode(page)
            let read = try PullResponse(json: data)
            #expect(read == page, "seed \(seed)")
            #expect(try WireCoding.decoder().decode(PullResponse.self, from: data) == read, "seed \(seed)")
        }
    }

    /// A record is read only up to `JSONReader.maximumFields` fields and as many clocks, on a pull page
    /// and in a push, so one record cannot take its page's memory many times over: 907,000 unknown
    /// field names in one record of a 20 MiB page held a device near 1 GB (attack 83).
    @Test func aRecordOfMoreFieldsOrClocksThanTheBoundIsRefused() throws {
        func page(fields: Int, clocks: Int) throws -> Data {
            var json = try #require(try JSONSerialization.jsonObject(with: WireCoding.encoder().encode(Self.randomPage(seed: 7))) as? [String: Any])
            var changes = try #require(json["changes"] as? [[String: Any]])
            var record = try #require(changes.first)
            var recordFields = try #require(record["fields"] as? [String: Any])
            var recordClocks = try #require(record["clocks"] as? [String: Any])
            let clock = try #require(recordClocks.values.first)
            for n in 0..<fields { recordFields["k\(n)"] = ["text": ""] }
            for n in 0..<clocks { recordClocks["k\(n)"] = clock }
            record["fields"] = recordFields
            record["clocks"] = recordClocks
            changes[0] = record
            json["changes"] = changes
            return try JSONSerialization.data(withJSONObject: json)
        }
        let bound = JSONReader.maximumFields
        _ = try PullResponse(json: page(fields: bound - 40, clocks: bound - 40))
        #expect(throws: JSONReaderError.self) { try PullResponse(json: page(fields: bound + 1, clocks: 0)) }
        #expect(throws: JSONReaderError.self) { try PullResponse(json: page(fields: 0, clocks: bound + 1)) }

        let seed = try #require((UInt64(1)...50).first { !Self.randomBatch(seed: $0).mutations.isEmpty })
        var batch = try #require(try JSONSerialization.jsonObject(with: Self.randomBatch(seed: seed).json()) as? [String: Any])
        var mutations = try #require(batch["mutations"] as? [[String: Any]])
        try #require(!mutations.isEmpty)
        var fields = (mutations[0]["fields"] as? [String: Any]) ?? [:]
        for n in 0...bound { fields["k\(n)"] = ["text": ""] }
        mutations[0]["fields"] = fields
        batch["mutations"] = mutations
        #expect(throws: JSONReaderError.self) { try PushRequest(json: JSONSerialization.data(withJSONObject: batch)) }
    }

    /// A page read for a request of `limit` changes takes at most that many changes and own records
    /// together, as the server makes it, and stops at the first one past: 47,856 small records in one
    /// 19.9 MiB page held a device about 194 MB over idle when it had asked for 1,000 (attack 83).
    @Test func aPageOfMoreChangesThanAskedIsRefusedWhereThePastOneStarts() throws {
        let record = ServerRecord(
            sequence: 1, entity: .issue, recordID: UUID(), version: 1, fields: ["title": .text("t")], clocks: [:],
            createdAt: Date(timeIntervalSince1970: 0), updatedAt: Date(timeIntervalSince1970: 0))
        let own = OwnRecord(sequence: 9, entity: .issue, recordID: UUID(), version: 2)
        for (changes, owned) in [(10, 0), (0, 10), (6, 4), (11, 0), (0, 11), (7, 4)] {
            let page = PullResponse(
                changes: Array(repeating: record, count: changes), nextCursor: "c", hasMore: true,
                ownRecords: Array(repeating: own, count: owned))
            let bytes = [UInt8](try WireCoding.encoder().encode(page))
            #expect(try PullResponse(wire: bytes).changes.count == changes, "without a limit, any count reads")
            if changes + owned <= 10 {
                #expect(try PullResponse(wire: bytes, atMost: 10) == page)
            } else {
                let error = try #require(throws: JSONReaderError.self) { try PullResponse(wire: bytes, atMost: 10) }
                #expect(error.message.contains("more than the 10 changes asked for"), "\(error)")
                #expect(error.offset < bytes.count - 30, "refused where the 11th starts, not after the page: \(error)")
            }
        }
    }

    /// A page holds at most `PullResponse.maximumFieldsPerPage` fields and clocks together, and is refused
    /// at the record that passes it: a thousand records of 990 null fields and one shared clock each, 12 MB
    /// of JSON within every other bound, decoded to about 200 MB on a device (attack 84, F1).
    @Test func aPageOfMoreFieldsThanThePageBoundIsRefused() throws {
        let clock = HybridTimestamp(physicalMilliseconds: 1_795_000_000_000, counter: 0, node: NodeID(7))
        let names = (0..<500).map { "f\($0)" }
        let record = ServerRecord(
            sequence: 1, entity: .issue, recordID: UUID(), version: 1,
            fields: Dictionary(uniqueKeysWithValues: names.map { ($0, FieldValue.null) }),
            clocks: Dictionary(uniqueKeysWithValues: names.map { ($0, clock) }),
            createdAt: Date(timeIntervalSince1970: 0), updatedAt: Date(timeIntervalSince1970: 0))
        let fit = PullResponse.maximumFieldsPerPage / 1_000  // records of 500 fields and 500 clocks
        for (count, reads) in [(fit, true), (fit + 1, false), (fit + 100, false)] {
            let page = PullResponse(changes: Array(repeating: record, count: count), nextCursor: "c", hasMore: true)
            let bytes = [UInt8](try WireCoding.encoder().encode(page))
            if reads {
                #expect(try PullResponse(wire: bytes, atMost: 1_000).changes.count == count)
            } else {
                let error = try #require(throws: JSONReaderError.self) { try PullResponse(wire: bytes, atMost: 1_000) }
                #expect(error.message.contains("\(PullResponse.maximumFieldsPerPage) fields and clocks"), "\(error)")
                #expect(error.offset < bytes.count * (fit + 2) / count, "refused at the record that passes it: \(error)")
            }
        }
    }

    /// A push read for a server that takes `limit` mutations stops at the first one past it, and at the
    /// mutation that passes `PushRequest.maximumFieldsPerBatch` fields and clocks together: 500 creates of
    /// 1,000 unknown fields each, 6 MB inflated, were decoded whole before any bound was checked, and eight
    /// such pushes at once held a server about 650 MB (attack 84, F4). The refusal's cause says which
    /// bound, so a server answers 413 (the device then sends fewer at once), not 400.
    @Test func aPushPastItsBoundsIsRefusedWhereThePastMutationStarts() throws {
        let clock = HybridTimestamp(physicalMilliseconds: 1_795_000_000_000, counter: 0, node: NodeID(7))
        func mutation(fields count: Int) -> PushMutation {
            let names = (0..<count).map { "f\($0)" }
            return PushMutation(
                idempotencyKey: UUID(), entity: .issue, operation: .create, recordID: UUID(), baseVersion: 0,
                fields: Dictionary(uniqueKeysWithValues: names.map { ($0, FieldValue.null) }),
                clocks: Dictionary(uniqueKeysWithValues: names.map { ($0, clock) }), createdAt: nil)
        }
        // By count: what the server takes reads, one more is refused where it starts.
        let small = mutation(fields: 2)
        for count in [10, 11, 40] {
            let data = try PushRequest(mutations: Array(repeating: small, count: count)).json()
            #expect(try PushRequest(json: data).mutations.count == count, "without a limit, any count reads")
            if count <= 10 {
                #expect(try PushRequest(wire: data, atMost: 10).mutations.count == count)
            } else {
                let error = try #require(throws: JSONReaderError.self) { try PushRequest(wire: data, atMost: 10) }
                #expect(error.message.contains("more than the 10 mutations"), "\(error)")
                #expect(error.underlying as? PushRequest.Overflow == .mutations(10), "\(error)")
                #expect(error.offset < data.count * 11 / count + 100, "refused where the 11th starts: \(error)")
            }
        }
        // By fields and clocks: mutations of 500 fields and 500 clocks each.
        let wide = mutation(fields: 500)
        let fit = PushRequest.maximumFieldsPerBatch / 1_000
        for (count, reads) in [(fit, true), (fit + 1, false), (fit + 60, false)] {
            let data = try PushRequest(mutations: Array(repeating: wide, count: count)).json()
            for shared in [false, true] {
                let bytes = shared ? try PushRequest(mutations: Array(repeating: wide, count: count)).json(sharingClocks: true) : data
                if reads {
                    #expect(try PushRequest(wire: bytes, atMost: 500).mutations.count == count)
                } else {
                    let error = try #require(throws: JSONReaderError.self) { try PushRequest(wire: bytes, atMost: 500) }
                    #expect(error.message.contains("\(PushRequest.maximumFieldsPerBatch) fields and clocks"), "\(error)")
                    #expect(error.underlying as? PushRequest.Overflow == .fieldsAndClocks(PushRequest.maximumFieldsPerBatch))
                    #expect(error.offset < bytes.count * (fit + 2) / count, "refused at the mutation that passes it: \(error)")
                    #expect(throws: JSONReaderError.self, "the bound holds without a count limit too") { try PushRequest(json: bytes) }
                }
            }
        }
    }

    /// A page names at most `PullResponse.maximumLeftProjects` projects the caller left, refused at the
    /// one past it while read: a hostile server's pages of 500,000 random ids each (19.5 MB, no change)
    /// held a device at 797 MB over eight pages, and each id was stored (attack 85, F1).
    @Test func aPageNamingMoreLeftProjectsThanTheBoundIsRefused() throws {
        for (count, reads) in [(PullResponse.maximumLeftProjects, true), (PullResponse.maximumLeftProjects + 1, false)] {
            let page = PullResponse(changes: [], nextCursor: "c", hasMore: true, leftProjects: (0..<count).map { _ in UUID() })
            let bytes = [UInt8](try WireCoding.encoder().encode(page))
            if reads {
                #expect(try PullResponse(wire: bytes, atMost: 10).leftProjects.count == count)
            } else {
                let error = try #require(throws: JSONReaderError.self) { try PullResponse(wire: bytes, atMost: 10) }
                #expect(error.message.contains("more than \(PullResponse.maximumLeftProjects) projects left"), "\(error)")
                #expect(throws: JSONReaderError.self, "without a limit too") { try PullResponse(wire: bytes) }
            }
        }
    }

    /// A page's or a push answer's checkpoint is stored and sent back with every request: one not of the
    /// protocol's form is refused as read. A hostile server's 19 MB checkpoint was stored and sent with
    /// every later pull and push (attack 85, F4).
    @Test func anAnsweredCheckpointOutsideTheProtocolsFormIsRefused() throws {
        for (checkpoint, reads) in [
            ("0", true), ("42.0123456789abcdef", true), ("042.0123456789abcdef", false), ("42.0123456789ABCDEF", false),
            ("1." + String(repeating: "a", count: 100_000), false), ("", false),
        ] {
            let page = [UInt8](try WireCoding.encoder().encode(PullResponse(changes: [], nextCursor: "c", hasMore: false, checkpoint: checkpoint)))
            let answer = [UInt8](try WireCoding.encoder().encode(PushResponse(results: [], checkpoint: checkpoint)))
            if reads {
                #expect(try PullResponse(wire: page, atMost: 10).checkpoint == checkpoint)
                #expect(try PushResponse(wire: answer, answering: 1).checkpoint == checkpoint)
            } else {
                #expect(throws: JSONReaderError.self, "\(checkpoint.prefix(30))") { try PullResponse(wire: page, atMost: 10) }
                #expect(throws: JSONReaderError.self, "\(checkpoint.prefix(30))") { try PushResponse(wire: answer, answering: 1) }
            }
        }
    }

    /// The answer to a push of `count` mutations holds one result each: one more is refused where it
    /// starts, and conflicts whose records pass `PushResponse.maximumFieldsPerAnswer` fields and clocks
    /// at the record that passes it, as a page's are (attack 84 F1's records, sent as a push's answer).
    @Test func anAnswerOfMoreResultsOrFieldsThanAPushCanHaveIsRefused() throws {
        let applied = MutationResult(idempotencyKey: UUID(), outcome: .applied(version: 1, serverID: nil))
        for (results, reads) in [(10, true), (11, false), (40, false)] {
            let bytes = [UInt8](try WireCoding.encoder().encode(PushResponse(results: Array(repeating: applied, count: results))))
            #expect(try PushResponse(wire: bytes).results.count == results, "without a count, any number reads")
            if reads {
                #expect(try PushResponse(wire: bytes, answering: 10).results.count == results)
            } else {
                let error = try #require(throws: JSONReaderError.self) { try PushResponse(wire: bytes, answering: 10) }
                #expect(error.message.contains("more results than the 10 mutations sent"), "\(error)")
                #expect(error.offset < bytes.count * 11 / results + 100, "refused where the 11th starts: \(error)")
            }
        }
        let clock = HybridTimestamp(physicalMilliseconds: 1_795_000_000_000, counter: 0, node: NodeID(7))
        let names = (0..<500).map { "f\($0)" }
        let record = ServerRecord(
            sequence: 1, entity: .issue, recordID: UUID(), version: 2,
            fields: Dictionary(uniqueKeysWithValues: names.map { ($0, FieldValue.null) }),
            clocks: Dictionary(uniqueKeysWithValues: names.map { ($0, clock) }),
            createdAt: Date(timeIntervalSince1970: 0), updatedAt: Date(timeIntervalSince1970: 0))
        let conflict = MutationResult(idempotencyKey: UUID(), outcome: .conflict(serverRecord: record))
        let fit = PushResponse.maximumFieldsPerAnswer / 1_000
        for (count, reads) in [(fit, true), (fit + 1, false)] {
            let bytes = [UInt8](try WireCoding.encoder().encode(PushResponse(results: Array(repeating: conflict, count: count))))
            if reads {
                #expect(try PushResponse(wire: bytes, answering: 500).results.count == count)
            } else {
                let error = try #require(throws: JSONReaderError.self) { try PushResponse(wire: bytes, answering: 500) }
                #expect(error.message.contains("\(PushResponse.maximumFieldsPerAnswer) fields and clocks"), "\(error)")
            }
        }
    }

    /// A page whose records carry one shared `clock`, and in `clocks` only the fields with another,
    /// reads as the same page, by both readers.
    @Test func readsSharedClocksAsTheClocksOfEveryField() throws {
        var shared = 0, withOthers = 0
        for seed in UInt64(1)...300 {
            let page = Self.randomPage(seed: seed)
            for record in page.changes {
                guard let plan = SharedClockRecord(record: record).sharedClock else { continue }
                shared += 1
                if !plan.others.isEmpty { withOthers += 1 }
            }
            let data = try WireCoding.encoder().encode(SharedClockPage(page: page))
            #expect(try PullResponse(json: data) == page, "seed \(seed)")
            #expect(try WireCoding.decoder().decode(PullResponse.self, from: data) == page, "seed \(seed)")
        }
        #expect(shared > 100 && withOthers > 50)
    }

    /// A record's fields are read into a table sized for its entity's catalog when the entity comes
    /// first, as every writer of the wire sorts its keys: made with the room for 20, an issue's 10
    /// fields, and the clocks mapped from them, took twice the memory (issue 41). Whatever entity a
    /// peer names, the table is never made bigger than that room; a record of more fields than its
    /// entity declares still reads whole. Pulled records and pushed mutations alike.
    @Test func aRecordsFieldsAreSizedByItsEntityAndMoreStillRead() throws {
        let clock = HybridTimestamp(physicalMilliseconds: 1_790_000_000_000, counter: 1, node: NodeID(7))
        let catalog = EntityType.issue.description.fields.map(\.name)
        let sized = [String: FieldValue](minimumCapacity: catalog.count).capacity
        let unsized = [String: FieldValue](minimumCapacity: JSONReader.defaultFieldRoom).capacity
        try #require(sized < unsized, "an issue has fewer fields than a table's default room")
        func pulled(_ names: [String]) throws -> ServerRecord {
            let members = names.sorted().map { "\"\($0)\":{\"text\":\"x\"}" }.joined(separator: ",")
            let record = "{\"clock\":\"\(clock.encoded)\",\"createdAt\":\"2026-10-01T10:00:00.000Z\",\"deleted\":false,"
                + "\"entity\":\"issue\",\"fields\":{\(members)},\"recordID\":\"9E039982-F0FE-11F1-B721-02FC00000001\","
                + "\"sequence\":1,\"updatedAt\":\"2026-10-01T10:00:00.000Z\",\"version\":1}"
            return try #require(try PullResponse(json: Data("{\"changes\":[\(record)],\"hasMore\":false,\"nextCursor\":\"c1\"}".utf8)).changes.first)
        }
        func pushed(_ names: [String]) throws -> PushMutation {
            let fields = Dictionary(uniqueKeysWithValues: names.map { ($0, FieldValue.text("x")) })
            let batch = PushRequest(mutations: [PushMutation(
                idempotencyKey: UUID(), entity: .issue, operation: .update, recordID: UUID(), serverID: nil, baseVersion: 1,
                fields: fields, clocks: fields.mapValues { _ in clock }, deletion: nil, createdAt: nil)])
            return try #require(try PushRequest(json: batch.json()).mutations.first)
        }
        let record = try pulled(catalog), mutation = try pushed(catalog)
        #expect(record.fields.count == catalog.count && mutation.fields.count == catalog.count)
        #expect(record.fields.capacity == sized, "a table of \(record.fields.capacity) for \(catalog.count) fields")
        #expect(record.clocks.capacity == sized && mutation.fields.capacity == sized)
        let extra = catalog + (1...30).map { "newer\($0)" }
        let (wider, widerMutation) = (try pulled(extra), try pushed(extra))
        #expect(wider.fields.count == extra.count && wider.clocks.count == extra.count && widerMutation.fields.count == extra.count)
        // The room a peer's entity asks for is capped: a record of no fields naming an entity of a
        // thousand gets no bigger table than one naming none.
        var reader = JSONReader(bytes: Array("{}".utf8))
        #expect(try reader.fields(expecting: JSONReader.maximumFields).capacity <= unsized)
    }

    /// `clocks` beside `clock` names the fields with another clock; a record with neither, or with
    /// either one null, is refused by both readers.
    @Test func readsTheOtherClocksBesideTheSharedOneAndRefusesNeither() throws {
        let text = String(decoding: try WireCoding.encoder().encode(SharedClockPage(page: PullResponse(
            changes: [Fixtures.serverRecord], nextCursor: "7", hasMore: false))), as: UTF8.self)
        let shared = Fixtures.clock(1_770_000_000_000), other = Fixtures.clock(1_770_000_000_900)
        #expect(text.contains(#""clock":"\#(shared.encoded)""#) && !text.contains(#""clocks""#))
        let withOther = text.replacingOccurrences(
            of: #""clock":"\#(shared.encoded)","#,
            with: #""clock":"\#(shared.encoded)","clocks":{"title":"\#(other.encoded)"},"#)
        let neither = text.replacingOccurrences(of: #""clock":"\#(shared.encoded)","#, with: "")
        let nullClock = text.replacingOccurrences(
            of: #""clock":"\#(shared.encoded)","#, with: #""clock":null,"clocks":{"projectID":"\#(shared.encoded)","title":"\#(shared.encoded)"},"#)
        let nullOthers = text.replacingOccurrences(
            of: #""clock":"\#(shared.encoded)","#, with: #""clock":"\#(shared.encoded)","clocks":null,"#)
        #expect(withOther != text && neither != text && nullClock != text && nullOthers != text)
        let expected = ["projectID": shared, "title": other]
        #expect(try PullResponse(json: Data(withOther.utf8)).changes.first?.clocks == expected)
        #expect(try WireCoding.decoder().decode(PullResponse.self, from: Data(withOther.utf8)).changes.first?.clocks == expected)
        for wrong in [neither, nullClock, nullOthers] {
            #expect(throws: JSONReaderError.self) { try PullResponse(json: Data(wrong.utf8)) }
            #expect(throws: DecodingError.self) { try WireCoding.decoder().decode(PullResponse.self, from: Data(wrong.utf8)) }
        }
    }

    /// Damaged documents (cut short, a byte changed, a byte inserted), in both clock forms: whatever the
    /// reader accepts, `JSONDecoder` accepts as the same value. Seeded, so a failure names its seed.
    @Test func neverAcceptsADamagedPageThatJSONDecoderRefuses() throws {
        var accepted = 0
        for seed in UInt64(1)...1_500 {
            let page = Self.randomPage(seed: seed % 40 + 1)
            let encoder = WireCoding.encoder()
            let encoded = try seed % 2 == 0 ? encoder.encode(SharedClockPage(page: page)) : encoder.encode(page)
            let data = Self.damaged(encoded, seed: seed)
            guard let read = try? PullResponse(json: Data(data)) else { continue }
            accepted += 1
            let decoded = try? WireCoding.decoder().decode(PullResponse.self, from: Data(data))
            #expect(decoded == read, "seed \(seed): \(String(decoding: data, as: UTF8.self))")
        }
        // Some damage is harmless (a space, a changed digit); the check above ran on those.
        #expect(accepted > 0)
    }

    /// A clock or id written with escapes is read as `JSONDecoder` reads it, after an unescaped twin.
    @Test func readsEscapedClocksAndIdsAsJSONDecoderDoes() throws {
        var record = Fixtures.serverRecord
        let clock = HybridTimestamp(physicalMilliseconds: 1_790_000_000_000, counter: 3, node: NodeID(0xA1))
        record.fields = ["title": .text("Leak"), "notes": .text("Wet")]
        record.clocks = ["title": clock, "notes": clock]
        let text = String(decoding: try WireCoding.encoder().encode(PullResponse(changes: [record], nextCursor: "7", hasMore: false)), as: UTF8.self)
        let encoded = clock.encoded
        // The second occurrence (notes sorts before title) escaped: same bytes after unescaping.
        let first = try #require(text.range(of: encoded))
        let escaped = text.replacingCharacters(
            in: try #require(text.range(of: encoded, range: first.upperBound..<text.endIndex)),
            with: "\\u0030" + encoded.dropFirst())
            .replacingOccurrences(of: record.recordID.uuidString, with: "\\u0030" + record.recordID.uuidString.dropFirst())
        #expect(escaped != text)
        let data = Data(escaped.utf8)
        let read = try PullResponse(json: data)
        #expect(try WireCoding.decoder().decode(PullResponse.self, from: data) == read)
        #expect(read.changes.first?.clocks == ["title": clock, "notes": clock])
    }

    @Test func refusesARecordWhoseFlagAndClockDisagreeAndSkipsUnknownMembers() throws {
        var live = Fixtures.serverRecord
        live.deletion = nil
        var text = String(decoding: try WireCoding.encoder().encode(PullResponse(changes: [live], nextCursor: "7", hasMore: false)), as: UTF8.self)
        let withExtra = text.replacingOccurrences(of: #""hasMore""#, with: #""future":{"a":[1,null]},"hasMore""#)
        #expect(try PullResponse(json: Data(withExtra.utf8)).changes == [live])
        text = text.replacingOccurrences(of: #""deleted":false"#, with: #""deleted":true"#)
        #expect(throws: JSONReaderError.self) { try PullResponse(json: Data(text.utf8)) }
        #expect(throws: JSONReaderError.self) { try PullResponse(json: Data(#"{"changes":[],"hasMore":false}"#.utf8)) }
    }

    static func randomAnswer(seed: UInt64) -> PushResponse {
        var random = SeededGenerator(seed: seed)
        let records = randomPage(seed: seed &+ 7).changes
        func outcome(_ random: inout SeededGenerator, duplicates: Bool) -> MutationOutcome {
            switch Int.random(in: 0..<(duplicates ? 4 : 3), using: &random) {
            case 0:
                .applied(
                    version: Int64.random(in: 1...1 << 40, using: &random),
                    serverID: Bool.random(using: &random) ? String(Int.random(in: 1...99_999, using: &random)) : nil)
            case 1 where !records.isEmpty: .conflict(serverRecord: records.randomElement(using: &random)!)
            case 1, 2:
                .rejected(reason: ErrorBody(
                    code: [.invalidRequest, .forbidden, ServerErrorCode(rawValue: "from_a_newer_server")].randomElement(using: &random)!,
                    message: randomText(&random)))
            default: .duplicate(original: outcome(&random, duplicates: false))
            }
        }
        return PushResponse(results: (0..<Int.random(in: 0...8, using: &random)).map { _ in
            MutationResult(idempotencyKey: UUID(), outcome: outcome(&random, duplicates: true))
        })
    }

    /// A push's answer, every outcome: read as `JSONDecoder` reads it, and a damaged answer the reader
    /// takes is one `JSONDecoder` takes alike.
    @Test func readsEveryPushAnswerAsJSONDecoderDoes() throws {
        for seed in UInt64(1)...300 {
            let answer = Self.randomAnswer(seed: seed)
            let data = try WireCoding.encoder().encode(answer)
            #expect(try PushResponse(wire: data) == answer, "seed \(seed)")
        }
        var accepted = 0
        for seed in UInt64(1)...1_500 {
            let data = Self.damaged(try WireCoding.encoder().encode(Self.randomAnswer(seed: seed % 40 + 1)), seed: seed)
            guard let read = try? PushResponse(wire: Data(data)) else { continue }
            accepted += 1
            let decoded = try? WireCoding.decoder().decode(PushResponse.self, from: Data(data))
            #expect(decoded == read, "seed \(seed): \(String(decoding: data, as: UTF8.self))")
        }
        #expect(accepted > 0)
        let nested = #"{"results":[{"idempotencyKey":"0B5E55ED-0000-4000-8000-0000000000A1","status":"duplicate","original":{"status":"duplicate","original":{"status":"applied","version":1}}}]}"#
        #expect(throws: JSONReaderError.self) { try PushResponse(wire: Data(nested.utf8)) }
    }

    /// `JSONDecoder` keeps the first of a repeated member; the readers refuse the document rather than
    /// keep the last, which would read it differently (a repeated `status` turned a rejection missing
    /// its reason into an applied outcome).
    @Test func aRepeatedMemberIsRefusedByEveryReader() throws {
        let key = #""idempotencyKey":"0B5E55ED-0000-4000-8000-0000000000A1""#
        let answers = [
            #"{"results":[{\#(key),"status":"rejected","status":"applied","version":1}]}"#,
            #"{"results":[{\#(key),"status":"applied","version":1,"version":2}]}"#,
            #"{"results":[{\#(key),\#(key),"status":"applied","version":1}]}"#,
            #"{"results":[],"results":[]}"#,
            #"{"results":[{\#(key),"status":"rejected","reason":{"code":"a","code":"b","message":""}}]}"#,
            #"{"results":[{\#(key),"status":"duplicate","original":{"status":"applied","version":1,"version":2}}]}"#,
        ]
        for answer in answers {
            #expect(throws: JSONReaderError.self, "\(answer)") { try PushResponse(wire: Data(answer.utf8)) }
        }
        #expect(try PushResponse(wire: Data(#"{"results":[{\#(key),"status":"applied","version":1,"future":1,"future":2}]}"#.utf8)).results.count == 1)

        let page = String(decoding: try WireCoding.encoder().encode(PullResponse(changes: [Fixtures.serverRecord], nextCursor: "7", hasMore: false)), as: UTF8.self)
        let repeats = [
            (#""hasMore":false"#, #""hasMore":true,"hasMore":false"#),
            (#""version":"#, #""version":1,"version":"#),
            (#""entity":"#, #""entity":"issue","entity":"#),
        ]
        for (member, twice) in repeats {
            let doubled = page.replacingOccurrences(of: member, with: twice, options: [], range: page.range(of: member))
            #expect(doubled != page)
            #expect(throws: JSONReaderError.self, "\(member)") { try PullResponse(json: Data(doubled.utf8)) }
        }
        let nonEmpty = try #require((UInt64(1)...50).lazy.map(Self.randomBatch(seed:)).first { !$0.mutations.isEmpty })
        let batch = String(decoding: try nonEmpty.json(), as: UTF8.self)
        let doubledBatch = batch.replacingOccurrences(of: #"{"baseVersion":"#, with: #"{"baseVersion":0,"baseVersion":"#)
        #expect(doubledBatch != batch)
        #expect(throws: JSONReaderError.self) { try PushRequest(json: Data(doubledBatch.utf8)) }
        #expect(throws: JSONReaderError.self) { try PushRequest(json: Data(#"{"mutations":[],"mutations":[]}"#.utf8)) }
    }
}

import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import OutpostFieldService
import OutpostModels
import OutpostSchema
import OutpostStore
import OutpostSync
import OutpostTesting
import OutpostWire
import Synchronization

/// Scenario `fuzz-server`: seeded hostile bodies for `POST /push` and `POST /pull` against a real
/// `outpost serve` child. The bodies are mutations of valid requests a real device sent (captured on
/// their way out): truncation, bit flips, values of the wrong type, huge or negative numbers, unknown
/// entities, operations and fields, deep nesting, invalid UTF-8, oversized batches, and gzip garbage
/// (random bytes, a cut or damaged stream, a bomb). Each case must end in a clear 4xx (an error body
/// with a code and a message) or a correct answer (a 2xx that decodes, one result per mutation), never
/// a 5xx, a hang, a dead server, or a changed database after a refusal.
enum ServerFuzzScenario {
    static let scenario = Scenario(
        name: "fuzz-server",
        summary: "hostile push and pull bodies (mutated valid requests, gzip garbage) against outpost serve",
        quickSeeds: 1, fullSeeds: 10
    ) { seed, quick in await run(seed: seed, quick: quick) }

    /// How long a request may take before it counts as a hang.
    static let hangLimit: TimeInterval = 20

    static func run(seed: UInt64, quick: Bool) async -> SeedOutcome {
        await SeedOutcome.inScratchFolder("fuzz-server") { folder, outcome in
            try await run(seed: seed, cases: quick ? 40 : 250, folder: folder, outcome: &outcome)
        }
    }

    /// One hostile request.
    struct Case {
        var route: String
        var body: Data
        var gzip = false
        var headers: [String: String] = [:]
        /// The number of mutations in the body, when it is still a readable push.
        var mutations: Int?
        var how: String
    }

    private static func run(seed: UInt64, cases: Int, folder: ScratchFolder, outcome: inout SeedOutcome) async throws {
        var random = SeededGenerator(seed: seed ^ 0x5E2F_0000)
        let database = folder.path("server.sqlite"), seedFile = folder.path("seed.json")
        try Crew.seedJSON.write(to: URL(fileURLWithPath: seedFile))
        var server = try ServeChild.start(databasePath: database, seedPath: seedFile)
        defer { server.child.kill() }

        // Valid requests, as a device really sends them: a seeded workload synced through a recorder.
        let recorder = RecordingTransport(base: HTTPTransport(
            configuration: .init(baseURL: URL(string: server.url)!, schemaVersion: LocalSchema.latestVersion),
            token: Crew.token(of: 0)))
        let store = try DeviceTemplate.openStore(at: folder.path("device.sqlite"))
        let engine = SyncEngine(store: store, transport: recorder, retryPolicy: Fleet.retries, batchSize: 6, pullLimit: 4)
        var workload = Workload(seed: seed)
        for _ in 0..<3 {
            for _ in 0..<10 { try await workload.step(device: 0, store: store, now: { Timestamp.now() }) }
            _ = try await engine.sync()
        }
        let (pushes, pulls) = recorder.captured
        guard !pushes.isEmpty, !pulls.isEmpty else { throw ReliabilityError("the device sent no push or no pull to copy") }
        let encoder = wireEncoder()
        let validPushes = try pushes.map { try encoder.encode($0) }
        let validPulls = try pulls.map { try encoder.encode($0) }

        for number in 0..<cases {
            let push = random.chance(0.7)
            let original = push ? random.pick(validPushes) : random.pick(validPulls)
            let hostile = mutate(original, route: push ? "push" : "pull", using: &random)
            outcome.mutations += 1
            let label = "case \(number) (POST /\(hostile.route), \(hostile.how))"
            let before = try databaseContent(database)
            let answer = await send(hostile, to: server.url)
            guard server.child.isRunning else {
                let exit = await server.child.exit()
                outcome.crashes += 1
                outcome.problems.append("\(label): the server died (\(exit))")
                server = try ServeChild.start(databasePath: database, seedPath: seedFile)
                continue
            }
            guard let (status, body) = answer else {
                outcome.crashes += 1
                outcome.problems.append("\(label): no answer within \(Int(hangLimit)) s")
                continue
            }
            if status >= 500 {
                outcome.crashes += 1
                outcome.problems.append("\(label): answered \(status): \(String(decoding: body.prefix(200), as: UTF8.self))")
            } else if (400..<500).contains(status) {
                let error = try? wireDecoder().decode(ErrorBody.self, from: body)
                if error == nil || error?.message.isEmpty == true {
                    outcome.crashes += 1
                    outcome.problems.append("\(label): answered \(status) without a clear error body: \(String(decoding: body.prefix(200), as: UTF8.self))")
                }
                if try databaseContent(database) != before {
                    outcome.diverged += 1
                    outcome.problems.append("\(label): refused with \(status), but the database changed")
                }
            } else if hostile.route == "push" {
                do {
                    let response = try wireDecoder().decode(PushResponse.self, from: body)
                    if let expected = hostile.mutations, response.results.count != expected {
                        outcome.diverged += 1
                        outcome.problems.append("\(label): \(response.results.count) results for \(expected) mutations")
                    }
                } catch {
                    outcome.crashes += 1
                    outcome.problems.append("\(label): answered \(status) with an unreadable push response: \(error)")
                }
            } else {
                if (try? wireDecoder().decode(PullResponse.self, from: body)) == nil {
                    outcome.crashes += 1
                    outcome.problems.append("\(label): answered \(status) with an unreadable pull response")
                }
                if try databaseContent(database) != before {
                    outcome.diverged += 1
                    outcome.problems.append("\(label): a pull changed the database")
                }
            }
        }
        // The server still works for a well-behaved device afterwards.
        let check = try await engine.sync()
        if !check.isComplete {
            outcome.crashes += 1
            outcome.problems.append("after the hostile bodies, a normal sync did not complete: \(String(describing: check.lastTransportError))")
        }
    }

    /// Sends one case with the protocol's headers and crew member 0's token; nil when no answer came.
    static func send(_ hostile: Case, to base: String) async -> (Int, Data)? {
        var request = HTTPClientRequest(url: "\(base)/\(hostile.route)")
        request.method = .POST
        request.headers.add(name: SyncProtocol.protocolVersionHeader, value: String(SyncProtocol.version))
        request.headers.add(name: SyncProtocol.schemaVersionHeader, value: String(LocalSchema.latestVersion))
        request.headers.add(name: "Content-Type", value: "application/json")
        request.headers.add(name: "Authorization", value: "Bearer \(Crew.token(of: 0))")
        if hostile.gzip { request.headers.add(name: "Content-Encoding", value: "gzip") }
        for (name, value) in hostile.headers { request.headers.replaceOrAdd(name: name, value: value) }
        request.body = .bytes(ByteBuffer(bytes: hostile.body))
        do {
            let response = try await HTTPClient.shared.execute(request, timeout: .seconds(Int64(hangLimit)))
            let data = try await response.body.collect(upTo: 64 << 20)
            return (Int(response.status.code), Data(data.readableBytesView))
        } catch {
            return nil
        }
    }

    /// One seeded hostile variant of a valid body.
    static func mutate(_ valid: Data, route: String, using random: inout SeededGenerator) -> Case {
        let tree = try? JSONSerialization.jsonObject(with: valid)
        let count = ((tree as? [String: Any])?["mutations"] as? [Any])?.count
        func bytes(_ data: Data, _ how: String, mutations: Int? = nil) -> Case {
            Case(route: route, body: data, mutations: mutations, how: how)
        }
        switch random.below(16) {
        case 0:
            let end = random.below(valid.count)
            return bytes(valid.prefix(end), "truncated to \(end) bytes")
        case 1:
            var data = [UInt8](valid)
            var offsets: [Int] = []
            for _ in 0..<(1 + random.below(6)) {
                let offset = random.below(data.count)
                data[offset] ^= UInt8(1) << UInt8(random.below(8))
                offsets.append(offset)
            }
            return bytes(Data(data), "bits flipped at \(offsets)")
        case 2, 3:
            guard let tree else { return bytes(valid, "the valid body") }
            var paths: [[PathStep]] = []
            collectPaths(tree, [], into: &paths)
            let path = random.pick(paths)
            let replacement = random.pick(wrongValues)
            let changed = replacing(tree, at: path[...], with: replacement.value)
            let data = (try? JSONSerialization.data(withJSONObject: changed, options: [.fragmentsAllowed])) ?? valid
            return bytes(data, "\(describe(path)) set to \(replacement.name)")
        case 4:
            let text = String(decoding: valid, as: UTF8.self)
            let numbers = numberRanges(in: text)
            guard !numbers.isEmpty else { return bytes(valid, "the valid body") }
            let range = random.pick(numbers)
            let huge = random.pick([
                "99999999999999999999999999999", "-9223372036854775809", "9223372036854775808", "1e999", "-1e999", "1e-999",
                "-1", "0.5", "-0", "1E+308", "123456789012345678901234567890.5",
            ])
            var changed = text
            changed.replaceSubrange(range, with: huge)
            return bytes(Data(changed.utf8), "number \(text[range]) replaced by \(huge)", mutations: count)
        case 5:
            guard route == "push", var object = tree as? [String: Any], var mutations = object["mutations"] as? [[String: Any]],
                !mutations.isEmpty
            else { return bytes(Data("{\"cursor\": \"\(random.below(1000))x\", \"limit\": 5}".utf8), "a cursor that is not a number") }
            let index = random.below(mutations.count)
            let how: String
            switch random.below(6) {
            case 0:
                mutations[index]["entity"] = random.pick(["spaceship", "__proto__", "", "Issue", "issues", "member\u{0}"])
                how = "unknown entity"
            case 1:
                mutations[index]["operation"] = random.pick(["explode", "DELETE", "", "merge"])
                how = "unknown operation"
            case 2:
                var fields = mutations[index]["fields"] as? [String: Any] ?? [:]
                var clocks = mutations[index]["clocks"] as? [String: Any] ?? [:]
                let name = random.pick(["noSuchField", "server_id", "sync", "id", "__proto__", "title\u{0}"])
                fields[name] = ["text": "injected"]
                clocks[name] = clocks.values.first ?? "0"
                mutations[index]["fields"] = fields
                mutations[index]["clocks"] = clocks
                how = "unknown field \(name.debugDescription)"
            case 3:
                var fields = mutations[index]["fields"] as? [String: Any] ?? [:]
                if let name = fields.keys.sorted().first {
                    fields[name] = random.pick([["blob": 1], ["text": 5], ["integer": "five"], [:], ["text": "a", "integer": 1]] as [[String: Any]])
                }
                mutations[index]["fields"] = fields
                how = "a field value of an unknown or wrong form"
            case 4:
                mutations[index]["idempotencyKey"] = UUID().uuidString
                mutations[index]["recordID"] = random.pick(["not-a-uuid", "", UUID().uuidString])
                how = "a new key and a bad or unknown record id"
            default:
                mutations[index]["clocks"] = ["title": random.pick(["", "zz", String(repeating: "f", count: 64), "-1"])]
                how = "damaged clocks"
            }
            object["mutations"] = mutations
            let data = (try? JSONSerialization.data(withJSONObject: object)) ?? valid
            return bytes(data, how, mutations: mutations.count)
        case 6:
            let depth = random.pick([64, 600, 5_000, 100_000])
            let open = random.chance(0.5) ? "[" : "{\"a\":"
            let close = open == "[" ? "]" : "}"
            let text = String(repeating: open, count: depth) + "1" + String(repeating: close, count: depth)
            let body = random.chance(0.5) ? text : "{\"mutations\": \(text), \"limit\": \(text)}"
            return bytes(Data(body.utf8), "nested \(depth) deep")
        case 7:
            var data = Data()
            for _ in 0..<(1 + random.below(2_000)) { data.append(UInt8(truncatingIfNeeded: random.next())) }
            var hostile = bytes(data, "gzip header on random bytes")
            if random.chance(0.5) { hostile.body = Data([0x1f, 0x8b, 0x08, 0x00]) + data }
            hostile.gzip = true
            return hostile
        case 8:
            var compressed = [UInt8](Gzip.compress(valid))
            let how: String
            if random.chance(0.5) {
                let end = random.below(compressed.count)
                compressed = Array(compressed[0..<end])
                how = "a gzip stream cut at \(end) bytes"
            } else {
                let offset = 10 + random.below(max(compressed.count - 10, 1))
                compressed[min(offset, compressed.count - 1)] ^= 0x5A
                how = "a gzip stream damaged at byte \(offset)"
            }
            var hostile = bytes(Data(compressed), how)
            hostile.gzip = true
            return hostile
        case 9:
            // A bomb: a small gzip body that inflates past the body limit.
            let size = random.pick([9, 64]) * 1024 * 1024
            var hostile = bytes(Gzip.compress(Data(repeating: UInt8(ascii: " "), count: size)), "a gzip bomb of \(size >> 20) MiB")
            hostile.gzip = true
            return hostile
        case 10:
            var hostile = bytes(Gzip.compress(valid), "the valid body gzip-compressed", mutations: count)
            hostile.gzip = true
            return hostile
        case 11:
            guard route == "push", var object = tree as? [String: Any], let mutations = object["mutations"] as? [[String: Any]],
                let first = mutations.first
            else { return bytes(Data("{\"limit\": \(random.pick(["0", "-5", "1000000000", "\"ten\"", "null", "[]"]))}".utf8), "a bad limit") }
            let copies = random.pick([501, 2_000])
            object["mutations"] = (0..<copies).map { _ -> [String: Any] in
                var copy = first
                copy["idempotencyKey"] = UUID().uuidString
                return copy
            }
            let data = (try? JSONSerialization.data(withJSONObject: object)) ?? valid
            return bytes(data, "\(copies) mutations in one batch")
        case 12:
            let body = random.pick(["", "null", "[]", "{}", "\"push\"", "{\"mutations\": {}}", "{\"mutations\": null}", "\u{FEFF}{}",
                                    "{\"mutations\": [], \"mutations\": [1]}", "{\"limit\": 1, \"cursor\": 7}", "{\"projects\": [\"x\"]}"])
            return bytes(Data(body.utf8), "the body \(body.debugDescription)", mutations: body == "{\"mutations\": []}" ? 0 : nil)
        case 13:
            var data = valid
            let offset = data.firstIndex(of: UInt8(ascii: "\"")).map { $0 + 1 } ?? 0
            let junk: [UInt8] = random.pick([[0xFF, 0xFE], [0xC0, 0x80], [0xED, 0xA0, 0x80], [0x00]])
            data.insert(contentsOf: junk, at: offset)
            return bytes(data, "invalid UTF-8 at byte \(offset)")
        case 14:
            let size = random.pick([100_000, 9 * 1024 * 1024])
            guard var object = tree as? [String: Any] else { return bytes(valid, "the valid body") }
            object["padding"] = String(repeating: "x", count: size)
            let data = (try? JSONSerialization.data(withJSONObject: object)) ?? valid
            return bytes(data, "an unknown key holding \(size) bytes", mutations: size < 1_000_000 ? count : nil)
        default:
            var hostile = bytes(valid, "the valid body with bad headers")
            switch random.below(4) {
            case 0: hostile.headers = [SyncProtocol.protocolVersionHeader: "99"]; hostile.how = "protocol version 99"
            case 1: hostile.headers = [SyncProtocol.schemaVersionHeader: "-3"]; hostile.how = "schema version -3"
            case 2: hostile.headers = ["Authorization": "Bearer nobody"]; hostile.how = "an unknown token"
            default: hostile.headers = ["Content-Encoding": "br"]; hostile.how = "Content-Encoding: br"
            }
            return hostile
        }
    }

    /// Values of the wrong type, size or range, to put where a valid value was.
    nonisolated(unsafe) static let wrongValues: [(name: String, value: Any)] = [
        ("a string", "seven"), ("an empty string", ""), ("null", NSNull()), ("true", true), ("an empty array", [Any]()),
        ("an empty object", [String: Any]()), ("-1", -1), ("Int64.max", Int64.max), ("1e308", 1e308), ("0.5", 0.5),
        ("a 200 KB string", String(repeating: "é", count: 100_000)), ("an array of 20,000 numbers", Array(repeating: 1, count: 20_000)),
    ]

    enum PathStep {
        case key(String)
        case index(Int)
    }

    static func collectPaths(_ value: Any, _ path: [PathStep], into paths: inout [[PathStep]]) {
        if !path.isEmpty { paths.append(path) }
        if let object = value as? [String: Any] {
            for key in object.keys.sorted() { collectPaths(object[key]!, path + [.key(key)], into: &paths) }
        } else if let array = value as? [Any] {
            for (index, element) in array.enumerated() { collectPaths(element, path + [.index(index)], into: &paths) }
        }
        if paths.isEmpty { paths.append([]) }
    }

    static func replacing(_ value: Any, at path: ArraySlice<PathStep>, with replacement: Any) -> Any {
        guard let step = path.first else { return replacement }
        switch step {
        case .key(let key):
            guard var object = value as? [String: Any], let child = object[key] else { return value }
            object[key] = replacing(child, at: path.dropFirst(), with: replacement)
            return object
        case .index(let index):
            guard var array = value as? [Any], array.indices.contains(index) else { return value }
            array[index] = replacing(array[index], at: path.dropFirst(), with: replacement)
            return array
        }
    }

    static func describe(_ path: [PathStep]) -> String {
        path.isEmpty ? "the body" : path.map { step -> String in
            switch step {
            case .key(let key): return ".\(key)"
            case .index(let index): return "[\(index)]"
            }
        }.joined()
    }

    /// The ranges of the number tokens in JSON text (outside strings).
    static func numberRanges(in text: String) -> [Range<String.Index>] {
        var ranges: [Range<String.Index>] = []
        var inString = false, escaped = false
        var index = text.startIndex
        while index < text.endIndex {
            let character = text[index]
            if inString {
                if escaped { escaped = false } else if character == "\\" { escaped = true } else if character == "\"" { inString = false }
                index = text.index(after: index)
            } else if character == "\"" {
                inString = true
                index = text.index(after: index)
            } else if character == "-" || character.isNumber {
                let start = index
                while index < text.endIndex, "+-.eE0123456789".contains(text[index]) { index = text.index(after: index) }
                ranges.append(start..<index)
            } else {
                index = text.index(after: index)
            }
        }
        return ranges
    }

    /// The wire's JSON coders (instants as `Timestamp` text), as the sync protocol defines them.
    static func wireEncoder() -> JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        encoder.dateEncodingStrategy = .custom { date, encoder in
            var container = encoder.singleValueContainer()
            try container.encode(Timestamp.string(from: date))
        }
        return encoder
    }

    static func wireDecoder() -> JSONDecoder {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .custom { decoder in
            let container = try decoder.singleValueContainer()
            let text = try container.decode(String.self)
            guard let date = Timestamp.date(from: text) else {
                throw DecodingError.dataCorruptedError(in: container, debugDescription: "'\(text)' is not a timestamp")
            }
            return date
        }
        return decoder
    }
}

/// A `SyncTransport` that passes every request to a real `HTTPTransport` and keeps each push and pull
/// it sent, so hostile variants start from what a device really sends.
final class RecordingTransport: ForwardingTransport {
    let base: HTTPTransport
    private let log = Mutex<(pushes: [PushRequest], pulls: [PullRequest])>(([], []))

    init(base: HTTPTransport) { self.base = base }

    var captured: (pushes: [PushRequest], pulls: [PullRequest]) { log.withLock { $0 } }

    func push(_ request: PushRequest) async throws(TransportError) -> PushResponse {
        log.withLock { $0.pushes.append(request) }
        return try await base.push(request)
    }

    func pull(_ request: PullRequest) async throws(TransportError) -> PullResponse {
        log.withLock { $0.pulls.append(request) }
        return try await base.pull(request)
    }
}

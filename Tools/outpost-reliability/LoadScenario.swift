import Foundation
import GRDB
import OutpostFieldService
import OutpostModels
import OutpostSchema
import OutpostStore
import OutpostSync
import OutpostTesting
import OutpostWire
import Synchronization

/// Scenario `load`: one in-process server on 127.0.0.1 and 50 devices, each its own store and sync
/// engine, writing and syncing concurrently for a fixed time. Every request is timed by kind (push,
/// pull) for throughput and p50/p99 latency. Then the devices settle one by one and the harness checks
/// that nothing was lost or duplicated: each record a device wrote is on the server once, with the
/// device's values, every key the server applied is one a device holds as done, every key a device
/// holds as done was answered by the server, and every device's final pull equals the server.
enum LoadScenario {
    static let scenario = Scenario(
        name: "load",
        summary: "50 devices pushing and pulling concurrently against one server for a fixed time",
        quickSeeds: 1, fullSeeds: 1
    ) { seed, quick in await run(seed: seed, quick: quick) }

    static let devices = 50

    static func run(seed: UInt64, quick: Bool) async -> SeedOutcome {
        var outcome = SeedOutcome()
        do {
            let folder = try ScratchFolder("load")
            defer { folder.remove() }
            let server = try await LoopbackServer.start(databasePath: folder.path("server.sqlite"))
            do {
                try await run(seed: seed, seconds: quick ? 2 : 30, folder: folder, server: server, outcome: &outcome)
            } catch {
                outcome.crashed(error, during: "the scenario")
            }
            await server.stop()
        } catch {
            outcome.crashed(error, during: "setup")
        }
        return outcome
    }

    /// One device of the load: its store, engine, and what it wrote.
    final class LoadDevice: Sendable {
        let index: Int
        let store: LocalStore
        let engine: SyncEngine
        let written = Mutex<Set<String>>([])

        init(index: Int, store: LocalStore, engine: SyncEngine) {
            self.index = index
            self.store = store
            self.engine = engine
        }
    }

    private static func run(
        seed: UInt64, seconds: Int, folder: ScratchFolder, server: LoopbackServer, outcome: inout SeedOutcome
    ) async throws {
        let book = LatencyBook()
        let fleet = try (0..<devices).map { index in
            let store = try DeviceTemplate.openStore(at: folder.path("device-\(index).sqlite"))
            // Five crew members, ten devices each: a member's phone, tablet and so on.
            let transport = TimedTransport(base: server.transport(for: index % Crew.users.count), book: book)
            let engine = SyncEngine(
                store: store, transport: transport, retryPolicy: Fleet.retries,
                random: SeededGenerator(seed: seed ^ UInt64(index + 1) << 40), batchSize: 50, pullLimit: 200)
            return LoadDevice(index: index, store: store, engine: engine)
        }

        // The load: every device writes 1–3 records of its own, syncs, and goes again until the deadline.
        let deadline = ContinuousClock.now + .seconds(seconds)
        let started = ContinuousClock.now
        let writes = try await withThrowingTaskGroup(of: (writes: Int, pushed: Int).self) { group in
            for device in fleet {
                group.addTask {
                    var random = SeededGenerator(seed: seed &* 31 &+ UInt64(device.index))
                    var writes = 0, pushed = 0
                    var issues: [UUID] = []
                    while ContinuousClock.now < deadline {
                        for _ in 0..<(1 + random.below(3)) {
                            try await write(device: device, random: &random, issues: &issues)
                            writes += 1
                        }
                        let report = try await device.engine.sync()
                        pushed += report.pushed
                    }
                    return (writes, pushed)
                }
            }
            var total = (writes: 0, pushed: 0)
            for try await result in group {
                total.writes += result.writes
                total.pushed += result.pushed
            }
            return total
        }
        let elapsed = (ContinuousClock.now - started).seconds
        book.stop()
        outcome.mutations = writes.writes

        // Settle: each device until a run sends nothing, then one more round so every device pulls all.
        for device in fleet {
            var quiet = false
            for _ in 0..<50 where !quiet {
                let report = try await device.engine.sync()
                quiet = report.isComplete && report.pushed + report.rebased + report.retried + report.failed == 0
            }
            if !quiet {
                outcome.lost += 1
                outcome.problems.append("device \(device.index) did not settle in 50 runs")
            }
        }
        for device in fleet { _ = try await device.engine.sync() }

        try check(fleet: fleet, server: server, outcome: &outcome)
        let divergences = try await divergences(fleet: fleet, server: server)
        outcome.diverged += divergences.count
        outcome.problems += divergences
        outcome.load = book.figures(seconds: elapsed, devices: fleet.count, pushedMutations: writes.pushed)
    }

    /// One write by `device`: a new issue, an edit of one of its issues, a comment on one, or a daily log.
    private static func write(device: LoadDevice, random: inout SeededGenerator, issues: inout [UUID]) async throws {
        let user = Crew.users[device.index % Crew.users.count]
        let number = random.below(1_000_000)
        let key: String
        switch issues.isEmpty ? 0 : random.below(4) {
        case 0:
            let issue = Issue(id: random.uuid(), projectID: Crew.project, title: "Load issue \(number) by \(device.index)")
            _ = try await device.store.save(issue)
            issues.append(issue.id)
            key = "issue/\(issue.id.uuidString.lowercased())"
        case 1:
            let id = random.pick(issues)
            guard var issue = try device.store.fetch(Issue.self, id: id) else { return }
            issue.details = "Edited \(number) by \(device.index)"
            _ = try await device.store.save(issue)
            key = "issue/\(id.uuidString.lowercased())"
        case 2:
            let comment = Comment(id: random.uuid(), issueID: random.pick(issues), authorID: user, body: "Load note \(number)")
            _ = try await device.store.save(comment)
            key = "comment/\(comment.id.uuidString.lowercased())"
        default:
            let log = DailyLog(
                id: random.uuid(), projectID: Crew.project, authorID: user, day: "2026-11-\(10 + number % 18)",
                notes: "Load log \(number)")
            _ = try await device.store.save(log)
            key = "dailyLog/\(log.id.uuidString.lowercased())"
        }
        device.written.withLock { _ = $0.insert(key) }
    }

    private static func check(fleet: [LoadDevice], server: LoopbackServer, outcome: inout SeedOutcome) throws {
        let state = try ServerState.read(databasePath: server.databasePath)
        let serverRecords = Set(state.records.keys.map { $0.lowercased() })
        var written: Set<String> = []
        var doneKeys: Set<String> = []
        for device in fleet {
            let mine = device.written.withLock { $0 }
            written.formUnion(mine)
            for key in mine.sorted() where !serverRecords.contains(key.lowercased()) {
                outcome.lost += 1
                outcome.problems.append("device \(device.index) wrote \(key), which is not on the server")
            }
            for key in try device.store.finishedMutationKeys() { doneKeys.insert(key.uuidString.lowercased()) }
            for mutation in try device.store.mutations() {
                if mutation.status != .done {
                    outcome.lost += 1
                    outcome.problems.append(
                        "device \(device.index): \(mutation.operation) \(mutation.entity.rawValue)/\(mutation.recordID) left \(mutation.status)")
                }
            }
        }
        // Records of the kinds the load writes that no device wrote would be duplicates.
        let writtenKeys = Set(written.map { $0.lowercased() })
        for key in serverRecords.sorted() where ["issue/", "comment/", "dailylog/"].contains(where: key.hasPrefix) {
            if !writtenKeys.contains(key) {
                outcome.duplicated += 1
                outcome.problems.append("the server holds \(key), which no device wrote")
            }
        }
        for (key, record) in state.appliedKeys.sorted(by: { $0.key < $1.key }) where !doneKeys.contains(key) {
            outcome.duplicated += 1
            outcome.problems.append("the server applied key \(key) (\(record)), which no device holds as done")
        }
        let answered = try answeredKeys(databasePath: server.databasePath)
        for key in doneKeys.sorted() where !answered.contains(key) {
            outcome.lost += 1
            outcome.problems.append("a device holds key \(key) as done, but the server never answered it")
        }
    }

    /// Every idempotency key the server answered, lowercased.
    static func answeredKeys(databasePath: String) throws -> Set<String> {
        var configuration = Configuration()
        configuration.readonly = true
        let queue = try DatabaseQueue(path: databasePath, configuration: configuration)
        defer { try? queue.close() }
        return try queue.read { db in
            Set(try String.fetchAll(db, sql: "SELECT idempotency_key FROM applied_mutations").map { $0.lowercased() })
        }
    }
}

extension LoadScenario {
    /// Each device's final pull against the server, run after `check` (async, so apart from it).
    static func divergences(fleet: [LoadDevice], server: LoopbackServer) async throws -> [String] {
        var problems: [String] = []
        for device in fleet {
            let result = try await compare(device.store, with: server.transport(for: device.index % Crew.users.count))
            problems += result.mismatches.map { "device \(device.index): \($0)" }
        }
        return problems
    }
}

/// Throughput and latency of the load scenario, as the table and the JSON report them.
struct LoadFigures: Sendable, Codable {
    struct Kind: Sendable, Codable {
        var requests: Int
        var p50Milliseconds: Double
        var p99Milliseconds: Double
        var maximumMilliseconds: Double
    }

    var devices: Int
    var seconds: Double
    var requests: Int
    var requestsPerSecond: Double
    var mutationsPerSecond: Double
    /// Requests that ended in a transport error during the load (retried by the engines).
    var transportErrors: Int
    var kinds: [String: Kind]
}

/// Request durations by kind, recorded while the load runs.
final class LatencyBook: Sendable {
    private let state = Mutex<(recording: Bool, durations: [String: [Double]], errors: Int)>((true, [:], 0))

    func record(_ kind: String, milliseconds: Double, failed: Bool) {
        state.withLock {
            guard $0.recording else { return }
            $0.durations[kind, default: []].append(milliseconds)
            if failed { $0.errors += 1 }
        }
    }

    /// Ends the measured window: the settling that follows is not load.
    func stop() { state.withLock { $0.recording = false } }

    func figures(seconds: Double, devices: Int, pushedMutations: Int) -> LoadFigures {
        let (durations, errors) = state.withLock { ($0.durations, $0.errors) }
        var kinds: [String: LoadFigures.Kind] = [:]
        for (kind, values) in durations {
            let sorted = values.sorted()
            func percentile(_ p: Double) -> Double {
                sorted.isEmpty ? 0 : sorted[min(sorted.count - 1, Int((Double(sorted.count) * p).rounded(.up)) - 1)]
            }
            kinds[kind] = .init(
                requests: sorted.count, p50Milliseconds: percentile(0.50), p99Milliseconds: percentile(0.99),
                maximumMilliseconds: sorted.last ?? 0)
        }
        let requests = durations.values.reduce(0) { $0 + $1.count }
        return LoadFigures(
            devices: devices, seconds: seconds, requests: requests, requestsPerSecond: Double(requests) / max(seconds, 0.001),
            mutationsPerSecond: Double(pushedMutations) / max(seconds, 0.001), transportErrors: errors, kinds: kinds)
    }
}

/// A `SyncTransport` that times every request of a real `HTTPTransport` into a `LatencyBook`.
struct TimedTransport: ForwardingTransport {
    let base: HTTPTransport
    let book: LatencyBook

    private func timed<Answer: Sendable>(
        _ kind: String, _ send: @Sendable () async throws(TransportError) -> Answer
    ) async throws(TransportError) -> Answer {
        let start = ContinuousClock.now
        do {
            let answer = try await send()
            book.record(kind, milliseconds: (ContinuousClock.now - start).seconds * 1000, failed: false)
            return answer
        } catch {
            book.record(kind, milliseconds: (ContinuousClock.now - start).seconds * 1000, failed: true)
            throw error
        }
    }

    func health() async throws(TransportError) -> HealthResponse {
        try await timed("health") { () async throws(TransportError) in try await base.health() }
    }

    func push(_ request: PushRequest) async throws(TransportError) -> PushResponse {
        try await timed("push") { () async throws(TransportError) in try await base.push(request) }
    }

    func pull(_ request: PullRequest) async throws(TransportError) -> PullResponse {
        try await timed("pull") { () async throws(TransportError) in try await base.pull(request) }
    }

    func mediaUploadStatus(for attachmentID: UUID) async throws(TransportError) -> MediaUploadStatus {
        try await timed("media") { () async throws(TransportError) in try await base.mediaUploadStatus(for: attachmentID) }
    }

    func uploadMedia(_ chunk: MediaChunk) async throws(TransportError) -> MediaUploadStatus {
        try await timed("media") { () async throws(TransportError) in try await base.uploadMedia(chunk) }
    }

    func downloadBundle(project: UUID, format: BundleFormat, to destination: URL) async throws(TransportError) -> Int64 {
        try await timed("bundle") { () async throws(TransportError) in
            try await base.downloadBundle(project: project, format: format, to: destination)
        }
    }

    func downloadOriginal(of attachmentID: UUID, byteCount: Int64, appendingTo partial: URL)
        async throws(TransportError) -> OriginalDownload
    {
        try await timed("media") { () async throws(TransportError) in
            try await base.downloadOriginal(of: attachmentID, byteCount: byteCount, appendingTo: partial)
        }
    }
}

extension Duration {
    /// The duration in seconds, as a floating-point number.
    var seconds: Double {
        Double(components.seconds) + Double(components.attoseconds) * 1e-18
    }
}

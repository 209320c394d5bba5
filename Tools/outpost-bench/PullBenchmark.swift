import Foundation
import GRDB
import OutpostConflicts
import OutpostFieldService
import OutpostModels
import OutpostSchema
import OutpostStore
import OutpostSync
import OutpostWire

/// The device side of issue 8's pull figure, with no server and no network: how fast pulled pages are
/// applied into a `LocalStore` (`applyPulledPage`), and how fast the wire form of a page is decoded.
///
/// The stream: one project, then `records` issues of it, one in a hundred an asset (with a server id)
/// and one in a hundred an issue naming an asset by the server id of an asset that arrives about a
/// thousand records later (a reference waiting for its mapping, linked when the asset comes).
///
/// - Apply into a fresh store, pages of 500 and of 1,000.
/// - Apply a second stream of as many new records into the store the first left behind (a store that
///   already holds `records`), pages of 500 and of 1,000: the rate must not fall as the store grows.
/// - Decode: every page's `PullResponse` JSON read and converted to `VersionedRecord`s, as the engine does,
///   by `PullResponse(json:)` (what the HTTP transport uses) against `JSONDecoder` in the same run.
///
/// Peer: the `sqlite3` CLI's `.import` of the issue rows the first run stored, as CSV, into a fresh
/// device schema, and of the second run's rows into that (then full) database: the bulk-insert floor.
///
/// `OUTPOST_BENCH_PULL_RECORDS` sets the size (default 100,000).
struct PullBenchmark: BenchmarkSuite {
    let name = "pull"
    let records = ProcessInfo.processInfo.environment["OUTPOST_BENCH_PULL_RECORDS"].flatMap(Int.init) ?? 100_000

    static let project = UUID(uuidString: "0b5e55ed-0000-4000-8000-0000000000e5")!

    func run() async throws -> [BenchmarkRow] {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("outpost-bench-pull-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let count = records.formatted()
        let first = Self.stream(records, generation: 0, withProject: true)
        let second = Self.stream(records, generation: 1, withProject: false)
        var rows: [BenchmarkRow] = []

        // Decoding the wire form alone: encoded untimed, decoded and converted timed, by the reader the
        // HTTP transport uses and by `JSONDecoder` (its peer, and what it replaced).
        let wire = try Self.wirePages(first, size: 500)
        let readSeconds = try measureSeconds {
            for data in wire {
                for change in try PullResponse(json: data).changes { _ = try change.versionedRecord }
            }
        }
        let decodeSeconds = try measureSeconds {
            let decoder = JSONDecoder()
            for data in wire {
                let response = try decoder.decode(PullResponse.self, from: data)
                for change in response.changes { _ = try change.versionedRecord }
            }
        }
        // What the engine then works out of each record where it decoded it (`PreparedChange`), which the
        // apply rows below no longer count: the store's writer skips it for a prepared page.
        let records = try wire.flatMap { try PullResponse(json: $0).changes.map { try $0.versionedRecord } }
        let prepareSeconds = measureSeconds {
            for record in records { _ = PreparedChange(record) }
        }
        rows.append(BenchmarkRow(
            metric: "prepare \(count) pulled records for the store (PreparedChange, off its writer)",
            value: Double(records.count) / prepareSeconds, unit: "records/s"))
        rows.append(BenchmarkRow(
            metric: "decode \(count) pulled records (PullResponse JSON, 500/page, to VersionedRecord; JSONReader)",
            value: Double(first.count) / readSeconds, unit: "records/s", peer: "JSONDecoder, same pages",
            peerValue: Double(first.count) / decodeSeconds))

        var peer: (fresh: Double, full: Double)?
        for size in [500, 1_000] {
            let path = folder.appendingPathComponent("device-\(size).sqlite").path
            let store = try LocalStore.open(at: path)
            let freshSeconds = try await apply(first, pageSize: size, into: store)
            let freshIssues = try BundleImportBenchmark.issueCount(in: path)
            if peer == nil {
                // The peer loads the very rows this run stored, before the second stream joins them.
                try exportIssues(of: path, to: folder.appendingPathComponent("first.csv"))
            }
            let fullSeconds = try await apply(second, pageSize: size, into: store)
            let issues = try BundleImportBenchmark.issueCount(in: path)
            let expected = Self.issueCount(first) + Self.issueCount(second)
            guard freshIssues == Self.issueCount(first), issues == expected else {
                throw BenchmarkFailure("pull apply left \(freshIssues) then \(issues) issues, not \(Self.issueCount(first)) then \(expected)")
            }
            try Self.checkLinks(in: path)
            if peer == nil {
                try exportIssues(of: path, to: folder.appendingPathComponent("all.csv"), excludingCSV: true)
                peer = try sqlite3ImportRates(folder: folder)
            }
            let freshRate = Double(first.count) / freshSeconds, fullRate = Double(second.count) / fullSeconds
            rows.append(BenchmarkRow(
                metric: "apply \(count) pulled records into a fresh store, \(size)/page (applyPulledPage)", value: freshRate,
                unit: "records/s", peer: "sqlite3 .import of the same issue rows, fresh schema", peerValue: peer?.fresh,
                target: "≥ 50,000 records/s", met: freshRate >= 50_000))
            rows.append(BenchmarkRow(
                metric: "apply \(count) more into that store (holding \(count)), \(size)/page", value: fullRate,
                unit: "records/s", peer: "sqlite3 .import of those rows into the full schema", peerValue: peer?.full,
                target: "≥ 50,000 records/s", met: fullRate >= 50_000))
        }
        return rows
    }

    /// Applies `changes` in pages of `pageSize`, each with its cursor; returns the seconds spent applying.
    /// Building the pages is not timed: each record is converted and prepared (`PreparedChange`) as the
    /// sync engine does where it decodes a page, off the store's writer.
    private func apply(_ changes: [ServerRecord], pageSize: Int, into store: LocalStore) async throws -> Double {
        var pages: [PulledPage] = []
        for start in stride(from: 0, to: changes.count, by: pageSize) {
            let slice = changes[start..<min(start + pageSize, changes.count)]
            pages.append(PulledPage(
                prepared: try slice.map { PreparedChange(try $0.versionedRecord) }, cursor: "\(slice.last!.sequence)"))
        }
        let clock = ContinuousClock()
        let started = clock.now
        let cpuStarted = Self.processCPUSeconds()
        for page in pages {
            let report = try await store.applyPulledPage(page)
            guard report.quarantined == 0 else { throw BenchmarkFailure("a synthetic record was quarantined") }
        }
        let seconds = (clock.now - started).seconds
        // On a shared machine the wall time mostly measures the other processes; the CPU time is ours.
        FileHandle.standardError.write(Data(String(
            format: "bench: pull: %d records, %d/page: %.2f s wall, %.2f s CPU (%.0f records per CPU second)\n",
            changes.count, pageSize, seconds, Self.processCPUSeconds() - cpuStarted,
            Double(changes.count) / max(Self.processCPUSeconds() - cpuStarted, 1e-9)).utf8))
        return seconds
    }

    /// CPU time of this process so far (every thread, the store's writer included).
    static func processCPUSeconds() -> Double {
        var time = timespec()
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &time)
        return Double(time.tv_sec) + Double(time.tv_nsec) / 1_000_000_000
    }

    /// The synthetic stream (see the type's comment); `generation` makes a second stream of new ids.
    static func stream(_ count: Int, generation: Int, withProject: Bool) -> [ServerRecord] {
        let node = NodeID(0xBE7C_0000 + UInt64(generation))
        let base = Int64(1_790_000_000_000) + Int64(generation) * 10_000_000
        let created = Date(timeIntervalSince1970: Double(base) / 1000)
        var changes: [ServerRecord] = []
        changes.reserveCapacity(count)
        var sequence = Int64(generation) * 10_000_000
        func record(_ entity: EntityType, id: UUID = .timeOrdered(), serverID: String? = nil, _ fields: [String: FieldValue]) {
            sequence += 1
            let stamp = HybridTimestamp(physicalMilliseconds: base + sequence, counter: 0, node: node)
            changes.append(ServerRecord(
                sequence: sequence, entity: entity, recordID: id, serverID: serverID, version: 1, fields: fields,
                clocks: fields.mapValues { _ in stamp }, createdAt: created, updatedAt: created))
        }
        if withProject {
            record(.project, id: project, [
                "name": .text("Bench tower"), "number": .null, "address": .text("1 Main St"), "status": .text("active"),
                "opportunityID": .null, "startDay": .null,
            ])
        }
        let statuses = ["open", "inProgress", "resolved", "closed"], priorities = ["low", "medium", "high", "critical"]
        var index = 0
        while changes.count < count {
            let block = index / 100
            switch index % 100 {
            case 50:
                record(.asset, serverID: "g\(generation)-asset-\(block)", [
                    "projectID": .uuid(project), "name": .text("Pump \(block)"), "qrCode": .text("G\(generation)-QR-\(block)"),
                    "category": .text("mechanical"), "location": .text("Level \(block % 40)"),
                ])
            default:
                // One issue per hundred names an asset that arrives ten blocks later, by its server id.
                let asset: FieldValue = index % 100 == 0 ? .text("g\(generation)-asset-\(block + 10)") : .null
                record(.issue, [
                    "projectID": .uuid(project), "title": .text("Issue \(index): hairline crack in drywall, level \(index % 40)"),
                    "details": .text("Found during walkthrough; check the framing behind it before patching."),
                    "status": .text(statuses[index % 4]), "priority": .text(priorities[(index / 4) % 4]),
                    "assigneeID": .null, "latitude": .real(47.6 + Double(index % 1000) / 100_000),
                    "longitude": .real(-122.3 - Double(index % 997) / 100_000), "assetID": asset, "modelElementID": .null,
                ])
            }
            index += 1
        }
        return changes
    }

    static func issueCount(_ changes: [ServerRecord]) -> Int {
        changes.filter { $0.entity == .issue }.count
    }

    /// Every page of `changes` as the server sends it.
    static func wirePages(_ changes: [ServerRecord], size: Int) throws -> [Data] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return try stride(from: 0, to: changes.count, by: size).map { start in
            let slice = Array(changes[start..<min(start + size, changes.count)])
            return try encoder.encode(PullResponse(
                changes: slice, nextCursor: "\(slice.last!.sequence)", hasMore: start + size < changes.count))
        }
    }

    /// The waiting references whose asset arrived must have been linked: no issue may still hold the
    /// server id of an asset the store has.
    static func checkLinks(in path: String) throws {
        let unlinked = try DatabaseQueue(path: path).read { db in
            try Int.fetchOne(db, sql: "SELECT count(*) FROM issues i JOIN assets a ON a.server_id = i.asset_id") ?? 0
        }
        guard unlinked == 0 else { throw BenchmarkFailure("\(unlinked) issues still name an arrived asset by its server id") }
    }

    /// Writes the issue rows of `path` as CSV; with `excludingCSV`, only those not already in first.csv
    /// (the rows the second stream added).
    private func exportIssues(of path: String, to csv: URL, excludingCSV: Bool = false) throws {
        let columns = try Self.peerIssueColumns(of: path)
        let query = excludingCSV
            ? "SELECT \(columns) FROM issues WHERE created_at >= \(Int64(1_790_000_000_000) + 10_000_000);"
            : "SELECT \(columns) FROM issues;"
        let job = try ChildProcess.run("/usr/bin/env", ["sqlite3", "-bail", "-readonly", path, ".mode csv", ".output \(csv.path)", query])
        guard job.status == 0 else { throw BenchmarkFailure("sqlite3 export exited with \(job.status); is sqlite3 installed?") }
    }

    /// The issue columns a peer `.import` writes: every one, but the row's clocks (`sync_clocks`, v17) as
    /// empty text. The peer writes the rows as they stood before the clocks moved into them (review 140,
    /// F4: exported whole, the peer wrote each record's clocks too, and its rate fell with the pull's
    /// work); the floor row imports the clocks.
    static func peerIssueColumns(of path: String) throws -> String {
        let names = try DatabaseQueue(path: path).read { db in try db.columns(in: "issues").map(\.name) }
        return names.map { $0 == LocalApp.rowClocksColumn ? "''" : $0.quotedDatabaseIdentifier }.joined(separator: ", ")
    }

    /// Rows per second of `sqlite3 .import`: first.csv into a freshly migrated device database, then all.csv
    /// (the second stream's rows) into that same, now full, database.
    private func sqlite3ImportRates(folder: URL) throws -> (fresh: Double, full: Double) {
        let target = folder.appendingPathComponent("peer.sqlite").path
        try LocalDatabase.migrate(at: target)
        var rates: [Double] = []
        for name in ["first", "all"] {
            let csv = folder.appendingPathComponent("\(name).csv")
            let before = try BundleImportBenchmark.issueCount(in: target)
            let job = try ChildProcess.run("/usr/bin/env", ["sqlite3", "-bail", target, ".import --csv \(csv.path) issues"])
            let added = try BundleImportBenchmark.issueCount(in: target) - before
            guard job.status == 0, added > 0 else { throw BenchmarkFailure("sqlite3 .import of \(csv.path) exited with \(job.status)") }
            rates.append(Double(added) / job.seconds)
        }
        return (rates[0], rates[1])
    }
}

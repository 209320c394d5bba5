import Foundation
import GRDB
import OutpostFieldService
import OutpostStore

#if canImport(Glibc)
import Glibc
#endif

/// Issue 6's figures: importing a bundle of 200,000 issues into a fresh store, as XML and as JSON, each
/// through the built `outpost import` in a child process so its peak RSS is its own. Peers, measured in
/// the same run: `xmllint --stream --noout` over the same XML plus the `sqlite3` CLI's `.import` of the
/// same rows as CSV (parsing plus bulk insert, with no validation). Then a 1,000,000-record bundle in
/// each encoding for peak memory.
///
/// For quick iterations, `OUTPOST_BENCH_BUNDLE_ISSUES` and `OUTPOST_BENCH_BUNDLE_MEMORY_RECORDS` change the
/// two sizes (a memory size of 0 skips that part); the figures in BENCHMARKS.md are at the defaults.
struct BundleImportBenchmark: BenchmarkSuite {
    let name = "bundle-import"
    let issues = Self.size("OUTPOST_BENCH_BUNDLE_ISSUES", default: 200_000)
    let memoryRecords = Self.size("OUTPOST_BENCH_BUNDLE_MEMORY_RECORDS", default: 1_000_000)

    /// 1000000 as "1,000,000", independent of the locale.
    static func grouped(_ number: Int) -> String {
        var digits = String(number)
        var index = digits.endIndex
        while digits.distance(from: digits.startIndex, to: index) > 3 {
            index = digits.index(index, offsetBy: -3)
            digits.insert(",", at: index)
        }
        return digits
    }

    private static func size(_ variable: String, default value: Int) -> Int {
        ProcessInfo.processInfo.environment[variable].flatMap { Int($0) }.map { max($0, 0) } ?? value
    }

    func run() async throws -> [BenchmarkRow] {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("outpost-bench-bundle-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let outpost = try Self.outpostExecutable()
        let template = folder.appendingPathComponent("template.sqlite").path
        try LocalDatabase.migrate(at: template)
        let columns = try Self.issueColumns(in: template)

        let xml = folder.appendingPathComponent("issues.xml"), json = folder.appendingPathComponent("issues.json")
        let csv = folder.appendingPathComponent("issues.csv")
        try BenchBundle(issues: issues).write(xml: xml, json: json, csv: csv, csvColumns: columns)

        func freshStore(_ name: String) throws -> String {
            let path = folder.appendingPathComponent(name).path
            try FileManager.default.copyItem(atPath: template, toPath: path)
            return path
        }
        let ourXMLStore = try freshStore("ours-xml.sqlite"), ourJSONStore = try freshStore("ours-json.sqlite")
        let peerStore = try freshStore("sqlite3.sqlite")

        let ourXML = try ChildProcess.run(outpost, ["import", xml.path, "--db", ourXMLStore, "--json"])
        let ourJSON = try ChildProcess.run(outpost, ["import", json.path, "--db", ourJSONStore, "--json"])
        let xmllint = try ChildProcess.run("/usr/bin/env", ["xmllint", "--stream", "--noout", xml.path])
        let sqlite = try ChildProcess.run("/usr/bin/env", ["sqlite3", "-bail", peerStore, ".import --csv \(csv.path) issues"])
        for (job, what) in [(ourXML, "outpost import (XML)"), (ourJSON, "outpost import (JSON)"), (xmllint, "xmllint"), (sqlite, "sqlite3 .import")]
        where job.status != 0 {
            throw BenchmarkFailure("\(what) exited with \(job.status); are libxml2-utils and sqlite3 installed (make bench installs them)?")
        }
        // Each side must have done the same work, or the comparison means nothing.
        for store in [ourXMLStore, ourJSONStore, peerStore] {
            let count = try Self.issueCount(in: store)
            guard count == issues else { throw BenchmarkFailure("\(store) holds \(count) issues, not \(issues)") }
        }

        let peerPair = xmllint.seconds + sqlite.seconds
        let thousands = "\(issues / 1000)K issues"
        var rows = [
            BenchmarkRow(metric: "import XML bundle, \(thousands) (schema-validated, one transaction)", value: ourXML.seconds,
                unit: "s", peer: "xmllint --stream --noout + sqlite3 .import CSV", peerValue: peerPair,
                target: "≤ 1.0× peer pair", met: ourXML.seconds <= peerPair),
            BenchmarkRow(metric: "import JSON bundle, \(thousands)", value: ourJSON.seconds, unit: "s",
                peer: "xmllint --stream --noout + sqlite3 .import CSV", peerValue: peerPair),
            BenchmarkRow(metric: "  peer: xmllint --stream --noout, \(thousands)", value: xmllint.seconds, unit: "s"),
            BenchmarkRow(metric: "  peer: sqlite3 .import CSV, \(thousands)", value: sqlite.seconds, unit: "s"),
            BenchmarkRow(metric: "peak RSS, import XML, \(thousands)", value: ourXML.peakMegabytes, unit: "MB",
                peer: "xmllint --stream", peerValue: xmllint.peakMegabytes),
            BenchmarkRow(metric: "peak RSS, import JSON, \(thousands)", value: ourJSON.peakMegabytes, unit: "MB",
                peer: "sqlite3 .import", peerValue: sqlite.peakMegabytes),
        ]
        for file in [xml, json, csv] { try FileManager.default.removeItem(at: file) }

        // Memory: a 1,000,000-record bundle (1 project, 1 member, the rest issues) in each encoding.
        guard memoryRecords > 2 else { return rows }
        let bigXML = folder.appendingPathComponent("big.xml"), bigJSON = folder.appendingPathComponent("big.json")
        // Ids in key order here, so SQLite appends rather than splitting pages all over a 500 MB table:
        // this run measures memory, and keeps the suite to a few minutes.
        try BenchBundle(issues: memoryRecords - 2, orderedIDs: true).write(xml: bigXML, json: bigJSON, csv: nil, csvColumns: [])
        for (file, encoding) in [(bigXML, "XML"), (bigJSON, "JSON")] {
            let store = try freshStore("big-\(encoding).sqlite")
            let job = try ChildProcess.run(outpost, ["import", file.path, "--db", store, "--json"])
            guard job.status == 0 else { throw BenchmarkFailure("outpost import of the 1M-record \(encoding) bundle exited with \(job.status)") }
            try FileManager.default.removeItem(at: file)
            try FileManager.default.removeItem(atPath: store)
            rows.append(BenchmarkRow(
                metric: "peak RSS, import \(encoding) bundle of \(Self.grouped(memoryRecords)) records (\(String(format: "%.1f", job.seconds)) s)",
                value: job.peakMegabytes, unit: "MB", target: "< 100 MB", met: job.peakMegabytes < 100))
        }
        return rows
    }

    /// The `issues` table's columns, in order, for the CSV the `sqlite3` peer imports.
    static func issueColumns(in path: String) throws -> [String] {
        try DatabaseQueue(path: path).read { db in
            try Row.fetchAll(db, sql: "PRAGMA table_info(issues)").map { $0["name"] as String }
        }
    }

    static func issueCount(in path: String) throws -> Int {
        try DatabaseQueue(path: path).read { try Int.fetchOne($0, sql: "SELECT count(*) FROM issues") ?? 0 }
    }

    /// The `outpost` tool beside this benchmark's executable, built in the same configuration if missing.
    static func outpostExecutable() throws -> String {
        let binary = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
        let folder = binary.deletingLastPathComponent()
        let candidate = folder.appendingPathComponent("outpost").path
        if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        // `make bench` builds only outpost-bench: build the tool into the same scratch folder.
        var scratch = folder.deletingLastPathComponent()
        if scratch.lastPathComponent.contains("-linux") || scratch.lastPathComponent.contains("-apple") {
            scratch.deleteLastPathComponent()
        }
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        FileHandle.standardError.write(Data("bench: building outpost (release) for the import figures…\n".utf8))
        let build = try ChildProcess.run("/usr/bin/env", [
            "swift", "build", "-c", folder.lastPathComponent, "--product", "outpost",
            "--package-path", root.path, "--scratch-path", scratch.path,
        ])
        guard build.status == 0, FileManager.default.isExecutableFile(atPath: candidate) else {
            throw BenchmarkFailure("could not build outpost next to outpost-bench (\(candidate))")
        }
        return candidate
    }
}

/// A child process's wall time and peak resident memory. The peak is the child's own `VmHWM` (the
/// high-water mark of its resident set, kept per address space), polled from `/proc` while it runs:
/// `wait4`'s `ru_maxrss` would also count the benchmark's own memory, which a spawned child inherits
/// as its high-water mark until it calls exec.
struct ChildProcess {
    let status: Int32
    let seconds: Double
    let peakKilobytes: Int

    var peakMegabytes: Double { Double(peakKilobytes) / 1024 }

    /// Runs `executable` with `arguments` to the end, output discarded.
    static func run(_ executable: String, _ arguments: [String]) throws -> ChildProcess {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        var pid: pid_t = 0
        let clock = ContinuousClock()
        let start = clock.now
        let spawned = posix_spawn(&pid, executable, &actions, nil, argv, environ)
        guard spawned == 0 else { throw BenchmarkFailure("cannot start \(executable): error \(spawned)") }
        var status: Int32 = 0
        var peak = 0
        while true {
            // Read before reaping: once reaped, /proc/<pid> is gone. The mark only grows, so the last
            // reading before exit is the peak, short of what the final few milliseconds added.
            if let mark = highWaterMark(of: pid) { peak = max(peak, mark) }
            let reaped = waitpid(pid, &status, WNOHANG)
            if reaped == pid { break }
            if reaped < 0, errno != EINTR { throw BenchmarkFailure("waitpid failed for \(executable)") }
            usleep(5_000)
        }
        let elapsed = clock.now - start
        let exitStatus = (status & 0x7F) == 0 ? (status >> 8) & 0xFF : 128 + (status & 0x7F)
        return ChildProcess(
            status: exitStatus,
            seconds: elapsed.seconds,
            peakKilobytes: peak)
    }

    /// `VmHWM` of a running process, in kilobytes.
    private static func highWaterMark(of pid: pid_t) -> Int? {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
            let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmHWM:") })
        else { return nil }
        return Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "")
    }
}

/// A synthetic project bundle: one project, one member and `issues` issues, in XML, JSON and (the issues
/// alone, as rows of the `issues` table) CSV. Ids are pseudo-random, as real UUIDs are, so inserts land
/// all over the table's B-tree as they would in the field.
struct BenchBundle {
    let issues: Int
    var orderedIDs = false

    func write(xml: URL, json: URL, csv: URL?, csvColumns: [String]) throws {
        let project = "0b5e55ed-0000-4000-8000-000000000002", member = "0b5e55ed-0000-4000-8000-000000000010"
        let stamp = "2026-11-18T11:06:40.125Z", stampMilliseconds = "1795000000125"
        let xmlOut = try BufferedFile(xml), jsonOut = try BufferedFile(json)
        let csvOut = try csv.map(BufferedFile.init)
        try xmlOut.write("""
            <?xml version="1.0" encoding="UTF-8"?>
            <bundle formatVersion="1" projectID="\(project)" asOf="\(stamp)">
              <records>
                <project id="\(project)" version="1" createdAt="\(stamp)" updatedAt="\(stamp)">
                  <name>Bench tower</name>
                  <address>1 Main St</address>
                  <status>active</status>
                </project>
                <member id="\(member)" version="1" createdAt="\(stamp)" updatedAt="\(stamp)">
                  <projectID>\(project)</projectID>
                  <userID>\(member)</userID>
                  <name>Ana Lima</name>
                  <email>ana@example.com</email>
                  <role>foreman</role>
                </member>

            """)
        try jsonOut.write("""
            {
              "format": "outpost-bundle",
              "formatVersion": 1,
              "projectID": "\(project)",
              "asOf": "\(stamp)",
              "records": [
                {"entity": "project", "id": "\(project)", "version": 1, "createdAt": "\(stamp)", "updatedAt": "\(stamp)", "fields": {"name": "Bench tower", "address": "1 Main St", "status": "active"}},
                {"entity": "member", "id": "\(member)", "version": 1, "createdAt": "\(stamp)", "updatedAt": "\(stamp)", "fields": {"projectID": "\(project)", "userID": "\(member)", "name": "Ana Lima", "email": "ana@example.com", "role": "foreman"}}
            """)
        var state: UInt64 = 2026
        let statuses = ["open", "inProgress", "resolved", "closed"], priorities = ["low", "medium", "high", "critical"]
        for index in 0..<issues {
            let id = orderedIDs ? String(format: "00000000-0000-4000-8000-%012d", index + 100) : Self.uuid(&state)
            let title = "Issue \(index): hairline crack in drywall, level \(index % 40)"
            let details = "Found during walkthrough; check the framing behind it before patching."
            let status = statuses[index % 4], priority = priorities[(index / 4) % 4]
            let latitude = String(format: "%.5f", 47.6 + Double(index % 1000) / 100_000)
            let longitude = String(format: "%.5f", -122.3 - Double(index % 997) / 100_000)
            try xmlOut.write("""
                    <issue id="\(id)" serverID="srv-\(index)" version="1" createdAt="\(stamp)" updatedAt="\(stamp)">
                      <projectID>\(project)</projectID>
                      <title>\(title)</title>
                      <details>\(details)</details>
                      <status>\(status)</status>
                      <priority>\(priority)</priority>
                      <assigneeID>\(member)</assigneeID>
                      <latitude>\(latitude)</latitude>
                      <longitude>\(longitude)</longitude>
                    </issue>

                """)
            try jsonOut.write("""
                ,
                    {"entity": "issue", "id": "\(id)", "serverID": "srv-\(index)", "version": 1, "createdAt": "\(stamp)", "updatedAt": "\(stamp)", "fields": {"projectID": "\(project)", "title": "\(title)", "details": "\(details)", "status": "\(status)", "priority": "\(priority)", "assigneeID": "\(member)", "latitude": \(latitude), "longitude": \(longitude)}}
                """)
            if let csvOut {
                let values: [String: String] = [
                    "id": id, "server_id": "srv-\(index)", "version": "1", "created_at": stampMilliseconds,
                    "updated_at": stampMilliseconds, "sync_status": "synced", "project_id": project,
                    "title": title, "details": details, "status": status, "priority": priority, "assignee_id": member,
                    "latitude": latitude, "longitude": longitude, "is_orphaned": "0", "description": "",
                ]
                try csvOut.write(csvColumns.map { column in values[column].map { "\"\($0)\"" } ?? "" }.joined(separator: ",") + "\n")
            }
        }
        try xmlOut.write("  </records>\n</bundle>\n")
        try jsonOut.write("\n  ]\n}\n")
        try xmlOut.close()
        try jsonOut.close()
        try csvOut?.close()
    }

    /// A lowercase UUID from a SplitMix64 stream.
    static func uuid(_ state: inout UInt64) -> String {
        func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
        let high = next(), low = next()
        let hex = String(format: "%016llx%016llx", high, (low & 0x3FFF_FFFF_FFFF_FFFF) | 0x8000_0000_0000_0000)
        let chars = Array(hex)
        return "\(String(chars[0..<8]))-\(String(chars[8..<12]))-4\(String(chars[13..<16]))-\(String(chars[16..<20]))-\(String(chars[20..<32]))"
    }
}

/// A file written through a 1 MiB buffer.
final class BufferedFile {
    private let handle: FileHandle
    private var buffer: [UInt8] = []

    init(_ url: URL) throws {
        guard FileManager.default.createFile(atPath: url.path, contents: nil) else {
            throw BenchmarkFailure("cannot create \(url.path)")
        }
        handle = try FileHandle(forWritingTo: url)
        buffer.reserveCapacity(1 << 20)
    }

    func write(_ text: String) throws {
        buffer.append(contentsOf: text.utf8)
        if buffer.count >= 1 << 20 { try flush() }
    }

    func close() throws {
        try flush()
        try handle.close()
    }

    private func flush() throws {
        try handle.write(contentsOf: buffer)
        buffer.removeAll(keepingCapacity: true)
    }
}

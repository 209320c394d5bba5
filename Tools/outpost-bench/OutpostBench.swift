import Foundation
import OutpostFieldService
import OutpostModels
import OutpostSchema

/// `outpost-bench [SUITE] [--json FILE] [--markdown FILE]`: every performance figure of the toolkit,
/// each next to a peer measured in the same run, printed as a table and then as JSON; `--json` also
/// writes the JSON to a file, and `--markdown` writes the table with its date and commit (`make bench`
/// keeps `BENCHMARKS.md` so, after a run of every suite). Benchmarks are not tests: nothing here
/// asserts a time.
@main
struct OutpostBench {
    /// Every suite, in the order they run. A suite is one file in this folder.
    static let suites: [any BenchmarkSuite] = [
        MigrationBenchmark(), ConflictMergeBenchmark(), StoreBenchmark(), BundleImportBenchmark(),
        ServerBenchmark(), PullBenchmark(), PostgresBenchmark(),
    ]

    static func main() async throws {
        // The bench measures the field-service app: its schema is this process's (the toolkit guesses none).
        try EntityCatalog.install(EntityCatalog.fieldService)
        var arguments = Array(CommandLine.arguments.dropFirst())
        func option(_ name: String) -> String? {
            guard let index = arguments.firstIndex(of: name), index + 1 < arguments.count else { return nil }
            defer { arguments.removeSubrange(index...(index + 1)) }
            return arguments[index + 1]
        }
        let jsonFile = option("--json"), markdownFile = option("--markdown")
        let only = arguments.first
        var rows: [BenchmarkRow] = []
        for suite in suites where only == nil || suite.name == only {
            FileHandle.standardError.write(Data("bench: \(suite.name)…\n".utf8))
            rows += try await suite.run()
        }
        guard !rows.isEmpty else {
            print("no benchmarks yet")
            return
        }
        let report = BenchmarkReport(rows: rows)
        print(report.table)
        print(report.json)
        if let jsonFile { try Data(report.json.utf8).write(to: URL(fileURLWithPath: jsonFile)) }
        if let markdownFile {
            guard only == nil else {
                FileHandle.standardError.write(Data("bench: --markdown is written after a run of every suite only\n".utf8))
                return
            }
            try Data(report.markdown(commit: Self.commit(), date: Date()).utf8).write(to: URL(fileURLWithPath: markdownFile))
        }
    }

    /// The checked-out commit, with "+changes" when the tree differs from it; "unknown" outside git.
    static func commit() -> String {
        func git(_ arguments: [String]) -> String? {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            process.arguments = ["git"] + arguments
            let pipe = Pipe()
            process.standardOutput = pipe
            process.standardError = FileHandle.nullDevice
            guard (try? process.run()) != nil else { return nil }
            let output = pipe.fileHandleForReading.readDataToEndOfFile()
            process.waitUntilExit()
            guard process.terminationStatus == 0 else { return nil }
            return String(decoding: output, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        }
        guard let head = git(["rev-parse", "--short", "HEAD"]) else { return "unknown" }
        let dirty = !(git(["status", "--porcelain", "--untracked-files=no"]) ?? "").isEmpty
        return dirty ? head + "+changes" : head
    }
}

/// A group of related measurements, such as the migrator's or the conflict merge's.
protocol BenchmarkSuite: Sendable {
    /// Short name, also accepted as the command's argument to run this suite alone.
    var name: String { get }
    func run() async throws -> [BenchmarkRow]
}

/// One measured figure, with the peer it is compared to and the target when there is one.
struct BenchmarkRow: Codable, Sendable {
    /// What was measured, for example "migrate v1→v5, 100,000 rows".
    var metric: String
    /// Our figure.
    var value: Double
    /// Its unit, such as "s", "records/s", "MB".
    var unit: String
    /// What the peer is, for example "sqlite3 CLI, same statements".
    var peer: String?
    /// The peer's figure in the same unit.
    var peerValue: Double?
    /// The target as the issue states it, for example "≤ 1.5× peer".
    var target: String?
    /// Whether the target was met in this run.
    var met: Bool?

    /// Ours divided by the peer's, when there is a peer.
    var ratio: Double? {
        guard let peerValue, peerValue != 0 else { return nil }
        return value / peerValue
    }
}

/// Renders rows as an aligned table and as JSON.
struct BenchmarkReport {
    let rows: [BenchmarkRow]

    static let header = ["metric", "ours", "peer", "peer value", "ratio", "target", "met"]

    /// A row's cells under `header`; a missed target reads `missed`.
    static func cells(of row: BenchmarkRow, missed: String) -> [String] {
        [row.metric, format(row.value) + " " + row.unit, row.peer ?? "—",
         row.peerValue.map { format($0) + " " + row.unit } ?? "—",
         row.ratio.map { String(format: "%.2f×", $0) } ?? "—", row.target ?? "—",
         row.met.map { $0 ? "yes" : missed } ?? "—"]
    }

    var table: String {
        let header = Self.header
        let cells = rows.map { Self.cells(of: $0, missed: "NO") }
        let widths = header.indices.map { column in ([header] + cells).map { $0[column].count }.max() ?? 0 }
        func line(_ values: [String]) -> String {
            zip(values, widths).map { $0 + String(repeating: " ", count: $1 - $0.count) }.joined(separator: "  ")
        }
        return ([line(header), line(widths.map { String(repeating: "-", count: $0) })] + cells.map(line))
            .joined(separator: "\n")
    }

    /// The table as Markdown, headed by when and on which commit it was measured.
    func markdown(commit: String, date: Date) -> String {
        let when = ISO8601DateFormatter.string(from: date, timeZone: .gmt, formatOptions: [.withInternetDateTime])
        var lines = [
            "# Benchmarks", "",
            "The latest `make bench` run: \(when), commit \(commit), release build. Every ratio is against a peer",
            "measured in the same run; this host's speed moves by a third from hour to hour, so compare ratios,",
            "not absolute figures. `make bench` rewrites this file and `bench-results.json` (the same rows).", "",
            "| " + Self.header.joined(separator: " | ") + " |",
            "|" + String(repeating: "---|", count: Self.header.count),
        ]
        for row in rows {
            let cells = Self.cells(of: row, missed: "no").map { $0.replacingOccurrences(of: "|", with: "\\|") }
            lines.append("| " + cells.joined(separator: " | ") + " |")
        }
        return lines.joined(separator: "\n") + "\n"
    }

    var json: String {
        struct Entry: Encodable {
            let row: BenchmarkRow
            func encode(to encoder: any Encoder) throws {
                try row.encode(to: encoder)
                var container = encoder.container(keyedBy: Key.self)
                try container.encodeIfPresent(row.ratio, forKey: .ratio)
            }
            enum Key: String, CodingKey { case ratio }
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        return (try? String(decoding: encoder.encode(rows.map(Entry.init)), as: UTF8.self)) ?? "[]"
    }

    static func format(_ value: Double) -> String {
        switch abs(value) {
        case 1_000...: String(format: "%.0f", value)
        case 1...: String(format: "%.2f", value)
        default: String(format: "%.4f", value)
        }
    }
}

/// Wall-clock time of `body`, in seconds, on a monotonic clock.
func measureSeconds(_ body: () throws -> Void) rethrows -> Double {
    try ContinuousClock().measure(body).seconds
}

extension Duration {
    /// The duration in seconds as a floating-point number.
    var seconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
}

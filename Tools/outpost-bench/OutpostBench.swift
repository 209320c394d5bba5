import Foundation

/// `outpost-bench`: every performance figure of the toolkit, each next to a peer measured in the same
/// run, printed as a table and then as JSON. Benchmarks are not tests: nothing here asserts a time.
@main
struct OutpostBench {
    /// Every suite, in the order they run. A suite is one file in this folder.
    static let suites: [any BenchmarkSuite] = [
        MigrationBenchmark(), ConflictMergeBenchmark(), StoreBenchmark(), BundleImportBenchmark(),
        ServerBenchmark(), PullBenchmark(), PostgresBenchmark(),
    ]

    static func main() async throws {
        let only = CommandLine.arguments.dropFirst().first
        var rows: [BenchmarkRow] = []
        for suite in suites where only == nil || suite.name == only {
            FileHandle.standardError.write(Data("bench: \(suite.name)…\n".utf8))
            rows += try await suite.run()
        }
        guard !rows.isEmpty else {
            print("no benchmarks yet")
            return
        }
        print(BenchmarkReport(rows: rows).table)
        print(BenchmarkReport(rows: rows).json)
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

    var table: String {
        let header = ["metric", "ours", "peer", "peer value", "ratio", "target", "met"]
        let cells = rows.map { row in
            [row.metric, Self.format(row.value) + " " + row.unit, row.peer ?? "—",
             row.peerValue.map { Self.format($0) + " " + row.unit } ?? "—",
             row.ratio.map { String(format: "%.2f×", $0) } ?? "—", row.target ?? "—",
             row.met.map { $0 ? "yes" : "NO" } ?? "—"]
        }
        let widths = header.indices.map { column in ([header] + cells).map { $0[column].count }.max() ?? 0 }
        func line(_ values: [String]) -> String {
            zip(values, widths).map { $0 + String(repeating: " ", count: $1 - $0.count) }.joined(separator: "  ")
        }
        return ([line(header), line(widths.map { String(repeating: "-", count: $0) })] + cells.map(line))
            .joined(separator: "\n")
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

import Foundation
import OutpostFieldServiceTesting
import Testing

/// `outpost-reliability --quick`: a few seeds of every scenario, run as the built binary, the way
/// `make reliability` runs the full scale. Every lost, overwritten, duplicated, diverged, stuck, crash
/// and corrupt figure must be 0, and the faults and kills must really have happened.
@Suite("outpost-reliability", .fieldService)
struct ReliabilityTests {
    struct Report: Decodable {
        struct Row: Decodable {
            let scenario: String
            let seeds: Int
            let faults: Int
            let kills: Int
            let mutations: Int
            let lost: Int
            let overwritten: Int
            let duplicated: Int
            let diverged: Int
            let escalated: Int
            let stuck: Int
            let crashes: Int
            let corrupt: Int
            let failingSeeds: [UInt64]
            let load: Load?
        }
        struct Load: Decodable {
            struct Kind: Decodable {
                let requests: Int
                let p50Milliseconds: Double
                let p99Milliseconds: Double
            }
            let devices: Int
            let requests: Int
            let requestsPerSecond: Double
            let kinds: [String: Kind]
        }
        let passed: Bool
        let scenarios: [Row]
    }

    /// The scenarios of the quick subset.
    static let quickScenarios = [
        "faults", "crash-sync", "convergence", "crash-import", "fuzz-bundles", "load", "crash-migrate", "fuzz-server",
        "presync", "access", "restore",
    ]

    @Test func theQuickRunLosesDuplicatesAndDivergesNothing() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("outpost-reliability-test-\(UUID())")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let json = folder.appendingPathComponent("report.json")

        let process = Process()
        process.executableURL = Outpost.executable.deletingLastPathComponent().appendingPathComponent("outpost-reliability")
        process.arguments = ["--quick", "--json", json.path] + Self.quickScenarios.flatMap { ["--scenario", $0] }
        let (status, output, errors) = try await ChildProcess.finish(process)
        let printed = String(decoding: output, as: UTF8.self) + String(decoding: errors, as: UTF8.self)

        #expect(status == 0, "\(printed)")
        let report = try JSONDecoder().decode(Report.self, from: Data(contentsOf: json))
        #expect(report.passed)
        #expect(report.scenarios.map(\.scenario) == Self.quickScenarios)
        for row in report.scenarios {
            #expect(row.seeds > 0 && row.mutations > 0, "\(row.scenario) ran nothing")
            #expect(row.lost == 0 && row.duplicated == 0 && row.diverged == 0 && row.escalated == 0, "\(row.scenario): \(printed)")
            #expect(row.overwritten == 0 && row.stuck == 0, "\(row.scenario): \(printed)")
            #expect(row.crashes == 0 && row.corrupt == 0, "\(row.scenario): \(printed)")
            #expect(row.failingSeeds.isEmpty)
        }
        #expect(report.scenarios.first { $0.scenario == "faults" }.map { $0.faults > 0 } ?? true, "no fault was injected")
        #expect(report.scenarios.first { $0.scenario == "crash-sync" }.map { $0.kills > 0 } ?? true, "nothing was killed")
        #expect(report.scenarios.first { $0.scenario == "crash-migrate" }.map { $0.kills > 0 } ?? true, "no migration was killed")
        let load = report.scenarios.first { $0.scenario == "load" }?.load
        #expect(load?.devices == 50)
        #expect((load?.kinds["push"]?.requests ?? 0) > 0 && (load?.kinds["pull"]?.requests ?? 0) > 0, "the load sent no push or pull")
        if let push = load?.kinds["push"] { #expect(push.p50Milliseconds <= push.p99Milliseconds) }
    }
}

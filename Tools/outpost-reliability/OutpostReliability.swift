import ArgumentParser
import Foundation
import OutpostFieldService
import OutpostModels
import OutpostSchema

/// `make reliability`: runs the reliability scenarios over many seeds and ends with a table of
/// faults injected, kills, mutations, and what went wrong: lost, overwritten, duplicated, diverged,
/// stuck, crashes and corrupt files, each of which must be 0. Exits 1 otherwise, printing each
/// failing seed with the command that replays it.
@main
struct OutpostReliability: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "outpost-reliability",
        abstract: "Faults, kills, convergence and access at scale: every lost, overwritten, duplicated, diverged, escalated and stuck figure must be 0.",
        discussion: "Scenarios: " + Scenario.all.map { "\($0.name) (\($0.summary))" }.joined(separator: "; ")
    )

    /// Installs the field-service schema, the one this tool works on, before any command runs (the
    /// toolkit guesses no app's schema), then runs the command.
    static func main() async {
        do {
            try EntityCatalog.install(EntityCatalog.fieldService)
        } catch {
            exit(withError: error)
        }
        await main(nil)
    }

    @Flag(help: "A few seeds per scenario (the workspace test's scale).")
    var quick = false

    @Option(help: "Run only this scenario (repeatable).")
    var scenario: [String] = []

    @Option(help: "Run only this seed (to replay a failure).")
    var seed: UInt64?

    @Option(help: "Seeds per scenario, instead of the scale's default.")
    var runs: Int?

    @Option(help: "Write the results as JSON to this file.")
    var json: String?

    @Flag(help: "Print each seed's result as it finishes.")
    var verbose = false

    func validate() throws {
        let names = Set(Scenario.all.map(\.name))
        for name in scenario where !names.contains(name) {
            throw ValidationError("no scenario '\(name)'; there are: \(Scenario.all.map(\.name).joined(separator: ", "))")
        }
        if let runs, runs < 1 { throw ValidationError("--runs must be at least 1") }
    }

    func run() async throws {
        let chosen = scenario.isEmpty ? Scenario.all : Scenario.all.filter { scenario.contains($0.name) }
        let started = Date()
        defer { DeviceTemplate.remove() }
        var rows: [ScenarioTotals] = []
        var failures: [(scenario: String, seed: UInt64, outcome: SeedOutcome)] = []
        for scenario in chosen {
            let seeds: [UInt64] = seed.map { [$0] } ?? Array(1...UInt64(runs ?? (quick ? scenario.quickSeeds : scenario.fullSeeds)))
            say("== \(scenario.name): \(scenario.summary); \(seeds.count) seed\(seeds.count == 1 ? "" : "s")")
            var totals = ScenarioTotals(scenario: scenario.name)
            let scenarioStart = Date()
            for seed in seeds {
                let outcome = await scenario.run(seed, quick)
                totals.add(outcome, seed: seed)
                if outcome.failed { failures.append((scenario.name, seed, outcome)) }
                if verbose || outcome.failed {
                    say(
                        "  seed \(seed): faults \(outcome.faults), kills \(outcome.kills), mutations \(outcome.mutations), "
                            + "lost \(outcome.lost), overwritten \(outcome.overwritten), duplicated \(outcome.duplicated), "
                            + "diverged \(outcome.diverged), escalated \(outcome.escalated), stuck \(outcome.stuck), "
                            + "crashes \(outcome.crashes), corrupt \(outcome.corrupt)\(outcome.failed ? "  FAILED" : "")")
                }
            }
            totals.seconds = Date().timeIntervalSince(scenarioStart)
            rows.append(totals)
        }

        say()
        say(table(rows))
        let convergence = ConvergenceTally.shared.totals
        if chosen.contains(where: { $0.name == ConvergenceScenario.scenario.name }) {
            say("convergence: \(convergence.records) records checked against the conflict model; losses it surfaces \(convergence.produced), "
                + "in the conflicts table of the device it names \(convergence.surfaced)")
            let copies = ConvergenceTally.shared.oldCopyTotals
            say("convergence: old copies imported after deletes and edits: \(copies.bundles) server bundles, \(copies.exports) device exports, "
                + "\(copies.forged) of them with versions raised")
            say(pairTable(ConvergenceTally.shared.pairTotals))
            let answers = ConvergenceTally.shared.answerTotals
            say("convergence: conflicts answered by the users: \(answers.overridden) overridden, \(answers.discarded) discarded")
            say("convergence: push answers lost while the others synced on top: \(ConvergenceTally.shared.lostAnswerTotal)")
        }
        let presync = PreSyncTally.shared.figures
        let ranPreSync = chosen.contains(where: { $0.name == PreSyncScenario.scenario.name })
        if ranPreSync {
            say("presync: \(presync.imports) imports (\(presync.importsDuringSync) during a sync), \(presync.staleSaves) stale-copy saves, "
                + "\(presync.restarts) restarts, \(presync.farAhead) clocks beyond the allowance ahead, "
                + "\(presync.overridden) of \(presync.seeds) seeds with policy overrides")
            say("presync: values that did not stand \(presync.produced), surfaced in a conflicts table \(presync.surfaced)")
        }
        let access = AccessTally.shared.figures
        let ranAccess = chosen.contains(where: { $0.name == AccessScenario.scenario.name })
        if ranAccess {
            say("access: \(access.steps) steps; the office's actions: "
                + access.actions.sorted { $0.key < $1.key }.map { "\($0.value) \($0.key)" }.joined(separator: ", "))
            say(answerTable(access.answers))
        }
        for row in rows {
            guard let load = row.load else { continue }
            say(String(format: "load: %d devices for %.1f s: %d requests (%.0f/s), %.0f mutations pushed/s, %d transport errors",
                       load.devices, load.seconds, load.requests, load.requestsPerSecond, load.mutationsPerSecond, load.transportErrors))
            for (kind, figures) in load.kinds.sorted(by: { $0.key < $1.key }) {
                say("  \(kind): " + String(format: "%d requests, p50 %.1f ms, p99 %.1f ms, max %.1f ms",
                           figures.requests, figures.p50Milliseconds, figures.p99Milliseconds, figures.maximumMilliseconds))
            }
        }
        let seconds = Date().timeIntervalSince(started)
        say(String(format: "total time %.1f s", seconds))

        let report = ReliabilityReport(
            date: ISO8601DateFormatter().string(from: started), scale: quick ? "quick" : "full", seconds: seconds,
            passed: failures.isEmpty, scenarios: rows,
            convergence: chosen.contains(where: { $0.name == ConvergenceScenario.scenario.name })
                ? .init(
                    recordsCheckedAgainstTheModel: convergence.records, lossesTheModelSurfaces: convergence.produced,
                    lossesSurfacedWhereTheModelSays: convergence.surfaced, pairsChecked: ConvergenceTally.shared.pairTotals,
                    oldBundlesImported: ConvergenceTally.shared.oldCopyTotals.bundles,
                    oldExportsImported: ConvergenceTally.shared.oldCopyTotals.exports,
                    oldCopiesWithVersionsRaised: ConvergenceTally.shared.oldCopyTotals.forged,
                    conflictsOverridden: ConvergenceTally.shared.answerTotals.overridden,
                    conflictsDiscarded: ConvergenceTally.shared.answerTotals.discarded,
                    pushAnswersLost: ConvergenceTally.shared.lostAnswerTotal)
                : nil,
            presync: ranPreSync ? presync : nil,
            access: ranAccess ? access : nil)
        if let json {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
            try encoder.encode(report).write(to: URL(fileURLWithPath: json))
        }

        guard failures.isEmpty else {
            say()
            say("FAILED: \(failures.count) seed\(failures.count == 1 ? "" : "s"). Replay each with the command shown:")
            for failure in failures {
                say()
                say("  outpost-reliability --scenario \(failure.scenario) --seed \(failure.seed)\(quick ? " --quick" : "")")
                for problem in failure.outcome.problems.prefix(12) { say("    - \(problem)") }
                if failure.outcome.problems.count > 12 { say("    … and \(failure.outcome.problems.count - 12) more") }
            }
            throw ExitCode(1)
        }
        say("PASSED: every lost, overwritten, duplicated, diverged, escalated, stuck, crashes and corrupt figure is 0.")
    }

    /// Prints a line at once, unbuffered even into a file or a pipe, so a long run shows its progress.
    func say(_ line: String = "") {
        FileHandle.standardOutput.write(Data((line + "\n").utf8))
    }

    /// The access scenario's answers checked, per request (rows) and the answer the role table expected (columns).
    func answerTable(_ answers: [String: [String: Int]]) -> String {
        let columns = AccessAnswer.allCases.map(\.rawValue)
        let header = ["access: answers checked, by what the role table expected"] + columns
        return aligned([header] + answers.keys.sorted().map { request in [request] + columns.map { "\(answers[request]?[$0] ?? 0)" } })
    }

    /// Records checked against the conflict model, per pair of step kinds (rows) and strategy (columns).
    func pairTable(_ pairs: [String: [String: Int]]) -> String {
        let strategies = ConvergenceScenario.subjects.map(\.strategy.rawValue)
        let header = ["steps of two devices on one record"] + strategies
        return aligned([header] + pairs.keys.sorted().map { pair in [pair] + strategies.map { String(pairs[pair]?[$0] ?? 0) } })
    }

    /// The results as a fixed-width table.
    func table(_ rows: [ScenarioTotals]) -> String {
        let header = [
            "scenario", "seeds", "faults", "kills", "mutations", "lost", "overwritten", "duplicated", "diverged", "escalated", "stuck", "crashes",
            "corrupt", "seconds", "req/s", "push p50/p99 ms", "pull p50/p99 ms",
        ]
        func latency(_ kind: LoadFigures.Kind?) -> String {
            kind.map { String(format: "%.1f/%.1f", $0.p50Milliseconds, $0.p99Milliseconds) } ?? "-"
        }
        let cells = rows.map { row in
            [row.scenario, "\(row.seeds)", "\(row.faults)", "\(row.kills)", "\(row.mutations)", "\(row.lost)", "\(row.overwritten)",
             "\(row.duplicated)", "\(row.diverged)", "\(row.escalated)", "\(row.stuck)", "\(row.crashes)", "\(row.corrupt)", String(format: "%.0f", row.seconds),
             row.load.map { String(format: "%.0f", $0.requestsPerSecond) } ?? "-",
             latency(row.load?.kinds["push"]), latency(row.load?.kinds["pull"])]
        }
        return aligned([header] + cells)
    }

    /// Rows as fixed-width text: the first column left-aligned, the others right-aligned.
    func aligned(_ rows: [[String]]) -> String {
        let widths = (rows.first ?? []).indices.map { column in rows.map { $0[column].count }.max() ?? 0 }
        return rows.map { row in
            row.enumerated().map { column, text in
                column == 0 ? text.padding(toLength: widths[column], withPad: " ", startingAt: 0)
                    : String(repeating: " ", count: widths[column] - text.count) + text
            }.joined(separator: "  ")
        }.joined(separator: "\n")
    }
}

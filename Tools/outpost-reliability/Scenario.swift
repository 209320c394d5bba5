import Foundation

/// What one seed of a scenario did and found. Every figure but `faults`, `kills` and `mutations` must be 0;
/// a scenario that does not measure one (only `presync` measures `overwritten` and `stuck`) leaves it 0.
struct SeedOutcome: Sendable {
    var faults = 0
    var kills = 0
    var mutations = 0
    /// Writes that did not reach the server, or were left unsent or failed on a device (`presync` counts
    /// those left unsent or failed under `stuck`, and here only writes that are gone).
    var lost = 0
    /// A value that lost without being surfaced: the server accepted it, then another value replaced it
    /// (or an old value came back over it), and no device's conflicts table holds it as the losing value.
    var overwritten = 0
    /// Writes applied twice, or records that should not exist.
    var duplicated = 0
    /// A device that differs from the server, or a server that differs from the fault-free reference
    /// (in `access`, the role table: a caller refused what the office gave them).
    var diverged = 0
    /// A caller who reached more than the office gave: a record, a project, a write or a role their
    /// role does not allow, an answer telling what they may not see, a revoked token that worked.
    var escalated = 0
    /// A mutation still pending, in flight or failed after the final syncs, or one
    /// `LocalStore.blockedMutations()` reports; or devices that never stopped syncing.
    var stuck = 0
    /// A process or run that crashed, or a harness step that threw.
    var crashes = 0
    /// A database whose `integrity_check` or audit chain failed.
    var corrupt = 0
    /// What went wrong, in words, for the report.
    var problems: [String] = []
    /// Throughput and latency, for the load scenario.
    var load: LoadFigures?

    var failed: Bool { lost + overwritten + duplicated + diverged + escalated + stuck + crashes + corrupt > 0 }

    /// Records a thrown error as a crash of the seed.
    mutating func crashed(_ error: any Error, during step: String) {
        crashes += 1
        problems.append("\(step) threw: \(error)")
    }

    /// One seed's outcome from `body`, run in a fresh scratch folder that is removed afterwards; an error
    /// it throws counts as the seed's crash.
    static func inScratchFolder(
        _ name: String, _ body: (ScratchFolder, inout SeedOutcome) async throws -> Void
    ) async -> SeedOutcome {
        var outcome = SeedOutcome()
        do {
            let folder = try ScratchFolder(name)
            defer { folder.remove() }
            try await body(folder, &outcome)
        } catch {
            outcome.crashed(error, during: "the scenario")
        }
        return outcome
    }
}

/// A named scenario: how many seeds it runs at each scale, and how to run one seed.
struct Scenario: Sendable {
    let name: String
    let summary: String
    let quickSeeds: Int
    let fullSeeds: Int
    let run: @Sendable (_ seed: UInt64, _ quick: Bool) async -> SeedOutcome

    static let all: [Scenario] = [
        FaultsScenario.scenario, CrashSyncScenario.scenario, ConvergenceScenario.scenario, CrashImportScenario.scenario,
        BundleFuzzScenario.scenario, LoadScenario.scenario, CrashMigrateScenario.scenario, ServerFuzzScenario.scenario,
        PreSyncScenario.scenario, SharedFileScenario.scenario, FrozenInstanceScenario.scenario, AccessScenario.scenario,
        RestoreScenario.scenario,
    ]
}

/// One table row: a scenario's totals over its seeds.
struct ScenarioTotals: Sendable, Codable {
    var scenario: String
    var seeds = 0
    var faults = 0
    var kills = 0
    var mutations = 0
    var lost = 0
    var overwritten = 0
    var duplicated = 0
    var diverged = 0
    var escalated = 0
    var stuck = 0
    var crashes = 0
    var corrupt = 0
    var failingSeeds: [UInt64] = []
    var seconds = 0.0
    /// The load scenario's throughput and latency (its last seed's).
    var load: LoadFigures?

    init(scenario: String) { self.scenario = scenario }

    mutating func add(_ outcome: SeedOutcome, seed: UInt64) {
        seeds += 1
        faults += outcome.faults
        kills += outcome.kills
        mutations += outcome.mutations
        lost += outcome.lost
        overwritten += outcome.overwritten
        duplicated += outcome.duplicated
        diverged += outcome.diverged
        escalated += outcome.escalated
        stuck += outcome.stuck
        crashes += outcome.crashes
        corrupt += outcome.corrupt
        if let figures = outcome.load { load = figures }
        if outcome.failed { failingSeeds.append(seed) }
    }
}

/// The whole run, as `--json` writes it.
struct ReliabilityReport: Sendable, Codable {
    var date: String
    var scale: String
    var seconds: Double
    var passed: Bool
    var scenarios: [ScenarioTotals]
    /// The convergence scenario's records checked against the conflict model, the losses the model
    /// surfaced (every one must be in the named device's conflicts table), the pairs of steps checked per
    /// strategy, the old copies imported, and the conflicts its users answered.
    var convergence: ConvergenceFigures?
    /// The presync scenario's imports, stale-copy saves, restarts, far-ahead clocks and lost values.
    var presync: PreSyncTally.Figures?
    /// The access scenario's steps, the office's actions and the answers checked against the role table.
    var access: AccessTally.Figures?

    struct ConvergenceFigures: Sendable, Codable {
        var recordsCheckedAgainstTheModel: Int
        var lossesTheModelSurfaces: Int
        var lossesSurfacedWhereTheModelSays: Int
        /// Records checked, by pair of step kinds two devices made on one record ("delete × edit"), then strategy.
        var pairsChecked: [String: [String: Int]]
        var oldBundlesImported: Int
        var oldExportsImported: Int
        /// Of the old copies, those rewritten with every version raised (to the largest, or at random).
        var oldCopiesWithVersionsRaised: Int
        var conflictsOverridden: Int
        var conflictsDiscarded: Int
        /// Pushes the server took whose answers a device lost while the others synced on top.
        var pushAnswersLost: Int
    }
}

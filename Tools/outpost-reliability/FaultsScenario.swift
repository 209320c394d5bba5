import Foundation
import OutpostTesting

/// Scenario 1, `faults`: three devices do a seeded workload in phases against a real server on
/// 127.0.0.1, every request going through `FaultyTransport`, and sync until they settle. The same
/// seed is then played without faults (devices syncing in a fixed order) and the two servers compared:
/// the same records with the same values and deletions, every key the server applied known as done by
/// a device, nothing left unsent or failed, and every device equal to the server.
enum FaultsScenario {
    static let scenario = Scenario(
        name: "faults",
        summary: "dropped requests and answers, delays, duplicates, 500/503/429 between 3 devices and a real server",
        quickSeeds: 2, fullSeeds: 80
    ) { seed, quick in await run(seed: seed, quick: quick) }

    struct Play {
        var state: ServerState
        var writes: Int
        var faults: Int
        var problems: SeedOutcome
    }

    static func run(seed: UInt64, quick: Bool) async -> SeedOutcome {
        var outcome = SeedOutcome()
        let reference: Play, faulty: Play
        do {
            reference = try await play(seed: seed, plan: .none)
        } catch {
            outcome.crashed(error, during: "the fault-free run")
            return outcome
        }
        do {
            faulty = try await play(seed: seed, plan: .standard)
        } catch {
            outcome.crashed(error, during: "the run with faults")
            return outcome
        }
        outcome = faulty.problems
        outcome.faults = faulty.faults
        outcome.mutations = faulty.writes
        if reference.writes != faulty.writes {
            outcome.diverged += 1
            outcome.problems.append("the workload wrote \(faulty.writes) times with faults, \(reference.writes) without: the devices saw different states")
        }
        for problem in reference.problems.problems { outcome.problems.append("fault-free run: \(problem)") }
        outcome.lost += reference.problems.lost
        outcome.duplicated += reference.problems.duplicated
        outcome.diverged += reference.problems.diverged
        let differences = faulty.state.differences(from: reference.state)
        outcome.lost += differences.lost.count
        outcome.duplicated += differences.duplicated.count
        outcome.diverged += differences.diverged.count
        outcome.problems += (differences.lost + differences.duplicated + differences.diverged).map { "server with faults vs without: \($0)" }
        return outcome
    }

    /// Plays the seed's workload with `plan`'s faults and returns the server's final state.
    static func play(seed: UInt64, plan: FaultPlan) async throws -> Play {
        let folder = try ScratchFolder("faults")
        defer { folder.remove() }
        let server = try await LoopbackServer.start(databasePath: folder.path("server.sqlite"))
        do {
            let result = try await play(seed: seed, plan: plan, folder: folder, server: server)
            await server.stop()
            return result
        } catch {
            await server.stop()
            throw error
        }
    }

    private static func play(seed: UInt64, plan: FaultPlan, folder: ScratchFolder, server: LoopbackServer) async throws -> Play {
        let clock = VirtualClock()
        let fleet = try Fleet.open(count: 3, in: folder, server: server, plan: plan, seed: seed, clock: clock)
        var workload = Workload(seed: seed)
        var order = SeededGenerator(seed: seed ^ 0x5EED_0DE5)
        var problems = SeedOutcome()
        let now: @Sendable () -> Date = { clock.advance() }
        for phase in 0..<4 {
            for _ in 0..<8 {
                for device in fleet.devices {
                    try await workload.step(device: device.index, store: device.store, now: now)
                }
            }
            if !(try await fleet.settle(shuffled: !plan.chances.isEmpty, order: &order)) {
                problems.problems.append("phase \(phase) did not settle in 400 rounds")
            }
        }
        let unfinished = try fleet.unfinished()
        problems.lost += unfinished.count
        problems.problems += unfinished
        let state = try ServerState.read(databasePath: server.databasePath)
        let done = try fleet.doneKeys()
        let unknown = state.appliedKeys.filter { !done.contains($0.key) }
        problems.duplicated += unknown.count
        problems.problems += unknown.map { "the server applied key \($0.key) (\($0.value)), which no device holds as done" }
        let divergences = try await fleet.divergences(server: server)
        problems.diverged += divergences.count
        problems.problems += divergences
        return Play(state: state, writes: workload.writes, faults: await fleet.faultsInjected(), problems: problems)
    }
}

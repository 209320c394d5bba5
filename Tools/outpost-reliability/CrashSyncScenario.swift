import Foundation
import OutpostFieldService
import OutpostStore
import OutpostSync
import OutpostTesting

#if canImport(Glibc)
import Glibc
#endif

/// Scenario 2, `crash-sync`: a device writes in bursts; after each burst `outpost sync` runs as a child
/// process against `outpost serve` (another child) and is SIGKILLed up to a seeded number of times, each
/// after a seeded share of the time a whole sync takes (a run that finishes first ends the burst), then
/// runs unkilled until it exits 0 on its own; now and then the server is SIGKILLed and restarted on its
/// file too. Afterwards nothing is left unsent, every record the device wrote is on the server as the
/// device holds it, the server applied no key the device does not hold as done, the device's audit chain
/// verifies (`outpost audit verify`) and both files pass `PRAGMA integrity_check`.
///
/// The seed fixes the writes and the kill schedule (how many kills, each delay as a share of the window,
/// which attempts kill the server). The window is the median whole sync seen so far in the seed, so the
/// kills spread over a sync's work on a fast machine and a slow one alike; fixed delays had landed
/// mostly after the sync was over on a fast one.
enum CrashSyncScenario {
    static let scenario = Scenario(
        name: "crash-sync",
        summary: "outpost sync (and now and then outpost serve) SIGKILLed at seeded moments, restarted until exit 0",
        quickSeeds: 1, fullSeeds: 20
    ) { seed, quick in await run(seed: seed, quick: quick) }

    static let attemptsPerBurst = 60
    /// At most this many kills of `outpost sync` per burst (the seed picks 1 to this many).
    static let killsPerBurst = 12
    /// The kill window before any sync has been seen to finish, in milliseconds: the old fixed delays'.
    static let initialWindowMilliseconds = 205
    /// Kills land at least this long after the start (milliseconds): an earlier one only stops the launch.
    static let earliestKill = 5
    /// Until the seed's first kill, delays stay under this (milliseconds): no sync is done that soon,
    /// so a seed always kills at least once, however fast the machine.
    static let firstKillWithin = 20
    /// An unkilled `outpost sync` still running after this is stopped and counted as a crash (a hang).
    static let hangLimit: Duration = .seconds(60)

    static func run(seed: UInt64, quick: Bool) async -> SeedOutcome {
        var outcome = SeedOutcome()
        guard FileManager.default.isExecutableFile(atPath: Child.outpostExecutable.path) else {
            outcome.crashed(ReliabilityError("\(Child.outpostExecutable.path) is missing: swift build --product outpost"), during: "setup")
            return outcome
        }
        let folder: ScratchFolder
        do {
            folder = try ScratchFolder("crash-sync")
        } catch {
            outcome.crashed(error, during: "setup")
            return outcome
        }
        defer { folder.remove() }
        var server: ServeChild?
        do {
            try await run(seed: seed, quick: quick, folder: folder, server: &server, outcome: &outcome)
        } catch {
            outcome.crashed(error, during: "the scenario")
        }
        if let server {
            server.child.process.terminate()
            _ = await server.child.exit()
        }
        do {
            for (name, file) in [("device", folder.path("device.sqlite")), ("server", folder.path("server.sqlite"))] {
                let result = try integrityCheck(file)
                if result != "ok" {
                    outcome.corrupt += 1
                    outcome.problems.append("\(name) database integrity_check: \(result)")
                }
            }
        } catch {
            outcome.crashed(error, during: "integrity_check")
        }
        return outcome
    }

    private static func run(
        seed: UInt64, quick: Bool, folder: ScratchFolder, server: inout ServeChild?, outcome: inout SeedOutcome
    ) async throws {
        let serverDB = folder.path("server.sqlite"), seedFile = folder.path("seed.json"), db = folder.path("device.sqlite")
        try Crew.seedJSON.write(to: URL(fileURLWithPath: seedFile))
        server = try ServeChild.start(databasePath: serverDB, seedPath: seedFile)
        var random = SeededGenerator(seed: seed ^ 0xC2A5_4000)
        var workload = Workload(seed: seed)
        let bursts = quick ? 2 : 6, writesPerBurst = quick ? 25 : 50
        // Whole `outpost sync` runs seen in this seed (process start to exit), in milliseconds; their
        // median is the kill window. The median, since the shortest is often a run with nothing left
        // to send and would keep every kill in a sync's first steps.
        var wholeSyncs: [Int] = []
        for burst in 0..<bursts {
            do {
                let store = try LocalStore.open(at: db)
                for _ in 0..<writesPerBurst {
                    try await workload.step(device: 0, store: store, now: { Date() })
                }
            }
            var finished = false
            let plannedKills = 1 + random.below(killsPerBurst)
            for attempt in 0..<attemptsPerBurst {
                let last = attempt == attemptsPerBurst - 1
                if !last, random.chance(0.12), let running = server {
                    running.child.kill()
                    _ = await running.child.exit()
                    outcome.kills += 1
                    server = try ServeChild.start(databasePath: serverDB, seedPath: seedFile)
                }
                guard let url = server?.url else { throw ReliabilityError("no server") }
                let killing = !last && attempt < plannedKills
                let window = wholeSyncs.isEmpty ? initialWindowMilliseconds : wholeSyncs.sorted()[wholeSyncs.count / 2]
                let bound = outcome.kills == 0 ? min(window, firstKillWithin) : window
                let delay = earliestKill + random.below(max(bound - earliestKill, 1))
                let started = ContinuousClock.now
                let sync = try Child(["sync", "--db", db, "--server", url, "--token", Crew.token(of: 0)])
                // Polled rather than slept through, so a run that ends first is timed to the millisecond.
                let deadline = started + (killing ? .milliseconds(delay) : hangLimit)
                while sync.isRunning, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(1)) }
                let hung = !killing && sync.isRunning
                if sync.isRunning { sync.kill() }
                let exit = await sync.exit()
                if hung {
                    outcome.crashes += 1
                    outcome.problems.append("burst \(burst), attempt \(attempt): outpost sync hung for \(hangLimit)")
                } else if exit.signaled, exit.status == SIGKILL {
                    outcome.kills += 1
                } else if !exit.signaled, exit.status == 0 {
                    // A run that finished by itself shows how long a whole sync takes here now.
                    wholeSyncs.append(Int((ContinuousClock.now - started).seconds * 1000))
                    finished = true
                    break
                } else if !exit.signaled, exit.status == 2 {
                    continue  // could not finish (the server was restarting): run again
                } else {
                    outcome.crashes += 1
                    outcome.problems.append("burst \(burst), attempt \(attempt): outpost sync ended with \(exit)")
                }
            }
            if !finished {
                outcome.lost += 1
                outcome.problems.append("burst \(burst): outpost sync never completed in \(attemptsPerBurst) attempts")
            }
        }
        outcome.mutations = workload.writes
        try await check(db: db, serverDB: serverDB, server: server, outcome: &outcome)
    }

    private static func check(db: String, serverDB: String, server: ServeChild?, outcome: inout SeedOutcome) async throws {
        guard let server else { return }
        let transport = HTTPTransport(
            configuration: .init(baseURL: URL(string: server.url)!, schemaVersion: LocalSchema.latestVersion), token: Crew.token(of: 0))
        try await checkSyncedDevice(db: db, serverDB: serverDB, transport: transport, unsent: \.lost, outcome: &outcome)
    }
}

import Foundation
import OutpostFieldService
import OutpostModels
import OutpostSchema
import OutpostStore
import OutpostSync
import OutpostTesting

/// `restore`: three devices do the faults scenario's seeded workload in phases against a real server;
/// in one phase the operator backs the server (`outpost serve`, a child process) up while the devices
/// sync (`outpost admin backup`), and in a later one stops it mid-settle (SIGTERM), puts the backup in
/// place and starts it again on the same port while the devices keep syncing. The devices must notice and rebuild, sending again their
/// own writes the backup lacks, through the faults scenario's dropped and duplicated requests and answers:
/// the server must end exactly as the same seed played without a restore or faults
/// (records, values, deletions: only versions and server ids may differ), every device equal to it,
/// nothing left unsent. A bundle downloaded after the backup is imported by one device before or after
/// the restore, and must leave nothing the restored server lost.
enum RestoreScenario {
    static let scenario = Scenario(
        name: "restore",
        summary: "the server restored from a backup taken mid-run while 3 devices keep syncing; "
            + "the end state must equal the same seed's run without a restore",
        quickSeeds: 1, fullSeeds: 30
    ) { seed, _ in await run(seed: seed) }

    struct Play {
        var state: ServerState
        var writes: Int
        var problems = SeedOutcome()
        /// Sync runs that met `history_changed`, changes sent again, records re-created and removed.
        var rebuilds = 0
        var resent = 0
        var recreated = 0
        var removed = 0
        /// Faults the fleet's transports played.
        var faults = 0
        /// Every value a device's open conflicts hold as the one that lost, as "entity/id.field=json".
        var surfaced: Set<String> = []
        /// Pre-sync bundles imported (one a run).
        var imports = 0
    }

    static func run(seed: UInt64) async -> SeedOutcome {
        var outcome = SeedOutcome()
        let reference: Play, restored: Play
        do {
            reference = try await play(seed: seed, restoring: false)
            restored = try await play(seed: seed, restoring: true)
        } catch {
            outcome.crashed(error, during: "the scenario")
            return outcome
        }
        outcome = restored.problems
        outcome.kills = 1  // the server, stopped for the restore
        outcome.faults = restored.faults
        outcome.mutations = restored.writes
        for problem in reference.problems.problems { outcome.problems.append("run without a restore: \(problem)") }
        outcome.lost += reference.problems.lost
        outcome.diverged += reference.problems.diverged
        if reference.writes != restored.writes {
            outcome.diverged += 1
            outcome.problems.append(
                "the workload wrote \(restored.writes) times with a restore, \(reference.writes) without: the devices saw different states")
        }
        if restored.rebuilds == 0 {
            outcome.diverged += 1
            outcome.problems.append("no device noticed the restore")
        }
        // A deleted record's hidden last values may differ: an edit that lost to the delete is kept among
        // them when the server merged it, and surfaced on its device when the device merged it (the order
        // the rebuild sends things in decides which). Either keeps the promise, if it is surfaced.
        var expectedState = reference.state
        for (key, expected) in reference.state.records where expected.deleted && restored.state.records[key]?.deleted == true {
            guard let actual = restored.state.records[key] else { continue }
            for (field, value) in expected.fields where actual.fields[field] != value {
                if restored.surfaced.contains("\(key).\(field)=\(value)") { expectedState.records[key]?.fields[field] = actual.fields[field] }
            }
        }
        // The outsider's issue is lost by the restore unless a device wrote to it (then re-created).
        let outsider = "issue/\(outsiderIssue(seed: seed).uuidString.lowercased())"
        if restored.state.records[outsider] == nil { expectedState.records[outsider] = nil }
        let differences = restored.state.differences(from: expectedState)
        outcome.lost += differences.lost.count
        outcome.duplicated += differences.duplicated.count
        outcome.diverged += differences.diverged.count
        outcome.problems += (differences.lost + differences.duplicated + differences.diverged).map { "restored server vs none: \($0)" }
        outcome.problems.append(
            "note: \(restored.rebuilds) rebuilds, \(restored.resent) changes resent, \(restored.recreated) records re-created, "
                + "\(restored.removed) removed, \(restored.imports) bundle imported")
        return outcome
    }

    static func play(seed: UInt64, restoring: Bool) async throws -> Play {
        let folder = try ScratchFolder("restore")
        defer { folder.remove() }
        let database = folder.path("server.sqlite"), seedFile = folder.path("seed.json")
        try Crew.seedJSON.write(to: URL(fileURLWithPath: seedFile))
        let arguments = ["--db", database, "--seed", seedFile, "--server-ids"]
        var server = try ServeChild.start(arguments)
        let port = server.port
        let url = URL(string: server.url)!
        let transport = { (index: Int) in
            HTTPTransport(configuration: .init(baseURL: url, schemaVersion: LocalSchema.latestVersion), token: Crew.token(of: index))
        }
        do {
            let clock = VirtualClock()
            // Faults too, in the run with the restore: the end state must not depend on them either.
            let fleet = try Fleet.open(
                count: 3, in: folder, transport: transport, plan: restoring ? .standard : .none, seed: seed, clock: clock)
            var workload = Workload(seed: seed)
            var order = SeededGenerator(seed: seed ^ 0x5EED_0DE5)
            var timing = SeededGenerator(seed: seed ^ 0xBAC0_0B5E)
            let backupPhase = 1 + timing.below(2)
            let restorePhase = backupPhase + 1 + timing.below(2)
            // A pre-sync bundle downloaded after the backup, so it holds records the restore loses,
            // imported by one device before or after the restore: it must be told (the bundle's
            // checkpoint) and end as the others. Both runs import it, so the workloads stay alike.
            let importer = timing.below(3)
            let importPhase = min(4, restorePhase - 1 + timing.below(3))
            let presync = URL(fileURLWithPath: folder.path("presync.json"))
            let backup = folder.path("backup.sqlite")
            var play = Play(state: ServerState(), writes: 0)
            let now: @Sendable () -> Date = { clock.advance() }
            for phase in 0..<5 {
                for _ in 0..<8 {
                    for device in fleet.devices {
                        try await workload.step(device: device.index, store: device.store, now: now)
                    }
                }
                if phase == restorePhase - 1 {
                    // A member outside the fleet writes one issue after the backup and is never heard
                    // from again (a phone gone): nobody sends it again, so the restore loses it unless
                    // a fleet device wrote to it, and the bundle carries it.
                    let outsider = try DeviceTemplate.openStore(at: folder.path("outsider.sqlite"))
                    // On the fleet's virtual clock, as every write of the run: a stamp of the real clock
                    // moved the server's clock by other amounts in the two runs, and values that tie
                    // broke the other way.
                    let stamp = now()
                    _ = try await outsider.save(
                        OutpostModels.Issue(
                            id: outsiderIssue(seed: seed), sync: SyncMetadata(createdAt: stamp), projectID: Crew.project,
                            title: "Written by a phone that is gone"),
                        now: stamp)
                    guard try await SyncEngine(store: outsider, transport: transport(Crew.users.count - 1))
                        .sync(now: now).isComplete
                    else {
                        throw ReliabilityError("the outsider's sync did not complete")
                    }
                    _ = try await transport(importer).downloadBundle(project: Crew.project, format: .json, to: presync)
                }
                if phase == importPhase {
                    _ = try fleet.devices[importer].store.importBundle(at: presync)
                    play.imports += 1
                }
                if restoring, phase == backupPhase {
                    // An online backup by the operator's command, taken while the devices sync.
                    let delay = timing.below(40)
                    let backingUp = Task {
                        try await Task.sleep(for: .milliseconds(delay))
                        let command = try Child(["admin", "backup", "--db", database, "--to", backup])
                        return await command.exit()
                    }
                    _ = try await settle(fleet, order: &order, play: &play)
                    let exit = try await backingUp.value
                    guard exit.status == 0, !exit.signaled else { throw ReliabilityError("outpost admin backup: \(exit)") }
                } else if restoring, phase == restorePhase {
                    // The server process stops mid-settle; the devices' requests fail until it serves the
                    // backup, put in place as the server's README says.
                    let delay = timing.below(40)
                    let running = server
                    let restoring = Task {
                        try await Task.sleep(for: .milliseconds(delay))
                        running.child.process.terminate()
                        _ = await running.child.exit()
                        for suffix in ["-wal", "-shm"] { try? FileManager.default.removeItem(atPath: database + suffix) }
                        try FileManager.default.removeItem(atPath: database)
                        try FileManager.default.copyItem(atPath: backup, toPath: database)
                        return try ServeChild.start(arguments, port: port)
                    }
                    _ = try await settle(fleet, order: &order, play: &play, maximumRounds: 40)
                    server = try await restoring.value
                }
                if !(try await settle(fleet, order: &order, play: &play)) {
                    play.problems.stuck += 1
                    play.problems.problems.append("phase \(phase) did not settle in 400 rounds")
                }
            }
            let unfinished = try fleet.unfinished()
            play.problems.lost += unfinished.count
            play.problems.problems += unfinished
            let divergences = try await fleet.divergences(transport: transport)
            play.problems.diverged += divergences.count
            play.problems.problems += divergences
            for device in fleet.devices where try !device.store.verifyAudit().isIntact {
                play.problems.corrupt += 1
                play.problems.problems.append("device \(device.index): the audit chain does not verify")
            }
            for device in fleet.devices {
                for conflict in try device.store.openConflicts() {
                    guard let field = conflict.field, let value = conflict.losingValue else { continue }
                    let json = try JSONSerialization.jsonObject(with: JSONEncoder().encode(value))
                    let text = String(decoding: try JSONSerialization.data(withJSONObject: json, options: [.sortedKeys]), as: UTF8.self)
                    play.surfaced.insert("\(conflict.entity.rawValue)/\(conflict.recordID.uuidString.lowercased()).\(field)=\(text)")
                }
            }
            server.child.process.terminate()
            _ = await server.child.exit()
            play.state = try ServerState.read(databasePath: database)
            play.writes = workload.writes
            play.faults = await fleet.faultsInjected()
            return play
        } catch {
            server.child.kill()
            _ = await server.child.exit()
            throw error
        }
    }

    /// The id of the issue the member outside the fleet writes, the same in both runs of a seed.
    static func outsiderIssue(seed: UInt64) -> UUID {
        UUID(uuidString: String(format: "0ff51de0-0000-4000-8000-%012llx", seed & 0xFFFF_FFFF_FFFF))!
    }

    /// `Fleet.settle` (shuffled), counting what the rebuilds did.
    static func settle(
        _ fleet: Fleet, order: inout SeededGenerator, play: inout Play, maximumRounds: Int = 400
    ) async throws -> Bool {
        var reports: [SyncReport] = []
        let settled = try await fleet.settle(shuffled: true, order: &order, maximumRounds: maximumRounds) { reports.append($0) }
        for report in reports {
            if report.historyChanged { play.rebuilds += 1 }
            play.resent += report.resent
            play.recreated += report.rebuilt?.recreated ?? 0
            play.removed += report.rebuilt?.removed ?? 0
        }
        return settled
    }
}

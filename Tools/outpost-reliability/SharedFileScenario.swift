import Foundation
import OutpostFieldService
import OutpostModels
import OutpostSchema
import OutpostStore
import OutpostSync
import OutpostTesting

#if canImport(Glibc)
import Glibc
#endif

/// Scenario `shared-file`: an app, its share extension and a widget on one device file, as iOS runs
/// them. The app (a `LocalStore` and its `SyncEngine` in this process) writes and syncs; the extension
/// (`outpost sync`, a child process) syncs the same file at the same time and is SIGKILLed at seeded
/// moments; a widget (a second `LocalStore` here) saves copies it read before the app's writes; now
/// and then a pre-sync bundle is imported (`outpost import`, killed too). Afterwards nothing is left
/// unsent, every record the device wrote is on the server as the device holds it, the server applied
/// no key the device does not hold as done, no widget save reverted an app write (overwritten), the
/// audit chain verifies and both files pass `integrity_check`.
enum SharedFileScenario {
    static let scenario = Scenario(
        name: "shared-file",
        summary: "an app, its extension (outpost sync, SIGKILLed) and a widget writing, syncing and importing on one device file",
        quickSeeds: 1, fullSeeds: 12
    ) { seed, quick in await run(seed: seed, quick: quick) }

    /// A widget's save of a copy read before the app's write: what each field must end as.
    struct Probe {
        let id: UUID
        let title: String
        let details: String
    }

    static func run(seed: UInt64, quick: Bool) async -> SeedOutcome {
        var outcome = SeedOutcome()
        guard FileManager.default.isExecutableFile(atPath: Child.outpostExecutable.path) else {
            outcome.crashed(ReliabilityError("\(Child.outpostExecutable.path) is missing: swift build --product outpost"), during: "setup")
            return outcome
        }
        let folder: ScratchFolder
        do {
            folder = try ScratchFolder("shared-file")
        } catch {
            outcome.crashed(error, during: "setup")
            return outcome
        }
        defer { folder.remove() }
        var server: ServeChild?
        do {
            let serverDB = folder.path("server.sqlite"), seedFile = folder.path("seed.json")
            try Crew.seedJSON.write(to: URL(fileURLWithPath: seedFile))
            server = try ServeChild.start(databasePath: serverDB, seedPath: seedFile)
            try await play(seed: seed, quick: quick, folder: folder, url: server!.url, outcome: &outcome)
        } catch {
            outcome.crashed(error, during: "the scenario")
        }
        if let server {
            server.child.process.terminate()
            _ = await server.child.exit()
        }
        for (name, file) in [("device", folder.path("device.sqlite")), ("server", folder.path("server.sqlite"))] {
            do {
                let result = try integrityCheck(file)
                if result != "ok" {
                    outcome.corrupt += 1
                    outcome.problems.append("\(name) database integrity_check: \(result)")
                }
            } catch {
                outcome.crashed(error, during: "integrity_check of the \(name) database")
            }
        }
        return outcome
    }

    private static func play(seed: UInt64, quick: Bool, folder: ScratchFolder, url: String, outcome: inout SeedOutcome) async throws {
        let db = folder.path("device.sqlite")
        let transport = HTTPTransport(
            configuration: .init(baseURL: URL(string: url)!, schemaVersion: LocalSchema.latestVersion), token: Crew.token(of: 0))
        let app = try LocalStore.open(at: db)
        let engine = SyncEngine(store: app, transport: transport)
        let widget = try LocalStore.open(at: db)
        var random = SeededGenerator(seed: seed ^ 0x5A4E_D0F1)
        var workload = Workload(seed: seed)
        var probes: [Probe] = []
        let rounds = quick ? 3 : 10
        for round in 0..<rounds {
            // The extension syncs the same file, and is killed after a seeded delay two times in three.
            let killAfter = random.chance(0.67) ? 5 + random.below(150) : nil
            let extensionSync = try Child(["sync", "--db", db, "--server", url, "--token", Crew.token(of: 0)])
            // Now and then a pre-sync import of the project, killed half the time.
            var importer: Child?
            if random.chance(0.3) {
                let bundle = URL(fileURLWithPath: folder.path("bundle-\(round).json"))
                if (try? await transport.downloadBundle(project: Crew.project, format: .json, to: bundle)) != nil {
                    importer = try Child(["import", bundle.path, "--db", db])
                }
            }
            // Kills land while the app works, timed from each child's start.
            let killsExtension = Task { () -> Bool in
                guard let killAfter else { return false }
                try? await Task.sleep(for: .milliseconds(killAfter))
                guard extensionSync.isRunning else { return false }
                extensionSync.kill()
                return true
            }
            let killImport = random.chance(0.5), importDelay = 5 + random.below(150)
            let killsImporter = Task { [importer] () -> Bool in
                guard let importer, killImport else { return false }
                try? await Task.sleep(for: .milliseconds(importDelay))
                guard importer.isRunning else { return false }
                importer.kill()
                return true
            }
            // The app writes and syncs meanwhile; a widget saves copies read before the app's writes.
            for step in 0..<(quick ? 15 : 30) {
                try await workload.step(device: 0, store: app, now: { Date() })
                if step % 10 == 5 { probes.append(try await probe(round: round, step: step, app: app, widget: widget)) }
                if step % 10 == 9 { _ = try? await engine.sync() }
            }
            if await killsImporter.value { outcome.kills += 1 }
            if let importer { _ = await importer.exit() }
            if await killsExtension.value { outcome.kills += 1 }
            let exit = await extensionSync.exit()
            if !exit.signaled, exit.status != 0, exit.status != 2 {
                outcome.crashes += 1
                outcome.problems.append("round \(round): the extension's outpost sync ended with \(exit)")
            }
        }
        outcome.mutations = workload.writes + probes.count * 3
        // Settle: the app's engine runs until nothing is left (a claim the killed extension held is free
        // at once, its process being gone), then the extension once more, unkilled.
        var settled = false
        for _ in 0..<20 {
            let report = try? await engine.sync()
            if report?.isComplete == true, try app.status().pendingChanges == 0 {
                settled = true
                break
            }
            try await Task.sleep(for: .milliseconds(200))
        }
        let last = try Child(["sync", "--db", db, "--server", url, "--token", Crew.token(of: 0)])
        let lastExit = await last.exit()
        if !settled || lastExit.signaled || lastExit.status != 0 {
            outcome.stuck += 1
            outcome.problems.append("the file did not settle (engine settled: \(settled), last outpost sync: \(lastExit))")
        }
        try await check(db: db, serverDB: folder.path("server.sqlite"), transport: transport, probes: probes, outcome: &outcome)
    }

    /// The app creates an issue; the widget reads it; the app changes its title and status; the widget
    /// saves its copy with new details. Every field must end as its last writer set it.
    private static func probe(round: Int, step: Int, app: LocalStore, widget: LocalStore) async throws -> Probe {
        let created = try await app.save(Issue(projectID: Crew.project, title: "Probe \(round).\(step)", details: "before"))
        guard var copy = try widget.fetch(Issue.self, id: created.id) else {
            throw ReliabilityError("the widget cannot read issue \(created.id) the app just saved")
        }
        var edited = created
        edited.title = "Probe \(round).\(step), checked"
        edited.status = .resolved
        try await app.save(edited)
        copy.details = "From the widget \(round).\(step)"
        try await widget.save(copy)
        return Probe(id: created.id, title: edited.title, details: copy.details)
    }

    private static func check(
        db: String, serverDB: String, transport: HTTPTransport, probes: [Probe], outcome: inout SeedOutcome
    ) async throws {
        try await checkSyncedDevice(db: db, serverDB: serverDB, transport: transport, unsent: \.stuck, outcome: &outcome)
        let store = try LocalStore.open(at: db)
        for probe in probes {
            guard let issue = try store.fetch(Issue.self, id: probe.id) else {
                outcome.lost += 1
                outcome.problems.append("probe issue \(probe.id) is missing on the device")
                continue
            }
            if issue.title != probe.title || issue.status != .resolved || issue.details != probe.details {
                outcome.overwritten += 1
                outcome.problems.append(
                    "probe issue \(probe.id): title \(issue.title), status \(issue.status), details \(issue.details); "
                        + "expected \(probe.title), resolved, \(probe.details)")
            }
        }
    }
}

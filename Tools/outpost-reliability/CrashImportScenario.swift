import Foundation
import OutpostFieldService
import OutpostModels
import OutpostSchema
import OutpostStore
import OutpostTesting

#if canImport(Glibc)
import Glibc
#endif

/// Scenario 4a, `crash-import`: `outpost import` of a large JSON bundle (the example bundle plus a
/// few thousand seeded issues) into a device database holding local work, SIGKILLed after a seeded
/// delay within the time a clean import takes. Each time the file must pass `integrity_check` and hold
/// exactly what it held before or exactly what a completed import gives, never something between;
/// importing again must then complete and give the completed content.
enum CrashImportScenario {
    static let scenario = Scenario(
        name: "crash-import",
        summary: "outpost import SIGKILLed at seeded moments: the database untouched or fully imported",
        quickSeeds: 1, fullSeeds: 15
    ) { seed, quick in await run(seed: seed, quick: quick) }

    static func run(seed: UInt64, quick: Bool) async -> SeedOutcome {
        await SeedOutcome.inScratchFolder("crash-import") { folder, outcome in
            try await run(seed: seed, quick: quick, folder: folder, outcome: &outcome)
        }
    }

    private static func run(seed: UInt64, quick: Bool, folder: ScratchFolder, outcome: inout SeedOutcome) async throws {
        var random = SeededGenerator(seed: seed ^ 0x1A7B_0000)
        let bundle = folder.path("bundle.json")
        let records = try writeLargeBundle(to: bundle, extraIssues: quick ? 600 : 3_000, random: &random)

        // The device before: a new database with some local work of its own.
        let base = folder.path("base.sqlite")
        do {
            let store = try DeviceTemplate.openStore(at: base)
            var workload = Workload(seed: seed)
            for _ in 0..<20 { try await workload.step(device: 0, store: store, now: { Date() }) }
        }
        let before = try databaseContent(base)

        // The device after a clean import, and how long that takes here.
        let reference = folder.path("reference.sqlite")
        try copyDatabase(base, to: reference)
        let started = ContinuousClock.now
        let cleanImport = try Child(["import", bundle, "--db", reference])
        let clean = await cleanImport.exit()
        let duration = ContinuousClock.now - started
        guard !clean.signaled, clean.status == 0 else {
            outcome.crashes += 1
            outcome.problems.append("a clean outpost import ended with \(clean)")
            return
        }
        let after = try databaseContent(reference)
        let window = max(Int(duration.components.seconds * 1000 + duration.components.attoseconds / 1_000_000_000_000_000), 20)

        let target = folder.path("device.sqlite")
        for attempt in 0..<(quick ? 2 : 10) {
            try copyDatabase(base, to: target)
            let delay = random.below(window + window / 4)
            let child = try Child(["import", bundle, "--db", target])
            try await Task.sleep(for: .milliseconds(delay))
            if child.isRunning { child.kill() }
            let exit = await child.exit()
            outcome.mutations += records
            if exit.signaled, exit.status == SIGKILL {
                outcome.kills += 1
            } else if exit.signaled || exit.status != 0 {
                outcome.crashes += 1
                outcome.problems.append("attempt \(attempt) (killed after \(delay) ms): outpost import ended with \(exit)")
            }
            let integrity = try integrityCheck(target)
            if integrity != "ok" {
                outcome.corrupt += 1
                outcome.problems.append("attempt \(attempt) (killed after \(delay) ms): integrity_check: \(integrity)")
            }
            let content = try databaseContent(target)
            if content != before && content != after {
                outcome.diverged += 1
                outcome.problems.append("attempt \(attempt) (killed after \(delay) ms): the database is neither untouched nor fully imported")
            }
            let reimport = try Child(["import", bundle, "--db", target])
            let again = await reimport.exit()
            if again.signaled || again.status != 0 {
                outcome.crashes += 1
                outcome.problems.append("attempt \(attempt): importing again after the kill ended with \(again)")
            } else if try databaseContent(target) != after {
                outcome.diverged += 1
                outcome.problems.append("attempt \(attempt): importing again after the kill did not give the completed content")
            }
        }
    }

    /// The example JSON bundle with `extraIssues` more issues on its project (seeded ids); returns the record count.
    static func writeLargeBundle(to path: String, extraIssues: Int, random: inout SeededGenerator) throws -> Int {
        let example = try examplesFolder().appendingPathComponent("project-bundle.json")
        guard var bundle = try JSONSerialization.jsonObject(with: Data(contentsOf: example)) as? [String: Any],
            var records = bundle["records"] as? [[String: Any]],
            let issue = records.first(where: { $0["entity"] as? String == "issue" })
        else { throw ReliabilityError("the example bundle has no issue to copy") }
        for number in 0..<extraIssues {
            var copy = issue
            copy["id"] = random.uuid().uuidString.lowercased()
            copy["serverID"] = "srv-extra-\(number)"
            if var fields = copy["fields"] as? [String: Any] {
                fields["title"] = "Copied issue \(number)"
                copy["fields"] = fields
            }
            records.append(copy)
        }
        bundle["records"] = records
        try JSONSerialization.data(withJSONObject: bundle, options: [.sortedKeys]).write(to: URL(fileURLWithPath: path))
        return records.count
    }
}

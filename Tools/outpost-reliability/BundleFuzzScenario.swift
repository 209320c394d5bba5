import Foundation
import OutpostTesting

#if canImport(Glibc)
import Glibc
#endif

/// Scenario 4b, `fuzz-bundles`: seeded mutations of `schemas/examples/*` (bit flips, random bytes over
/// a range, a range cut out or repeated, truncation) imported with `outpost import` into a device that
/// already holds the example project. The process must never crash or hang (it is stopped after
/// `hangLimit`, which counts as a crash), the file must pass `integrity_check`, and a refused bundle
/// must leave the database exactly as it was.
enum BundleFuzzScenario {
    static let scenario = Scenario(
        name: "fuzz-bundles",
        summary: "seeded bit flips and truncations of schemas/examples/* through outpost import",
        quickSeeds: 1, fullSeeds: 20
    ) { seed, quick in await run(seed: seed, quick: quick) }

    static let hangLimit: Duration = .seconds(30)

    static func run(seed: UInt64, quick: Bool) async -> SeedOutcome {
        await SeedOutcome.inScratchFolder("fuzz-bundles") { folder, outcome in
            try await run(seed: seed, quick: quick, folder: folder, outcome: &outcome)
        }
    }

    private static func run(seed: UInt64, quick: Bool, folder: ScratchFolder, outcome: inout SeedOutcome) async throws {
        var random = SeededGenerator(seed: seed ^ 0xF022_0000)
        let examples = try examplesFolder()
        let originals = try ["project-bundle.xml", "project-bundle.json"].map {
            ($0, try Data(contentsOf: examples.appendingPathComponent($0)))
        }
        let base = folder.path("base.sqlite")
        _ = try DeviceTemplate.openStore(at: base)
        let seeding = try Child(["import", examples.appendingPathComponent("project-bundle.xml").path, "--db", base])
        let seeded = await seeding.exit()
        guard !seeded.signaled, seeded.status == 0 else { throw ReliabilityError("importing the example bundle ended with \(seeded)") }
        let before = try databaseContent(base)
        let target = folder.path("device.sqlite")

        for number in 0..<(quick ? 12 : 40) {
            let (name, original) = random.pick(originals)
            let (mutated, how) = mutate(original, using: &random)
            let file = folder.path("case-\(number)-\(name)")
            try mutated.write(to: URL(fileURLWithPath: file))
            try copyDatabase(base, to: target)
            outcome.mutations += 1
            let child = try Child(["import", file, "--db", target])
            let started = ContinuousClock.now
            while child.isRunning, ContinuousClock.now - started < hangLimit { try await Task.sleep(for: .milliseconds(20)) }
            let hung = child.isRunning
            if hung { child.kill() }
            let exit = await child.exit()
            if hung || exit.signaled {
                outcome.crashes += 1
                outcome.problems.append("\(name) with \(how): outpost import \(hung ? "hung" : "ended with \(exit)")")
                continue
            }
            let integrity = try integrityCheck(target)
            if integrity != "ok" {
                outcome.corrupt += 1
                outcome.problems.append("\(name) with \(how): integrity_check: \(integrity)")
            }
            if exit.status != 0, try databaseContent(target) != before {
                outcome.diverged += 1
                outcome.problems.append("\(name) with \(how): refused (\(exit)) but the database changed")
            }
        }
    }

    /// One seeded mutation of `data`, and a description of it for the report.
    static func mutate(_ data: Data, using random: inout SeededGenerator) -> (Data, String) {
        var bytes = [UInt8](data)
        let count = bytes.count
        switch random.below(5) {
        case 0:
            let flips = 1 + random.below(8)
            var offsets: [Int] = []
            for _ in 0..<flips {
                let offset = random.below(count)
                bytes[offset] ^= UInt8(1) << UInt8(random.below(8))
                offsets.append(offset)
            }
            return (Data(bytes), "bits flipped at \(offsets)")
        case 1:
            let start = random.below(count), length = 1 + random.below(64)
            for offset in start..<min(count, start + length) { bytes[offset] = UInt8(truncatingIfNeeded: random.next()) }
            return (Data(bytes), "random bytes over \(start)..<\(min(count, start + length))")
        case 2:
            let start = random.below(count), length = 1 + random.below(512)
            bytes.removeSubrange(start..<min(count, start + length))
            return (Data(bytes), "bytes \(start)..<\(min(count, start + length)) cut out")
        case 3:
            let start = random.below(count), length = 1 + random.below(512)
            let range = start..<min(count, start + length)
            bytes.insert(contentsOf: bytes[range], at: range.upperBound)
            return (Data(bytes), "bytes \(range) repeated")
        default:
            let end = random.below(count)
            return (Data(bytes[0..<end]), "truncated to \(end) bytes")
        }
    }
}

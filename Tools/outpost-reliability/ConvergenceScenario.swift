import Foundation
import OutpostModels
import OutpostStore
import OutpostTesting
import Synchronization

/// Scenario 3, `convergence`: 3 to 5 devices edit the same issues and daily logs offline, round after
/// round, then sync in random orders through `FaultyTransport`. After each round every device equals
/// the server for every record it may see, and the harness's own model of the round's edits says which
/// values lost: for each field, the write with the newest clock (the virtual clock orders every write
/// of the seed) must be the server's value, and each other device's last value for that field, when it
/// differs, must appear in some device's conflicts table (as the local or the remote value). Lost values
/// produced and surfaced are counted; an unsurfaced one counts as lost.
enum ConvergenceScenario {
    static let scenario = Scenario(
        name: "convergence",
        summary: "3–5 devices edit shared records offline, sync in random orders through faults; losers surfaced",
        quickSeeds: 2, fullSeeds: 80
    ) { seed, quick in await run(seed: seed, quick: quick) }

    /// One field of one record.
    struct FieldKey: Hashable, Comparable {
        var entity: EntityType
        var id: UUID
        var field: String

        static func < (a: FieldKey, b: FieldKey) -> Bool {
            (a.entity.rawValue, a.id.uuidString, a.field) < (b.entity.rawValue, b.id.uuidString, b.field)
        }
    }

    /// One write of a round: who, what, and its place in the seed's order of writes.
    struct Edit {
        var device: Int
        var value: FieldValue
        var order: Int
    }

    static func run(seed: UInt64, quick: Bool) async -> SeedOutcome {
        var outcome = SeedOutcome()
        do {
            let folder = try ScratchFolder("convergence")
            defer { folder.remove() }
            let server = try await InProcessServer.start(databasePath: folder.path("server.sqlite"))
            do {
                try await run(seed: seed, quick: quick, folder: folder, server: server, outcome: &outcome)
            } catch {
                outcome.crashed(error, during: "the scenario")
            }
            await server.stop()
        } catch {
            outcome.crashed(error, during: "setup")
        }
        return outcome
    }

    private static func run(
        seed: UInt64, quick: Bool, folder: ScratchFolder, server: InProcessServer, outcome: inout SeedOutcome
    ) async throws {
        var random = SeededGenerator(seed: seed ^ 0xC0DE_C0DE)
        let clock = VirtualClock()
        let fleet = try Fleet.open(count: 3 + random.below(3), in: folder, server: server, plan: .standard, seed: seed, clock: clock)
        let now: @Sendable () -> Date = { clock.advance() }

        // The shared records: a few issues and daily logs, made by the first device and synced to all.
        var records: [(EntityType, UUID)] = []
        let first = fleet.devices[0]
        for number in 0..<3 {
            let issue = Issue(id: random.uuid(), projectID: Crew.project, title: "Shared issue \(number)")
            _ = try await first.store.save(issue, now: now())
            records.append((.issue, issue.id))
        }
        for number in 0..<2 {
            let log = DailyLog(id: random.uuid(), projectID: Crew.project, authorID: Crew.users[0], day: "2026-11-2\(number)")
            _ = try await first.store.save(log, now: now())
            records.append((.dailyLog, log.id))
        }
        outcome.mutations += records.count
        guard try await fleet.settle(shuffled: true, order: &random) else {
            outcome.lost += 1
            outcome.problems.append("the shared records did not settle")
            return
        }

        var order = 0
        var produced = 0, surfaced = 0
        for round in 0..<(quick ? 3 : 5) {
            var marks: [Int: Int64] = [:]
            for device in fleet.devices { marks[device.index] = try device.store.openConflicts().map(\.id).max() ?? 0 }
            var edits: [FieldKey: [Edit]] = [:]
            // Offline: each device writes 2–6 fields, the devices' writes interleaved in a seeded order.
            var queue: [Int] = []
            for device in fleet.devices { queue += Array(repeating: device.index, count: 2 + random.below(5)) }
            for index in random.shuffled(queue) {
                let device = fleet.devices[index]
                let (entity, id) = random.pick(records)
                order += 1
                let before = try device.store.record(entity, id: id)
                let number = random.below(1_000_000)
                let field: String
                switch entity {
                case .issue:
                    guard var issue = try device.store.fetch(Issue.self, id: id) else { continue }
                    switch random.below(4) {
                    case 0: field = "title"; issue.title = "Title \(order) by \(index)"
                    case 1: field = "details"; issue.details = "Details \(order) by \(index)"
                    case 2: field = "status"; issue.status = random.pick(Workload.statuses)
                    default: field = "priority"; issue.priority = random.pick(Workload.priorities)
                    }
                    _ = try await device.store.save(issue, now: now())
                default:
                    guard var log = try device.store.fetch(DailyLog.self, id: id) else { continue }
                    switch random.below(4) {
                    case 0: field = "notes"; log.notes = "Notes \(order) by \(index)"
                    case 1: field = "weather"; log.weather = "Weather \(order) by \(index)"
                    case 2: field = "hours"; log.hours = Double(number % 80) / 2
                    default: field = "crewSize"; log.crewSize = number % 9
                    }
                    _ = try await device.store.save(log, now: now())
                }
                let value = try device.store.record(entity, id: id)?[field] ?? .null
                // Writing the value a field already holds changes nothing and stamps nothing: not an edit.
                guard before?[field] != value else { continue }
                outcome.mutations += 1
                edits[FieldKey(entity: entity, id: id, field: field), default: []].append(Edit(device: index, value: value, order: order))
            }

            guard try await fleet.settle(shuffled: true, order: &random) else {
                outcome.lost += 1
                outcome.problems.append("round \(round) did not settle in 400 rounds")
                return
            }

            // Surfaced conflicts of this round, on every device.
            var conflicts: [OpenConflict] = []
            for device in fleet.devices {
                conflicts += try device.store.openConflicts().filter { $0.id > marks[device.index] ?? 0 }
            }
            let reference = fleet.devices[0].store
            for (key, writes) in edits.sorted(by: { $0.key < $1.key }) {
                guard let winner = writes.max(by: { $0.order < $1.order }) else { continue }
                let standing = try reference.record(key.entity, id: key.id)?[key.field]
                if standing != winner.value {
                    outcome.lost += 1
                    outcome.problems.append(
                        "round \(round): \(key.entity.rawValue)/\(key.id).\(key.field) is \(standing.map { "\($0)" } ?? "missing"), "
                            + "but the newest write was device \(winner.device)'s \(winner.value)")
                }
                var lastByDevice: [Int: Edit] = [:]
                for write in writes where write.order > (lastByDevice[write.device]?.order ?? 0) { lastByDevice[write.device] = write }
                for (device, loser) in lastByDevice.sorted(by: { $0.key < $1.key })
                where device != winner.device && loser.value != winner.value {
                    produced += 1
                    let found = conflicts.contains {
                        $0.entity == key.entity && $0.recordID == key.id && $0.field == key.field
                            && ($0.localValue == loser.value || $0.remoteValue == loser.value)
                    }
                    if found {
                        surfaced += 1
                    } else {
                        outcome.lost += 1
                        outcome.problems.append(
                            "round \(round): device \(device)'s \(loser.value) for \(key.entity.rawValue)/\(key.id).\(key.field) "
                                + "lost to device \(winner.device)'s \(winner.value) and is in no conflicts table")
                    }
                }
            }
            let divergences = try await fleet.divergences(server: server)
            outcome.diverged += divergences.count
            outcome.problems += divergences.map { "round \(round): \($0)" }
        }
        let unfinished = try fleet.unfinished()
        outcome.lost += unfinished.count
        outcome.problems += unfinished
        let state = try ServerState.read(databasePath: server.databasePath)
        let done = try fleet.doneKeys()
        for (key, record) in state.appliedKeys.sorted(by: { $0.key < $1.key }) where !done.contains(key) {
            outcome.duplicated += 1
            outcome.problems.append("the server applied key \(key) (\(record)), which no device holds as done")
        }
        outcome.faults = await fleet.faultsInjected()
        ConvergenceTally.shared.add(produced: produced, surfaced: surfaced)
    }
}

/// Lost values produced and surfaced over the whole run, for the report's note.
final class ConvergenceTally: Sendable {
    static let shared = ConvergenceTally()
    private let counts = Mutex<(produced: Int, surfaced: Int)>((0, 0))

    func add(produced: Int, surfaced: Int) {
        counts.withLock { $0.produced += produced; $0.surfaced += surfaced }
    }

    var totals: (produced: Int, surfaced: Int) { counts.withLock { $0 } }
}

import Foundation
import OutpostConflictModel
import OutpostConflicts
import OutpostFieldService
import OutpostModels
import OutpostSchema
import OutpostStore
import OutpostSync
import OutpostTesting
import Synchronization

/// Scenario 3, `convergence`: 3 to 5 devices write records of every conflict strategy and are checked,
/// round after round, against the reference model (`OutpostConflictModel`, the conflicts README's table).
///
/// Each round makes one fresh record per strategy (an issue merged field by field, a daily log under last
/// write wins, an asset the office's, a scope under manual, a measure sheet under client wins, a comment
/// append only: the server and devices run one policy giving each its strategy), synced to every device.
/// Every device then reads each record as a screen keeps it, and an old copy of the project is taken (the
/// server's bundle, or a device's export). Then:
///
/// 1. offline, the devices edit and delete in a seeded order;
/// 2. they sync one after another in a seeded order, each to completion, through `FaultyTransport`, and
///    then all once more;
/// 3. each restores what it holds deleted, saves its screen's stale copy (edited or not), imports the old
///    copy, edits or deletes, in a seeded order;
/// 4. the same syncs again.
///
/// The model is told the same steps. Then, per record: the server's record (live or deleted, and every
/// value, a tombstone's last values too) must be the model's, and each device's conflicts table must hold
/// exactly the losses the model surfaced on that device, no fewer (a value lost unseen: overwritten) and
/// no more (diverged); every device must equal the server; and a new device that pulls and then imports
/// the old copy must too (a delete it never held must not come back). Then the users answer about half of
/// the round's conflicts (override or discard) and the devices sync again: see `resolveSome`.
enum ConvergenceScenario {
    static let scenario = Scenario(
        name: "convergence",
        summary: "3–5 devices write records of every strategy (edits, deletes, restores, stale copies, old bundles), sync in random orders through faults; every run checked against the conflict model",
        quickSeeds: 8, fullSeeds: 400
    ) { seed, quick in await run(seed: seed, quick: quick) }

    /// Which record plays each strategy, and which of its text fields are the model's fields.
    struct Subject: Sendable {
        let strategy: ConflictPolicyName
        let entity: EntityType
        let fields: [String]
    }

    static let subjects: [Subject] = [
        Subject(strategy: .fieldMerge, entity: .issue, fields: ["title", "details"]),
        Subject(strategy: .lastWriteWins, entity: .dailyLog, fields: ["notes", "weather"]),
        Subject(strategy: .serverWins, entity: .asset, fields: ["name", "location"]),
        Subject(strategy: .manual, entity: .scope, fields: ["name", "notes"]),
        Subject(strategy: .clientWins, entity: .measureSheet, fields: ["name", "notes"]),
        Subject(strategy: .appendOnly, entity: .comment, fields: ["body"]),
    ]

    /// The app's policy, which the server runs too: the catalog's, with the overrides that give each
    /// subject its strategy.
    static let policy = ConflictPolicy(overriding: [.dailyLog: .lastWriteWins, .scope: .manual, .measureSheet: .clientWins])

    static func run(seed: UInt64, quick: Bool) async -> SeedOutcome {
        var outcome = SeedOutcome()
        do {
            let folder = try ScratchFolder("convergence")
            defer { folder.remove() }
            let server = try await LoopbackServer.start(databasePath: folder.path("server.sqlite"), policy: policy)
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
        seed: UInt64, quick: Bool, folder: ScratchFolder, server: LoopbackServer, outcome: inout SeedOutcome
    ) async throws {
        var random = SeededGenerator(seed: seed ^ 0xC0DE_C0DE)
        let clock = VirtualClock()
        let fleet = try Fleet.open(
            count: 3 + random.below(3), in: folder, server: server, plan: .standard, seed: seed, clock: clock, policy: policy)
        let now: @Sendable () -> Date = { clock.advance() }

        // The parents the subjects hang from, never written again: an issue for the comments, a scope for
        // the measure sheets.
        let first = fleet.devices[0].store
        let parentIssue = try await first.save(Issue(id: random.uuid(), projectID: Crew.project, title: "Comments go here"), now: now())
        let parentScope = try await first.save(Scope(id: random.uuid(), projectID: Crew.project, name: "Sheets go here"), now: now())
        outcome.mutations += 2

        var run = Round.Context(
            seed: seed, fleet: fleet, server: server, folder: folder, now: now, parentIssue: parentIssue.id,
            parentScope: parentScope.id)
        for round in 0..<(quick ? 3 : 4) {
            var state = Round(number: round, context: run)
            try await state.play(random: &random, outcome: &outcome)
            run = state.context
            guard !outcome.failed else { break }
            try await resolveSome(
                after: state.marks, round: round, fleet: fleet, server: server, now: now, random: &random, outcome: &outcome)
        }
        let unfinished = try fleet.unfinished()
        outcome.stuck += unfinished.count
        outcome.problems += unfinished
        let serverState = try ServerState.read(databasePath: server.databasePath)
        let done = try fleet.doneKeys()
        for (key, record) in serverState.appliedKeys.sorted(by: { $0.key < $1.key }) where !done.contains(key) {
            outcome.duplicated += 1
            outcome.problems.append("the server applied key \(key) (\(record)), which no device holds as done")
        }
        outcome.faults = await fleet.faultsInjected()
    }
}

/// One round: fresh records, the steps, the syncs, and the checks against the model.
struct Round {
    /// What lasts between rounds.
    struct Context {
        let seed: UInt64
        let fleet: Fleet
        let server: LoopbackServer
        let folder: ScratchFolder
        let now: @Sendable () -> Date
        let parentIssue: UUID
        let parentScope: UUID
    }

    let number: Int
    var context: Context
    /// Each device's highest conflict id when the round began: the round's conflicts come after.
    var marks: [Int: Int64] = [:]
    private var records: [(subject: ConvergenceScenario.Subject, id: UUID)] = []
    private var models: [ConflictModel] = []
    private var screens: [[EntityRecord]] = []
    /// The kinds of step each device made on each record, for the tally of pairs checked.
    private var kinds: [[Set<String>]] = []
    private var step = 0

    init(number: Int, context: Context) {
        self.number = number
        self.context = context
    }

    private var fleet: Fleet { context.fleet }
    private var devices: Int { context.fleet.devices.count }

    mutating func play(random: inout SeededGenerator, outcome: inout SeedOutcome) async throws {
        try await makeRecords(random: &random, outcome: &outcome)
        guard !outcome.failed else { return }
        for device in fleet.devices { marks[device.index] = try device.store.openConflicts().map(\.id).max() ?? 0 }

        // Screens and the old copy, read before anything.
        for index in models.indices { models[index].beginRound() }
        screens = try fleet.devices.map { device in
            try records.map { record in
                guard let held = try device.store.record(record.subject.entity, id: record.id) else {
                    throw ReliabilityError("device \(device.index) does not hold \(record.subject.entity.rawValue)/\(record.id)")
                }
                return held
            }
        }
        let oldCopy = URL(fileURLWithPath: context.folder.path("old-copy-\(number).json"))
        let fromExport = random.chance(0.5)
        if fromExport {
            _ = try fleet.devices[random.below(devices)].store.exportBundle(project: Crew.project, format: .json, to: oldCopy)
        } else {
            _ = try await context.server.transport(for: 0).downloadBundle(project: Crew.project, format: .json, to: oldCopy)
        }
        // Half the copies are edited as an attacker would: every version raised, to the largest there is
        // or by a random amount. A bundle's versions are its word; the model says the same of either copy.
        let forged = random.chance(0.5)
        if forged { try Self.raiseVersions(in: oldCopy, random: &random) }

        // Offline: each device edits and deletes, 1 to 3 steps, interleaved in a seeded order.
        var queue: [Int] = []
        for device in 0..<devices { queue += Array(repeating: device, count: 1 + random.below(3)) }
        for device in random.shuffled(queue) {
            let index = random.below(records.count)
            let operation: ConflictModel.Operation = random.chance(0.2) ? .delete : edit(index, device, &random)
            try await make(operation, record: index, device: device, oldCopy: oldCopy, outcome: &outcome)
        }
        try await syncWave(order: random.shuffled(Array(0..<devices)), losing: losers(&random), outcome: &outcome)
        try await syncWave(order: Array(0..<devices), outcome: &outcome)

        // Afterward: restores, stale copies, old copies, edits and deletes.
        queue = []
        for device in 0..<devices { queue += Array(repeating: device, count: random.below(3)) }
        for device in random.shuffled(queue) {
            let index = random.below(records.count)
            let operation: ConflictModel.Operation
            let roll = random.below(100)
            if roll < 25 {
                operation = .staleSave(changes(index, device, &random, some: random.chance(0.7)))
            } else if roll < 45 {
                operation = .restore(changes(index, device, &random, some: random.chance(0.5)))
            } else if roll < 55 {
                operation = .importOldCopy
            } else if roll < 85 {
                operation = edit(index, device, &random)
            } else {
                operation = .delete
            }
            try await make(operation, record: index, device: device, oldCopy: oldCopy, outcome: &outcome)
        }
        try await syncWave(order: random.shuffled(Array(0..<devices)), losing: losers(&random), outcome: &outcome)
        try await syncWave(order: Array(0..<devices), outcome: &outcome)

        try check(outcome: &outcome)
        try await checkNewcomer(importing: oldCopy, outcome: &outcome)
        let divergences = try await fleet.divergences(server: context.server)
        outcome.diverged += divergences.count
        outcome.problems += divergences.map { "round \(number): \($0)" }
        ConvergenceTally.shared.add(pairs: pairsChecked(), oldCopies: (fromExport ? 0 : 1, fromExport ? 1 : 0, forged ? 1 : 0))
    }

    /// One record per strategy, made by device 0 with values the model starts from, synced everywhere.
    private mutating func makeRecords(random: inout SeededGenerator, outcome: inout SeedOutcome) async throws {
        let store = fleet.devices[0].store
        for subject in ConvergenceScenario.subjects {
            let id = random.uuid()
            let values = Dictionary(uniqueKeysWithValues: subject.fields.map { ($0, "\($0) r\(number)") })
            var record: EntityRecord
            switch subject.entity {
            case .issue: record = Issue(id: id, projectID: Crew.project, title: "-").record
            case .dailyLog: record = DailyLog(id: id, projectID: Crew.project, authorID: Crew.users[0], day: "2026-11-2\(number)").record
            case .asset: record = Asset(id: id, projectID: Crew.project, name: "-", qrCode: "QR-\(id)").record
            case .scope: record = Scope(id: id, projectID: Crew.project, name: "-").record
            case .measureSheet: record = MeasureSheet(id: id, scopeID: context.parentScope, name: "-").record
            default: record = Comment(id: id, issueID: context.parentIssue, authorID: Crew.users[0], body: "-").record
            }
            for (field, value) in values { record[field] = .text(value) }
            _ = try await store.save(record, now: context.now())
            outcome.mutations += 1
            records.append((subject, id))
            // Append only offers every value of a refused write to a deleted record (to save as a new one),
            // its issue and author too: the model holds those fields, never edited, as well.
            var modelValues = values
            if subject.strategy == .appendOnly {
                for field in subject.entity.description.fields.map(\.name) where modelValues[field] == nil {
                    modelValues[field] = Self.text(of: record[field])
                }
            }
            models.append(ConflictModel(strategy: subject.strategy, values: modelValues, devices: devices))
        }
        kinds = Array(repeating: Array(repeating: [], count: devices), count: records.count)
        var order = SeededGenerator(seed: context.seed &+ UInt64(number))
        guard try await fleet.settle(shuffled: true, order: &order) else {
            outcome.stuck += 1
            outcome.problems.append("round \(number): the new records did not settle")
            return
        }
    }

    /// An edit of one or more of the record's fields, with values no one wrote before.
    private mutating func edit(_ index: Int, _ device: Int, _ random: inout SeededGenerator) -> ConflictModel.Operation {
        .edit(changes(index, device, &random, some: true))
    }

    private mutating func changes(
        _ index: Int, _ device: Int, _ random: inout SeededGenerator, some: Bool
    ) -> [String: String] {
        guard some else { return [:] }
        let fields = records[index].subject.fields
        var chosen = fields.filter { _ in random.chance(0.5) }
        if chosen.isEmpty { chosen = [random.pick(fields)] }
        step += 1
        return Dictionary(uniqueKeysWithValues: chosen.map { ($0, "\($0) r\(number) #\(step) d\(device)") })
    }

    /// Tells the model, then makes the step on the device, when the model says the device can.
    private mutating func make(
        _ operation: ConflictModel.Operation, record index: Int, device: Int, oldCopy: URL, outcome: inout SeedOutcome
    ) async throws {
        guard models[index].allows(operation, on: device) else { return }
        let (subject, id) = records[index]
        let store = fleet.devices[device].store
        let where_ = "round \(number): device \(device)'s \(Self.kind(of: operation)) of \(subject.entity.rawValue)/\(id)"
        guard let held = try store.record(subject.entity, id: id) else {
            outcome.diverged += 1
            outcome.problems.append("\(where_): the device does not hold the record")
            return
        }
        let expectDeleted = models[index].view(of: device).isDeleted
        if held.sync.isDeleted != expectDeleted, operation != .importOldCopy {
            outcome.diverged += 1
            outcome.problems.append("\(where_): the device holds it \(held.sync.isDeleted ? "deleted" : "live"), the model says otherwise")
            return
        }
        models[index].apply(operation, on: device)
        PreSyncScenario.trace("\(where_): \(operation) (held v\(held.sync.version)\(held.sync.isDeleted ? " deleted" : ""))")
        kinds[index][device].insert(Self.kind(of: operation))
        outcome.mutations += 1
        switch operation {
        case .edit(let values), .restore(let values):
            var record = held
            for (field, value) in values { record[field] = .text(value) }
            _ = try await store.save(record, now: context.now())
        case .staleSave(let values):
            var record = screens[device][index]
            for (field, value) in values { record[field] = .text(value) }
            _ = try await store.save(record, now: context.now())
        case .delete:
            _ = try await store.delete(subject.entity, id: id, now: context.now())
        case .importOldCopy:
            _ = try store.importBundle(at: oldCopy)
        }
    }

    /// The devices of a wave whose push's answer is lost, about one in three.
    private func losers(_ random: inout SeededGenerator) -> Set<Int> {
        Set((0..<devices).filter { _ in random.chance(0.35) })
    }

    /// Each device in `order` syncs to completion (no other device syncs meanwhile); the model likewise.
    /// A device in `losing` whose changes fit one push (the fleet's batches hold 4) syncs once instead,
    /// and loses the push's answer: the server takes its changes, as the model's sync says, the others
    /// sync on top of them, and it learns of it at its next run (the wave after), by asking the server
    /// before it pulls. Sent as concurrent with what the others wrote meanwhile, its changes went again
    /// over their later writes, or were offered back as lost on its own device (attack 103, F1).
    private mutating func syncWave(order: [Int], losing: Set<Int> = [], outcome: inout SeedOutcome) async throws {
        for device in order {
            // One push holds them only when no two are of one record: a record's later change waits for
            // its earlier one's answer (seed 24 lost an edit's answer, and the delete behind it went in the
            // device's next run, after the others had synced for the last time).
            let pending = try fleet.devices[device].store.mutations(status: .pending)
            let losesTheAnswer = losing.contains(device) && (1...4).contains(pending.count)
                && Set(pending.map(\.recordID)).count == pending.count
            for index in models.indices {
                let before = models[index].surfaced.count
                models[index].sync(device)
                PreSyncScenario.trace(
                    "round \(number): device \(device) syncs \(records[index].subject.entity.rawValue): model server "
                        + "\(models[index].server.isDeleted ? "deleted " : "")\(models[index].server.fieldValues.sorted { $0.key < $1.key }), "
                        + "surfaced \(models[index].surfaced.dropFirst(before).map(\.description))")
            }
            if losesTheAnswer {
                PreSyncScenario.trace("round \(number): device \(device)'s push answer is lost")
                if try await fleet.syncLosingThePushAnswer(device) { ConvergenceTally.shared.lostAnswer() }
                continue
            }
            guard try await fleet.syncToCompletion(device) else {
                outcome.stuck += 1
                outcome.problems.append("round \(number): device \(device) did not finish syncing")
                return
            }
        }
    }

    /// The server's records and each device's conflicts against the model.
    private func check(outcome: inout SeedOutcome) throws {
        let server = try ServerState.read(databasePath: context.server.databasePath)
        var surfacedByDevice: [[OpenConflict]] = []
        for device in fleet.devices {
            surfacedByDevice.append(try device.store.openConflicts().filter { $0.id > marks[device.index] ?? 0 })
        }
        for (index, (subject, id)) in records.enumerated() {
            let model = models[index]
            let name = "round \(number): \(subject.entity.rawValue)/\(id) (\(subject.strategy.rawValue))"
            guard let stored = server.records["\(subject.entity.rawValue)/\(id.uuidString.lowercased())"] else {
                outcome.lost += 1
                outcome.problems.append("\(name) is not on the server")
                continue
            }
            if stored.deleted != model.server.isDeleted {
                outcome.diverged += 1
                outcome.problems.append("\(name): the server holds it \(stored.deleted ? "deleted" : "live"), the model says otherwise")
            }
            for field in subject.fields {
                // As the server stores a text value, normalized as `ServerState` reads it (the fields the
                // model holds besides are never written).
                let expected = try model.server.fieldValues[field].map {
                    String(decoding: try JSONSerialization.data(withJSONObject: ["text": $0], options: [.sortedKeys]), as: UTF8.self)
                }
                if stored.fields[field] != expected {
                    outcome.diverged += 1
                    outcome.problems.append(
                        "\(name).\(field): the server holds \(stored.fields[field] ?? "nothing"), the model \(expected ?? "nothing")")
                }
            }
            // Exactly the model's losses, on the devices the model names.
            var actual: [ConflictModel.Loss] = []
            for (device, conflicts) in surfacedByDevice.enumerated() {
                for conflict in conflicts where conflict.entity == subject.entity && conflict.recordID == id {
                    let value = conflict.field == nil ? nil : conflict.losingValue.map(Self.text(of:))
                    actual.append(ConflictModel.Loss(device: device, field: conflict.field, value: value, isRestore: conflict.kind == .restore))
                }
            }
            let expected = model.surfaced.sorted()
            var unmatched = actual.sorted()
            var missing = 0
            for loss in expected {
                if let found = unmatched.firstIndex(of: loss) {
                    unmatched.remove(at: found)
                } else {
                    missing += 1
                    outcome.overwritten += 1
                    outcome.problems.append("\(name): the model surfaces \(loss), no conflicts table holds it")
                }
            }
            for extra in unmatched {
                outcome.diverged += 1
                outcome.problems.append("\(name): \(extra) is surfaced, the model does not surface it")
            }
            ConvergenceTally.shared.add(produced: expected.count, surfaced: expected.count - missing)
        }
    }

    /// A new device pulls everything, then imports the old copy: it must end as the server is (a record
    /// deleted before it joined must not come back from the copy).
    /// Two new devices take the old copy, one after its first sync and one before (a pre-sync), and
    /// each, synced, holds what the server holds.
    private func checkNewcomer(importing oldCopy: URL, outcome: inout SeedOutcome) async throws {
        for importsFirst in [false, true] {
            let name = importsFirst ? "presynced-\(number)" : "newcomer-\(number)"
            let store = try DeviceTemplate.openStore(at: context.folder.path("\(name).sqlite"))
            let engine = SyncEngine(store: store, transport: context.server.transport(for: 0), policy: ConvergenceScenario.policy)
            if !importsFirst { _ = try await engine.sync(now: context.now) }
            _ = try store.importBundle(at: oldCopy)
            _ = try await engine.sync(now: context.now)
            let when = importsFirst ? "before its first sync" : "after its first sync"
            let result = try await compare(store, with: context.server.transport(for: 0))
            outcome.diverged += result.mismatches.count
            outcome.problems += result.mismatches.map { "round \(number), a new device importing the old copy \(when): \($0)" }
            for (index, (subject, id)) in records.enumerated() where models[index].server.isDeleted {
                if try store.record(subject.entity, id: id).map({ !$0.sync.isDeleted }) ?? false {
                    outcome.diverged += 1
                    outcome.problems.append("round \(number): the old copy brought \(subject.entity.rawValue)/\(id) back on a new device \(when)")
                }
            }
        }
    }

    /// Rewrites a JSON bundle with every record's version raised: to the largest there is, or by a
    /// random amount.
    static func raiseVersions(in bundle: URL, random: inout SeededGenerator) throws {
        guard var document = try JSONSerialization.jsonObject(with: Data(contentsOf: bundle)) as? [String: Any],
            var records = document["records"] as? [[String: Any]]
        else { throw ReliabilityError("the old copy is not a JSON bundle") }
        let largest = random.chance(0.5)
        for index in records.indices {
            let version = (records[index]["version"] as? NSNumber)?.int64Value ?? 0
            records[index]["version"] = largest ? Int64.max : version + 1 + Int64(random.below(1_000_000))
        }
        document["records"] = records
        try JSONSerialization.data(withJSONObject: document).write(to: bundle)
    }

    /// For each strategy, the pairs of step kinds that two devices made on one record this round.
    private func pairsChecked() -> [String: [String: Int]] {
        var pairs: [String: [String: Int]] = [:]
        for (index, (subject, _)) in records.enumerated() {
            var seen: Set<String> = []
            for a in 0..<devices {
                for b in (a + 1)..<max(a + 1, devices) {
                    for x in kinds[index][a] {
                        for y in kinds[index][b] { seen.insert([x, y].sorted().joined(separator: " × ")) }
                    }
                }
            }
            for pair in seen { pairs[pair, default: [:]][subject.strategy.rawValue, default: 0] += 1 }
        }
        return pairs
    }

    /// A field's value as the model writes it: text as it is, an id in lowercase, null as "null".
    static func text(of value: FieldValue) -> String {
        switch value {
        case .text(let text): text
        case .uuid(let id): id.uuidString.lowercased()
        case .null: "null"
        default: "\(value)"
        }
    }

    static func kind(of operation: ConflictModel.Operation) -> String {
        switch operation {
        case .edit: "edit"
        case .delete: "delete"
        case .restore: "restore"
        case .staleSave(let values): values.isEmpty ? "stale save (unchanged)" : "stale save"
        case .importOldCopy: "old copy"
        }
    }
}

extension ConvergenceScenario {
    /// The users answer some of the round's conflicts: each device overrides or discards about half of
    /// its own. An override must bring back the value the conflict recorded as losing, and a record that
    /// value lost to a delete with it; after a sync, the newest override of each field stands on every
    /// device under field merge (under last write wins a newer override of another field stands whole,
    /// under server wins and manual the first one the server takes stands, under client wins the last
    /// synced, and append only refuses an override as any edit), a
    /// record brought back is live (but under append only, where a delete is final), and every device
    /// still equals the server.
    fileprivate static func resolveSome(
        after marks: [Int: Int64], round: Int, fleet: Fleet, server: LoopbackServer, now: @Sendable () -> Date,
        random: inout SeededGenerator, outcome: inout SeedOutcome
    ) async throws {
        let strategies = Dictionary(uniqueKeysWithValues: subjects.map { ($0.entity, $0.strategy) })
        /// The newest override of each field, by "entity/id" and field.
        var overrides: [String: (entity: EntityType, id: UUID, field: String, device: Int, value: FieldValue)] = [:]
        /// Records an override brought back from a tombstone ("entity/id"): that writes every field anew.
        var revived: [String: (entity: EntityType, id: UUID)] = [:]
        for device in random.shuffled(fleet.devices.map(\.index)) {
            let store = fleet.devices[device].store
            for conflict in try store.openConflicts() where conflict.id > marks[device] ?? 0 && random.chance(0.5) {
                // A lost restore: overridden, the record is back on the device (and, but under append only,
                // everywhere once the devices settle); discarded, it stays deleted.
                if conflict.kind == .restore, let before = try store.record(conflict.entity, id: conflict.recordID) {
                    let choice: ConflictChoice = random.chance(0.7) ? .override : .discard
                    try await store.resolveConflict(conflict.id, choice: choice, now: now())
                    ConvergenceTally.shared.answered(choice)
                    let live = try store.record(conflict.entity, id: conflict.recordID).map { !$0.sync.isDeleted }
                    if live != (choice == .override ? true : !before.sync.isDeleted) {
                        outcome.lost += 1
                        outcome.problems.append(
                            "round \(round): device \(device)'s \(choice.rawValue) of lost restore \(conflict.id) "
                                + "(\(conflict.entity.rawValue)/\(conflict.recordID)) left it \(live == true ? "live" : "deleted")")
                    }
                    if choice == .override {
                        outcome.mutations += 1
                        revived["\(conflict.entity.rawValue)/\(conflict.recordID)"] = (conflict.entity, conflict.recordID)
                    }
                    continue
                }
                guard let field = conflict.field, let before = try store.record(conflict.entity, id: conflict.recordID)
                else { continue }
                let choice: ConflictChoice = random.chance(0.7) ? .override : .discard
                try await store.resolveConflict(conflict.id, choice: choice, now: now())
                ConvergenceTally.shared.answered(choice)
                let after = try store.record(conflict.entity, id: conflict.recordID)?[field]
                let where_ = "round \(round): device \(device)'s \(choice.rawValue) of conflict \(conflict.id) "
                    + "(\(conflict.entity.rawValue)/\(conflict.recordID).\(field))"
                guard choice == .override else {
                    if after != before[field] {
                        outcome.lost += 1
                        outcome.problems.append("\(where_) changed the value to \(after.map { "\($0)" } ?? "nothing")")
                    }
                    continue
                }
                guard let losing = conflict.losingValue else {
                    outcome.lost += 1
                    outcome.problems.append("\(where_): the conflict does not say which value lost")
                    continue
                }
                if after != losing {
                    outcome.lost += 1
                    outcome.problems.append(
                        "\(where_) left \(after.map { "\($0)" } ?? "nothing"), not the losing value \(losing)")
                }
                if before.sync.isDeleted {
                    revived["\(conflict.entity.rawValue)/\(conflict.recordID)"] = (conflict.entity, conflict.recordID)
                    if try store.record(conflict.entity, id: conflict.recordID)?.sync.isDeleted != false {
                        outcome.lost += 1
                        outcome.problems.append("\(where_) did not bring the deleted record back")
                    }
                }
                if let after, after != before[field] {
                    outcome.mutations += 1
                    overrides["\(conflict.entity.rawValue)/\(conflict.recordID).\(field)"] =
                        (conflict.entity, conflict.recordID, field, device, after)
                }
            }
        }
        guard try await fleet.settle(shuffled: true, order: &random) else {
            outcome.stuck += 1
            outcome.problems.append("round \(round): the overrides did not settle")
            return
        }
        let reference = fleet.devices[0].store
        for (record, (entity, id)) in revived.sorted(by: { $0.key < $1.key }) where strategies[entity] != .appendOnly {
            if try reference.record(entity, id: id)?.sync.isDeleted != false {
                outcome.lost += 1
                outcome.problems.append("round \(round): \(record), brought back by an override, is not live after the sync")
            }
        }
        for (key, newest) in overrides.sorted(by: { $0.key < $1.key }) {
            // Field merge alone keeps each field's newest write whatever else was written: under last write
            // wins a newer override of another field stands whole, and the older one is surfaced instead.
            guard let strategy = strategies[newest.entity], strategy == .fieldMerge,
                revived["\(newest.entity.rawValue)/\(newest.id)"] == nil
            else { continue }
            let standing = try reference.record(newest.entity, id: newest.id)?[newest.field]
            if standing != newest.value {
                outcome.lost += 1
                outcome.problems.append(
                    "round \(round): \(key) is \(standing.map { "\($0)" } ?? "missing") "
                        + "after the overrides, not device \(newest.device)'s newest override \(newest.value)")
            }
        }
        let divergences = try await fleet.divergences(server: server)
        outcome.diverged += divergences.count
        outcome.problems += divergences.map { "round \(round), after the overrides: \($0)" }
    }
}

/// The convergence scenario's figures over the whole run, for the report.
final class ConvergenceTally: Sendable {
    static let shared = ConvergenceTally()
    private let counts = Mutex<(produced: Int, surfaced: Int, records: Int)>((0, 0, 0))
    private let answers = Mutex<(overridden: Int, discarded: Int)>((0, 0))
    /// Per pair of step kinds two devices made on one record, per strategy: records checked against the model.
    private let pairs = Mutex<[String: [String: Int]]>([:])
    private let oldCopies = Mutex<(bundles: Int, exports: Int, forged: Int)>((0, 0, 0))

    /// Adds one record's figures: losses the model surfaced, and how many of them a conflicts table held.
    func add(produced: Int, surfaced: Int) {
        counts.withLock { $0.produced += produced; $0.surfaced += surfaced; $0.records += 1 }
    }

    /// Adds a round's pairs checked, and whether its old copy was a bundle or an export.
    func add(pairs round: [String: [String: Int]], oldCopies copies: (Int, Int, Int)) {
        pairs.withLock { all in
            for (pair, strategies) in round {
                for (strategy, count) in strategies { all[pair, default: [:]][strategy, default: 0] += count }
            }
        }
        oldCopies.withLock { $0.bundles += copies.0; $0.exports += copies.1; $0.forged += copies.2 }
    }

    private let lostAnswers = Mutex(0)

    /// Counts one push whose answer a device lost while the others synced on top (`syncWave`).
    func lostAnswer() {
        lostAnswers.withLock { $0 += 1 }
    }

    /// Push answers lost over the whole run.
    var lostAnswerTotal: Int { lostAnswers.withLock { $0 } }

    /// Counts one conflict the users answered.
    func answered(_ choice: ConflictChoice) {
        answers.withLock { if choice == .override { $0.overridden += 1 } else { $0.discarded += 1 } }
    }

    /// Losses the model surfaced, those a conflicts table held, and records checked.
    var totals: (produced: Int, surfaced: Int, records: Int) { counts.withLock { $0 } }
    /// Conflicts overridden and discarded over the whole run.
    var answerTotals: (overridden: Int, discarded: Int) { answers.withLock { $0 } }
    /// Records checked against the model, per pair of step kinds and strategy.
    var pairTotals: [String: [String: Int]] { pairs.withLock { $0 } }
    /// Rounds whose old copy was the server's bundle, and a device's export.
    var oldCopyTotals: (bundles: Int, exports: Int, forged: Int) { oldCopies.withLock { $0 } }
}

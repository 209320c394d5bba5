import Foundation
import OutpostBundles
import OutpostConflicts
import OutpostFieldService
import OutpostModels
import OutpostSchema
import OutpostStore
import OutpostSync
import OutpostTesting
import OutpostWire
import Synchronization

/// Scenario `presync`: what a crew's day does to the pre-sync bundle. Two field devices (crew 0 and
/// 1) and the office (crew 2, always online) share records of every strategy: issues, a daily log and a
/// scope item (field merge), fees and an asset (server wins), a time entry (client wins), comments
/// (append only); on about half the seeds the app overrides some of them (manual, last write wins, …),
/// the server configured with the same `ConflictPolicy` (`ServerConfiguration.conflictPolicy`). Each
/// round:
///
/// 1. the field devices edit offline, their clocks skewed by seeded amounts (within the server's
///    5-minute allowance or beyond it, ahead or behind), restarted now and then (the store closed and
///    opened again from its file, so the clock resumes from what the file kept), while the office edits
///    the same records and syncs at once;
/// 2. each field device reads a record or two as a screen would (a typed model or an `EntityRecord`),
///    then comes online: downloads the project bundle and imports it (sometimes while a `sync()` of the
///    same store runs), or only syncs; then saves the copies it read before, one field edited (stale
///    copies); a clock that ran far ahead is corrected at some point;
/// 3. every device syncs until nothing is pending (bounded), and the round is checked.
///
/// The checks, per round. Every write has a value no other write of the seed has, so a value names its
/// write. Within a round, no device saw another's writes before writing (the field devices are offline,
/// the office writes before anyone else sends, and the only later writes are stale copies, which by
/// design surface any newer value they replace), so the writes to one field are concurrent, whatever
/// the strategy. Hence:
///
/// - each writer's last value of a field either stands on the server or is the losing value of a
///   conflict on some device (server wins and manual: the device's own value lost; client wins: the
///   office's, which the device replaced; field merge and last write wins: whichever clock was older).
///   Otherwise it counts as **overwritten** when the server once accepted it (the transport saw it
///   applied), as **lost** when it never got there, and under **stuck** alone when its record still has
///   a change waiting on the writer;
/// - a field nobody wrote in the round keeps the value it had, and a field somebody wrote holds one of
///   the round's values or the one before: an old value sent back (a stale copy's) is **overwritten**;
/// - each comment created offline is on the server (**lost** otherwise);
/// - every device equals the server (**diverged**, `compare`), and no mutation is left pending, in
///   flight or failed, or reported by `LocalStore.blockedMutations()` (**stuck**);
/// - at the end, every idempotency key the server applied is one a device holds as done (**duplicated**).
///
/// A seed replays the same schedule (`--scenario presync --seed N`); only the moment an import lands
/// inside a concurrent sync, and the real time the skews are added to, differ between runs. With
/// `OUTPOST_RELIABILITY_TRACE` set, a replay prints each step (clocks, writes, imports, syncs) to stderr.
enum PreSyncScenario {
    static let scenario = Scenario(
        name: "presync",
        summary: "offline edits, office edits, pre-sync imports (some during a sync), stale copies, skewed clocks, policy overrides",
        quickSeeds: 10, fullSeeds: 90
    ) { seed, quick in await run(seed: seed, quick: quick) }

    /// The office's crew index; 0 and 1 are the field devices.
    static let office = 2
    static let fieldDevices = [0, 1]

    /// The server's allowance for a clock ahead of its own time, in seconds.
    static let allowance = Double(HybridLogicalClock.defaultMaximumDrift.components.seconds)

    /// The fields the scenario edits, per entity: text and numbers only, so every value written can be
    /// unique in the seed (a choice or a flag would repeat, and a repeated value cannot name its write).
    static let editable: [EntityType: [String]] = [
        .issue: ["title", "details"],
        .dailyLog: ["notes", "weather", "crew", "crewSize", "hours"],
        .scopeItem: ["name", "quantity", "unitPriceCents"],
        .fee: ["name", "amountCents"],
        .asset: ["name", "category", "location"],
        .timeEntry: ["note"],
    ]

    /// Sync rounds of all devices at the end of a round before what is left counts as stuck.
    static let settleRounds = 16

    static func run(seed: UInt64, quick: Bool) async -> SeedOutcome {
        var outcome = SeedOutcome()
        do {
            let folder = try ScratchFolder("presync")
            defer { folder.remove() }
            var random = SeededGenerator(seed: seed ^ 0x9E5F_1C00)
            let policy = drawPolicy(&random)
            let server = try await LoopbackServer.start(databasePath: folder.path("server.sqlite"), policy: policy)
            trace("seed \(seed): policy \(policy == ConflictPolicy() ? "the catalog's" : "\(overrides(of: policy))")")
            var run = SeedRun(seed: seed, folder: folder, server: server, policy: policy, random: random)
            do {
                try await run.play(rounds: quick ? 2 : 3)
            } catch {
                run.outcome.crashed(error, during: "the scenario")
            }
            outcome = run.outcome
            await server.stop()
        } catch {
            outcome.crashed(error, during: "setup")
        }
        return outcome
    }

    /// The app's conflict policy for a seed: the catalog's on about half the seeds, else one to three of
    /// the edited entities overridden with another strategy (never append only: the scenario edits them).
    static func drawPolicy(_ random: inout SeededGenerator) -> ConflictPolicy {
        guard random.chance(0.5) else { return ConflictPolicy() }
        let strategies: [ConflictStrategy] = [.serverWins, .clientWins, .lastWriteWins, .fieldMerge, .manual]
        let entities = random.shuffled(editable.keys.sorted { $0.rawValue < $1.rawValue })
        var overrides: [EntityType: ConflictStrategy] = [:]
        for entity in entities.prefix(1 + random.below(3)) {
            let current = ConflictStrategy(entity.description.defaultPolicy)
            overrides[entity] = random.pick(strategies.filter { $0 != current })
        }
        return ConflictPolicy(overriding: overrides)
    }

    /// The entities whose strategy `policy` overrides, for the trace.
    static func overrides(of policy: ConflictPolicy) -> String {
        EntityCatalog.all.map(\.type).filter { policy[$0] != ConflictStrategy($0.description.defaultPolicy) }
            .map { "\($0.rawValue)=\(policy[$0])" }.joined(separator: ",")
    }

    /// A clock skew in seconds: none, within the allowance (ahead or behind), or beyond it. Far ahead is
    /// drawn most: it is what the server refuses.
    static func drawSkew(_ random: inout SeededGenerator) -> TimeInterval {
        switch random.below(6) {
        case 0: 0
        case 1: Double(10 + random.below(230))
        case 2: -Double(10 + random.below(230))
        case 3, 4: Double(6 * 60 + random.below(25 * 60))
        default: -Double(6 * 60 + random.below(55 * 60))
        }
    }

    /// A value for `field` no other write of the seed has: `serial` is the seed's write counter.
    static func value(for field: String, serial: Int, round: Int, writer: Int) -> FieldValue {
        switch field {
        case "amountCents", "unitPriceCents": .integer(Int64(100_000 + serial))
        case "crewSize": .integer(Int64(1_000 + serial))
        case "hours", "quantity": .real(Double(1_000 + serial) + 0.5)
        default: .text("\(field) r\(round) by \(name(of: writer)) #\(serial)")
        }
    }

    static func name(of index: Int) -> String { index == office ? "the office" : "device \(index)" }

    /// Whether `OUTPOST_RELIABILITY_TRACE` asks for each step of a replay.
    static let tracing = ProcessInfo.processInfo.environment["OUTPOST_RELIABILITY_TRACE"] != nil

    /// Prints a step of the seed to stderr when tracing.
    static func trace(_ line: @autoclosure () -> String) {
        if tracing {
            let time = String(format: "%.3f", Date().timeIntervalSince1970.truncatingRemainder(dividingBy: 1000))
            FileHandle.standardError.write(Data(("  | \(time) " + line() + "\n").utf8))
        }
    }

    /// The typed model of a record, for a screen that holds one; nil for entities not edited here.
    static func typedCopy(_ entity: EntityType, id: UUID, in store: LocalStore) throws -> (any Syncable)? {
        switch entity {
        case .issue: try store.fetch(Issue.self, id: id)
        case .dailyLog: try store.fetch(DailyLog.self, id: id)
        case .scopeItem: try store.fetch(ScopeItem.self, id: id)
        case .fee: try store.fetch(Fee.self, id: id)
        case .asset: try store.fetch(Asset.self, id: id)
        case .timeEntry: try store.fetch(TimeEntry.self, id: id)
        default: nil
        }
    }

    /// Saves the typed copy `model` with `field` set to `value`, through the typed `save`.
    static func save<Model: Syncable>(
        _ model: Model, field: String, value: FieldValue, in store: LocalStore, now: Date
    ) async throws {
        var record = model.record
        record[field] = value
        _ = try await store.save(try Model(record: record), now: now)
    }

    /// Imports `file` (downloaded from the server) into `store` on a thread of its own, as
    /// `Device.preSync` does (the server's word: its versions are not the file's, and a store that held
    /// none of the project keeps its position for the next pull): it may wait for the store's writes, and they for it, so it must not hold one
    /// of the few threads the concurrent sync runs on.
    static func importOffThread(_ file: URL, into store: LocalStore) async -> Result<ImportSummary, any Error> {
        await withCheckedContinuation { continuation in
            DispatchQueue.global().async {
                do {
                    let summary = try store.importBundle(at: file, fromServer: true)
                    continuation.resume(returning: .success(summary))
                } catch {
                    continuation.resume(returning: .failure(error))
                }
            }
        }
    }

    /// Every record the server holds, by "entity/id", as crew member `member` pulls it from the start.
    static func serverRecords(_ server: LoopbackServer, as member: Int = office) async throws -> [String: ServerRecord] {
        let transport = server.transport(for: member)
        var records: [String: ServerRecord] = [:]
        var cursor: String?
        while true {
            let page = try await transport.pull(PullRequest(cursor: cursor, limit: 500))
            for record in page.changes { records["\(record.entity.rawValue)/\(record.recordID)"] = record }
            cursor = page.nextCursor
            if !page.hasMore { break }
        }
        return records
    }
}

/// One device of the scenario: its database file, the store and engine open on it now (a restart
/// replaces both), and how far its clock is off.
struct SkewedDevice: Sendable {
    let index: Int
    let path: String
    let transport: AcceptanceRecorder
    private let policy: ConflictPolicy
    private let seed: UInt64
    private(set) var store: LocalStore
    private(set) var engine: SyncEngine
    private(set) var restarts = 0
    /// Seconds the device's clock runs ahead of the real time (negative: behind).
    var skew: TimeInterval = 0

    init(index: Int, path: String, server: LoopbackServer, policy: ConflictPolicy, seed: UInt64) throws {
        self.index = index
        self.path = path
        self.policy = policy
        self.seed = seed
        transport = AcceptanceRecorder(base: server.transport(for: index))
        store = try DeviceTemplate.openStore(at: path)
        engine = Self.makeEngine(store: store, transport: transport, policy: policy, seed: seed ^ UInt64(index + 1) << 32)
    }

    private static func makeEngine(store: LocalStore, transport: AcceptanceRecorder, policy: ConflictPolicy, seed: UInt64) -> SyncEngine {
        SyncEngine(
            store: store, transport: transport, policy: policy, retryPolicy: Fleet.retries,
            random: SeededGenerator(seed: seed), batchSize: 4, pullLimit: 5)
    }

    /// The device's wall time now: the real time plus its skew (the server checks clocks against the
    /// real time, so a skew here is a skew there).
    var now: Date { Date().addingTimeInterval(skew) }

    /// The device's wall clock as its engine reads it, at the current skew.
    var clock: @Sendable () -> Date {
        let skew = skew
        return { Date().addingTimeInterval(skew) }
    }

    /// The app restarts: the store and its engine are let go (GRDB closes the pool with the last
    /// reference) and the file opened again, so the clock resumes from what the file kept and in-flight
    /// mutations are recovered, as after a real restart.
    mutating func restart() throws {
        restarts += 1
        store = try LocalStore.open(at: path)
        engine = Self.makeEngine(
            store: store, transport: transport, policy: policy,
            seed: seed ^ UInt64(index + 1) << 32 ^ UInt64(restarts) << 48)
    }
}

/// One write of a round: who, what, and how.
private struct Write {
    var writer: Int
    var value: FieldValue
    var order: Int
    /// "offline edit", "office edit" or "stale-copy save", for the report.
    var how: String
    /// The writer's clock skew when it wrote, in seconds.
    var skew: TimeInterval

    /// The write in words: how, and with which clock.
    var described: String {
        "\(how)\(skew == 0 ? "" : String(format: " (clock %+.0f s)", skew))"
    }
}

/// A copy of a record a screen holds, typed or generic.
private enum HeldCopy {
    case record(EntityRecord)
    case typed(any Syncable)

    var entity: EntityType {
        switch self {
        case .record(let record): record.entity
        case .typed(let model): type(of: model).entityType
        }
    }

    var id: UUID {
        switch self {
        case .record(let record): record.id
        case .typed(let model): model.id
        }
    }
}

/// How a field device comes online in a round.
private enum GoingOnline: CaseIterable {
    /// Imports the bundle, saves its stale copies, then syncs.
    case importThenSync
    /// Starts a sync and imports the bundle while it runs, then saves its stale copies.
    case importDuringSync
    /// Imports the bundle and saves its stale copies; the final syncs send them.
    case importOnly
    /// Only syncs, then saves its stale copies: a pull makes them stale, the case the store handled first.
    case syncOnly
}

/// One seed's devices, records and findings.
private struct SeedRun {
    let seed: UInt64
    let folder: ScratchFolder
    let server: LoopbackServer
    let policy: ConflictPolicy
    var random: SeededGenerator
    var outcome = SeedOutcome()
    var devices: [SkewedDevice] = []
    /// The records every writer edits.
    var records: [(entity: EntityType, id: UUID)] = []
    /// Issues, for comments.
    var issues: [UUID] = []
    /// The seed's write counter: every value written carries it.
    var serial = 0
    /// Unfinished mutations already counted as stuck ("device/sequence"), so a later round does not count them again.
    var countedStuck: Set<String> = []
    var figures = PreSyncTally.Figures()

    init(seed: UInt64, folder: ScratchFolder, server: LoopbackServer, policy: ConflictPolicy, random: SeededGenerator) {
        self.seed = seed
        self.folder = folder
        self.server = server
        self.policy = policy
        self.random = random
    }

    mutating func play(rounds: Int) async throws {
        if try await setUp() {
            for round in 0..<rounds { try await play(round: round) }
        }
        try checkDuplicates()
        figures.seeds = 1
        figures.overridden = policy == ConflictPolicy() ? 0 : 1
        PreSyncTally.shared.add(figures)
    }

    /// The office makes the shared records and syncs; each field device starts from a new database with
    /// the project bundle imported (the night before), then syncs. False (a finding) when that does not
    /// settle: the rounds would then start from different states.
    mutating func setUp() async throws -> Bool {
        for index in 0...PreSyncScenario.office {
            devices.append(try SkewedDevice(
                index: index, path: folder.path("device-\(index).sqlite"), server: server, policy: policy, seed: seed))
        }
        let office = devices[PreSyncScenario.office]
        let member = Crew.users[PreSyncScenario.office]
        let scope = Scope(id: random.uuid(), projectID: Crew.project, name: "Yard scope")
        var made: [any Syncable] = [scope]
        for number in 0..<2 {
            let issue = Issue(id: random.uuid(), projectID: Crew.project, title: "Shared issue \(number)")
            issues.append(issue.id)
            made.append(issue)
        }
        made.append(DailyLog(id: random.uuid(), projectID: Crew.project, authorID: member, day: "2026-11-24", notes: "Started"))
        made.append(ScopeItem(id: random.uuid(), scopeID: scope.id, name: "Tile", quantity: 1, unit: "m2", unitPriceCents: 100))
        for number in 0..<2 {
            made.append(Fee(id: random.uuid(), projectID: Crew.project, name: "Fee \(number)", amountCents: 1_000))
        }
        made.append(Asset(id: random.uuid(), projectID: Crew.project, name: "Mixer", qrCode: "QR-\(seed)-mixer"))
        made.append(TimeEntry(
            id: random.uuid(), projectID: Crew.project, memberID: member, kind: .clockIn, recordedAt: Date()))
        for model in made {
            _ = try await office.store.save(model.record, now: office.now)
            outcome.mutations += 1
            if PreSyncScenario.editable[type(of: model).entityType] != nil {
                records.append((type(of: model).entityType, model.id))
            }
        }
        guard await sendAll(PreSyncScenario.office, during: "setup") else {
            outcome.stuck += 1
            outcome.problems.append("setup: the office could not send the shared records")
            return false
        }
        for index in PreSyncScenario.fieldDevices {
            if let file = await download(index, name: "setup") { _ = await importBundle(file, into: index, during: "setup") }
        }
        guard await settle(during: "setup") else {
            outcome.stuck += 1
            outcome.problems.append("setup: the devices did not settle in \(PreSyncScenario.settleRounds) rounds")
            return false
        }
        return true
    }

    mutating func play(round: Int) async throws {
        var marks: [Int: Int64] = [:]
        for device in devices { marks[device.index] = try device.store.openConflicts().map(\.id).max() ?? 0 }
        let start = try await PreSyncScenario.serverRecords(server)
        var writes: [FieldKey: [Write]] = [:]
        var comments: [(writer: Int, id: UUID, body: String)] = []
        var order = 0

        // Offline: the field devices' clocks are set for the day (a restart now and then), the office's
        // is near right. The writers' turns are interleaved in a seeded order; the office sends each
        // of its edits at once, the field devices none.
        for index in PreSyncScenario.fieldDevices {
            devices[index].skew = PreSyncScenario.drawSkew(&random)
            if devices[index].skew > PreSyncScenario.allowance { figures.farAhead += 1 }
            if random.chance(0.5) { try restart(index) }
            PreSyncScenario.trace("round \(round): device \(index)'s clock \(Int(devices[index].skew)) s off")
        }
        devices[PreSyncScenario.office].skew = random.chance(0.5) ? 0 : Double(random.below(241) - 120)
        let hot = Array(random.shuffled(records).prefix(3 + random.below(2)))
        var turns = Array(repeating: PreSyncScenario.office, count: 2 + random.below(3))
        for index in PreSyncScenario.fieldDevices { turns += Array(repeating: index, count: 2 + random.below(4)) }
        for writer in random.shuffled(turns) {
            let store = devices[writer].store
            if writer != PreSyncScenario.office, random.chance(0.12), let issue = issues.isEmpty ? nil : random.pick(issues) {
                serial += 1
                let body = "Comment r\(round) by \(PreSyncScenario.name(of: writer)) #\(serial)"
                let comment = Comment(id: random.uuid(), issueID: issue, authorID: Crew.users[writer], body: body)
                _ = try await store.save(comment, now: devices[writer].now)
                comments.append((writer, comment.id, body))
                outcome.mutations += 1
                continue
            }
            let (entity, id) = random.chance(0.8) ? random.pick(hot) : random.pick(records)
            guard let fields = PreSyncScenario.editable[entity], var record = try store.record(entity, id: id),
                !record.sync.isDeleted
            else { continue }
            let field = random.pick(fields)
            serial += 1
            order += 1
            let value = PreSyncScenario.value(for: field, serial: serial, round: round, writer: writer)
            record[field] = value
            _ = try await store.save(record, now: devices[writer].now)
            PreSyncScenario.trace("\(PreSyncScenario.name(of: writer)) writes \(entity.rawValue)/\(id).\(field) = \(value) at version \(record.sync.version)")
            outcome.mutations += 1
            let how = writer == PreSyncScenario.office ? "office edit" : "offline edit"
            writes[.init(entity: entity, id: id, field: field), default: []].append(
                Write(writer: writer, value: value, order: order, how: how, skew: devices[writer].skew))
            if writer == PreSyncScenario.office {
                // Online and on time, the office sends at once; a write it holds back would reach the server
                // after the field devices' and no longer be concurrent with theirs.
                if !(await sendAll(writer, during: "round \(round): the office's edit")) {
                    outcome.stuck += 1
                    outcome.problems.append("round \(round): the office could not send its edit of \(entity.rawValue)/\(id).\(field)")
                }
            } else if random.chance(0.1) {
                try restart(writer)
            }
        }

        // Online: each field device reads copies, comes online (an import, during a sync or not, or only
        // a sync), then saves the copies with one field edited. A clock that ran far ahead is corrected
        // before it goes online, or after.
        for index in random.shuffled(PreSyncScenario.fieldDevices) {
            if devices[index].skew > PreSyncScenario.allowance, random.chance(0.3) { try correctClock(index) }
            // Copies of different records: two copies of one record at one version would be two screens
            // saving over each other, which the store rightly cannot tell from an edit.
            var copies: [HeldCopy] = []
            for _ in 0..<(1 + random.below(2)) {
                let (entity, id) = random.chance(0.8) ? random.pick(hot) : random.pick(records)
                if copies.contains(where: { $0.id == id }) { continue }
                let store = devices[index].store
                if random.chance(0.5), let typed = try PreSyncScenario.typedCopy(entity, id: id, in: store) {
                    copies.append(.typed(typed))
                } else if let record = try store.record(entity, id: id) {
                    copies.append(.record(record))
                }
            }
            let step = "round \(round): \(PreSyncScenario.name(of: index)) coming online"
            let mode = random.pick(GoingOnline.allCases)
            PreSyncScenario.trace("\(PreSyncScenario.name(of: index)) comes online: \(mode), clock \(Int(devices[index].skew)) s off, copies of "
                + copies.map { "\($0.entity.rawValue)/\($0.id)" }.joined(separator: ", "))
            switch mode {
            case .importThenSync, .importOnly:
                if let file = await download(index, name: "r\(round)") { _ = await importBundle(file, into: index, during: step) }
            case .importDuringSync:
                await importDuringSync(index, round: round, during: step)
            case .syncOnly:
                _ = await sync(index, during: step)
            }
            for copy in copies {
                guard let fields = PreSyncScenario.editable[copy.entity] else { continue }
                let field = random.pick(fields)
                serial += 1
                order += 1
                let value = PreSyncScenario.value(for: field, serial: serial, round: round, writer: index)
                let store = devices[index].store, now = devices[index].now
                switch copy {
                case .record(var record):
                    record[field] = value
                    _ = try await store.save(record, now: now)
                case .typed(let model):
                    try await PreSyncScenario.save(model, field: field, value: value, in: store, now: now)
                }
                PreSyncScenario.trace("\(PreSyncScenario.name(of: index)) saves its copy of \(copy.entity.rawValue)/\(copy.id) with \(field) = \(value)")
                outcome.mutations += 1
                figures.staleSaves += 1
                writes[.init(entity: copy.entity, id: copy.id, field: field), default: []].append(
                    Write(writer: index, value: value, order: order, how: "stale-copy save", skew: devices[index].skew))
            }
            if mode == .importThenSync { _ = await sync(index, during: step) }
        }

        // The clocks are put right (a restart now and then), and everyone syncs until nothing is left.
        for index in PreSyncScenario.fieldDevices where devices[index].skew > PreSyncScenario.allowance {
            try correctClock(index)
        }
        if !(await settle(during: "round \(round): the final syncs")) {
            outcome.stuck += 1
            outcome.problems.append("round \(round): the devices did not settle in \(PreSyncScenario.settleRounds) sync rounds")
        }
        try await check(round: round, start: start, writes: writes, comments: comments, marks: marks)
    }

    // MARK: Steps

    mutating func restart(_ index: Int) throws {
        PreSyncScenario.trace("\(PreSyncScenario.name(of: index)) restarts")
        try devices[index].restart()
        figures.restarts += 1
    }

    /// The device's date is set right (to within a minute of the real time), now and then with a restart.
    mutating func correctClock(_ index: Int) throws {
        devices[index].skew = random.chance(0.5) ? 0 : Double(random.below(121) - 60)
        PreSyncScenario.trace("\(PreSyncScenario.name(of: index))'s clock is corrected to \(Int(devices[index].skew)) s off")
        if random.chance(0.5) { try restart(index) }
    }

    /// One sync run of device `index`; a store error it throws counts as a crash of `step`.
    mutating func sync(_ index: Int, during step: String) async -> SyncReport? {
        do {
            let report = try await devices[index].engine.sync(now: devices[index].clock)
            PreSyncScenario.trace("\(PreSyncScenario.name(of: index)) syncs: \(Self.describe(report))")
            return report
        } catch {
            outcome.crashed(error, during: "\(step): \(PreSyncScenario.name(of: index))'s sync")
            return nil
        }
    }

    /// A sync report in a line, for the trace.
    static func describe(_ report: SyncReport) -> String {
        "pulled \(report.pulled), pushed \(report.pushed), rebased \(report.rebased), failed \(report.failed), "
            + "conflicts \(report.conflictsSurfaced), complete \(report.isComplete)"
            + (report.lastTransportError.map { ", \($0)" } ?? "") + (report.pause.map { ", paused: \($0)" } ?? "")
    }

    /// Syncs device `index` until nothing of it is pending (at most five runs).
    mutating func sendAll(_ index: Int, during step: String) async -> Bool {
        for _ in 0..<5 {
            guard await sync(index, during: step) != nil else { continue }
            if (try? devices[index].store.status().pendingChanges) == 0 { return true }
        }
        return false
    }

    /// Downloads the project bundle as device `index`, JSON or XML; nil (a crash) when that fails.
    mutating func download(_ index: Int, name: String) async -> URL? {
        let format: BundleFormat = random.chance(0.5) ? .json : .xml
        let file = folder.url.appendingPathComponent("bundle-\(index)-\(name).\(format.rawValue)")
        do {
            _ = try await devices[index].transport.downloadBundle(project: Crew.project, format: format, to: file)
            return file
        } catch {
            outcome.crashed(error, during: "\(name): \(PreSyncScenario.name(of: index))'s bundle download")
            return nil
        }
    }

    /// Imports `file` into device `index`'s database, as `Device.importBundle` does.
    mutating func importBundle(_ file: URL, into index: Int, during step: String) async -> Bool {
        figures.imports += 1
        switch await PreSyncScenario.importOffThread(file, into: devices[index].store) {
        case .success(let summary):
            PreSyncScenario.trace("\(PreSyncScenario.name(of: index)) imports \(file.lastPathComponent): \(summary.total)")
            return true
        case .failure(let error):
            outcome.crashed(error, during: "\(step): the import")
            return false
        }
    }

    /// Starts a sync of device `index`, imports the bundle while it runs (after a seeded pause of up to
    /// 20 ms, so the import lands at different points of the run), and waits for both.
    mutating func importDuringSync(_ index: Int, round: Int, during step: String) async {
        guard let file = await download(index, name: "r\(round)") else { return }
        figures.imports += 1
        figures.importsDuringSync += 1
        let engine = devices[index].engine, clock = devices[index].clock
        let syncing = Task { try await engine.sync(now: clock) }
        let pause = random.below(21)
        if pause > 0 { try? await Task.sleep(for: .milliseconds(pause)) }
        let imported = await PreSyncScenario.importOffThread(file, into: devices[index].store)
        switch imported {
        case .success(let summary): PreSyncScenario.trace("\(PreSyncScenario.name(of: index)) imports during a sync (after \(pause) ms): \(summary.total)")
        case .failure(let error): outcome.crashed(error, during: "\(step): the import during a sync")
        }
        switch await syncing.result {
        case .success(let report): PreSyncScenario.trace("\(PreSyncScenario.name(of: index))'s sync during the import: \(Self.describe(report))")
        case .failure(let error): outcome.crashed(error, during: "\(step): the sync during an import")
        }
    }

    /// Sync runs of every device, in a seeded order each round, until a whole round in which every run
    /// completed, nobody sent or was refused anything and nothing is pending on any device. False when
    /// `settleRounds` were not enough.
    mutating func settle(during step: String) async -> Bool {
        for _ in 0..<PreSyncScenario.settleRounds {
            var quiet = true
            for index in random.shuffled(devices.map(\.index)) {
                guard let report = await sync(index, during: step) else {
                    quiet = false
                    continue
                }
                let pending = (try? devices[index].store.status().pendingChanges) ?? 1
                if !report.isComplete || report.pushed + report.rebased + report.retried + report.failed > 0 || pending > 0 {
                    quiet = false
                }
            }
            if quiet { return true }
        }
        return false
    }

    // MARK: Checks

    mutating func check(
        round: Int, start: [String: ServerRecord], writes: [FieldKey: [Write]],
        comments: [(writer: Int, id: UUID, body: String)], marks: [Int: Int64]
    ) async throws {
        let final = try await PreSyncScenario.serverRecords(server)
        var conflicts: [OpenConflict] = []
        var accepted: Set<AcceptedValue> = []
        /// Records with a change still waiting, per device ("entity/id").
        var waiting: [Int: Set<String>] = [:]
        for device in devices {
            conflicts += try device.store.openConflicts().filter { $0.id > marks[device.index] ?? 0 }
            accepted.formUnion(await device.transport.accepted)
            waiting[device.index] = Set(try device.store.mutations().filter { $0.status != .done }.map {
                "\($0.entity.rawValue)/\($0.recordID)"
            })
        }
        let here = "round \(round)"
        /// Values that did not stand because their change is still waiting: told after the stuck mutations.
        var waitingValues: [String] = []

        for (key, list) in writes.sorted(by: { $0.key < $1.key }) {
            let record = "\(key.entity.rawValue)/\(key.id)"
            let place = "\(here): \(record).\(key.field) (\(policy[key.entity]))"
            guard let stored = final[record], !stored.isDeleted else {
                outcome.lost += 1
                outcome.problems.append("\(place): the record is \(final[record] == nil ? "missing" : "deleted") on the server")
                continue
            }
            let standing = stored.fields[key.field] ?? .null
            var last: [Int: Write] = [:]
            for write in list where write.order > (last[write.writer]?.order ?? 0) { last[write.writer] = write }
            for (writer, write) in last.sorted(by: { $0.key < $1.key }) where write.value != standing {
                figures.produced += 1
                let found = conflicts.contains {
                    $0.entity == key.entity && $0.recordID == key.id && $0.field == key.field && $0.losingValue == write.value
                }
                if found {
                    figures.surfaced += 1
                    continue
                }
                let winner = list.first { $0.value == standing }.map { " (\(PreSyncScenario.name(of: $0.writer))'s \($0.described))" } ?? ""
                let what = "\(place): \(PreSyncScenario.name(of: writer))'s \(write.described) \(write.value) lost to \(standing)\(winner)"
                if waiting[writer]?.contains(record) == true {
                    waitingValues.append("\(what); its change is still waiting on the device (counted as stuck)")
                } else if accepted.contains(AcceptedValue(entity: key.entity, id: key.id, field: key.field, value: write.value)) {
                    outcome.overwritten += 1
                    outcome.problems.append("\(what): the server had accepted it, and no conflicts table holds it")
                } else {
                    outcome.lost += 1
                    outcome.problems.append("\(what): it never reached the server, and no conflicts table holds it")
                }
            }
            let before = start[record]?.fields[key.field] ?? .null
            if standing != before, !list.contains(where: { $0.value == standing }) {
                outcome.overwritten += 1
                outcome.problems.append("\(place) is \(standing), which nobody wrote this round (it was \(before)): an old value sent back")
            }
        }
        for (entity, id) in records {
            let record = "\(entity.rawValue)/\(id)"
            guard let before = start[record], let after = final[record] else { continue }
            for field in entity.description.fields.map(\.name)
            where writes[.init(entity: entity, id: id, field: field)] == nil && before.fields[field] != after.fields[field] {
                outcome.overwritten += 1
                outcome.problems.append(
                    "\(here): \(record).\(field) went from \(before.fields[field] ?? .null) to \(after.fields[field] ?? .null), "
                        + "though nobody wrote it this round")
            }
        }
        for comment in comments {
            let record = "\(EntityType.comment.rawValue)/\(comment.id)"
            if let stored = final[record], !stored.isDeleted, stored.fields["body"] == .text(comment.body) { continue }
            let what = "\(here): \(PreSyncScenario.name(of: comment.writer))'s comment \(comment.id) is not on the server"
            if waiting[comment.writer]?.contains(record) == true {
                waitingValues.append("\(what); it is still waiting on the device (counted as stuck)")
            } else {
                outcome.lost += 1
                outcome.problems.append(what)
            }
        }

        for device in devices {
            let name = PreSyncScenario.name(of: device.index)
            let unfinished = try device.store.mutations().filter { $0.status != .done }
            let blocked = try device.store.blockedMutations()
            let blockers = Dictionary(blocked.map { ($0.mutation.sequence, $0.blockedBy) }, uniquingKeysWith: { first, _ in first })
            var left = unfinished
            for entry in blocked where !unfinished.contains(where: { $0.sequence == entry.mutation.sequence }) { left.append(entry.mutation) }
            for mutation in left where countedStuck.insert("\(device.index)/\(mutation.sequence)").inserted {
                outcome.stuck += 1
                outcome.problems.append(
                    "\(here): \(name): \(mutation.operation) \(mutation.entity.rawValue)/\(mutation.recordID) left \(mutation.status)"
                        + (mutation.lastError.map { " (\($0))" } ?? "")
                        + (blockers[mutation.sequence].map { " blocked by \($0)" } ?? ""))
            }
            let result = try await compare(device.store, with: server.transport(for: device.index))
            outcome.diverged += result.mismatches.count
            outcome.problems += result.mismatches.map { "\(here): \(name): \($0)" }
        }
        outcome.problems += waitingValues
    }

    /// Every idempotency key the server applied must be one a device holds as done: anything else was
    /// applied twice, or by a change the device no longer knows it sent.
    mutating func checkDuplicates() throws {
        let state = try ServerState.read(databasePath: server.databasePath)
        var done: Set<String> = []
        for device in devices {
            for key in try device.store.finishedMutationKeys() { done.insert(key.uuidString.lowercased()) }
        }
        for (key, record) in state.appliedKeys.sorted(by: { $0.key < $1.key }) where !done.contains(key) {
            outcome.duplicated += 1
            outcome.problems.append("the server applied key \(key) (\(record)), which no device holds as done")
        }
    }
}

/// One field value a push carried that the server answered `applied`.
struct AcceptedValue: Hashable, Sendable {
    var entity: EntityType
    var id: UUID
    var field: String
    var value: FieldValue
}

/// A fault-free `HTTPTransport` that remembers every field value the server accepted, so a value that
/// did not stand can be told apart: overwritten (the server had it) or lost (it never got there). It
/// passes on the policy the server names, so the engine's check that both settle conflicts alike runs
/// as it does in an app.
actor AcceptanceRecorder: ForwardingTransport {
    let base: HTTPTransport
    private(set) var accepted: Set<AcceptedValue> = []

    init(base: HTTPTransport) {
        self.base = base
    }

    func push(_ request: PushRequest) async throws(TransportError) -> PushResponse {
        let response = try await base.push(request)
        let sent = Dictionary(request.mutations.map { ($0.idempotencyKey, $0) }, uniquingKeysWith: { first, _ in first })
        for result in response.results {
            guard case .applied = result.outcome.unwrapped, let mutation = sent[result.idempotencyKey] else { continue }
            for (field, value) in mutation.fields {
                accepted.insert(AcceptedValue(entity: mutation.entity, id: mutation.recordID, field: field, value: value))
            }
        }
        return response
    }
}

/// What the scenario did over the whole run, for the report's note.
final class PreSyncTally: Sendable {
    static let shared = PreSyncTally()
    private let totals = Mutex(Figures())

    struct Figures: Sendable, Codable {
        var seeds = 0
        /// Seeds whose app overrides some entity's strategy.
        var overridden = 0
        var imports = 0
        var importsDuringSync = 0
        var staleSaves = 0
        var restarts = 0
        /// Device-rounds whose clock ran beyond the server's allowance ahead.
        var farAhead = 0
        /// Values that did not stand, and those of them found in a conflicts table.
        var produced = 0
        var surfaced = 0

        static func + (a: Figures, b: Figures) -> Figures {
            Figures(
                seeds: a.seeds + b.seeds, overridden: a.overridden + b.overridden, imports: a.imports + b.imports,
                importsDuringSync: a.importsDuringSync + b.importsDuringSync, staleSaves: a.staleSaves + b.staleSaves,
                restarts: a.restarts + b.restarts, farAhead: a.farAhead + b.farAhead, produced: a.produced + b.produced,
                surfaced: a.surfaced + b.surfaced)
        }
    }

    func add(_ figures: Figures) { totals.withLock { $0 = $0 + figures } }

    var figures: Figures { totals.withLock { $0 } }
}

/// One field of one record.
struct FieldKey: Hashable, Comparable {
    var entity: EntityType
    var id: UUID
    var field: String

    static func < (a: FieldKey, b: FieldKey) -> Bool {
        (a.entity.rawValue, a.id.uuidString, a.field) < (b.entity.rawValue, b.id.uuidString, b.field)
    }
}

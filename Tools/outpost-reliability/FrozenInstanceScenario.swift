import Foundation
import Logging
import OutpostFieldService
import OutpostModels
import OutpostSchema
import OutpostStore
import OutpostSync
import OutpostTesting
import OutpostWire
import PostgresNIO

/// Scenario `frozen-instance`: three `outpost serve` instances on one PostgreSQL database and media
/// folder, three devices each syncing through its own instance. In every round one instance is frozen
/// (SIGSTOP) a few milliseconds into its device's push, while the other devices keep writing and
/// syncing through theirs for a few seconds, and is then thawed. Afterwards every device settles:
/// nothing is left unsent, every record a device wrote is on the server as each device holds it, the
/// database applied no key no device holds as done, and no sync through a healthy instance hung.
///
/// Needs `OUTPOST_TEST_POSTGRES_URL` (a cluster it may create databases on): `make reliability` and
/// `make test` start a throwaway one (`scripts/with-test-postgres.sh`).
enum FrozenInstanceScenario {
    static let scenario = Scenario(
        name: "frozen-instance",
        summary: "three outpost serve instances on one PostgreSQL, one frozen (SIGSTOP) mid-push each round and thawed",
        quickSeeds: 1, fullSeeds: 8
    ) { seed, quick in await run(seed: seed, quick: quick) }

    /// The bounds the instances run with, short so a seed takes seconds: a push meeting the frozen
    /// writer's lock waits `lockWait`, and the database ends the frozen session after `idleLimit`.
    static let lockWait = 2, idleLimit = 4
    /// A sync through a healthy instance that takes longer than this counts as a hang.
    static let hangLimit: Duration = .seconds(90)

    static func run(seed: UInt64, quick: Bool) async -> SeedOutcome {
        var outcome = SeedOutcome()
        let base: String
        let folder: ScratchFolder
        let database: (name: String, url: String)
        do {
            base = try ReliabilityPostgres.baseURL()
            folder = try ScratchFolder("frozen-instance")
            database = try await ReliabilityPostgres.createDatabase(on: base, for: "frozen")
        } catch {
            outcome.crashed(error, during: "setup")
            return outcome
        }
        var instances: [ServeChild] = []
        do {
            let seedFile = folder.path("seed.json"), media = folder.path("media")
            try Crew.seedJSON.write(to: URL(fileURLWithPath: seedFile))
            for _ in 0..<3 {
                // One at a time: the first migrates the schema and loads the seed.
                instances.append(try ServeChild.start([
                    "--postgres", database.url, "--media", media, "--seed", seedFile,
                    "--database-lock-wait", "\(lockWait)", "--idle-transaction-timeout", "\(idleLimit)",
                ]))
            }
            try await play(seed: seed, quick: quick, folder: folder, instances: instances, database: database.url, outcome: &outcome)
        } catch {
            outcome.crashed(error, during: "the scenario")
        }
        for instance in instances {
            instance.child.thaw()
            instance.child.process.terminate()
            _ = await instance.child.exit()
        }
        await ReliabilityPostgres.dropDatabase(database.name, on: base)
        folder.remove()
        return outcome
    }

    private struct Phone {
        let store: LocalStore
        let engine: SyncEngine
        let transport: HTTPTransport
    }

    private static func play(
        seed: UInt64, quick: Bool, folder: ScratchFolder, instances: [ServeChild], database: String, outcome: inout SeedOutcome
    ) async throws {
        var phones: [Phone] = []
        for index in 0..<3 {
            let transport = HTTPTransport(
                configuration: .init(
                    baseURL: URL(string: instances[index].url)!, schemaVersion: LocalSchema.latestVersion,
                    requestTimeout: .seconds(5)),
                token: Crew.token(of: index))
            let store = try LocalStore.open(at: folder.path("device-\(index).sqlite"))
            phones.append(Phone(store: store, engine: SyncEngine(store: store, transport: transport), transport: transport))
        }
        var random = SeededGenerator(seed: seed ^ 0xF0F0_5E1D)
        var workload = Workload(seed: seed)
        let rounds = quick ? 2 : 5
        for _ in 0..<rounds {
            for _ in 0..<8 {
                for (index, phone) in phones.enumerated() {
                    try await workload.step(device: index, store: phone.store, now: { Date() })
                }
            }
            // Freeze one instance a few milliseconds into its device's push.
            let frozen = random.below(3)
            let frozenPhone = phones[frozen]
            let caught = Task { try? await frozenPhone.engine.sync() }
            try await Task.sleep(for: .milliseconds(1 + random.below(40)))
            instances[frozen].child.freeze()
            outcome.kills += 1
            // The others go on through their instances for longer than the lock wait and the idle limit.
            let until = ContinuousClock.now + .seconds(idleLimit + 2)
            while ContinuousClock.now < until {
                for (index, phone) in phones.enumerated() where index != frozen {
                    try await workload.step(device: index, store: phone.store, now: { Date() })
                    let started = ContinuousClock.now
                    _ = try? await phone.engine.sync()
                    if ContinuousClock.now - started > hangLimit {
                        outcome.crashes += 1
                        outcome.problems.append("a sync through healthy instance \(index) took \(ContinuousClock.now - started)")
                    }
                }
            }
            instances[frozen].child.thaw()
            _ = await caught.value
        }
        // Settle: every device syncs until nothing is left, twice over so each sees the others' last changes.
        for _ in 0..<2 {
            for (index, phone) in phones.enumerated() {
                var settled = false
                for _ in 0..<30 {
                    if let report = try? await phone.engine.sync(), report.isComplete, try phone.store.status().pendingChanges == 0 {
                        settled = true
                        break
                    }
                    try await Task.sleep(for: .milliseconds(500))
                }
                if !settled {
                    outcome.stuck += 1
                    outcome.problems.append("device \(index) did not settle")
                }
            }
        }
        outcome.mutations = workload.writes
        try await check(phones: phones, database: database, outcome: &outcome)
    }

    private static func check(phones: [Phone], database: String, outcome: inout SeedOutcome) async throws {
        var done: Set<String> = []
        for (index, phone) in phones.enumerated() {
            for key in try phone.store.finishedMutationKeys() { done.insert(key.uuidString.lowercased()) }
            for mutation in try phone.store.mutations() {
                if mutation.status != .done {
                    outcome.stuck += 1
                    outcome.problems.append(
                        "device \(index): \(mutation.operation) \(mutation.entity.rawValue)/\(mutation.recordID) left \(mutation.status)")
                }
            }
            let comparison = try await compare(phone.store, with: phone.transport)
            outcome.diverged += comparison.mismatches.count
            outcome.problems += comparison.mismatches.map { "device \(index): \($0)" }
            // Every record this device wrote is on the server (the comparison walks what the server has).
            let onServer = try await serverRecords(through: phone.transport)
            let onServerIDs = Set(onServer.map { $0.uuidString.lowercased() })
            for record in try writtenRecords(devicePath: phone.store.path).sorted()
            where !onServerIDs.contains(String(record.split(separator: "/").last ?? "")) {
                outcome.lost += 1
                outcome.problems.append("device \(index): \(record) is not on the server")
            }
        }
        var held: [String: String] = [:]
        for (index, phone) in phones.enumerated() {
            for mutation in try phone.store.mutations() {
                held[mutation.recordID.uuidString.lowercased(), default: ""] +=
                    " device \(index) \(mutation.operation) \(mutation.status) key \(mutation.idempotencyKey.uuidString.lowercased().prefix(13)) attempts \(mutation.attempts);"
            }
        }
        for (key, record) in try await appliedKeys(in: database) where !done.contains(key) {
            outcome.duplicated += 1
            outcome.problems.append(
                "the database applied key \(key) (\(record)), which no device holds as done; the devices hold:\(held[String(record.split(separator: "/").last ?? "")] ?? " nothing")")
        }
    }

    /// The ids of every record the server holds for the transport's member.
    private static func serverRecords(through transport: HTTPTransport) async throws -> Set<UUID> {
        var ids: Set<UUID> = []
        var cursor: String?
        while true {
            let page = try await transport.pull(PullRequest(cursor: cursor, limit: 500))
            for record in page.changes { ids.insert(record.recordID) }
            cursor = page.nextCursor
            if !page.hasMore { return ids }
        }
    }

    // MARK: - The database

    /// Every key the database applied (answered `applied`; a conflict's answer is kept too, for its
    /// replay), with its record as `entity/id`.
    private static func appliedKeys(in database: String) async throws -> [(key: String, record: String)] {
        var keys: [(key: String, record: String)] = []
        for (key, entity, id, outcome) in try await ReliabilityPostgres.rows(
            "SELECT idempotency_key, entity, record_id, outcome FROM applied_mutations", of: (String, String, String, String).self,
            on: database)
        {
            let object = try JSONSerialization.jsonObject(with: Data(outcome.utf8)) as? [String: Any]
            guard object?["status"] as? String == "applied" else { continue }
            keys.append((key.lowercased(), "\(entity)/\(id.lowercased())"))
        }
        return keys
    }
}

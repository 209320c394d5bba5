import Foundation
import OutpostConflicts
import OutpostFieldService
import OutpostStore
import OutpostSync
import OutpostTesting

/// One simulated device: its own store file, a sync engine, and the fault wrapper its requests go through.
struct SimulatedDevice: Sendable {
    let index: Int
    let store: LocalStore
    let engine: SyncEngine
    let transport: FaultyTransport
}

/// Several devices against one server, on one virtual clock.
struct Fleet: Sendable {
    let devices: [SimulatedDevice]
    let clock: VirtualClock

    /// Retries due almost at once (the clock moves 10 ms per sync run), and never given up on: a fault
    /// the harness injects must delay a change, never fail it, so any failed mutation is a finding.
    static let retries = RetryPolicy(
        initialDelay: .milliseconds(1), maximumDelay: .milliseconds(8), retryLimit: 1_000_000,
        maximumRetryAfter: .milliseconds(8))

    /// Opens `count` devices in `folder`, crew members 0…count−1, their requests going through `plan`.
    static func open(
        count: Int, in folder: ScratchFolder, server: LoopbackServer, plan: FaultPlan, seed: UInt64, clock: VirtualClock,
        policy: ConflictPolicy = ConflictPolicy()
    ) throws -> Fleet {
        try open(count: count, in: folder, transport: server.transport(for:), plan: plan, seed: seed, clock: clock, policy: policy)
    }

    /// Opens `count` devices whose requests go to `transport(index)` through `plan`.
    static func open(
        count: Int, in folder: ScratchFolder, transport base: (Int) -> HTTPTransport, plan: FaultPlan, seed: UInt64,
        clock: VirtualClock, policy: ConflictPolicy = ConflictPolicy()
    ) throws -> Fleet {
        let devices = try (0..<count).map { index in
            let store = try DeviceTemplate.openStore(at: folder.path("device-\(index).sqlite"))
            let transport = FaultyTransport(
                base: base(index), plan: plan, seed: seed &* 0x9E37_79B9 &+ UInt64(index) &+ 1)
            let engine = SyncEngine(
                store: store, transport: transport, policy: policy, retryPolicy: retries,
                random: SeededGenerator(seed: seed ^ UInt64(index + 1) << 32), batchSize: 4, pullLimit: 5)
            return SimulatedDevice(index: index, store: store, engine: engine, transport: transport)
        }
        return Fleet(devices: devices, clock: clock)
    }

    /// Sync runs, device after device (in a seeded random order each round when `shuffled`), until a
    /// whole round where every run completed and nobody sent anything: then every device holds the
    /// server's latest state. Returns false when `maximumRounds` were not enough.
    /// `onReport` hears each run's report.
    func settle(
        shuffled: Bool, order: inout SeededGenerator, maximumRounds: Int = 400, onReport: (SyncReport) -> Void = { _ in }
    ) async throws -> Bool {
        let clock = self.clock
        for _ in 0..<maximumRounds {
            var quiet = true
            for device in shuffled ? order.shuffled(devices) : devices {
                clock.advance(by: 10)
                let report = try await device.engine.sync(now: { clock.now })
                onReport(report)
                if !report.isComplete || report.pushed + report.rebased + report.retried + report.failed > 0 {
                    quiet = false
                }
            }
            if quiet { return true }
        }
        return false
    }

    /// Device `index` syncs, run after run, until a run completes with nothing sent or retried: every
    /// change of its reached the server, and it holds the server's latest state. Returns false when
    /// `maximumRuns` were not enough.
    func syncToCompletion(_ index: Int, maximumRuns: Int = 400) async throws -> Bool {
        let clock = self.clock, device = devices[index]
        for _ in 0..<maximumRuns {
            clock.advance(by: 10)
            let report = try await device.engine.sync(now: { clock.now })
            PreSyncScenario.trace(
                "device \(index) run: pulled \(report.pulled), pushed \(report.pushed), rebased \(report.rebased), "
                    + "retried \(report.retried), surfaced \(report.conflictsSurfaced)\(report.lastTransportError.map { ", \($0)" } ?? "")")
            if report.isComplete && report.pushed + report.rebased + report.retried + report.failed == 0 { return true }
        }
        return false
    }

    /// Device `index` syncs once with no fault but its push's answer lost (`FaultyTransport.losePushAnswers`):
    /// the server takes its changes, and the device does not learn it until its next run asks. Returns
    /// whether an answer was lost (a run with nothing the server took whole loses none).
    @discardableResult
    func syncLosingThePushAnswer(_ index: Int) async throws -> Bool {
        let clock = self.clock, device = devices[index]
        let before = await device.transport.pushAnswersLost
        await device.transport.losePushAnswers(true)
        clock.advance(by: 10)
        do {
            _ = try await device.engine.sync(now: { clock.now })
        } catch {
            await device.transport.losePushAnswers(false)
            throw error
        }
        await device.transport.losePushAnswers(false)
        return await device.transport.pushAnswersLost > before
    }

    /// Faults played across the fleet.
    func faultsInjected() async -> Int {
        var total = 0
        for device in devices { total += await device.transport.injectedCount }
        return total
    }

    /// What is left on the devices: mutations not done (pending, in flight or failed), with why.
    func unfinished() throws -> [String] {
        var problems: [String] = []
        for device in devices {
            for mutation in try device.store.mutations() where mutation.status != .done {
                problems.append(
                    "device \(device.index): \(mutation.operation) \(mutation.entity.rawValue)/\(mutation.recordID) left \(mutation.status)"
                        + (mutation.lastError.map { " (\($0))" } ?? ""))
            }
        }
        return problems
    }

    /// Idempotency keys of every mutation the devices hold as done (finished: out of the queue).
    func doneKeys() throws -> Set<String> {
        var keys: Set<String> = []
        for device in devices {
            for key in try device.store.finishedMutationKeys() { keys.insert(key.uuidString.lowercased()) }
        }
        return keys
    }

    /// Each device against the server as its member sees it.
    func divergences(server: LoopbackServer) async throws -> [String] {
        try await divergences(transport: server.transport(for:))
    }

    /// Each device against the server `transport(index)` reaches, as its member sees it.
    func divergences(transport: (Int) -> HTTPTransport) async throws -> [String] {
        var problems: [String] = []
        for device in devices {
            let result = try await compare(device.store, with: transport(device.index))
            problems += result.mismatches.map { "device \(device.index): \($0)" }
        }
        return problems
    }
}

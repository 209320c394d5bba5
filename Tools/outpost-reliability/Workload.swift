import Foundation
import OutpostFieldService
import OutpostModels
import OutpostSchema
import OutpostStore
import OutpostTesting

/// A seeded stream of field work for several devices on the shared project: issues created, edited
/// field by field (title, details, status, priority) and now and then deleted, comments, daily logs
/// created and edited, and each device's own estimate graph (opportunity → project → scope → items,
/// fees). What it writes depends only on the seed and on what the device holds, so two runs of the
/// same seed whose devices hold the same records write the same things.
///
/// Shared records are only edited in ways whose outcome the conflict policy fixes whatever order the
/// devices sync in (field merge by clock, append-only creates); server-wins money and client-wins time
/// entries are only ever written by the one device that owns them.
struct Workload {
    private var random: SeededGenerator
    /// Issues on the shared project, in creation order.
    private(set) var sharedIssues: [UUID] = []
    /// Daily logs on the shared project, in creation order.
    private(set) var dailyLogs: [UUID] = []
    private var estimates: [Int: Estimate] = [:]
    /// Writes made so far.
    private(set) var writes = 0

    private struct Estimate {
        var project: UUID
        var scope: UUID
        var items: [UUID] = []
        var fees: [UUID] = []
    }

    static let statuses: [Issue.Status] = [.open, .inProgress, .resolved, .closed]
    static let priorities: [Issue.Priority] = [.low, .medium, .high, .critical]

    init(seed: UInt64) {
        random = SeededGenerator(seed: seed ^ 0x3C6E_F372_FE94_F82B)
    }

    /// One piece of work by device `device` (crew member `device`), stamped by `now`.
    mutating func step(device: Int, store: LocalStore, now: @Sendable () -> Date) async throws {
        let user = Crew.users[device]
        let roll = random.below(100)
        let number = random.below(1_000_000)
        switch roll {
        case 0..<15:
            try await createIssue(store: store, number: number, now: now)
        case 15..<45:
            try await editIssue(store: store, number: number, now: now)
        case 45..<50:
            guard !sharedIssues.isEmpty else { return }
            let id = random.pick(sharedIssues)
            guard try store.fetch(Issue.self, id: id)?.sync.isDeleted == false else { return }
            _ = try await store.delete(.issue, id: id, now: now())
            writes += 1
        case 50..<60:
            guard !sharedIssues.isEmpty else { return }
            let id = random.pick(sharedIssues)
            guard try store.fetch(Issue.self, id: id)?.sync.isDeleted == false else { return }
            _ = try await store.save(Comment(id: random.uuid(), issueID: id, authorID: user, body: "Note \(number)"), now: now())
            writes += 1
        case 60..<67:
            let log = DailyLog(
                id: random.uuid(), projectID: Crew.project, authorID: user, day: "2026-11-\(10 + number % 18)",
                notes: "Started \(number)")
            _ = try await store.save(log, now: now())
            dailyLogs.append(log.id)
            writes += 1
        case 67..<80:
            guard !dailyLogs.isEmpty else { return }
            let id = random.pick(dailyLogs)
            let field = random.below(4)
            guard var log = try store.fetch(DailyLog.self, id: id) else { return }
            switch field {
            case 0: log.notes = "Notes \(number)"
            case 1: log.weather = "Weather \(number)"
            case 2: log.hours = Double(number % 80) / 2
            default: log.crewSize = number % 9
            }
            _ = try await store.save(log, now: now())
            writes += 1
        default:
            try await estimateStep(device: device, store: store, number: number, now: now)
        }
    }

    /// Device `device` creates an issue on the shared project (the convergence scenario's setup uses it too).
    mutating func createIssue(store: LocalStore, number: Int, now: @Sendable () -> Date) async throws {
        let issue = Issue(
            id: random.uuid(), projectID: Crew.project, title: "Issue \(number)", details: "Found on round \(writes)",
            priority: random.pick(Self.priorities))
        _ = try await store.save(issue, now: now())
        sharedIssues.append(issue.id)
        writes += 1
    }

    private mutating func editIssue(store: LocalStore, number: Int, now: @Sendable () -> Date) async throws {
        guard !sharedIssues.isEmpty else { return }
        let id = random.pick(sharedIssues)
        let field = random.below(4)
        let status = random.pick(Self.statuses), priority = random.pick(Self.priorities)
        // A deleted issue is left alone: a device that never held it has no copy (a pulled tombstone
        // carries no contents), so whether one is there depends on when this device last synced, and
        // the faults scenario needs the same writes whatever the network did.
        guard var issue = try store.fetch(Issue.self, id: id), !issue.sync.isDeleted else { return }
        switch field {
        case 0: issue.title = "Title \(number)"
        case 1: issue.details = "Details \(number)"
        case 2: issue.status = status
        default: issue.priority = priority
        }
        _ = try await store.save(issue, now: now())
        writes += 1
    }

    private mutating func estimateStep(device: Int, store: LocalStore, number: Int, now: @Sendable () -> Date) async throws {
        guard var estimate = estimates[device] else {
            let opportunity = Opportunity(id: random.uuid(), name: "Lead \(number)", customerName: "Customer \(device)")
            let project = Project(id: random.uuid(), opportunityID: opportunity.id, name: "Remodel \(number)")
            let scope = Scope(id: random.uuid(), projectID: project.id, name: "Scope \(number)")
            _ = try await store.save(opportunity, now: now())
            _ = try await store.save(project, now: now())
            _ = try await store.save(scope, now: now())
            writes += 3
            estimates[device] = Estimate(project: project.id, scope: scope.id)
            return
        }
        let choice = random.below(4)
        let itemID = random.uuid(), feeID = random.uuid()
        switch choice {
        case 0:
            let item = ScopeItem(
                id: itemID, scopeID: estimate.scope, name: "Item \(number)", quantity: Double(number % 40 + 1),
                unit: "m2", unitPriceCents: Int64(number % 9_000 + 100))
            _ = try await store.save(item, now: now())
            estimate.items.append(item.id)
        case 1:
            guard !estimate.items.isEmpty, var item = try store.fetch(ScopeItem.self, id: random.pick(estimate.items)) else { return }
            if number % 2 == 0 { item.quantity = Double(number % 50 + 1) } else { item.unitPriceCents = Int64(number % 12_000 + 50) }
            _ = try await store.save(item, now: now())
        case 2:
            let fee = Fee(id: feeID, projectID: estimate.project, name: "Fee \(number)", amountCents: Int64(number % 50_000))
            _ = try await store.save(fee, now: now())
            estimate.fees.append(fee.id)
        default:
            guard !estimate.fees.isEmpty, var fee = try store.fetch(Fee.self, id: random.pick(estimate.fees)) else { return }
            fee.amountCents = Int64(number % 70_000)
            _ = try await store.save(fee, now: now())
        }
        estimates[device] = estimate
        writes += 1
    }
}

import Foundation
import NIOConcurrencyHelpers

/// The database work under way on this instance, which `/metrics` reports: connections in use (how
/// much of the pool a load takes), pushes in progress per project (each waits for or holds the
/// writers' lock, so a project whose count stays up is one whose crews are stuck behind it), and how
/// long each write waited for that lock (SQLite's one writer, PostgreSQL's advisory lock), handed to
/// `onLockWait` as it happens.
final class DatabaseActivity: Sendable {
    private struct State {
        var connectionsInUse = 0
        var pushes: [UUID: Int] = [:]
    }

    private let state = NIOLockedValueBox(State())
    private let onLockWait: @Sendable (Duration) -> Void

    init(onLockWait: @escaping @Sendable (Duration) -> Void = { _ in }) {
        self.onLockWait = onLockWait
    }

    func connectionTaken() { state.withLockedValue { $0.connectionsInUse += 1 } }
    func connectionReturned() { state.withLockedValue { $0.connectionsInUse -= 1 } }

    /// A push touching `projects` has begun (`true`) or ended.
    func push(into projects: Set<UUID>, begun: Bool) {
        state.withLockedValue { state in
            for project in projects {
                let count = state.pushes[project, default: 0] + (begun ? 1 : -1)
                // Forgotten at 0: a push names whatever project ids its caller sends, and an entry kept
                // for each made every id ever named a series of /metrics for good (an attack named 50,000
                // and a scrape took minutes).
                state.pushes[project] = count == 0 ? nil : count
            }
        }
    }

    func lockWaited(_ duration: Duration) { onLockWait(duration) }

    var connectionsInUse: Int { state.withLockedValue { $0.connectionsInUse } }
    /// Pushes in progress by project, for the projects with one under way: the label set is bounded by
    /// the pushes running at once, not by every id a push ever named.
    var pushesByProject: [UUID: Int] { state.withLockedValue { $0.pushes } }
}

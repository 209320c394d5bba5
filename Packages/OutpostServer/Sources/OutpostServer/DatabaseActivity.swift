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
            for project in projects { state.pushes[project, default: 0] += begun ? 1 : -1 }
        }
    }

    func lockWaited(_ duration: Duration) { onLockWait(duration) }

    var connectionsInUse: Int { state.withLockedValue { $0.connectionsInUse } }
    /// Pushes in progress by project, for every project pushed to on this instance (0 once they end, so
    /// a scrape sees the gauge come down; the label set is bounded by the projects).
    var pushesByProject: [UUID: Int] { state.withLockedValue { $0.pushes } }
}

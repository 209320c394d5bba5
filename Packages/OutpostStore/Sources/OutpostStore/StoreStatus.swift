import Foundation
import GRDB

/// What a sync status bar shows, read from the store alone.
public struct StoreStatus: Sendable, Hashable, Codable {
    /// Local changes the server has not acknowledged yet.
    public let pendingChanges: Int
    /// Changes the server refused for good or that ran out of retries.
    public let failedChanges: Int
    /// Conflicts waiting for the user's choice.
    public let openConflicts: Int
    /// When a sync last completed, if ever.
    public let lastSuccessfulSync: Date?
    /// Original files of photos and voice notes not yet uploaded.
    public let pendingMediaUploads: Int
    /// Set when the server refused this device's changes because its clock runs more than 5 minutes
    /// ahead of the server's, and stamping them again did not help: the device's date and time are
    /// wrong. The changes wait, and go once it is right; cleared by the next complete sync.
    public let clockWarning: String?

    static func read(_ db: Database) throws -> StoreStatus {
        let pending = try Int.fetchOne(db, sql: "SELECT count(*) FROM mutation_queue WHERE status IN ('pending', 'inFlight')") ?? 0
        let lastSync = try String.fetchOne(db, sql: "SELECT value FROM sync_state WHERE key = 'last_successful_sync'")
            .flatMap(Int64.init).map(Date.init(storageMilliseconds:))
        return StoreStatus(
            pendingChanges: pending,
            failedChanges: try MutationQueue.count(status: .failed, in: db),
            openConflicts: try Int.fetchOne(db, sql: "SELECT count(*) FROM conflicts WHERE status = 'open'") ?? 0,
            lastSuccessfulSync: lastSync,
            pendingMediaUploads: try Int.fetchOne(db, sql: "SELECT count(*) FROM media_uploads WHERE status = 'pending'") ?? 0,
            clockWarning: try String.fetchOne(db, sql: "SELECT value FROM sync_state WHERE key = 'clock_warning'"))
    }
}

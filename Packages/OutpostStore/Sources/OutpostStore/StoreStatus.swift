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
    /// Projects the server said this device's user was taken off (`PullResponse.leftProjects`). Their
    /// records stay on the device, and changes to them the server has not taken stay in the queue
    /// (failed, as the server refuses them) for the user to hand over: `LocalStore.unsentChanges()`.
    public let leftProjects: [UUID]
    /// Pulled records this app version could not take in, kept aside (`LocalStore.quarantinedRecords()`
    /// says which and why): the user is told rather than left with a silent gap.
    public let quarantinedRecords: Int

    static func read(_ db: Database) throws -> StoreStatus {
        // Not `IN ('pending', 'inFlight')`: a status no build writes reads as pending too (see
        // `MutationQueue.mutation(from:)`), and the next run sends it.
        let pending = try Int.fetchOne(db, sql: "SELECT count(*) FROM mutation_queue WHERE status NOT IN ('done', 'failed')") ?? 0
        let lastSync = try String.fetchOne(db, sql: "SELECT value FROM sync_state WHERE key = 'last_successful_sync'")
            .flatMap(Int64.init).map(Date.init(storageMilliseconds:))
        return StoreStatus(
            pendingChanges: pending,
            failedChanges: try MutationQueue.count(status: .failed, in: db),
            openConflicts: try Int.fetchOne(db, sql: "SELECT count(*) FROM conflicts WHERE status = 'open'") ?? 0,
            lastSuccessfulSync: lastSync,
            pendingMediaUploads: try Int.fetchOne(db, sql: "SELECT count(*) FROM media_uploads WHERE status = 'pending'") ?? 0,
            clockWarning: try String.fetchOne(db, sql: "SELECT value FROM sync_state WHERE key = 'clock_warning'"),
            leftProjects: try LeftProjects.all(in: db),
            quarantinedRecords: try Quarantine.count(in: db))
    }
}

/// Projects the user was taken off, one `sync_state` key each (`left_project:` and the id), so no
/// schema version is needed for them.
enum LeftProjects {
    private static let prefix = "left_project:"

    static func remember(_ project: UUID, at now: Date, in db: Database) throws {
        try db.execute(
            sql: "INSERT OR IGNORE INTO sync_state (key, value) VALUES (?, ?)",
            arguments: [prefix + project.storageText, String(now.storageMilliseconds)])
    }

    static func forget(_ project: UUID, in db: Database) throws {
        try db.execute(sql: "DELETE FROM sync_state WHERE key = ?", arguments: [prefix + project.storageText])
    }

    static func all(in db: Database) throws -> [UUID] {
        try String.fetchAll(db, sql: "SELECT key FROM sync_state WHERE key LIKE 'left\\_project:%' ESCAPE '\\' ORDER BY key")
            .compactMap { UUID(uuidString: String($0.dropFirst(prefix.count))) }
    }
}

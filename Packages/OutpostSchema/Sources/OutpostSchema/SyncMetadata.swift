import Foundation

/// Where a record stands with the server, as the device sees it.
public enum SyncStatus: String, Sendable, Hashable, Codable, CaseIterable {
    /// Written locally; the server has not acknowledged the latest change.
    case pending
    /// The server holds the same version as the device.
    case synced
    /// The server refused the change for good; the user decides what happens next.
    case failed
    /// A conflict awaits the user's choice (override or discard).
    case conflicted
}

/// The bookkeeping every syncable record carries next to its domain fields.
public struct SyncMetadata: Sendable, Hashable, Codable {
    /// The id the server assigned, for backends that replace client UUIDs (often an integer, kept as text).
    public var serverID: String?
    /// The server's version of the record; 0 until the server first acknowledges it.
    public var version: Int64
    /// When the record was first written, on whichever device wrote it.
    public var createdAt: Date
    /// When any field last changed.
    public var updatedAt: Date
    /// Set when the record is deleted: deletes travel as tombstones, never as missing rows.
    public var deletedAt: Date?
    /// Whether the latest local change has reached the server.
    public var syncStatus: SyncStatus
    /// True when the record's parent is gone (deleted on the server, or absent from a bundle):
    /// the record is kept for the user to relink or close, never dropped.
    public var isOrphaned: Bool

    /// Creates metadata; a record made on the device starts pending at version 0.
    public init(
        serverID: String? = nil,
        version: Int64 = 0,
        createdAt: Date,
        updatedAt: Date? = nil,
        deletedAt: Date? = nil,
        syncStatus: SyncStatus = .pending,
        isOrphaned: Bool = false
    ) {
        self.serverID = serverID
        self.version = version
        self.createdAt = createdAt
        self.updatedAt = updatedAt ?? createdAt
        self.deletedAt = deletedAt
        self.syncStatus = syncStatus
        self.isOrphaned = isOrphaned
    }

    /// Whether the record is a tombstone.
    public var isDeleted: Bool { deletedAt != nil }
}

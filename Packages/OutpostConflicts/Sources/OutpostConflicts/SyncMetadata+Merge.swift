import Foundation
import OutpostSchema

extension SyncMetadata {
    /// Bookkeeping of two versions combined the same way whichever side merges (each part is a
    /// maximum, minimum or union), so merges stay commutative and associative. The store sets the
    /// version and status it wants when it writes; `deletedAt` follows the merged tombstone.
    static func merged(_ a: SyncMetadata, _ b: SyncMetadata, deletion: HybridTimestamp?) -> SyncMetadata {
        SyncMetadata(
            serverID: Self.larger(a.serverID, b.serverID),
            version: Swift.max(a.version, b.version),
            createdAt: Swift.min(a.createdAt, b.createdAt),
            updatedAt: Swift.max(a.updatedAt, b.updatedAt),
            deletedAt: deletion?.date,
            syncStatus: a.syncStatus.urgency >= b.syncStatus.urgency ? a.syncStatus : b.syncStatus,
            isOrphaned: a.isOrphaned || b.isOrphaned)
    }

    private static func larger(_ a: String?, _ b: String?) -> String? {
        guard let a else { return b }
        guard let b else { return a }
        return Swift.max(a, b)
    }
}

extension SyncStatus {
    /// The status that needs the most attention wins a merge: a conflict over a failure over a pending change.
    fileprivate var urgency: Int {
        switch self {
        case .synced: 0
        case .pending: 1
        case .failed: 2
        case .conflicted: 3
        }
    }
}

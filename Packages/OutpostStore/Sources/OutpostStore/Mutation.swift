import Foundation
import OutpostConflicts
import OutpostSchema

/// What a queued mutation does to its record on the server.
public enum MutationOperation: String, Sendable, Hashable, Codable, CaseIterable {
    case create, update, delete
}

/// Where a queued mutation stands.
public enum MutationStatus: String, Sendable, Hashable, Codable, CaseIterable {
    /// Waiting to be sent (or to be retried at `nextAttemptAt`).
    case pending
    /// Sent and not yet answered; found after a crash, it is sent again (the idempotency key makes that safe).
    case inFlight
    /// The server applied it (or answered that it already had). Such a mutation leaves the queue, its
    /// key kept (`LocalStore.finishedMutationKeys()`); only a queue edited by hand still holds one.
    case done
    /// The server refused it for good, or it ran out of retries; shown to the user.
    case failed
}

/// One local write waiting for the server, as the durable queue holds it.
public struct Mutation: Sendable, Hashable, Codable {
    /// Queue position: first in, first out among mutations that do not wait on each other.
    public let sequence: Int64
    /// Client-generated; the server applies each key at most once and answers a repeat with the original result.
    public let idempotencyKey: UUID
    public let entity: EntityType
    public let recordID: UUID
    public let operation: MutationOperation
    /// The server version the change was made against (0 for a record the server has not seen).
    public let baseVersion: Int64
    /// The fields written (every field for a create), with the clock of each.
    public let fields: [String: FieldValue]
    public let clocks: [String: HybridTimestamp]
    /// The delete's clock, for a delete.
    public let deletion: HybridTimestamp?
    /// Records whose create must be acknowledged before this one is sent (its parents, a clock-out's clock-in).
    public let dependsOn: [UUID]
    public let syncClass: SyncClass
    public let status: MutationStatus
    public let attempts: Int
    /// Not sent before this instant (backoff).
    public let nextAttemptAt: Date
    /// The server's reason, or the transport's, for the last failure.
    public let lastError: String?
    /// The audit entry of the write that queued it.
    public let auditSequence: Int64?
    /// Why its fields cannot be read, when they cannot (its payload or its audit entry damaged or
    /// gone): listed by `LocalStore.unsentChanges()` with no fields rather than failing the whole list,
    /// and failed with this reason when claimed. Nil for every readable change.
    public let unreadable: String?
}

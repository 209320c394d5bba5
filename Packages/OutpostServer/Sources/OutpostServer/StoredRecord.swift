import Foundation
import OutpostConflicts
import OutpostSchema
import OutpostWire

/// A record as the server stores it: the wire's `ServerRecord` plus what access control needs (the
/// project it belongs to, or for an opportunity not yet linked to one, the user who created it).
struct StoredRecord: Sendable, Hashable {
    var entity: EntityType
    var id: UUID
    /// The integer id assigned in `--server-ids` mode.
    var serverID: Int64?
    /// The project the record belongs to; nil only for an opportunity no project references yet.
    var projectID: UUID?
    /// The user whose push created the record (or the seed).
    var ownerID: UUID
    var version: Int64
    var sequence: Int64
    var fields: [String: FieldValue]
    var clocks: [String: HybridTimestamp]
    var deletion: HybridTimestamp?
    var createdAt: Date
    var updatedAt: Date
    /// The member whose push wrote this version (`written_by`), whose records quota its bytes count
    /// against; nil for the office's writes, which count for `ownerID`. Written, never read back: a
    /// push's rules learn a target's writer with its size (`PushSnapshot.storedBytes`).
    var writtenBy: UUID? = nil

    /// The wire form; references stay client ids (see `SQLiteStorage.wireRecord` for server-id mode).
    var serverRecord: ServerRecord {
        ServerRecord(
            sequence: sequence, entity: entity, recordID: id, serverID: serverID.map(String.init), version: version,
            fields: fields, clocks: clocks, deletion: deletion, createdAt: createdAt, updatedAt: updatedAt)
    }

    /// The generic record, as validation and bundles take it.
    var entityRecord: EntityRecord {
        EntityRecord(
            entity: entity, id: id, fields: fields,
            sync: SyncMetadata(
                serverID: serverID.map(String.init), version: version, createdAt: createdAt, updatedAt: updatedAt,
                deletedAt: deletion?.date, syncStatus: .synced))
    }

    /// The record with its clocks, as the conflict strategies take it.
    var versionedRecord: VersionedRecord {
        get throws(ConflictError) {
            try VersionedRecord(record: entityRecord, clocks: clocks, deletion: deletion)
        }
    }
}

extension StoredRecord {
    /// This record changed by the server (an operator's edit): `changes` written, brought back if
    /// deleted, at the next version and `sequence`, stamped after every clock it holds.
    mutating func edit(_ changes: [String: FieldValue], at now: Date, sequence: Int64) {
        let stamp = HybridTimestamp(physicalMilliseconds: now.milliseconds, counter: 0, node: NodeID(0))
        let clock = max(stamp, (Array(clocks.values) + (deletion.map { [$0] } ?? [])).max() ?? stamp).next
        for (field, value) in changes {
            fields[field] = value
            clocks[field] = clock
        }
        deletion = nil
        version += 1
        self.sequence = sequence
        updatedAt = now
    }

    /// Makes this record a tombstone at `sequence`, stamped by the server at `now`: an operator's removal
    /// (a member taken out of a project), which every device pulls like any delete.
    mutating func tombstone(at now: Date, sequence: Int64) {
        let stamp = HybridTimestamp(physicalMilliseconds: now.milliseconds, counter: 0, node: NodeID(0))
        version += 1
        self.sequence = sequence
        // A tombstone keeps the time it was deleted (`PushRules.deletedBeforeJoining` reads it).
        if deletion == nil { updatedAt = now }
        deletion = max(stamp, clocks.values.max() ?? stamp).next
    }
}

extension HybridTimestamp {
    /// The stamp right after this one, on the server's node; at the last instant the encoding holds, that
    /// instant (a record a broken server or an import left there must not trap an operator's edit).
    fileprivate var next: HybridTimestamp { successor(on: NodeID(0)) }
}

extension StoredRecord {
    /// A target of a push the caller may not see, as the rules take it: where it belongs, whether and
    /// when it was deleted (what the rules tell that by), and nothing of its contents, which are never
    /// read (`PushBatch.targetsToRead`). The rules answer any change of it as one of a record that does
    /// not exist before they look at anything else (`PushRules.apply`).
    init(unread target: TargetSummary) {
        let summary = target.summary
        self.init(
            entity: summary.key.entity, id: summary.key.id, serverID: summary.serverID, projectID: summary.projectID,
            ownerID: summary.ownerID, version: 0, sequence: summary.sequence, fields: [:], clocks: [:],
            deletion: target.deleted ? HybridTimestamp(physicalMilliseconds: 0, counter: 0, node: NodeID(0)) : nil, createdAt: .distantPast, updatedAt: Date(milliseconds: target.updatedAt))
    }
}

import Foundation
import GRDB
import OutpostConflicts
import OutpostSchema

/// A value, delete or restore that lost a conflict, kept until the user overrides or discards it.
public struct OpenConflict: Sendable, Hashable, Codable {
    /// What lost.
    public enum Kind: String, Sendable, Hashable, Codable, CaseIterable {
        /// A field's value (`field`, `losingValue`).
        case value
        /// A delete: the record stayed or came back live.
        case delete
        /// A restore: a write that brought the record back from a delete, undone by another delete. Listed
        /// only when no value its user wrote is listed with it (overriding one of those restores too).
        /// Overriding it brings the record back, except under append only, where a delete is final: the
        /// write is refused again and listed again, and the record's last values stay on its tombstone.
        case restore

        /// The kind of a conflict that names none: a row from before toolkit step 8, or JSON an earlier
        /// build wrote. Those builds listed only values (with a field) and deletes (without one).
        static func unrecorded(field: String?) -> Kind { field == nil ? .delete : .value }
    }

    /// The conflict's number, for `resolveConflict`.
    public let id: Int64
    public let entity: EntityType
    public let recordID: UUID
    /// What lost.
    public let kind: Kind
    /// The field that lost; nil when a delete or a restore lost.
    public let field: String?
    /// The strategy that decided.
    public let strategy: ConflictPolicyName
    /// This device's value, and the server's.
    public let localValue: FieldValue?
    public let remoteValue: FieldValue?
    /// Whose value (or delete) lost: `.client` when this device's, `.server` when the server's. Nil for a
    /// conflict recorded before schema v11, which did not keep it.
    public let losingSide: Side?
    /// When the conflict was found.
    public let createdAt: Date

    /// Reads `kind` when it is there: JSON an earlier build wrote (`outpost conflicts list --json`) has
    /// none (`Kind.unrecorded(field:)`).
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        id = try container.decode(Int64.self, forKey: .id)
        entity = try container.decode(EntityType.self, forKey: .entity)
        recordID = try container.decode(UUID.self, forKey: .recordID)
        field = try container.decodeIfPresent(String.self, forKey: .field)
        kind = try container.decodeIfPresent(Kind.self, forKey: .kind) ?? .unrecorded(field: field)
        strategy = try container.decode(ConflictPolicyName.self, forKey: .strategy)
        localValue = try container.decodeIfPresent(FieldValue.self, forKey: .localValue)
        remoteValue = try container.decodeIfPresent(FieldValue.self, forKey: .remoteValue)
        losingSide = try container.decodeIfPresent(Side.self, forKey: .losingSide)
        createdAt = try container.decode(Date.self, forKey: .createdAt)
    }

    init(
        id: Int64, entity: EntityType, recordID: UUID, kind: Kind, field: String?, strategy: ConflictPolicyName,
        localValue: FieldValue?, remoteValue: FieldValue?, losingSide: Side?, createdAt: Date
    ) {
        self.id = id
        self.entity = entity
        self.recordID = recordID
        self.kind = kind
        self.field = field
        self.strategy = strategy
        self.localValue = localValue
        self.remoteValue = remoteValue
        self.losingSide = losingSide
        self.createdAt = createdAt
    }

    /// The value that lost, which `override` brings back; nil when a delete lost or the side is unknown.
    public var losingValue: FieldValue? {
        switch losingSide {
        case .client: localValue
        case .server: remoteValue
        case nil: nil
        }
    }
}

/// What the user chose for a surfaced conflict.
public enum ConflictChoice: String, Sendable, Hashable, Codable, CaseIterable {
    /// Bring the losing value (or delete) back, as a new local change with a fresh clock.
    case override
    /// Keep the winner; the losing value is let go.
    case discard
}

extension LocalStore {
    /// Conflicts waiting for the user, oldest first.
    public func openConflicts() throws(StoreError) -> [OpenConflict] {
        try read { db in
            try Row.fetchAll(db, sql: "SELECT * FROM conflicts WHERE status = 'open' ORDER BY id").compactMap(Self.conflict(from:))
        }
    }

    /// Settles conflict `id`: `override` writes the losing value back (deletes the record, when a delete
    /// lost; brings it back, when a restore lost) as an ordinary local change that syncs; `discard` only
    /// closes the conflict. A value that lost to a delete comes back with the record: an undelete the server applies on its version.
    /// `override` of a conflict whose record is no longer on the device throws `recordNotHeld` and leaves
    /// it open.
    public func resolveConflict(_ id: Int64, choice: ConflictChoice, now: Date = Timestamp.now()) async throws(StoreError) {
        guard let conflict = try openConflicts().first(where: { $0.id == id }) else {
            throw StoreError(.conflictNotFound, path: path, message: "no open conflict \(id)")
        }
        if choice == .override {
            // Closed with nothing written, the user's choice went without a word (attack 106, N2).
            guard let current = try record(conflict.entity, id: conflict.recordID) else {
                throw StoreError(
                    .recordNotHeld, path: path,
                    message: "conflict \(id): \(conflict.entity.rawValue) \(conflict.recordID.storageText) is no longer on this "
                        + "device (removed since, as the server no longer holds it), so its losing value cannot be kept; "
                        + "the conflict stays open: discard it, or save the value in a record of your own")
            }
            if let field = conflict.field {
                // A field conflict always stores its losing value; nil here means the stored text no
                // longer reads, and closing the conflict would drop the user's choice without a word.
                if conflict.losingSide != nil, conflict.losingValue == nil {
                    throw StoreError(
                        .databaseFailure, path: path,
                        message: "conflict \(id) (\(conflict.entity.rawValue) \(conflict.recordID.storageText)): "
                            + "the losing value of '\(field)' cannot be read back")
                }
                // The recorded side, never the record's current value: the record may have moved on since
                // (a later pull, the user's own edit), and then the current value no longer tells which
                // one lost. Only a conflict from before v11 has no side; for it the value that is not
                // current is the best guess left.
                let losing = conflict.losingSide == nil
                    ? (current[field] == conflict.localValue ? conflict.remoteValue : conflict.localValue)
                    : conflict.losingValue
                // A losing value that stands again already is not written twice. On a tombstone the value
                // lost to the delete (it may even be the field's value the tombstone holds): keeping it
                // means bringing the record back, which saving does.
                if let losing, losing != current[field] || current.sync.isDeleted {
                    var changed = current
                    changed[field] = losing
                    try await save(changed, now: now)
                }
            } else if conflict.kind == .restore {
                // Saving the tombstone brings the record back with the values it holds.
                if current.sync.isDeleted { try await save(current, now: now) }
            } else if !current.sync.isDeleted {
                try await delete(conflict.entity, id: conflict.recordID, now: now)
            }
        }
        try write { db in
            try db.execute(
                sql: "UPDATE conflicts SET status = 'resolved', resolution = ?, resolved_at = ? WHERE id = ?",
                arguments: [choice.rawValue, now.storageMilliseconds, id])
        }
    }

    private static func conflict(from row: Row) -> OpenConflict? {
        func value(_ column: String) -> FieldValue? {
            (row[column] as String?).flatMap { try? MutationQueue.decoder.decode(FieldValue.self, from: Data($0.utf8)) }
        }
        guard let entity = EntityType(rawValue: row["entity"]), let recordID = UUID(uuidString: row["record_id"]),
            let strategy = ConflictPolicyName(rawValue: row["strategy"])
        else { return nil }
        let field: String? = row["field"]
        let kind = (row["kind"] as String?).flatMap(OpenConflict.Kind.init(rawValue:)) ?? .unrecorded(field: field)
        return OpenConflict(
            id: row["id"], entity: entity, recordID: recordID, kind: kind, field: field, strategy: strategy,
            localValue: value("local_value"), remoteValue: value("remote_value"),
            losingSide: (row["losing_side"] as String?).flatMap(Side.init(rawValue:)),
            createdAt: Date(storageMilliseconds: row["created_at"]))
    }
}

import Foundation
import OutpostConflicts
import OutpostSchema

/// One local write as it travels to the server: the fields it touched with their clocks, so the
/// server can apply it once (by idempotency key) and detect a stale base version.
public struct PushMutation: Sendable, Hashable, Codable {
    /// What the mutation does to its record.
    public enum Operation: String, Sendable, Hashable, Codable, CaseIterable {
        case create, update, delete
    }

    /// Client-generated; the server applies each key at most once and answers a repeat with the original result.
    public var idempotencyKey: UUID
    /// The record's entity type.
    public var entity: EntityType
    /// What the mutation does.
    public var operation: Operation
    /// The record's client id, which never changes even when the server assigns its own.
    public var recordID: UUID
    /// The server's id for the record, once known (servers that assign integer ids).
    public var serverID: String?
    /// The server version the change was made against; 0 for a record the server has not seen.
    public var baseVersion: Int64
    /// The fields written (every field for a create), in `FieldValue`'s one-key JSON form.
    public var fields: [String: FieldValue]
    /// The clock of every field in `fields`. On the wire, a mutation whose fields all carry one clock
    /// may send it once as `clock` instead, to a server that reads that form (see `SyncProtocol.acceptsHeader`).
    public var clocks: [String: HybridTimestamp]
    /// The delete's clock, for a delete.
    public var deletion: HybridTimestamp?
    /// When the device first wrote the record, sent with a create so the server keeps it.
    public var createdAt: Date?

    /// Creates a mutation; every field in `fields` needs a clock in `clocks`.
    public init(
        idempotencyKey: UUID, entity: EntityType, operation: Operation, recordID: UUID, serverID: String? = nil,
        baseVersion: Int64, fields: [String: FieldValue] = [:], clocks: [String: HybridTimestamp] = [:],
        deletion: HybridTimestamp? = nil, createdAt: Date? = nil
    ) {
        self.idempotencyKey = idempotencyKey
        self.entity = entity
        self.operation = operation
        self.recordID = recordID
        self.serverID = serverID
        self.baseVersion = baseVersion
        self.fields = fields
        self.clocks = clocks
        self.deletion = deletion
        self.createdAt = createdAt
    }

    /// The mutation that sends `change` (a `VersionedRecord` holding only the fields one write touched).
    public init(idempotencyKey: UUID, operation: Operation, change: VersionedRecord, baseVersion: Int64) {
        self.init(
            idempotencyKey: idempotencyKey, entity: change.record.entity, operation: operation,
            recordID: change.record.id, serverID: change.record.sync.serverID, baseVersion: baseVersion,
            fields: change.record.fields, clocks: change.clocks, deletion: change.deletion)
    }

    /// The one clock every field carries, sent once in place of `clocks` when the server reads that
    /// form; nil when the fields' clocks differ (a folded edit), when a clock names no field, or
    /// when there are no fields (a delete). Only this all-or-nothing form is sent, never `clock`
    /// beside some of the `clocks`, so a server from before the form refuses the whole batch (it has
    /// no `clocks`) instead of reading a partial list as fields without clocks.
    public var sharedClock: HybridTimestamp? {
        guard clocks.count == fields.count, let first = clocks.first?.value else { return nil }
        for (name, clock) in clocks where clock != first || fields[name] == nil { return nil }
        return first
    }

    /// What `Codable` writes: the long form, a clock per field, which every server reads.
    private enum CodingKeys: String, CodingKey {
        case idempotencyKey, entity, operation, recordID, serverID, baseVersion, fields, clocks, deletion, createdAt
    }

    /// The members of either clock form, read beside the others.
    private enum ClockKeys: String, CodingKey {
        case clock, clocks
    }

    /// Reads either clock form: `clocks` for every field, or `clock` for every field `clocks` (if
    /// present) does not name. A null `clock` is refused, as by the wire reader.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        idempotencyKey = try container.decode(UUID.self, forKey: .idempotencyKey)
        entity = try container.decode(EntityType.self, forKey: .entity)
        operation = try container.decode(Operation.self, forKey: .operation)
        recordID = try container.decode(UUID.self, forKey: .recordID)
        serverID = try container.decodeIfPresent(String.self, forKey: .serverID)
        baseVersion = try container.decode(Int64.self, forKey: .baseVersion)
        fields = try container.decode([String: FieldValue].self, forKey: .fields)
        clocks = try decoder.container(keyedBy: ClockKeys.self).fieldClocks(of: fields, shared: .clock, listed: .clocks)
        deletion = try container.decodeIfPresent(HybridTimestamp.self, forKey: .deletion)
        createdAt = try container.decodeIfPresent(Date.self, forKey: .createdAt)
    }
}

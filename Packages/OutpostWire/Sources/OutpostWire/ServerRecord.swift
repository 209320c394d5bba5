import Foundation
import OutpostConflicts
import OutpostSchema

/// A record as the server holds it, with every field's clock and its place in the server's change
/// sequence: what a pull delivers, and what a conflict sends back.
public struct ServerRecord: Sendable, Hashable, Codable {
    /// The server's change sequence when the record last changed; pull pages follow it.
    public var sequence: Int64
    /// The record's entity type.
    public var entity: EntityType
    /// The client id the record was created with.
    public var recordID: UUID
    /// The id the server assigned, for servers that assign their own (integer ids, kept as text).
    public var serverID: String?
    /// The server's version of the record, the base of the next mutation.
    public var version: Int64
    /// The record's fields in `FieldValue`'s one-key JSON form (a tombstone keeps its last values).
    public var fields: [String: FieldValue]
    /// The clock of every field in `fields`. On the wire, a pull page may carry one `clock` for most of
    /// them and only the others here (see `PullRequest.acceptsSharedClock`); reading expands it.
    public var clocks: [String: HybridTimestamp]
    /// When the record was deleted; nil while it is live. On the wire also as the `deleted` flag.
    public var deletion: HybridTimestamp?
    /// When the record was first written, on the device that created it (ISO 8601 with milliseconds).
    public var createdAt: Date
    /// When the server last changed it.
    public var updatedAt: Date

    /// Creates a record; every field in `fields` needs a clock in `clocks`.
    public init(
        sequence: Int64, entity: EntityType, recordID: UUID, serverID: String? = nil, version: Int64,
        fields: [String: FieldValue], clocks: [String: HybridTimestamp], deletion: HybridTimestamp? = nil,
        createdAt: Date, updatedAt: Date
    ) {
        self.sequence = sequence
        self.entity = entity
        self.recordID = recordID
        self.serverID = serverID
        self.version = version
        self.fields = fields
        self.clocks = clocks
        self.deletion = deletion
        self.createdAt = createdAt
        self.updatedAt = updatedAt
    }

    /// Whether this is a tombstone.
    public var isDeleted: Bool { deletion != nil }

    private enum CodingKeys: String, CodingKey {
        case sequence, entity, recordID, serverID, version, fields, clocks, clock, deleted, deletion, createdAt, updatedAt
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        sequence = try container.decode(Int64.self, forKey: .sequence)
        entity = try container.decode(EntityType.self, forKey: .entity)
        recordID = try container.decode(UUID.self, forKey: .recordID)
        serverID = try container.decodeIfPresent(String.self, forKey: .serverID)
        version = try container.decode(Int64.self, forKey: .version)
        fields = try container.decode([String: FieldValue].self, forKey: .fields)
        clocks = try container.fieldClocks(of: fields, shared: .clock, listed: .clocks)
        deletion = try container.decodeIfPresent(HybridTimestamp.self, forKey: .deletion)
        createdAt = try Self.timestamp(container, .createdAt)
        updatedAt = try Self.timestamp(container, .updatedAt)
        // A flag without its clock (or the reverse) cannot be merged safely: refuse rather than guess.
        guard try container.decode(Bool.self, forKey: .deleted) == (deletion != nil) else {
            throw DecodingError.dataCorruptedError(
                forKey: .deleted, in: container, debugDescription: "'deleted' and 'deletion' disagree.")
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(sequence, forKey: .sequence)
        try container.encode(entity, forKey: .entity)
        try container.encode(recordID, forKey: .recordID)
        try container.encodeIfPresent(serverID, forKey: .serverID)
        try container.encode(version, forKey: .version)
        try container.encode(fields, forKey: .fields)
        try container.encode(clocks, forKey: .clocks)
        try container.encode(deletion != nil, forKey: .deleted)
        try container.encodeIfPresent(deletion, forKey: .deletion)
        try container.encode(Timestamp.string(from: createdAt), forKey: .createdAt)
        try container.encode(Timestamp.string(from: updatedAt), forKey: .updatedAt)
    }

    /// The clocks of `fields` from either wire form: without `shared`, `listed` names every field;
    /// beside it, `listed` names only the fields with another clock and every other field of `fields`
    /// carries `shared`. A name in `listed` without a value stays, so converting the record refuses it
    /// as the long form would.
    static func clocks(
        of fields: [String: FieldValue], shared: HybridTimestamp?, listed: [String: HybridTimestamp]?
    ) -> [String: HybridTimestamp] {
        guard let shared else { return listed ?? [:] }
        var clocks = fields.mapValues { _ in shared }
        for (name, other) in listed ?? [:] { clocks[name] = other }
        return clocks
    }

    private static func timestamp(_ container: KeyedDecodingContainer<CodingKeys>, _ key: CodingKeys) throws -> Date {
        let text = try container.decode(String.self, forKey: key)
        guard let date = Timestamp.date(from: text) else {
            throw DecodingError.dataCorruptedError(forKey: key, in: container, debugDescription: "'\(text)' is not an ISO 8601 timestamp.")
        }
        return date
    }

    /// The record with its clocks, as the store and the conflict strategies take it: fields as the
    /// server holds them, server id and version in the sync metadata, the tombstone from `deletion`.
    public var versionedRecord: VersionedRecord {
        get throws(ConflictError) {
            let sync = SyncMetadata(
                serverID: serverID, version: version, createdAt: createdAt, updatedAt: updatedAt,
                deletedAt: deletion?.date, syncStatus: .synced)
            return try VersionedRecord(
                record: EntityRecord(entity: entity, id: recordID, fields: fields, sync: sync), clocks: clocks,
                deletion: deletion)
        }
    }
}

extension KeyedDecodingContainer {
    /// The clocks of `fields` in either wire form (`ServerRecord`, `PushMutation`): `listed` for every
    /// field, or `shared` for every field `listed` (if present) does not name. As strict as the wire
    /// reader: a null `shared`, or a null `listed` beside it, is refused.
    func fieldClocks(of fields: [String: FieldValue], shared: Key, listed: Key) throws -> [String: HybridTimestamp] {
        guard contains(shared) else { return try decode([String: HybridTimestamp].self, forKey: listed) }
        let clock = try decode(HybridTimestamp.self, forKey: shared)
        let others = contains(listed) ? try decode([String: HybridTimestamp].self, forKey: listed) : nil
        return ServerRecord.clocks(of: fields, shared: clock, listed: others)
    }
}

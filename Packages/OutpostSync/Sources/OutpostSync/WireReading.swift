import Foundation
import OutpostConflicts
import OutpostModels

/// Answers the transport reads with `JSONReader` instead of `JSONDecoder`: a pull page of 500 records
/// through `JSONDecoder` cost more than applying it to the store (see Workspace.md, "Sync"). The
/// `Codable` conformances stay, for the in-memory transport, tests and other clients.
protocol WireReadable {
    /// Reads one value of this type from `reader`, failing on anything `JSONDecoder` would refuse.
    init(reading reader: inout JSONReader) throws(JSONReaderError)
}

extension WireReadable {
    /// The value of a whole document.
    init(wire data: Data) throws(JSONReaderError) {
        var reader = JSONReader(data)
        self = try Self(reading: &reader)
        try reader.expectEnd()
    }
}

extension PullResponse: WireReadable {
    /// Reads a page from the wire's JSON as `JSONDecoder` would, several times faster; for transports
    /// of one's own.
    public init(json data: Data) throws(JSONReaderError) {
        try self.init(wire: data)
    }

    init(reading reader: inout JSONReader) throws(JSONReaderError) {
        var changes: [ServerRecord]?, nextCursor: String?, hasMore: Bool?
        try reader.beginObject()
        while let key = try reader.nextKey() {
            switch key {
            case "changes":
                var records: [ServerRecord] = []
                try reader.beginArray()
                while try reader.nextElement() { records.append(try ServerRecord(reading: &reader)) }
                changes = records
            case "nextCursor": nextCursor = try reader.string()
            case "hasMore": hasMore = try reader.bool()
            default: try reader.skipValue()
            }
        }
        guard let changes, let nextCursor, let hasMore else {
            throw reader.error("a pull page needs 'changes', 'nextCursor' and 'hasMore'")
        }
        self.init(changes: changes, nextCursor: nextCursor, hasMore: hasMore)
    }
}

extension ServerRecord: WireReadable {
    init(reading reader: inout JSONReader) throws(JSONReaderError) {
        var sequence: Int64?, entity: EntityType?, recordID: UUID?, serverID: String?, version: Int64?
        var fields: [String: FieldValue]?, clocks: [String: HybridTimestamp]?, deleted: Bool?
        var deletion: HybridTimestamp?, createdAt: Date?, updatedAt: Date?
        try reader.beginObject()
        while let key = try reader.nextKey() {
            switch key {
            case "sequence": sequence = try reader.integer()
            case "entity":
                let name = try reader.string()
                guard let type = EntityType(rawValue: name) else { throw reader.error("'\(name)' is not an entity type") }
                entity = type
            case "recordID": recordID = try Self.uuid(&reader)
            case "serverID": serverID = try reader.takeNull() ? nil : reader.string()
            case "version": version = try reader.integer()
            case "fields": fields = try reader.fields()
            case "clocks":
                var read: [String: HybridTimestamp] = [:]
                try reader.beginObject()
                while let name = try reader.nextKey() { read[name] = try Self.clock(&reader) }
                clocks = read
            case "deleted": deleted = try reader.bool()
            case "deletion": deletion = try reader.takeNull() ? nil : Self.clock(&reader)
            case "createdAt": createdAt = try Self.date(&reader)
            case "updatedAt": updatedAt = try Self.date(&reader)
            default: try reader.skipValue()
            }
        }
        guard let sequence, let entity, let recordID, let version, let fields, let clocks, let deleted,
            let createdAt, let updatedAt
        else {
            throw reader.error(
                "a record needs 'sequence', 'entity', 'recordID', 'version', 'fields', 'clocks', 'deleted', 'createdAt' and 'updatedAt'")
        }
        // A flag without its clock (or the reverse) cannot be merged safely: refuse rather than guess.
        guard deleted == (deletion != nil) else { throw reader.error("'deleted' and 'deletion' disagree") }
        self.init(
            sequence: sequence, entity: entity, recordID: recordID, serverID: serverID, version: version,
            fields: fields, clocks: clocks, deletion: deletion, createdAt: createdAt, updatedAt: updatedAt)
    }

    private static func uuid(_ reader: inout JSONReader) throws(JSONReaderError) -> UUID {
        let text = try reader.string()
        guard let id = UUID(hyphenatedText: text) else { throw reader.error("'\(text)' is not a UUID") }
        return id
    }

    private static func clock(_ reader: inout JSONReader) throws(JSONReaderError) -> HybridTimestamp {
        let text = try reader.string()
        do {
            return try HybridTimestamp(encoded: text)
        } catch {
            throw reader.error(error.description)
        }
    }

    private static func date(_ reader: inout JSONReader) throws(JSONReaderError) -> Date {
        let text = try reader.string()
        guard let date = Timestamp.date(from: text) else { throw reader.error("'\(text)' is not an ISO 8601 timestamp") }
        return date
    }
}

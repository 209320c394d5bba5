import Foundation
import OutpostConflicts
import OutpostModels
import OutpostSync

/// A record row as stored, its fields and clocks still the JSON text they were written as: what pull
/// and bundles read, so a record that only travels on is never decoded.
struct StoredRow: Sendable, Hashable {
    var entity: EntityType
    var id: UUID
    var serverID: Int64?
    var projectID: UUID?
    var ownerID: UUID
    var version: Int64
    var sequence: Int64
    /// `{"name":{"kind":value},…}`, keys sorted (the wire's form).
    var fieldsJSON: String
    /// `{"name":"clock",…}`, keys sorted.
    var clocksJSON: String
    /// The deletion clock's encoded text, for a tombstone.
    var deletion: String?
    var createdAt: Int64
    var updatedAt: Int64

    var key: RecordKey { RecordKey(entity: entity, id: id) }

    /// The record with its fields and clocks decoded.
    func decoded() throws(ServerError) -> StoredRecord {
        do {
            // `JSONReader`, not `JSONDecoder`: every record of a pre-sync bundle comes through here.
            var clocks: [String: HybridTimestamp] = [:]
            var clockReader = JSONReader(Data(clocksJSON.utf8))
            try clockReader.beginObject()
            while let field = try clockReader.nextKey() { clocks[field] = try HybridTimestamp(encoded: clockReader.string()) }
            try clockReader.expectEnd()
            var fieldReader = JSONReader(Data(fieldsJSON.utf8))
            let fields = try fieldReader.fields()
            try fieldReader.expectEnd()
            return StoredRecord(
                entity: entity, id: id, serverID: serverID, projectID: projectID, ownerID: ownerID, version: version,
                sequence: sequence, fields: fields, clocks: clocks,
                deletion: try deletion.map { text throws in try HybridTimestamp(encoded: text) },
                createdAt: Date(milliseconds: createdAt), updatedAt: Date(milliseconds: updatedAt))
        } catch let error as ServerError {
            throw error
        } catch {
            throw ServerError(
                .databaseFailure, message: "the stored \(entity.rawValue) \(id.storageText) is unreadable: \(error)")
        }
    }
}

/// What a pull's answer depends on besides its request: the projects the caller belongs to, and the
/// newest change sequence, which every write moves. While both read the same, a pull reads the same page.
struct PullBasis: Sendable, Hashable {
    var memberships: Set<UUID>
    var newestSequence: Int64
}

/// One page of a pull as a backend read it: rows in sequence order, with (in server-id mode) the
/// summaries of the parents they name. `json` writes the wire's `PullResponse` around the stored JSON.
struct PullPage: Sendable {
    var rows: [StoredRow]
    var nextCursor: String
    var hasMore: Bool
    /// The parents the rows name, for server-id references; empty when the server keeps client ids.
    var parents: [RecordKey: RecordSummary] = [:]
    /// What the page was read against, for the read-ahead's check when it is served.
    var basis = PullBasis(memberships: [], newestSequence: 0)

    /// Where a page ends, counted as its rows are read in sequence order: after `limit` rows, or after
    /// the row whose stored fields and clocks bring the page to `maximumBytes` (the first row always
    /// goes, so a pull moves on even past a record bigger than that). Both backends read through it, so
    /// a page of large records (inline thumbnails) is never read, held or sent whole.
    struct Extent {
        let limit: Int
        let maximumBytes: Int
        private(set) var rows = 0
        private var bytes = 0

        init(limit: Int, maximumBytes: Int) {
            self.limit = limit
            self.maximumBytes = maximumBytes
        }

        /// Counts a row of `size` bytes in; false once the page is full (that row is not part of it).
        mutating func admit(size: Int) -> Bool {
            guard rows < limit, bytes < maximumBytes else { return false }
            rows += 1
            bytes += size
            return true
        }
    }

    /// The parents a backend must look up for `rows` in server-id mode (decoding only rows with parents).
    static func parentKeys(of rows: [StoredRow]) throws(ServerError) -> Set<RecordKey> {
        var keys = Set<RecordKey>()
        for row in rows where !row.entity.description.parents.isEmpty {
            let record = try row.decoded()
            for relation in row.entity.description.parents {
                if case .uuid(let id) = record.fields[relation.field] ?? .null {
                    keys.insert(RecordKey(entity: relation.entity, id: id))
                }
            }
        }
        return keys
    }

    /// The answer's JSON, as `JSONEncoder` would write `PullResponse` (keys sorted). Rows go out as
    /// stored; in server-id mode a row naming parents has its references rewritten by `rules`.
    func json(rules: PushRules) throws(ServerError) -> [UInt8] {
        var json = JSONWriter(capacity: 256 + rows.count * 700)
        json.raw(#"{"changes":["#)
        let page: Set<RecordKey> = rules.assignsServerIDs ? Set(rows.map(\.key)) : []
        for (index, row) in rows.enumerated() {
            if index > 0 { json.raw(",") }
            var fields = row.fieldsJSON
            if rules.assignsServerIDs, !row.entity.description.parents.isEmpty {
                let wire = rules.wireRecord(try row.decoded(), page: page) { parents[$0] }
                fields = try StoredJSON.fields(wire.fields)
            }
            Self.write(row, fields: fields, into: &json)
        }
        json.raw(#"],"hasMore":"#)
        json.bool(hasMore)
        json.raw(#","nextCursor":"#)
        json.string(nextCursor)
        json.raw("}")
        return json.bytes
    }

    /// A `ServerRecord` in its `Codable` form, keys sorted.
    private static func write(_ row: StoredRow, fields: String, into json: inout JSONWriter) {
        json.raw(#"{"clocks":"#)
        json.json(row.clocksJSON)
        json.raw(#","createdAt":"#)
        json.string(Timestamp.string(from: Date(milliseconds: row.createdAt)))
        json.raw(#","deleted":"#)
        json.bool(row.deletion != nil)
        if let deletion = row.deletion {
            json.raw(#","deletion":"#)
            json.string(deletion)
        }
        json.raw(#","entity":"#)
        json.string(row.entity.rawValue)
        json.raw(#","fields":"#)
        json.json(fields)
        json.raw(#","recordID":"#)
        json.string(row.id.uppercasedText)
        json.raw(#","sequence":"#)
        json.integer(row.sequence)
        if let serverID = row.serverID {
            json.raw(#","serverID":"#)
            json.string(String(serverID))
        }
        json.raw(#","updatedAt":"#)
        json.string(Timestamp.string(from: Date(milliseconds: row.updatedAt)))
        json.raw(#","version":"#)
        json.integer(row.version)
        json.raw("}")
    }
}

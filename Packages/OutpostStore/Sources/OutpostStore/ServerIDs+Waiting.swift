import Foundation
import GRDB
import OutpostSchema

/// References that arrived as a server id this device could not map yet.
///
/// A server that assigns its own ids sends a parent reference as the parent's server id when it can,
/// and a record appears in pulls only at its latest change, so a child can arrive pages before the
/// parent that names that id. The child is stored with the id as text (it is all the device knows),
/// and the reference is noted here; when the mapping is learned (the parent pulled, or a push of it
/// acknowledged) the reference is rewritten to the client id in the same transaction.
///
/// The notes live in `sync_state` under keys that start with the parent's entity and server id, so
/// learning a mapping finds its references with one range read of that table's primary key, instead
/// of scanning every child table. (A table of their own would need a new schema version, which the
/// reference server must accept first; see the package README.)
extension ServerIDs {
    private static let separator = "\u{1F}"

    private static func prefix(_ parent: EntityType, _ serverID: String) -> String {
        ["reference", parent.rawValue, serverID, ""].joined(separator: separator)
    }

    /// Notes every parent reference of `record` still held as a server id, to be rewritten later.
    static func noteUnmapped(in record: EntityRecord, db: Database) throws {
        for relation in record.entity.description.parents {
            guard case .text(let serverID) = record[relation.field] else { continue }
            let key = prefix(relation.entity, serverID)
                + [record.entity.rawValue, record.id.storageText, relation.field].joined(separator: separator)
            try db.cachedStatement(sql: "INSERT OR IGNORE INTO sync_state (key, value) VALUES (?, '')").execute(arguments: [key])
        }
    }

    /// Rewrites the references noted for `serverID` of `entity` to `clientID`; returns how many rows changed.
    /// A row that was written with another value since (the user relinked it) is left alone.
    @discardableResult
    static func linkWaitingReferences(to entity: EntityType, serverID: String, clientID: UUID, db: Database) throws -> Int {
        let start = prefix(entity, serverID)
        // Every character after the prefix is ASCII, so DEL bounds the range.
        let keys = try String.fetchAll(
            db.cachedStatement(sql: "SELECT key FROM sync_state WHERE key >= ? AND key < ?"),
            arguments: [start, start + "\u{7F}"])
        var linked = 0
        for key in keys {
            let parts = key.dropFirst(start.count).components(separatedBy: separator)
            // Table and column come from the catalog, never from the stored key itself.
            if parts.count == 3, let child = EntityType(rawValue: parts[0]), let id = UUID(hyphenatedText: parts[1]),
                let relation = child.description.parents.first(where: { $0.field == parts[2] && $0.entity == entity })
            {
                let table = child.description.table.quotedDatabaseIdentifier
                let column = ColumnName.forField(relation.field).quotedDatabaseIdentifier
                // Cached: a pull that brings a thousand parents links as many children (the statements
                // are few, one per catalog reference).
                try db.cachedStatement(sql: "UPDATE \(table) SET \(column) = ? WHERE id = ? AND \(column) = ?")
                    .execute(arguments: [clientID.storageText, id.storageText, serverID])
                linked += db.changesCount
            }
            try db.cachedStatement(sql: "DELETE FROM sync_state WHERE key = ?").execute(arguments: [key])
        }
        return linked
    }
}

import Foundation
import GRDB
import OutpostSchema

/// Deletes a pull brought for records this device never held (`known_deletions`, v14): the device
/// stores nothing of such a record, so this is what keeps an older copy of it (a bundle downloaded
/// before the delete, a teammate's export made before they pulled it) from bringing it back for good.
/// A pulled record that is stored (the server brought it back) removes its row.
enum KnownDeletions {
    /// Notes that the server deleted `entity` `id` at `version`; an older note is replaced, a newer kept.
    static func remember(_ entity: EntityType, _ id: UUID, version: Int64, deletedAt: Date, in db: Database) throws {
        try db.cachedStatement(sql: """
            INSERT INTO known_deletions (entity, record_id, version, deleted_at) VALUES (?, ?, ?, ?)
            ON CONFLICT (entity, record_id) DO UPDATE SET version = excluded.version, deleted_at = excluded.deleted_at
            WHERE excluded.version > known_deletions.version
            """).execute(arguments: [entity.rawValue, id.storageText, version, deletedAt.storageMilliseconds])
    }

    /// Whether a pull said the server deleted this record, which the device never held. (The version is
    /// kept for the newer-note rule above; an import skips the record whatever version it claims.)
    static func contains(_ entity: EntityType, _ id: UUID, in db: Database) throws -> Bool {
        try Bool.fetchOne(
            db.cachedStatement(sql: "SELECT EXISTS (SELECT 1 FROM known_deletions WHERE entity = ? AND record_id = ?)"),
            arguments: [entity.rawValue, id.storageText]) ?? false
    }

    /// Forgets the note: the record is stored now.
    static func forget(_ entity: EntityType, _ id: UUID, in db: Database) throws {
        try db.cachedStatement(sql: "DELETE FROM known_deletions WHERE entity = ? AND record_id = ?")
            .execute(arguments: [entity.rawValue, id.storageText])
    }

    /// Whether any note exists: an import or a page looks records up only then.
    static func any(in db: Database) throws -> Bool {
        try Bool.fetchOne(db, sql: "SELECT EXISTS (SELECT 1 FROM known_deletions)") ?? false
    }
}

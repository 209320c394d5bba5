import Foundation
import GRDB
import OutpostSchema

/// Versions an import wrote, which the server has not confirmed (`imported_versions`, toolkit step 2).
///
/// A bundle is a file: anyone who held it may have edited it. Its versions are its word, not the
/// server's, so they may not outrank what a pull brings: an attack raised a bundle's versions to the
/// largest there is, and the device then kept the bundle's copy over every later version the server sent
/// (each looked older), for good. So each record an import writes is noted here with the version it
/// wrote; while the record still holds that version, a pulled copy replaces it whatever the numbers say,
/// and the pull forgets the note. A note whose version the record no longer holds (a push's answer or a
/// later pull gave it another) says nothing, so no path that writes a server's version has to clear it.
enum ImportedVersions {
    /// Notes that an import wrote `version` of `entity` `id`.
    static func note(_ entity: EntityType, _ id: UUID, version: Int64, in db: Database) throws {
        try db.cachedStatement(sql: "INSERT OR REPLACE INTO imported_versions (entity, record_id, version) VALUES (?, ?, ?)")
            .execute(arguments: [entity.rawValue, id.storageText, version])
    }

    /// Notes every record of `staged` (a qualified table name, never input: an import's staging table,
    /// its rows already in the entity's table, or the entity's table when every row is the import's), in
    /// one statement.
    static func noteStaged(_ entity: EntityType, staged: String, in db: Database) throws {
        try db.execute(
            sql: "INSERT OR REPLACE INTO imported_versions (entity, record_id, version) SELECT ?, id, version FROM \(staged)",
            arguments: [entity.rawValue])
    }

    /// Whether the record's stored `version` is one an import wrote and the server has not confirmed.
    static func isUnconfirmed(_ entity: EntityType, _ id: UUID, version: Int64, in db: Database) throws -> Bool {
        try Int64.fetchOne(
            db.cachedStatement(sql: "SELECT version FROM imported_versions WHERE entity = ? AND record_id = ?"),
            arguments: [entity.rawValue, id.storageText]) == version
    }

    /// The imported version noted for each of `ids`, for a pulled page (one query per entity).
    static func versions(of entity: EntityType, _ ids: String, in db: Database) throws -> [UUID: Int64] {
        var found: [UUID: Int64] = [:]
        let rows = try Row.fetchCursor(
            db.cachedStatement(sql: """
                SELECT imported_versions.record_id, imported_versions.version
                FROM json_each(?) AS page CROSS JOIN imported_versions
                ON imported_versions.entity = ? AND imported_versions.record_id = page.value
                """),
            arguments: [ids, entity.rawValue])
        while let row = try rows.next() {
            if let id = UUID(hyphenatedText: row[0] as String) { found[id] = row[1] }
        }
        return found
    }

    /// Forgets the note: a pull brought the server's own version.
    static func forget(_ entity: EntityType, _ id: UUID, in db: Database) throws {
        try db.cachedStatement(sql: "DELETE FROM imported_versions WHERE entity = ? AND record_id = ?")
            .execute(arguments: [entity.rawValue, id.storageText])
    }

    /// Whether any note exists: a page looks its records up only then.
    static func any(in db: Database) throws -> Bool {
        try Bool.fetchOne(db, sql: "SELECT EXISTS (SELECT 1 FROM imported_versions)") ?? false
    }

    /// The toolkit step that makes the table.
    static let table = """
        CREATE TABLE IF NOT EXISTS imported_versions (
            entity TEXT NOT NULL, record_id TEXT NOT NULL, version INTEGER NOT NULL, PRIMARY KEY (entity, record_id)
        ) WITHOUT ROWID;
        """
}

import Foundation
import GRDB
import OutpostSchema

/// Orphans: records kept although their parent is missing or deleted, flagged for the user to relink
/// or close. Never dropped, and never refused, which is why entity tables have no foreign keys.
extension EntityTables {
    /// Whether a parent `record` references is absent from the store or deleted. Ids in `arriving` are
    /// parents that come in the same batch and count as present.
    static func hasMissingParent(_ record: EntityRecord, besides arriving: Set<UUID> = [], in db: Database) throws -> Bool {
        for relation in record.entity.description.parents {
            guard case .uuid(let parent) = record[relation.field], !arriving.contains(parent) else { continue }
            let table = relation.entity.description.table.quotedDatabaseIdentifier
            let row = try Row.fetchOne(
                db.cachedStatement(sql: "SELECT deleted_at FROM \(table) WHERE id = ?"), arguments: [parent.storageText])
            if row == nil || row?["deleted_at"] as Int64? != nil { return true }
        }
        return false
    }

    /// Clears the orphan flag of the live children of `parents` (records that have just arrived live,
    /// by entity) whose every parent is now here; returns how many it cleared. The children are found
    /// through the app's index on each parent column (as `flagOrphans` finds them), one statement per
    /// relation for all the parents; only the orphans among them are read. Measured with sqlite3 on a
    /// 5,000-id page: 0.97 ms per relation against an empty child table, 8.2 ms against 100,000
    /// children (the index probes); a pull pays it only for pages that bring parents new to the device.
    @discardableResult
    static func settleOrphans(childrenOf parents: [EntityType: [UUID]], in db: Database) throws -> Int {
        var settled = 0
        for (entity, ids) in parents {
            for (child, table, column) in childColumns(of: entity) {
                // An empty table has no orphans: one step, where the walk costs a millisecond a page.
                guard try Bool.fetchOne(db.cachedStatement(sql: "SELECT EXISTS (SELECT 1 FROM \(table))")) == true else { continue }
                let orphans = try String.fetchAll(
                    db.cachedStatement(sql: orphanedChildrenSQL(table: table, column: column)),
                    arguments: [PulledPageReads.jsonArray(ids)])
                for text in orphans {
                    guard let id = UUID(uuidString: text), let record = try fetchRecord(child.type, id: id, in: db),
                        try !hasMissingParent(record, in: db)
                    else { continue }
                    try db.cachedStatement(sql: "UPDATE \(table) SET is_orphaned = 0 WHERE id = ?").execute(arguments: [text])
                    settled += 1
                }
            }
        }
        return settled
    }

    /// The orphans among the live children of the parents in a JSON array of ids (`settleOrphans`).
    /// `table` and `column` are quoted. It probes the index on the parent column that every declared
    /// parent has (`DeclaredColumns.check`): without one SQLite read the whole child table for each
    /// parent: applying 100,000 pulled records (an asset in most pages) into a store holding as many ran
    /// at 0.03× sqlite3's `.import` of the same rows, 0.69× with the index (`outpost-bench pull`).
    static func orphanedChildrenSQL(table: String, column: String) -> String {
        """
        SELECT c.id FROM json_each(?) AS p CROSS JOIN \(table) AS c ON c.\(column) = p.value
        WHERE c.is_orphaned = 1 AND c.deleted_at IS NULL
        """
    }

    /// Flags the live children of one parent id as orphaned (`flagOrphans`), through the same index.
    static func flagChildrenSQL(table: String, column: String) -> String {
        "UPDATE \(table) SET is_orphaned = 1 WHERE \(column) = ? AND deleted_at IS NULL AND is_orphaned = 0"
    }

    /// Each entity naming `entity` as a parent, with its table and that parent's column, quoted for SQL.
    static func childColumns(of entity: EntityType) -> [(child: EntityDescription, table: String, column: String)] {
        EntityCatalog.all.flatMap { child in
            child.parents.filter { $0.entity == entity }.map {
                (child, child.table.quotedDatabaseIdentifier, ColumnName.forField($0.field).quotedDatabaseIdentifier)
            }
        }
    }

    /// Flags the live children of a deleted record as orphaned; returns how many were newly flagged.
    @discardableResult
    static func flagOrphans(childrenOf entity: EntityType, id: UUID, in db: Database) throws -> Int {
        var flagged = 0
        for (_, table, column) in childColumns(of: entity) {
            try db.execute(sql: flagChildrenSQL(table: table, column: column), arguments: [id.storageText])
            flagged += db.changesCount
        }
        return flagged
    }
}

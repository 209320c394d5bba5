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

    /// Flags the live children of a deleted record as orphaned; returns how many were newly flagged.
    @discardableResult
    static func flagOrphans(childrenOf entity: EntityType, id: UUID, in db: Database) throws -> Int {
        var flagged = 0
        for child in EntityCatalog.all {
            for relation in child.parents where relation.entity == entity {
                let table = child.table.quotedDatabaseIdentifier
                let column = ColumnName.forField(relation.field).quotedDatabaseIdentifier
                try db.execute(
                    sql: "UPDATE \(table) SET is_orphaned = 1 WHERE \(column) = ? AND deleted_at IS NULL AND is_orphaned = 0",
                    arguments: [id.storageText])
                flagged += db.changesCount
            }
        }
        return flagged
    }
}

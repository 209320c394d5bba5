import Foundation
import GRDB
import OutpostConflicts
import OutpostSchema

/// What applying a page needs to know about its records, read with one query per table for the whole
/// page instead of several per record: which records the device holds (with their field clocks), which
/// have a local change waiting, and whether the parents they name are present.
///
/// A record with a local change waiting is not served from here: the merge reads it record by record,
/// as it always did, since it is rare and its reads change as the merge writes; nor is a record the
/// page already wrote (a page that holds a record twice), whose second change must see the first.
struct PulledPageReads {
    /// The stored row and field clocks of each record of the page the device held when the page began.
    private var stored: [Key: (record: EntityRecord, clocks: FieldClocks.Stored?)] = [:]
    /// Records of the page with an unfinished mutation when the page began.
    private var waiting: Set<Key> = []
    /// Records the page has written so far.
    private var written: Set<Key> = []
    /// Whether a parent outside the page is missing or deleted; parents outside the page do not change
    /// while it is applied (only a reference column or the orphan flag may), so one answer serves it all.
    private var parentMissing: [Key: Bool] = [:]
    /// Records of entities others name as parents that the page stored live where the device held none
    /// or a deleted one (`arrived`): their children flagged orphaned are looked at again.
    private(set) var arrivedParents: [EntityType: [UUID]] = [:]
    private let parentEntities = Set(EntityCatalog.all.flatMap { $0.parents.map(\.entity) })
    /// Records of the page whose clocks do not read (`FieldClocks.Unreadable`).
    private var unreadableClocks: Set<Key> = []
    /// Entities whose table keeps the clock of a record pulled whole in its row (`LocalApp.rowClocksColumn`).
    private var rowClockEntities: Set<EntityType> = []
    /// Records of the page the device does not hold that have a `field_clocks` row all the same.
    private var clocksWithoutRecord: Set<Key> = []
    /// Keys of quarantined records, to clear only entries that exist.
    private(set) var quarantined: Set<Key>
    /// Records of the page this device knows only as deleted (`KnownDeletions`).
    private var knownDeleted: Set<Key> = []
    /// The version an import wrote of each record of the page that has one noted (`ImportedVersions`).
    private var imported: [Key: Int64] = [:]
    /// Whether any imported version was noted when the page began: only then are records looked up.
    private(set) var anyImported = false

    struct Key: Hashable {
        let entity: EntityType
        let id: UUID

        /// Hashed by the id alone: ids are random, and the entity's name hashed with each was a tenth of
        /// the hashing a pulled record costs the writer (`perf`, issue 41). Equal still means both equal.
        func hash(into hasher: inout Hasher) {
            hasher.combine(id)
        }
    }

    /// Reads the page's records, their waiting changes and the quarantine log.
    init(_ changes: [VersionedRecord], in db: Database) throws {
        quarantined = Set(try Quarantine.keys(in: db).map { Key(entity: $0.0, id: $0.1) })
        guard !changes.isEmpty else { return }
        written.reserveCapacity(changes.count)
        let anyKnownDeletion = try KnownDeletions.any(in: db)
        anyImported = try ImportedVersions.any(in: db)
        var byEntity: [EntityType: [UUID]] = [:]
        for index in changes.indices { byEntity[changes[index].record.entity, default: []].append(changes[index].record.id) }
        for (entity, ids) in byEntity {
            let idList = Self.jsonArray(ids)
            let layout = TableLayout.of(entity)
            let rowClocks = try layout.keepsClocksInRow(in: db)
            if rowClocks { rowClockEntities.insert(entity) }
            var held: [UUID] = []
            let clocksColumn = layout.columns.count
            try db.cachedStatement(sql: rowClocks ? layout.selectByIDListWithRowClocks : layout.selectByIDList)
                .forEachRow(arguments: [idList]) {
                    let record = try layout.record(from: $0)
                    let key = Key(entity: entity, id: record.id)
                    stored[key] = (record, nil)
                    held.append(record.id)
                    guard rowClocks, let text = $0.text(at: clocksColumn) else { return }
                    do {
                        stored[key]?.clocks = try FieldClocks.Stored.read(text, entity: entity, id: record.id)
                    } catch {
                        unreadableClocks.insert(key)
                    }
                }
            // A `field_clocks` row stands over the row's clock. Where rows keep clocks, looked up for every
            // record of the page: one for a record not held would stand over the clock a pull keeps in
            // its new row (`mayKeepClockInRow`).
            if rowClocks || !held.isEmpty {
                let clocks = try Row.fetchCursor(
                    db.cachedStatement(sql: """
                        SELECT field_clocks.record_id, field_clocks.clocks
                        FROM json_each(?) AS page CROSS JOIN field_clocks
                        ON field_clocks.entity = ? AND field_clocks.record_id = page.value
                        """),
                    arguments: [rowClocks ? idList : Self.jsonArray(held), entity.rawValue])
                while let row = try clocks.next() {
                    guard let id = UUID(hyphenatedText: row[0] as String) else { continue }
                    let key = Key(entity: entity, id: id)
                    guard stored[key] != nil else {
                        clocksWithoutRecord.insert(key)
                        continue
                    }
                    do {
                        stored[key]?.clocks = try FieldClocks.Stored.read(row[1], entity: entity, id: id)
                        unreadableClocks.remove(key)
                    } catch {
                        stored[key]?.clocks = nil
                        unreadableClocks.insert(key)
                    }
                }
            }
            let unfinished = try String.fetchAll(
                db.cachedStatement(sql: """
                    SELECT mutation_queue.record_id
                    FROM json_each(?) AS page CROSS JOIN mutation_queue ON mutation_queue.record_id = page.value
                    WHERE mutation_queue.entity = ? AND mutation_queue.status != 'done'
                    """),
                arguments: [idList, entity.rawValue])
            for text in unfinished {
                if let id = UUID(hyphenatedText: text) { waiting.insert(Key(entity: entity, id: id)) }
            }
            if anyImported {
                for (id, version) in try ImportedVersions.versions(of: entity, idList, in: db) {
                    imported[Key(entity: entity, id: id)] = version
                }
            }
            guard anyKnownDeletion else { continue }
            let deleted = try String.fetchAll(
                db.cachedStatement(sql: """
                    SELECT known_deletions.record_id
                    FROM json_each(?) AS page CROSS JOIN known_deletions
                    ON known_deletions.entity = ? AND known_deletions.record_id = page.value
                    """),
                arguments: [idList, entity.rawValue])
            for text in deleted {
                if let id = UUID(hyphenatedText: text) { knownDeleted.insert(Key(entity: entity, id: id)) }
            }
        }
    }

    /// Whether a record the device did not hold when the page began, and the page has not written, may
    /// keep its clock in the row the page stores (`LocalApp.rowClocksColumn`): its table has the column,
    /// and no `field_clocks` row of it would stand over that clock.
    func mayKeepClockInRow(_ entity: EntityType, _ id: UUID) -> Bool {
        let key = Key(entity: entity, id: id)
        return rowClockEntities.contains(entity) && !clocksWithoutRecord.contains(key) && !written.contains(key)
            && stored[key] == nil
    }

    /// Whether the device knows the record only as a delete a pull brought (`KnownDeletions`); a page
    /// that stores it forgets that (`forgetDeletion`).
    func isKnownDeleted(_ entity: EntityType, _ id: UUID) -> Bool {
        knownDeleted.contains(Key(entity: entity, id: id))
    }

    /// Whether `version`, as the device held the record when the page began, is one an import wrote and
    /// the server has not confirmed. Only for a record the page has not written yet.
    func isImported(_ entity: EntityType, _ id: UUID, version: Int64) -> Bool {
        imported[Key(entity: entity, id: id)] == version
    }

    /// Notes that the page removed the record's known deletion.
    mutating func forgetDeletion(_ entity: EntityType, _ id: UUID) {
        knownDeleted.remove(Key(entity: entity, id: id))
    }

    /// The stored record and its clocks as the page began, or nil when the device did not hold it.
    /// Only for a record the page has not written yet (`needsExactReads` says which).
    func stored(_ entity: EntityType, _ id: UUID) -> (record: EntityRecord, clocks: FieldClocks.Stored?)? {
        stored[Key(entity: entity, id: id)]
    }

    /// Whether the record must be read record by record: it has a local change waiting, or the page
    /// already wrote it (a page that holds a record twice must see its own first write).
    func needsExactReads(_ entity: EntityType, _ id: UUID) -> Bool {
        let key = Key(entity: entity, id: id)
        return waiting.contains(key) || written.contains(key)
    }

    /// Whether the record's stored clocks did not read when the page began. Only for a record the page
    /// has not written yet.
    func hasUnreadableClocks(_ entity: EntityType, _ id: UUID) -> Bool {
        unreadableClocks.contains(Key(entity: entity, id: id))
    }

    /// Notes that the page wrote a record.
    mutating func wrote(_ entity: EntityType, _ id: UUID) {
        written.insert(Key(entity: entity, id: id))
    }

    /// Notes a record quarantined by this page.
    mutating func quarantine(_ entity: EntityType, _ id: UUID) {
        quarantined.insert(Key(entity: entity, id: id))
    }

    /// Notes a quarantine entry cleared by this page.
    mutating func clearQuarantine(_ entity: EntityType, _ id: UUID) {
        quarantined.remove(Key(entity: entity, id: id))
    }

    /// `EntityTables.hasMissingParent`, with each parent outside the page looked up once per page.
    /// Notes that the page stored `id` live where the device held none, or a deleted one.
    mutating func arrived(_ entity: EntityType, _ id: UUID) {
        if parentEntities.contains(entity) { arrivedParents[entity, default: []].append(id) }
    }

    /// Notes that the page deleted `id`: a child later in the page whose parent it is, read as present
    /// before the delete, is an orphan (the cached answer kept it a plain record).
    mutating func parentGone(_ entity: EntityType, _ id: UUID) {
        parentMissing[Key(entity: entity, id: id)] = true
    }

    mutating func hasMissingParent(_ record: EntityRecord, besides arriving: Set<UUID>, in db: Database) throws -> Bool {
        for relation in record.entity.description.parents {
            guard case .uuid(let parent) = record[relation.field], !arriving.contains(parent) else { continue }
            let key = Key(entity: relation.entity, id: parent)
            let missing: Bool
            if let known = parentMissing[key] {
                missing = known
            } else {
                let table = relation.entity.description.table.quotedDatabaseIdentifier
                let row = try Row.fetchOne(
                    db.cachedStatement(sql: "SELECT deleted_at FROM \(table) WHERE id = ?"), arguments: [parent.storageText])
                missing = row == nil || row?["deleted_at"] as Int64? != nil
                parentMissing[key] = missing
            }
            if missing { return true }
        }
        return false
    }

    /// Ids as a JSON array of their stored text, bound as one argument to `json_each`, so one cached
    /// statement serves pages of any size. The queries walk the array and look each id up (`CROSS JOIN`
    /// keeps that order): `IN (SELECT value FROM json_each(?))` first copied the ids into a temporary
    /// B-tree, nearly half of these reads' time in `perf`.
    static func jsonArray(_ ids: some Collection<UUID>) -> String {
        var text = "["
        text.reserveCapacity(ids.count * 39 + 2)
        for id in ids {
            if text.utf8.count > 1 { text += "," }
            text += "\"" + id.storageText + "\""
        }
        return text + "]"
    }
}

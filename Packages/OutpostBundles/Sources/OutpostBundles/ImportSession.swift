import Foundation
import GRDB
import OutpostModels
import OutpostStore

/// One import's work inside the transaction its caller owns.
///
/// Each record is checked against the catalog's rules, then goes one of two ways:
/// - a record whose id the store does not hold yet is staged (`StagedTable`) and written at the end, in
///   key order; a table that started empty needs no lookup at all, which is the bulk of a first import;
/// - a record the store already holds is compared with the stored one and written (or left) through
///   `EntityTables`, as `LocalChangeDecision` says.
///
/// Orphan-ness is settled only once everything is written, so a child listed before its parent is not
/// flagged. A duplicate id among new records is found when the staged rows move (the primary key refuses
/// it) and among stored ones by the ids kept here; either way the import fails with the second record's
/// place, and nothing is written.
///
/// Memory: nothing per new record; one id per record that was already stored, a bounded cache of parents
/// found in the store, and a small entry per stored record whose parent was not found when it was read.
final class ImportSession {
    private let db: Database
    private var tables: [EntityType: StagedTable] = [:]
    private var updatedIDs: [EntityType: Set<UUID>] = [:]
    private var storedParents = BoundedIDCache(capacity: 4096)
    private var pending: [PendingRecord] = []
    private var documentLocation: SourceLocation?
    private(set) var counts: [EntityType: ImportCounts] = [:]

    init(db: Database) {
        self.db = db
    }

    /// Checks and applies one record from the bundle.
    func apply(_ incoming: EntityRecord, at location: SourceLocation) throws {
        let entity = incoming.entity
        if let failure = incoming.validationErrors.first { throw BundleError(failure, at: location) }
        if documentLocation == nil {
            documentLocation = SourceLocation(file: location.file, archiveEntry: location.archiveEntry)
        }
        let table = try table(for: entity)
        guard try table.contains(incoming.id) else {
            try table.stage(incoming, at: location)
            return
        }
        guard updatedIDs[entity, default: []].insert(incoming.id).inserted else {
            throw BundleError(.duplicateRecord, message: "a second record with this id",
                entity: entity, id: incoming.id).located(location)
        }
        try applyOverStored(incoming)
    }

    /// Writes the staged records, flags orphans and settles records whose parents were missing when they
    /// were read, now that every record is in its table.
    func finish() throws {
        let staged = EntityCatalog.all.compactMap { tables[$0.type] }
        let place = documentLocation ?? SourceLocation()
        for table in staged {
            try table.flush(location: place)
            counts[table.description.type, default: ImportCounts()].inserted += table.stagedCount
        }
        for table in staged {
            counts[table.description.type, default: ImportCounts()].orphaned += try table.flagOrphans()
        }
        for table in staged { try table.drop() }
        try settlePending()
    }

    private func table(for entity: EntityType) throws -> StagedTable {
        if let table = tables[entity] { return table }
        let table = try StagedTable(entity.description, in: db)
        tables[entity] = table
        return table
    }

    /// A record the store already holds: kept, left as it is, or replaced.
    private func applyOverStored(_ incoming: EntityRecord) throws {
        let entity = incoming.entity
        let stored = try EntityTables.fetchRecord(entity, id: incoming.id, in: db)
        switch LocalChangeDecision.decide(stored: stored, incoming: incoming) {
        case .keepLocalChanges:
            counts[entity, default: ImportCounts()].skippedLocallyModified += 1
            return
        case .refreshAroundLocalChanges:
            if try EntityTables.refreshUnchangedFields(from: incoming, in: db) != nil {
                counts[entity, default: ImportCounts()].refreshedAroundLocalChanges += 1
            } else {
                counts[entity, default: ImportCounts()].skippedLocallyModified += 1
            }
            return
        case .keepNewerStored:
            counts[entity, default: ImportCounts()].skippedOutdated += 1
            return
        case .write:
            break
        }
        if try parentsExist(incoming) {
            try write(incoming, over: stored)
            return
        }
        // A parent is missing so far (it may be staged): store the record as orphaned and settle it at the end.
        var orphaned = incoming
        orphaned.sync.isOrphaned = true
        let before: PendingRecord.Before =
            stored == nil ? .absent : stored == incoming ? .sameAsAttached : stored == orphaned ? .sameAsOrphaned : .different
        if let stored, stored != orphaned {
            try EntityTables.replaceWithServerVersion(stored, by: orphaned, in: db)
        } else if stored == nil {
            try EntityTables.save(orphaned, in: db)
        }
        pending.append(PendingRecord(entity: entity, id: incoming.id, before: before))
    }

    private func settlePending() throws {
        for record in pending {
            guard var stored = try EntityTables.fetchRecord(record.entity, id: record.id, in: db) else { continue }
            let attached = try parentsExist(stored)
            var tally = counts[record.entity, default: ImportCounts()]
            switch (record.before, attached) {
            case (.absent, _): tally.inserted += 1
            case (.sameAsAttached, true), (.sameAsOrphaned, false): tally.unchanged += 1
            default: tally.updated += 1
            }
            if attached {
                stored.sync.isOrphaned = false
                try EntityTables.save(stored, in: db)
            } else {
                tally.orphaned += 1
            }
            counts[record.entity] = tally
        }
        pending.removeAll()
    }

    private func write(_ record: EntityRecord, over stored: EntityRecord?) throws {
        if let stored, stored == record {
            counts[record.entity, default: ImportCounts()].unchanged += 1
            return
        }
        if let stored {
            try EntityTables.replaceWithServerVersion(stored, by: record, in: db)
        } else {
            try EntityTables.save(record, in: db)
        }
        if stored == nil {
            counts[record.entity, default: ImportCounts()].inserted += 1
        } else {
            counts[record.entity, default: ImportCounts()].updated += 1
        }
    }

    /// Whether every parent the record names is in the store's tables now (staged records are not yet).
    private func parentsExist(_ record: EntityRecord) throws -> Bool {
        for relation in record.entity.description.parents {
            guard case .uuid(let parentID) = record[relation.field] else { continue }
            let key = ParentKey(entity: relation.entity, id: parentID)
            if storedParents.contains(key) { continue }
            guard try EntityTables.containsRecord(relation.entity, id: parentID, in: db) else { return false }
            storedParents.insert(key)
        }
        return true
    }

    private struct PendingRecord {
        enum Before { case absent, sameAsAttached, sameAsOrphaned, different }
        let entity: EntityType
        let id: UUID
        let before: Before
    }
}

/// A parent known to be in the store.
struct ParentKey: Hashable {
    let entity: EntityType
    let id: UUID
}

/// A set that forgets everything when full: parents repeat (every issue names the same project), so a
/// small cache saves most store lookups while its memory stays fixed however large the bundle.
struct BoundedIDCache {
    private var members: Set<ParentKey> = []
    private let capacity: Int

    init(capacity: Int) { self.capacity = capacity }

    func contains(_ key: ParentKey) -> Bool { members.contains(key) }

    mutating func insert(_ key: ParentKey) {
        if members.count >= capacity { members.removeAll(keepingCapacity: true) }
        members.insert(key)
    }
}

import Foundation
import GRDB
import OutpostBundles
import OutpostSchema

/// One import's work inside the transaction its caller owns.
///
/// Each record (already checked against the catalog's rules by the bundle's reader) goes one of two ways:
/// - a record whose id the store does not hold yet is staged (`StagedTable`) and written at the end, in
///   key order; a table that started empty needs no lookup at all, which is the bulk of a first import;
/// - a record the store already holds is written (or left) as `ServerArrival`, the rule pulled records
///   go through too, says for a server version without clocks, unless the version held is one the server
///   gave this device: that stands, and a pull brings anything newer.
///
/// Every version it writes is noted as the bundle's word (`ImportedVersions`) until a pull confirms it.
///
/// Every record it writes is noted, and `journal()` appends the notes to the change journal, so
/// `changes()` subscribers in this process and others hear of the import as of any other commit.
///
/// Orphan-ness is settled only once everything is written, so a child listed before its parent is not
/// flagged. A duplicate id among new records is found when the staged rows move (the primary key refuses
/// it) and among stored ones by the ids kept here; either way the import fails with the second record's
/// place, and nothing is written.
///
/// Every record is held to the bundle's project by what the store holds (`BundleRecordStream.requireProject`):
/// a record the store holds in another project, or one naming a parent the store holds in another
/// project, refuses the whole import, so a bundle can neither overwrite another project's records nor
/// hang records under them (what the bundle itself says of a record's project its stream checks).
///
/// Memory: nothing per new record; one id per record that was already stored, bounded caches of parents
/// found in the store and of their projects, and a small entry per stored record whose parent was not
/// found when it was read.
final class ImportSession {
    private let db: Database
    private var tables: [EntityType: StagedTable] = [:]
    private var updatedIDs: [EntityType: Set<UUID>] = [:]
    private var storedParents = BoundedIDCache(capacity: 4096)
    /// The project of each parent looked up in the store (nil: none the store can tell), forgotten when full.
    private var parentProjects: [ParentKey: UUID?] = [:]
    private let stream: BundleRecordStream
    private var pending: [PendingRecord] = []
    private(set) var counts: [EntityType: ImportCounts] = [:]
    /// Records written since the last `journal()`.
    private var written: [StoreChange] = []
    private let origin: String
    /// Whether the store knows of deletes of records it never held (`KnownDeletions`): only then is a
    /// new record looked up there.
    private let checksKnownDeletions: Bool
    /// Whether versions written are noted as the bundle's word: not for a bundle the device downloaded
    /// from its own server (`LocalStore.importBundle(at:fromServer:)`), whose versions are the server's.
    private let notesVersions: Bool
    /// Whether a record came with a server id (a server in `--server-ids` mode): its references are
    /// server ids the store links only once a pull tells it whose they are.
    private(set) var carriesServerIDs = false

    /// A session writing `stream`'s records in `db`'s open transaction; `origin` names the store in the
    /// change journal.
    init(db: Database, origin: String, stream: BundleRecordStream, notesVersions: Bool = true) throws {
        self.db = db
        self.notesVersions = notesVersions
        self.origin = origin
        self.stream = stream
        checksKnownDeletions = try KnownDeletions.any(in: db)
    }

    /// Applies one record from the bundle.
    func apply(_ incoming: EntityRecord, at location: SourceLocation) throws {
        if incoming.sync.serverID != nil { carriesServerIDs = true }
        let entity = incoming.entity
        let table = try table(for: entity)
        try requireProjectOfStoredParents(incoming, at: location)
        guard try table.contains(incoming.id) else {
            // A record this device knows the server deleted: the bundle is older than the delete
            // (downloaded, or exported by a teammate, before it) whatever version it claims, as a
            // bundle's versions are its word (`ImportedVersions`); if the server brought the record
            // back, a pull brings it.
            if checksKnownDeletions, try KnownDeletions.contains(entity, incoming.id, in: db) {
                counts[entity, default: ImportCounts()].skippedOutdated += 1
                return
            }
            try table.stage(incoming, at: location)
            note(incoming)
            return
        }
        guard updatedIDs[entity, default: []].insert(incoming.id).inserted else {
            throw BundleError(.duplicateRecord, message: "a second record with this id",
                entity: entity, id: incoming.id).located(location)
        }
        let stored = try EntityTables.fetchRecord(entity, id: incoming.id, in: db)
        if let stored, let project = try projectInStore(of: stored) {
            // Records never move between projects: the one it is held in is the one it belongs to.
            try stream.requireProject(
                project, of: entity, id: incoming.id, because: "this device holds it in that project", at: location)
        }
        try applyOverStored(incoming, stored: stored)
    }

    /// Appends the records written since the last call to the change journal, as one entry.
    func journal() throws {
        try ChangeJournal.append(written, origin: origin, in: db)
        written.removeAll(keepingCapacity: true)
    }

    /// Writes the staged records, flags orphans and settles records whose parents were missing when they
    /// were read, now that every record is in its table. `place` is the document, for a duplicate's error.
    func finish(at place: SourceLocation) throws {
        let staged = EntityCatalog.all.compactMap { tables[$0.type] }
        for table in staged {
            try table.flush(location: place)
            if notesVersions { try table.noteImportedVersions() }
            counts[table.description.type, default: ImportCounts()].inserted += table.stagedCount
        }
        for table in staged {
            counts[table.description.type, default: ImportCounts()].orphaned += try table.flagOrphans()
        }
        for table in staged { try table.drop() }
        try settlePending()
        try journal()
    }

    private func note(_ record: EntityRecord) {
        written.append(StoreChange(entity: record.entity, recordID: record.id, operation: .update))
    }

    private func table(for entity: EntityType) throws -> StagedTable {
        if let table = tables[entity] { return table }
        let table = try StagedTable(entity.description, in: db)
        tables[entity] = table
        return table
    }

    /// Holds `record` to the bundle's project by the parent it belongs through (the first parent it
    /// names, as `PulledPage.project` follows), when the store holds that parent, in the project it is
    /// held in. The scope records it names the stream checks itself; a parent the store does not hold
    /// (yet: a staged one) is the bundle's, checked as a record of its own.
    ///
    /// Its other references (an issue's asset or assignee) place nothing: a pull stores them as they
    /// come, and so does this. The server answers a reference into a project the pusher cannot see as it
    /// answers an id that exists nowhere, so such a reference can be on the server; refusing it here let
    /// one crew member stop every device that also held the other project from importing this one.
    private func requireProjectOfStoredParents(_ record: EntityRecord, at location: SourceLocation) throws {
        let scope = EntityCatalog.schema.scope
        let owning = record.entity.description.parents.lazy.compactMap { relation -> (ParentRelation, UUID)? in
            guard case .uuid(let parentID) = record[relation.field] else { return nil }
            return (relation, parentID)
        }.first
        guard let (relation, parentID) = owning, relation.entity != scope, try !table(for: relation.entity).startedEmpty else { return }
        let key = ParentKey(entity: relation.entity, id: parentID)
        let project: UUID?
        if let known = parentProjects[key] {
            project = known
        } else {
            project = try EntityTables.fetchRecord(relation.entity, id: parentID, in: db).flatMap { try projectInStore(of: $0) }
            if parentProjects.count >= 4096 { parentProjects.removeAll(keepingCapacity: true) }
            parentProjects[key] = project
        }
        guard let project else { return }
        try stream.requireProject(
            project, of: record.entity, id: record.id,
            because: "its \(relation.field) names \(relation.entity.rawValue) \(parentID.lowercasedText), which this device holds in that project",
            at: location)
    }

    /// The project the store holds `record` in, through its owning parents; nil when the store cannot tell.
    private func projectInStore(of record: EntityRecord) throws -> UUID? {
        try PulledPage.project(of: record, in: [:]) { entity, id in try EntityTables.fetchRecord(entity, id: id, in: db) }
    }

    /// A record the store already holds (`stored`, nil if it went since): kept, left as it is, or replaced.
    private func applyOverStored(_ incoming: EntityRecord, stored: EntityRecord?) throws {
        let entity = incoming.entity
        // A version the server gave this device (a pull, a push's answer) stands against any bundle,
        // whatever version the bundle claims: a bundle's versions are its word (`ImportedVersions`), and
        // raised ones brought deleted records back and held edited ones against the server for good. A
        // pull brings whatever is newer, with its clocks.
        if let stored, stored.sync.version > 0, stored != incoming,
            try !ImportedVersions.isUnconfirmed(entity, stored.id, version: stored.sync.version, in: db)
        {
            if stored.sync.syncStatus == .synced {
                counts[entity, default: ImportCounts()].skippedOutdated += 1
            } else {
                counts[entity, default: ImportCounts()].skippedLocallyModified += 1
            }
            return
        }
        let arrival = ServerArrival.decide(
            stored: stored, incomingVersion: incoming.sync.version,
            changeWaiting: stored.map { $0.sync.syncStatus != .synced } ?? false, carriesClocks: false)
        switch arrival {
        case .keepWaitingChange, .mergeWithWaitingChange:
            counts[entity, default: ImportCounts()].skippedLocallyModified += 1
            return
        case .refreshAroundWaitingChange:
            if try EntityTables.refreshUnchangedFields(from: incoming, in: db) != nil {
                counts[entity, default: ImportCounts()].refreshedAroundLocalChanges += 1
                if notesVersions { try ImportedVersions.note(entity, incoming.id, version: incoming.sync.version, in: db) }
                note(incoming)
            } else {
                counts[entity, default: ImportCounts()].skippedLocallyModified += 1
            }
            return
        case .keepNewerStored:
            counts[entity, default: ImportCounts()].skippedOutdated += 1
            return
        case .store:
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
        if notesVersions { try ImportedVersions.note(entity, incoming.id, version: incoming.sync.version, in: db) }
        note(incoming)
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
        if notesVersions { try ImportedVersions.note(record.entity, record.id, version: record.sync.version, in: db) }
        note(record)
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

    /// Hashed by the id alone, as `PulledPageReads.Key`: ids are random. Equal still means both equal.
    func hash(into hasher: inout Hasher) {
        hasher.combine(id)
    }
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

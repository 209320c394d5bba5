import Foundation
import GRDB
import OutpostConflicts
import OutpostModels
import OutpostSync

/// What the server does with one mutation, inside the push's write transaction: check its shape and
/// clocks, translate server-id references, check the caller may touch every project concerned,
/// compare the base version, resolve with the entity's `ConflictPolicy` (the devices' own), validate
/// the result against the catalog and write it at the next change sequence.
///
/// A refusal throws a `ServerError` with the wire code that becomes the mutation's `rejected` reason.
struct PushRules: Sendable {
    let assignsServerIDs: Bool
    let policy = ConflictPolicy()

    func apply(_ mutation: PushMutation, by caller: Caller, in db: Database, now: Date) throws -> MutationOutcome {
        do {
            return try applyChecked(mutation, by: caller, in: db, now: now)
        } catch let error as ConflictError {
            throw ServerError.badRequest(error.description)
        }
    }

    private func applyChecked(_ mutation: PushMutation, by caller: Caller, in db: Database, now: Date) throws
        -> MutationOutcome
    {
        try checkShape(mutation, now: now)
        let fields = try clientReferences(in: mutation, db: db)
        let existing = try StoredRecord.fetch(mutation.entity, id: mutation.recordID, in: db)
        if let existing, try !Access.canSee(existing, caller, in: db) {
            throw ServerError.forbidden("you are not a member of this record's project")
        }
        let merged: VersionedRecord
        switch (mutation.operation, existing) {
        case (.create, nil):
            let record = EntityRecord(
                entity: mutation.entity, id: mutation.recordID, fields: fields,
                sync: SyncMetadata(createdAt: mutation.createdAt ?? now, updatedAt: now))
            merged = try VersionedRecord(record: record, clocks: mutation.clocks)
        case (.update, nil), (.delete, nil):
            throw ServerError.notFound("no \(mutation.entity.rawValue) \(mutation.recordID.storageText) on the server")
        case (_, let current?) where current.version != mutation.baseVersion:
            // A create of a record the server holds is a stale base too (0); after merging, the engine
            // sends it again on the returned version and it resolves like an update.
            return .conflict(serverRecord: try wireRecord(current, in: db))
        case (_, let current?):
            let change = EntityRecord(
                entity: mutation.entity, id: mutation.recordID, fields: fields,
                sync: SyncMetadata(version: mutation.baseVersion, createdAt: current.createdAt))
            let client = try VersionedRecord(
                record: change, clocks: mutation.clocks,
                deletion: mutation.operation == .delete ? mutation.deletion : nil)
            let resolution = try policy.resolve(client: client, server: current.versionedRecord)
            if resolution.isRefusal {
                throw ServerError.badRequest(
                    "\(mutation.entity.rawValue) is append-only: an existing record cannot be edited; save a new one")
            }
            merged = resolution.merged
        }
        if let problem = merged.record.validationErrors.first {
            throw ServerError.badRequest(problem.description)
        }
        let project = try projectOf(merged.record, existing: existing, caller: caller, in: db)
        try checkReferences(merged.record, caller: caller, in: db)
        if mutation.entity == .project { try link(opportunityOf: merged.record, in: db) }
        var stored = StoredRecord(
            entity: mutation.entity, id: mutation.recordID, serverID: existing?.serverID,
            projectID: project, ownerID: existing?.ownerID ?? caller.userID, version: (existing?.version ?? 0) + 1,
            sequence: try nextValue("change_sequence", in: db), fields: merged.record.fields, clocks: merged.clocks,
            deletion: merged.deletion, createdAt: existing?.createdAt ?? merged.record.sync.createdAt, updatedAt: now)
        if stored.serverID == nil, assignsServerIDs {
            stored.serverID = try nextValue("server_id", in: db)
        }
        try stored.save(in: db)
        if mutation.entity == .project {
            try db.execute(
                sql: "INSERT OR IGNORE INTO memberships (project_id, user_id) VALUES (?, ?)",
                arguments: [stored.id.storageText, caller.userID.storageText])
        }
        return .applied(version: stored.version, serverID: stored.serverID.map(String.init))
    }

    /// What `InMemoryTransport` also refuses, plus clocks too far ahead of the server's time.
    private func checkShape(_ mutation: PushMutation, now: Date) throws {
        let description = mutation.entity.description
        if let unknown = mutation.fields.keys.sorted().first(where: { description.field(named: $0) == nil }) {
            throw ServerError.badRequest("'\(unknown)' is not a field of \(mutation.entity.rawValue)")
        }
        if Set(mutation.fields.keys) != Set(mutation.clocks.keys) {
            throw ServerError.badRequest("every field needs a clock and every clock a field")
        }
        if (mutation.operation == .delete) != (mutation.deletion != nil) {
            throw ServerError.badRequest("a delete, and only a delete, carries a deletion clock")
        }
        let limit = now.addingTimeInterval(Double(HybridLogicalClock.defaultMaximumDrift.components.seconds))
        let clocks = Array(mutation.clocks.values) + (mutation.deletion.map { [$0] } ?? [])
        if let ahead = clocks.first(where: { $0.date > limit }) {
            throw ServerError.badRequest(
                "clock \(ahead.encoded) runs more than 5 minutes ahead of the server: check the device's date and time")
        }
    }

    /// The fields with every parent reference sent as a server id (text) turned into the client id.
    private func clientReferences(in mutation: PushMutation, db: Database) throws -> [String: FieldValue] {
        var fields = mutation.fields
        for relation in mutation.entity.description.parents {
            guard case .text(let text) = fields[relation.field] ?? .null else { continue }
            guard let serverID = Int64(text),
                let id = try String.fetchOne(
                    db, sql: "SELECT id FROM records WHERE entity = ? AND server_id = ?",
                    arguments: [relation.entity.rawValue, serverID]
                ).flatMap(UUID.init(uuidString:))
            else {
                throw ServerError.notFound("\(relation.field): no \(relation.entity.rawValue) with server id '\(text)'")
            }
            fields[relation.field] = .uuid(id)
        }
        return fields
    }

    /// The project a record belongs to: itself for a project, else that of the first parent it names;
    /// an opportunity keeps the project that links it (none until one does). The caller must be a
    /// member of it, except of a project they are creating (they become its first member).
    private func projectOf(_ record: EntityRecord, existing: StoredRecord?, caller: Caller, in db: Database) throws
        -> UUID?
    {
        switch record.entity {
        case .project:
            let hasMembers = try Bool.fetchOne(
                db, sql: "SELECT 1 FROM memberships WHERE project_id = ?", arguments: [record.id.storageText]) ?? false
            if existing != nil || hasMembers, try !Access.isMember(caller, of: record.id, in: db) {
                throw ServerError.forbidden("you are not a member of project \(record.id.storageText)")
            }
            return record.id
        case .opportunity:
            return existing?.projectID
        default:
            for relation in record.entity.description.parents {
                guard case .uuid(let parentID) = record[relation.field] else { continue }
                let project: UUID?
                if relation.entity == .project {
                    guard try StoredRecord.fetch(.project, id: parentID, in: db) != nil else {
                        throw ServerError.notFound("\(relation.field): no project \(parentID.storageText) on the server")
                    }
                    project = parentID
                } else {
                    guard let parent = try StoredRecord.fetch(relation.entity, id: parentID, in: db) else {
                        throw ServerError.notFound(
                            "\(relation.field): no \(relation.entity.rawValue) \(parentID.storageText) on the server")
                    }
                    project = parent.projectID
                }
                guard let project, try Access.isMember(caller, of: project, in: db) else {
                    throw ServerError.forbidden("you are not a member of the project \(relation.field) belongs to")
                }
                return project
            }
            throw ServerError.badRequest("a \(record.entity.rawValue) must name its parent")
        }
    }

    /// Every other record the record names must be one the caller may see, so ids of other projects'
    /// records cannot be probed or linked. A reference to a record the server does not hold is kept
    /// (the device flags such records orphaned rather than dropping them).
    private func checkReferences(_ record: EntityRecord, caller: Caller, in db: Database) throws {
        for relation in record.entity.description.parents {
            guard case .uuid(let parentID) = record[relation.field],
                let parent = try StoredRecord.fetch(relation.entity, id: parentID, in: db)
            else { continue }
            guard try Access.canSee(parent, caller, in: db) else {
                throw ServerError.forbidden("\(relation.field) names a record of a project you are not a member of")
            }
        }
    }

    /// A project naming an opportunity no project had yet makes the opportunity that project's: it moves
    /// to the end of the change sequence, just before the project itself, so the project's other members
    /// pull it, parent first.
    private func link(opportunityOf project: EntityRecord, in db: Database) throws {
        guard case .uuid(let id) = project["opportunityID"],
            var opportunity = try StoredRecord.fetch(.opportunity, id: id, in: db), opportunity.projectID == nil
        else { return }
        opportunity.projectID = project.id
        opportunity.sequence = try nextValue("change_sequence", in: db)
        try opportunity.save(in: db)
    }

    /// The record as pull and conflicts send it. In server-id mode a reference names the parent's server
    /// id when the client can already map it: the parent changed before the record (so a client reading
    /// in sequence has pulled it, or created it) or it travels in the same page (`page`). A parent that
    /// moved later in the sequence (an opportunity linked after its project) is named by client id,
    /// since the client would meet its server id only afterwards.
    func wireRecord(_ record: StoredRecord, page: Set<RecordKey> = [], in db: Database) throws -> ServerRecord {
        var wire = record.serverRecord
        guard assignsServerIDs else { return wire }
        for relation in record.entity.description.parents {
            guard case .uuid(let parentID) = wire.fields[relation.field] ?? .null,
                let row = try Row.fetchOne(
                    db, sql: "SELECT server_id, sequence FROM records WHERE entity = ? AND id = ?",
                    arguments: [relation.entity.rawValue, parentID.storageText]),
                let serverID = row["server_id"] as Int64?
            else { continue }
            let parentSequence: Int64 = row["sequence"]
            guard parentSequence < record.sequence || page.contains(RecordKey(entity: relation.entity, id: parentID))
            else { continue }
            wire.fields[relation.field] = .text(String(serverID))
        }
        return wire
    }

    /// Writes a record the seed defines, stamped with the server's clock.
    func insertSeeded(
        _ entity: EntityType, id: UUID, projectID: UUID, owner: UUID, fields: [String: FieldValue],
        stamp: HybridTimestamp, in db: Database, now: Date
    ) throws {
        let record = StoredRecord(
            entity: entity, id: id, serverID: assignsServerIDs ? try nextValue("server_id", in: db) : nil,
            projectID: projectID, ownerID: owner, version: 1, sequence: try nextValue("change_sequence", in: db),
            fields: fields, clocks: fields.mapValues { _ in stamp }, deletion: nil, createdAt: now, updatedAt: now)
        if let problem = record.entityRecord.validationErrors.first {
            throw ServerError(.invalidSeed, message: problem.description)
        }
        try record.save(in: db)
    }

    /// The next value of a counter, taken inside the caller's write transaction.
    private func nextValue(_ counter: String, in db: Database) throws -> Int64 {
        guard let value = try Int64.fetchOne(
            db, sql: "UPDATE counters SET value = value + 1 WHERE name = ? RETURNING value", arguments: [counter])
        else { throw ServerError(.databaseFailure, message: "the counter \(counter) is missing") }
        return value
    }
}

/// A record's identity: its entity and client id.
struct RecordKey: Sendable, Hashable {
    let entity: EntityType
    let id: UUID
}

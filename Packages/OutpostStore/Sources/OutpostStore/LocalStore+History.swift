import Foundation
import GRDB
import OutpostBundles
import OutpostConflicts
import OutpostSchema

/// What rebuilding the replica against a restored server did (`LocalStore.finishHistoryRebuild`).
public struct HistoryRebuildReport: Sendable, Hashable {
    /// Records the restored server no longer holds that this device wrote to (or that a record it wrote
    /// to needs as a parent): queued again as creates with the values the device holds.
    public var recreated = 0
    /// Projects the restored server no longer holds that another device made, which this device wrote
    /// to or holds records of: kept here, never sent as this device's create (its user would own them);
    /// what this device wrote to one goes as an update, which waits for its maker's copy.
    public var kept = 0
    /// Records the restored server no longer holds that this device never wrote to: removed here, as a
    /// device that never held them would not hold them either.
    public var removed = 0

    /// Nothing recreated or removed.
    public init() {}
}

/// Where this device stands in the server's history (`sync_state`): the last checkpoint the server
/// gave (`PullResponse.checkpoint`, `PushResponse.checkpoint`), the checkpoints imported bundles
/// carried that the server has not confirmed yet, and whether a rebuild after a restore is under way.
enum HistoryState {
    static let checkpointKey = "history_checkpoint"
    static let rebuildKey = "history_rebuild"
    /// Space-separated, oldest first.
    static let importedKey = "history_checkpoints_imported"

    static func save(checkpoint: String, in db: Database) throws {
        try db.cachedStatement(sql: "INSERT OR REPLACE INTO sync_state (key, value) VALUES (?, ?)")
            .execute(arguments: [checkpointKey, checkpoint])
    }

    static func checkpoint(in db: Database) throws -> String? {
        try String.fetchOne(db.cachedStatement(sql: "SELECT value FROM sync_state WHERE key = ?"), arguments: [checkpointKey])
    }

    static func importedCheckpoints(in db: Database) throws -> [String] {
        try SyncState.list(of: importedKey, in: db)
    }

    private static func saveImported(_ checkpoints: [String], in db: Database) throws {
        try SyncState.setList(importedKey, to: checkpoints, in: db)
    }

    /// How many imported checkpoints may wait on a device whose own checkpoint is `own`: one fewer than a
    /// header carries, so an export of this device carries them all with its own; a device with none
    /// keeps as many as a header carries, since its export carries no own one. Refusing the 64
    /// another device's export may carry left a fresh device unable to import it (attack 123, F3). It
    /// usually gets its own from a pull, which first has the server confirm every waiting one
    /// (`SyncEngine`); when it gets one with them still waiting, `exportCheckpoints` asks for a sync.
    static func maximumImported(besides own: String?) -> Int {
        own == nil ? BundleCheckpoints.maximumCount : BundleCheckpoints.maximumCount - 1
    }

    /// Keeps the checkpoints an imported bundle carried for the server to confirm, leaving out ones
    /// the device holds already. Returns the count that would wait, keeping nothing, when that is more
    /// than `maximumImported(besides:)`; nil when kept.
    static func noteImported(_ checkpoints: [String], in db: Database) throws -> (waiting: Int, maximum: Int)? {
        let own = try checkpoint(in: db)
        let before = try importedCheckpoints(in: db)
        var kept = before
        for checkpoint in checkpoints where checkpoint != own && !kept.contains(checkpoint) { kept.append(checkpoint) }
        if kept == before { return nil }
        let maximum = maximumImported(besides: own)
        guard kept.count <= maximum else { return (kept.count, maximum) }
        try saveImported(kept, in: db)
        return nil
    }

    static func confirmImported(_ checkpoint: String, in db: Database) throws {
        try saveImported(try importedCheckpoints(in: db).filter { $0 != checkpoint }, in: db)
    }

    /// What an export of this device carries: its own checkpoint, then the unconfirmed imported ones.
    /// A receiving device confirms every one, since the records may come from any of them.
    /// One more than a header holds is refused, not cut: a device that kept a full header's worth with
    /// no checkpoint of its own, then got one before a pull had them confirmed (a push in a run whose
    /// budget ran out before its pull, or a page applied after an import made during the pull), is asked
    /// to sync, whose pull has them confirmed; leaving one out would spare the receiving device a
    /// question a restored server must be asked.
    static func exportCheckpoints(in db: Database) throws -> [String] {
        let own = try checkpoint(in: db).flatMap { BundleCheckpoints.isValid($0) ? $0 : nil }
        let carried = (own.map { [$0] } ?? []) + (try importedCheckpoints(in: db))
        guard carried.count <= BundleCheckpoints.maximumCount else {
            throw BundleError(
                .limitExceeded,
                message: "this device holds \(carried.count - 1) checkpoints of the server's history that imports brought and "
                    + "the server has not confirmed, and one of its own: more than the \(BundleCheckpoints.maximumCount) a "
                    + "bundle carries; sync, then export again")
        }
        return carried
    }

    static func isRebuilding(in db: Database) throws -> Bool {
        try String.fetchOne(db.cachedStatement(sql: "SELECT value FROM sync_state WHERE key = ?"), arguments: [rebuildKey]) != nil
    }
}

extension LocalStore {
    /// The last checkpoint the server gave this device, sent with every pull and push; nil before the
    /// first answer and while a rebuild is under way.
    public func historyCheckpoint() throws(StoreError) -> String? {
        try read { try HistoryState.checkpoint(in: $0) }
    }

    /// Checkpoints that imported bundles and exports carried and the server has not confirmed yet,
    /// oldest first. The sync engine asks the server about each before it pulls: the records such an
    /// import brought may come from a history a restore has since lost, which this device's own
    /// checkpoint cannot tell.
    public func importedCheckpoints() throws(StoreError) -> [String] {
        try read { try HistoryState.importedCheckpoints(in: $0) }
    }

    /// Forgets `checkpoint` once the server confirmed its history holds it.
    public func confirmImportedCheckpoint(_ checkpoint: String) throws(StoreError) {
        try write { db in try HistoryState.confirmImported(checkpoint, in: db) }
    }

    /// Whether a rebuild after a server restore began and has not finished: the next pull starts from
    /// the beginning again with `PulledPage.rebuildsHistory` (a rebuild cut short starts over).
    public func isRebuildingHistory() throws(StoreError) -> Bool {
        try read { try HistoryState.isRebuilding(in: $0) }
    }

    /// Starts over against a server whose history no longer holds this device's checkpoint (restored
    /// from a backup; it answered `history_changed`). In one transaction: the pull cursors, the
    /// checkpoint, the server-id map (a restored server may give a lost record's id to another) and the
    /// deletions known only by id are forgotten; every record and every waiting change is marked as made
    /// on no version the server holds (0), since versions of the lost history mean nothing to the
    /// restored one; every finished upload of an original asks the server again. Nothing the user wrote
    /// is touched. The pull that follows brings every record again
    /// (`PulledPage.rebuildsHistory`), then `finishHistoryRebuild` settles what it did not bring.
    public func beginHistoryRebuild(now: Date = Timestamp.now()) throws(StoreError) {
        try write { db in
            try db.execute(
                sql: "INSERT OR REPLACE INTO sync_state (key, value) VALUES (?, ?)",
                arguments: [HistoryState.rebuildKey, String(now.storageMilliseconds)])
            try db.execute(sql: "DELETE FROM sync_state WHERE key = ?", arguments: [HistoryState.checkpointKey])
            // The rebuild settles whatever imports brought: their checkpoints need no answer now.
            try db.execute(sql: "DELETE FROM sync_state WHERE key = ?", arguments: [HistoryState.importedKey])
            try db.execute(sql: "DELETE FROM sync_state WHERE key = ?", arguments: [BundlePositions.key])
            try db.execute(sql: "DELETE FROM sync_state WHERE key IN (?, ?)", arguments: [RereadProjects.pendingKey, RereadProjects.readingKey])
            try db.execute(sql: "DELETE FROM sync_state WHERE key = ?", arguments: [OwnSequences.key])
            try db.execute(sql: "DELETE FROM sync_cursors")
            try db.execute(sql: "DELETE FROM server_id_map")
            try db.execute(sql: "DELETE FROM known_deletions")
            try db.execute(sql: "DELETE FROM imported_versions")
            for description in EntityCatalog.all {
                try db.execute(sql: "UPDATE \(description.table.quotedDatabaseIdentifier) SET version = 0")
            }
            try db.execute(sql: "UPDATE mutation_queue SET base_version = 0 WHERE status != 'done'")
            // An original uploaded after the backup is not in the restored history (its folder may hold the
            // file, its database does not): each upload asks the server again where it stands, and goes on
            // from there (a finished one costs one status request).
            try db.execute(sql: "UPDATE media_uploads SET status = 'pending', attempts = 0, last_error = NULL WHERE status = 'done'")
            // Versions of the lost history kept in the clocks (a held version, a deferred tombstone, the
            // values pulls replaced) would be compared with the restored history's.
            let rows = try Row.fetchAll(
                db, sql: """
                    SELECT entity, record_id, clocks FROM field_clocks
                    WHERE clocks LIKE '%heldVersion%' OR clocks LIKE '%deferredTombstone%' OR clocks LIKE '%pulled%'
                    """)
            for row in rows {
                guard let entity = EntityType(rawValue: row["entity"]), let id = UUID(uuidString: row["record_id"]) else { continue }
                var clocks = try FieldClocks.Stored.read(row["clocks"], entity: entity)
                clocks.heldVersion = nil
                clocks.deferredTombstone = nil
                clocks.pulled = nil
                try FieldClocks.write(clocks, entity, id, in: db)
            }
        }
    }

    /// Ends a rebuild once its pull reached the end: `seen` holds every record the pull brought. A
    /// record it did not bring is one the restored server does not hold. Written to by this device
    /// (or waiting to be sent, or a parent of such a record), it is queued again as a create with the
    /// values held here, its other waiting changes folded into that create, except a project another
    /// device made, which is kept (`HistoryRebuildReport.kept`); otherwise it is removed, as a fresh
    /// device would not hold it. An attachment queued again uploads its original again. One
    /// transaction, which also ends the rebuild.
    @discardableResult
    public func finishHistoryRebuild(seen: [EntityType: Set<UUID>], now: Date = Timestamp.now()) async throws(StoreError)
        -> HistoryRebuildReport
    {
        let (report, changes) = try await StoreError.mapping(path: path) {
            try await writer.finishHistoryRebuild(seen: seen, in: pool, now: now)
        }
        for change in changes { observers.publish(change) }
        return report
    }
}

/// A record the server did not send when it sent everything its caller may see.
struct UnheldKey: Hashable {
    let entity: EntityType
    let id: UUID
}

extension StoreWriter {
    func finishHistoryRebuild(seen: [EntityType: Set<UUID>], in pool: DatabasePool, now: Date) throws
        -> (HistoryRebuildReport, [StoreChange])
    {
        try transaction(in: pool) { db in
            var unseen: [UnheldKey: EntityRecord] = [:]
            var order: [UnheldKey] = []
            for description in EntityCatalog.all {
                let seenIDs = seen[description.type] ?? []
                for record in try EntityTables.fetchAll(description.type, in: db) where !seenIDs.contains(record.id) {
                    let key = UnheldKey(entity: record.entity, id: record.id)
                    unseen[key] = record
                    order.append(key)
                }
            }
            let (report, changes) = try settleUnheld(unseen, order: order, ownWritesByClocks: true, db: db, now: now)
            try db.execute(sql: "DELETE FROM sync_state WHERE key = ?", arguments: [HistoryState.rebuildKey])
            try ChangeJournal.append(changes, origin: origin, in: db)
            return (report, changes)
        }
    }

    /// Settles records the server does not hold (`unseen`, in `order`), as a fresh device would hold
    /// them plus this device's own writes: one written to here (or a parent of such a record) is queued
    /// again as a create with the values held here, its waiting changes folded into it, but a project
    /// another device made, which is kept and its values from here sent as an update; any other is
    /// removed. Written to means a change waiting, or with `ownWritesByClocks` (a restored server, which
    /// lost acknowledged writes too) a field or delete this device stamped. Inside the caller's
    /// transaction; the caller journals the changes.
    func settleUnheld(_ unseen: [UnheldKey: EntityRecord], order: [UnheldKey], ownWritesByClocks: Bool, db: Database, now: Date) throws
        -> (HistoryRebuildReport, [StoreChange])
    {
        typealias Key = UnheldKey
        var report = HistoryRebuildReport()
        var changes: [StoreChange] = []
        var recreate: Set<Key> = []
        var untouched: Set<Key> = []
        // A project the restored server lost that another device made is kept here, never queued as this
        // device's create: sent so (as the parent of this device's records, or for an edit of it), it came
        // back as this user's project, with them its owner and its real owner locked out, on whichever
        // device synced first (attack 86, F2; attack 87, 1).
        var kept: Set<Key> = []
        for key in order {
            guard let record = unseen[key] else { continue }
            let operations = try String.fetchAll(
                db, sql: "SELECT operation FROM mutation_queue WHERE entity = ? AND record_id = ? AND status != 'done'",
                arguments: [key.entity.rawValue, key.id.storageText])
            // A record created here and never sent: the server never had it, its create goes as it is.
            // (Were it answered with the answer lost, the restored server lost that too.)
            if operations.contains(MutationOperation.create.rawValue) {
                untouched.insert(key)
                continue
            }
            let clocks = try FieldClocks.read(key.entity, key.id, in: db)
            if record.sync.isDeleted {
                // This device's delete goes again too (a create of its last values, then the delete): the
                // author's own copy, brought back by its rebuild, must meet it, not a missing record.
                // A record an import brought and this device deleted goes with its delete: the server never had it.
                if ownWritesByClocks, clocks?.deletion?.node == clock.node {
                    if try isScopeMadeElsewhere(key, in: db) { kept.insert(key) } else { recreate.insert(key) }
                }
                continue
            }
            let ownWrites = ownWritesByClocks && clocks.map { stored in
                stored.fields.values.contains { $0.node == clock.node } || stored.deletion?.node == clock.node
            } ?? false
            if ownWrites || !operations.isEmpty {
                if try isScopeMadeElsewhere(key, in: db) { kept.insert(key) } else { recreate.insert(key) }
            }
        }
        // A record queued again, or still to be sent, needs its parents on the server: those the server
        // lost come back too, but a project another device made (`isScopeMadeElsewhere`).
        var added = Array(recreate.union(untouched))
        while let key = added.popLast() {
            guard let record = unseen[key] else { continue }
            for relation in record.entity.description.parents {
                guard case .uuid(let parent) = record[relation.field] else { continue }
                let parentKey = Key(entity: relation.entity, id: parent)
                guard unseen[parentKey] != nil, !untouched.contains(parentKey), !recreate.contains(parentKey),
                    !kept.contains(parentKey)
                else { continue }
                if try isScopeMadeElsewhere(parentKey, in: db) { kept.insert(parentKey) } else { recreate.insert(parentKey) }
                added.append(parentKey)
            }
        }
        for key in order where !untouched.contains(key) {
            guard var record = unseen[key] else { continue }
            try db.execute(
                sql: "DELETE FROM mutation_queue WHERE entity = ? AND record_id = ? AND status != 'done'",
                arguments: [key.entity.rawValue, key.id.storageText])
            if kept.contains(key) {
                // Kept at version 0, so its maker's copy replaces it when it comes; the values this device
                // wrote to it go again as an update, which waits for that copy (refused until then, it
                // stays this device's failed change, retried as any is) and is merged with it.
                let clocks = try FieldClocks.read(key.entity, key.id, in: db)
                let own = clocks.map { $0.fields.filter { $0.value.node == clock.node }.keys.sorted() } ?? []
                record.sync.serverID = nil
                record.sync.version = 0
                if let clocks, !own.isEmpty, !record.sync.isDeleted {
                    record.sync.syncStatus = .pending
                    try resend(record, operation: .update, fields: own, clocks: clocks, db: db, now: now)
                } else {
                    try EntityTables.save(record, in: db)
                }
                report.kept += 1
                changes.append(StoreChange(entity: key.entity, recordID: key.id, operation: .update))
            } else if recreate.contains(key) {
                let clocks = try FieldClocks.read(key.entity, key.id, in: db)
                    ?? FieldClocks.Stored(fields: [:], deletion: nil, server: nil)
                record.sync.serverID = nil
                record.sync.version = 0
                record.sync.syncStatus = .pending
                let fields = record.entity.description.fields.map(\.name)
                let deletedAt = record.sync.deletedAt
                record.sync.deletedAt = nil
                try resend(record, operation: .create, fields: fields, clocks: clocks, db: db, now: now)
                if let deletion = clocks.deletion, deletedAt != nil {
                    record.sync.deletedAt = deletedAt
                    try resend(record, operation: .delete, fields: [], clocks: clocks, deletion: deletion, db: db, now: now)
                }
                try db.execute(
                    sql: """
                        UPDATE media_uploads SET uploaded_bytes = 0, status = 'pending', attempts = 0, last_error = NULL
                        WHERE attachment_id = ?
                        """, arguments: [key.id.storageText])
                report.recreated += 1
                changes.append(StoreChange(entity: key.entity, recordID: key.id, operation: .update))
            } else {
                try db.execute(
                    sql: "DELETE FROM \(record.entity.description.table.quotedDatabaseIdentifier) WHERE id = ?",
                    arguments: [key.id.storageText])
                try db.execute(
                    sql: "DELETE FROM field_clocks WHERE entity = ? AND record_id = ?",
                    arguments: [key.entity.rawValue, key.id.storageText])
                report.removed += 1
                changes.append(StoreChange(entity: key.entity, recordID: key.id, operation: .delete))
            }
        }
        return (report, changes)
    }

    /// On a page that rebuilds the history: queues again this device's own writes of the record that
    /// the restored server's version lacks (a value stamped by this device newer than the server's
    /// stamp of that field, or this device's delete of a record the server holds live), with their
    /// original stamps and on version 0, so the page's merge settles them by the entity's strategy:
    /// taken when the server's record is an older state of what this device saw, merged (and whatever
    /// loses surfaced) when someone changed it since the restore. Returns how many changes it queued.
    func resendLostOwnWrites(of remote: VersionedRecord, in db: Database, now: Date) throws -> Int {
        let entity = remote.record.entity, id = remote.record.id
        // A change still waiting does not cover them: an acknowledged edit of one field the restore lost
        // and an unsent edit of another are both this device's, and both must reach the server.
        guard var local = try EntityTables.fetchRecord(entity, id: id, in: db),
            let clocks = try FieldClocks.read(entity, id, in: db)
        else { return 0 }
        let waiting = try MutationQueue.unfinishedChange(entity, id, in: db)
        let own = clock.node
        local.sync.syncStatus = .pending
        let ownFields = clocks.fields.filter { field, stamp in stamp.node == own && !(waiting?.fields.contains(field) ?? false) }
        // Values this device holds under a delete it took in (no change of its own waits) are the
        // tombstone's last values, which that delete already passed over here. Sent again as an update to
        // a server that holds the record deleted too, they are no lost write: a client-wins record took
        // them over the delete and came back live on every other device (attack 69, finding 3). They
        // still go as last values of a delete sent again.
        func notPassedOver(_ fields: [String]) -> [String] {
            guard local.sync.isDeleted, waiting == nil, let deletion = clocks.deletion else { return fields }
            return fields.filter { (clocks.fields[$0] ?? .origin) > deletion }
        }
        // Lost values of a record whose delete waits go with that delete, as the tombstone's last values:
        // an update queued behind it would bring the record back.
        func send(_ fields: [String]) throws -> Int {
            guard !fields.isEmpty else { return 0 }
            if local.sync.isDeleted, waiting != nil {
                var payload = MutationQueue.Payload(
                    fields: Dictionary(uniqueKeysWithValues: fields.map { ($0, local[$0]) }),
                    clocks: Dictionary(uniqueKeysWithValues: fields.map { ($0, clocks.fields[$0] ?? .origin) }), deletion: nil)
                payload.resent = true
                if try MutationQueue.carry(payload, intoWaitingDeleteOf: entity, id, in: db) { return 1 }
            }
            try resend(local, operation: .update, fields: fields, clocks: clocks, db: db, now: now)
            return 1
        }
        if remote.isContentlessTombstone {
            // The server holds the record deleted, with last values this page does not carry: every value
            // of this device's goes again. The conflict answer brings the tombstone whole, and the merge
            // keeps what the server already had, and surfaces what the delete hid (or brings the record
            // back, for an edit newer than the delete), as the entity's strategy says. This device's own
            // delete, newer than the server's, goes again too (with those values): a write between the two
            // deletes must still meet the later one.
            if local.sync.isDeleted, waiting == nil, let deletion = clocks.deletion, deletion.node == own,
                let theirs = remote.deletion, deletion > theirs
            {
                try resend(local, operation: .delete, fields: ownFields.keys.sorted(), clocks: clocks, deletion: deletion, db: db, now: now)
                return 1
            }
            return try send(notPassedOver(ownFields.keys.sorted()))
        }
        let lost = ownFields.filter { field, stamp in stamp > (remote.clocks[field] ?? .origin) }.keys.sorted()
        if local.sync.isDeleted, waiting == nil, remote.deletion == nil, let deletion = clocks.deletion {
            // This device's delete of a record the server holds live goes again, with the values it wrote
            // before it (the tombstone's last values). A delete from elsewhere is its author's to send,
            // unless this device's own values of the record were lost too: they go as last values of that
            // delete, so that the record ends as this device last saw it (sent as an update alone, it would
            // stand live on the server while deleted here until the delete's author rebuilds).
            guard deletion.node == own || !lost.isEmpty else { return 0 }
            try resend(local, operation: .delete, fields: lost, clocks: clocks, deletion: deletion, db: db, now: now)
            return 1
        }
        return try send(notPassedOver(lost))
    }

    /// Whether `key` is a project (the schema's scope) this device did not make: no create of it in its
    /// audit chain. A device's create of a project makes its user the owner, so only its maker's device
    /// sends it again to a restored server that lost it.
    private func isScopeMadeElsewhere(_ key: UnheldKey, in db: Database) throws -> Bool {
        guard key.entity == EntityCatalog.schema.scope else { return false }
        let made = try Bool.fetchOne(
            db, sql: "SELECT EXISTS (SELECT 1 FROM audit_log WHERE entity = ? AND record_id = ? AND operation = ?)",
            arguments: [key.entity.rawValue, key.id.storageBytes, MutationOperation.create.rawValue]) ?? false
        return !made
    }

    /// Queues a change of `record` with the stamps it already carries (not new ones: the values were
    /// written then), on version 0, with its audit entry.
    private func resend(
        _ record: EntityRecord, operation: MutationOperation, fields names: [String], clocks: FieldClocks.Stored,
        deletion: HybridTimestamp? = nil, db: Database, now: Date
    ) throws {
        try EntityTables.save(record, in: db)
        let fields = Dictionary(uniqueKeysWithValues: names.map { ($0, record[$0]) })
        var encoder = JSONWriter(capacity: 64 * fields.count)
        try encoder.storedFields(fields)
        let audit = try AuditTrail.append(
            entity: record.entity, recordID: record.id, operation: operation, fields: encoder.data, at: now, in: db)
        var payload = MutationQueue.Payload(
            fields: fields, clocks: Dictionary(uniqueKeysWithValues: names.map { ($0, clocks.fields[$0] ?? .origin) }),
            deletion: deletion)
        payload.resent = true
        try MutationQueue.enqueue(
            entity: record.entity, recordID: record.id, operation: operation, baseVersion: 0,
            payload: payload,
            fieldsInAudit: true, dependsOn: parents(of: record), syncClass: .structured, auditSequence: audit,
            now: now, in: db)
    }
}

import Foundation
import GRDB
import OutpostConflicts
import OutpostSchema

/// The one owner of local writes: it stamps each with the device's clock and commits the row, its
/// field clocks, the queued mutation and the audit entry in one transaction.
actor StoreWriter {
    var clock: HybridLogicalClock
    /// The clock value the file holds (`clock_last`), committed: at or after every stamp issued so far.
    private var savedClock: HybridTimestamp?
    /// Whether a page applied since the store opened has looked for quarantined records this build can
    /// store (an app update is a new process, so once per open is enough).
    var quarantineRechecked = false

    /// How far ahead of the newest stamp the saved clock value is set. Saving the exact last stamp
    /// wrote one more B-tree page in every local write (a sixth of a write's cost); saving a value
    /// 10 ms ahead writes it about once per 10 ms of continuous writing (one write in 80 at 8,000
    /// writes/s), and a restart resumes after every stamp ever issued. Every process that opens the
    /// file and writes starts from the reserve, so it must be shorter than opening a store takes
    /// (15 ms here): a second's reserve moved the clock a second ahead per widget, extension or CLI
    /// run, 300 s after 330 of them, and that device's edits then beat later ones by other devices.
    static let clockReserveMilliseconds: Int64 = 10

    /// The store this writer writes for, as its commits name it in the change journal.
    let origin: String

    init(clock: HybridLogicalClock, origin: String) {
        self.clock = clock
        self.savedClock = clock.last
        self.origin = origin
    }

    /// Runs `body` in one write transaction and, when the clock has moved past the value the file
    /// holds, saves a new one in the same transaction: the file's value covers every stamp a
    /// committed write carries, since a write that fails takes its saved value with it.
    func transaction<T>(in pool: DatabasePool, _ body: (Database) throws -> T) throws -> T {
        var saved: HybridTimestamp?
        // BEGIN and COMMIT are cached statements: GRDB's `write` parses both anew for every transaction,
        // a tenth of a local write's own work.
        let result = try pool.writeWithoutTransaction { db in
            try db.cachedStatement(sql: "BEGIN IMMEDIATE TRANSACTION").execute()
            do {
                let result = try body(db)
                saved = try saveClockIfNeeded(db)
                try db.cachedStatement(sql: "COMMIT TRANSACTION").execute()
                return result
            } catch {
                // GRDB's rollback tolerates a transaction SQLite already rolled back on its own.
                try? db.rollback()
                throw error
            }
        }
        if let saved { savedClock = saved }
        return result
    }

    /// Writes `clock_last` a reserve ahead of the clock when the clock has passed the saved value, or
    /// when the clock started again below a saved value that ran too far ahead (`HybridLogicalClock.tick`):
    /// left there, a restart would resume from it and stamps after the restart could repeat earlier ones.
    private func saveClockIfNeeded(_ db: Database) throws -> HybridTimestamp? {
        let restartedBelow = { (saved: HybridTimestamp, last: HybridTimestamp) in
            Duration.milliseconds(saved.physicalMilliseconds - last.physicalMilliseconds)
                > .milliseconds(Self.clockReserveMilliseconds) + self.clock.maximumDrift
        }
        guard let last = clock.last, savedClock.map({ last > $0 || restartedBelow($0, last) }) ?? true else { return nil }
        let physical = min(
            last.physicalMilliseconds + Self.clockReserveMilliseconds, HybridTimestamp.maximumPhysicalMilliseconds)
        let reserved = max(last, HybridTimestamp(physicalMilliseconds: physical, counter: 0, node: clock.node))
        // An upsert, not INSERT OR REPLACE: REPLACE deletes and re-inserts, touching the key's index too.
        try db.cachedStatement(sql: """
                INSERT INTO sync_state (key, value) VALUES ('clock_last', ?)
                ON CONFLICT(key) DO UPDATE SET value = excluded.value
                """).execute(arguments: [reserved.encoded])
        return reserved
    }

    /// Reads (or creates) the node id and the clock's last value, persisted in `sync_state`.
    static func loadClockState(_ db: Database) throws -> (NodeID, HybridTimestamp?) {
        let node: NodeID
        if let text = try String.fetchOne(db, sql: "SELECT value FROM sync_state WHERE key = 'node_id'"),
            let value = UInt64(text, radix: 16)
        {
            node = NodeID(value)
        } else {
            node = NodeID(uuid: UUID())
            try db.execute(
                sql: "INSERT OR REPLACE INTO sync_state (key, value) VALUES ('node_id', ?)",
                arguments: [String(node.rawValue, radix: 16)])
        }
        let last = try String.fetchOne(db, sql: "SELECT value FROM sync_state WHERE key = 'clock_last'")
            .flatMap { try? HybridTimestamp(encoded: $0) }
        return (node, last)
    }

    /// Writes `record` (create or update, decided by what the table holds) and returns it as stored,
    /// with the operation queued, or nil when nothing was written (a copy read before a delete, saved
    /// with no change of its user's: the delete stands). `alongside` runs in the same transaction, for
    /// what must land with the record or not at all (an attachment's upload entry).
    func save(
        _ record: EntityRecord, in pool: DatabasePool, now: Date, alongside: (@Sendable (Database) throws -> Void)? = nil
    ) throws -> (EntityRecord, MutationOperation?) {
        try transaction(in: pool) { db in
            let stored = try EntityTables.fetchRecord(record.entity, id: record.id, in: db)
            // Refused before anything is written: saved, the move went out, the server refused it for ever,
            // and the record stood in the other project on this device alone.
            if let stored, let move = try Self.projectMove(from: stored, to: record, arriving: { [:] }, in: db) {
                let field = record.entity.description.parents.first { stored[$0.field] != record[$0.field] }?.field
                throw record.error(
                    .inconsistentFields, field,
                    "puts \(record.entity.rawValue) \(record.id.storageText) in project \(move.to.storageText), and it belongs to project "
                        + "\(move.from.storageText): a record cannot move to another project; create it there instead")
            }
            // A record the table did not hold has no clocks yet (the row and its clocks are written together).
            let clocksBefore = stored == nil ? nil : try FieldClocks.read(record.entity, record.id, in: db)
            var written = record
            var surfaced: [StaleCopy.Surfaced] = []
            let isStale = stored.map { record.sync.version < $0.sync.version } ?? false
            if let stored, isStale {
                (written, surfaced) = StaleCopy.reconcile(record, with: stored, clocks: clocksBefore)
            }
            // Read before another local write: `updatedAt` moves forward with every write of the record,
            // a delete's included.
            let readAt = record.sync.updatedAt.storageMilliseconds
            let readBeforeLocalWrite = stored.map { readAt < $0.sync.updatedAt.storageMilliseconds } ?? false
            if let stored, readBeforeLocalWrite {
                let (local, more) = StaleCopy.reconcileLocal(written, readAt: readAt, with: stored, clocks: clocksBefore)
                written = local
                surfaced += more
            }
            let fieldNames = record.entity.description.fields.map(\.name)
            // Writing to a tombstone brings the record back; see `Revival` for which fields are the user's.
            let revival = stored.flatMap { stored in
                Revival(of: stored, by: record, readBeforeItsDelete: isStale || readBeforeLocalWrite, clocks: clocksBefore)
            }
            let isCreate = stored == nil || stored?.sync.isDeleted == true
            let userChanged = fieldNames.filter { name in
                revival?.everyFieldIsTheUsers ?? (stored == nil) || stored?[name] != written[name]
            }
            // Nothing the caller changed: nothing is written. A copy read before the record was deleted
            // leaves the delete standing (saved whole, it brought the record back unseen); a live record
            // gets no empty update, which would move the server's version and make a teammate's change
            // made on the version before look concurrent (server wins and manual then refuse it).
            // A value of the copy kept back as possibly only out of date is still offered (`StaleCopy`).
            if let stored, userChanged.isEmpty, revival.map({ $0.readBeforeTheDelete }) ?? !stored.sync.isDeleted {
                if let clocksBefore, !surfaced.isEmpty {
                    let stamp = clock.tick(now: now, after: clocksBefore.newest)
                    try StaleCopy.surface(surfaced, written: stored, clocks: clocksBefore, stamp: stamp, db: db, now: now)
                }
                return (stored, nil)
            }
            // A revival sends every field, since the server must have a value newer than the delete for
            // each; the ones its user did not change are carried, and take the server's newest values
            // when the change meets them (`MutationQueue.Payload.carried`).
            let changed = isCreate ? fieldNames : userChanged
            let carried = revival.map { revival in revival.carriesFields ? Set(fieldNames).subtracting(userChanged) : [] } ?? []
            // Only what this write changes: a value stored before the rule must not block other edits.
            if let error = written.unbundlableValueError(in: userChanged) { throw error }
            written.sync = SyncMetadata(
                serverID: stored?.sync.serverID ?? record.sync.serverID, version: stored?.sync.version ?? 0,
                createdAt: stored?.sync.createdAt ?? record.sync.createdAt, updatedAt: Self.writeTime(after: stored, now: now),
                deletedAt: nil, syncStatus: .pending, isOrphaned: stored?.sync.isOrphaned ?? record.sync.isOrphaned)
            // A tombstone the server holds (version above 0) comes back as an update of the server's
            // version: the server answers a create of a record it has with a conflict, every time.
            let operation: MutationOperation = isCreate && (stored?.sync.version ?? 0) == 0 ? .create : .update
            // After every clock the record carries, even when this device's time is behind them: a write
            // stamped before the value it replaces would lose to it, and the server would keep that value.
            let stamp = clock.tick(now: now, after: clocksBefore?.newest)
            var clocks = clocksBefore ?? FieldClocks.Stored(fields: [:], deletion: nil, server: nil)
            // A write over a tombstone too: a copy read before it must not put back what it replaced.
            if let stored { FieldClocks.noteLocalChanges(of: changed, from: stored, to: written, in: &clocks) }
            // The delete the save undoes, when its copy's user never saw it, is surfaced once the server
            // takes the write (or a merge keeps the record back); not now, since the entity's strategy may
            // still refuse the write (append only) and leave the delete standing.
            try commit(
                written, operation: operation, changed: changed, deletion: nil, stamp: stamp, clocks: clocks,
                revives: revival?.deletion, deleteUnseen: revival?.readBeforeTheDelete ?? false, carried: carried,
                followedAhead: .of(stamp, over: clocksBefore, now: now, allowance: clock.maximumDrift), db: db, now: now)
            if let clocksBefore, !surfaced.isEmpty {
                try StaleCopy.surface(surfaced, written: written, clocks: clocksBefore, stamp: stamp, db: db, now: now)
            }
            try alongside?(db)
            try ChangeJournal.append(
                [StoreChange(entity: written.entity, recordID: written.id, operation: operation)], origin: origin, in: db)
            return (written, operation)
        }
    }

    /// A local write's `updatedAt`: now, or a millisecond after the stored one, so every write of a
    /// record moves it forward and a copy's `updatedAt` tells which writes it was read before.
    static func writeTime(after stored: EntityRecord?, now: Date) -> Date {
        guard let stored else { return now }
        let next = stored.sync.updatedAt.storageMilliseconds + 1
        return now.storageMilliseconds >= next ? now : Date(storageMilliseconds: next)
    }

    /// Soft-deletes the record: a tombstone that syncs, never a missing row.
    func delete(_ entity: EntityType, id: UUID, in pool: DatabasePool, now: Date) throws -> EntityRecord? {
        try transaction(in: pool) { db in
            guard var record = try EntityTables.fetchRecord(entity, id: id, in: db), !record.sync.isDeleted else {
                return nil
            }
            let clocks = try FieldClocks.read(entity, id, in: db)
            let stamp = clock.tick(now: now, after: clocks?.newest)
            let updatedAt = Self.writeTime(after: record, now: now)
            record.sync.deletedAt = now
            record.sync.updatedAt = updatedAt
            record.sync.syncStatus = .pending
            try commit(
                record, operation: .delete, changed: [], deletion: stamp, stamp: stamp, clocks: clocks,
                followedAhead: .of(stamp, over: clocks, now: now, allowance: clock.maximumDrift), db: db, now: now)
            try ChangeJournal.append([StoreChange(entity: entity, recordID: id, operation: .delete)], origin: origin, in: db)
            return record
        }
    }

    private func commit(
        _ record: EntityRecord, operation: MutationOperation, changed: [String], deletion: HybridTimestamp?,
        stamp: HybridTimestamp, clocks stored: FieldClocks.Stored?, revives: HybridTimestamp? = nil,
        deleteUnseen: Bool = false, carried: Set<String> = [], followedAhead: MutationQueue.FollowedAhead? = nil,
        db: Database, now: Date
    ) throws {
        // What the stamp followed, for each field it stamps (and the delete): `Payload.followedAhead`.
        var aheadByField: [String: MutationQueue.FollowedAhead] = [:]
        if let followedAhead {
            for field in changed { aheadByField[field] = followedAhead }
            if deletion != nil { aheadByField[MutationQueue.Payload.deletionKey] = followedAhead }
        }
        try EntityTables.save(record, in: db)

        var clocks = stored ?? FieldClocks.Stored(fields: [:], deletion: nil, server: nil)
        for field in changed { clocks.fields[field] = stamp }
        clocks.deletion = deletion
        // A save over a tombstone pulled without contents goes out on the version this device's values
        // are of (see `FieldClocks.Stored.heldVersion`); from then on the queued change carries it.
        // (Only a row deleted by such a tombstone holds one; every other write of the row clears it.)
        let baseVersion = stored?.heldVersion ?? record.sync.version
        clocks.heldVersion = nil
        try FieldClocks.write(clocks, record.entity, record.id, in: db)

        let fields = Dictionary(uniqueKeysWithValues: changed.map { ($0, record[$0]) })
        // The audit entry holds the encoding of the fields; the queued payload points to it.
        var encoder = JSONWriter(capacity: 64 * fields.count)
        try encoder.storedFields(fields)
        let encodedFields = encoder.data
        let audit = try AuditTrail.append(
            entity: record.entity, recordID: record.id, operation: operation, fields: encodedFields, at: now, in: db)
        try MutationQueue.enqueue(
            entity: record.entity, recordID: record.id, operation: operation, baseVersion: baseVersion,
            payload: .init(
                fields: fields, clocks: Dictionary(uniqueKeysWithValues: changed.map { ($0, stamp) }), deletion: deletion,
                carried: carried, revives: revives, deleteUnseen: deleteUnseen && revives != nil,
                followedAhead: aheadByField),
            fieldsInAudit: true, dependsOn: parents(of: record), syncClass: .structured, auditSequence: audit,
            now: now, in: db)
    }

    /// Record mutations are always structured data, an attachment's too (its thumbnail travels inline so
    /// teammates see something first); the original file of an attachment is uploaded separately as media.

    /// The records this one references; the queue sends it only after their creates are acknowledged.
    func parents(of record: EntityRecord) -> [UUID] {
        record.entity.description.parents.compactMap { relation in
            if case .uuid(let id) = record[relation.field] { id } else { nil }
        }
    }
}

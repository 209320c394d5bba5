import Foundation
import GRDB
import OutpostConflicts
import OutpostSchema

/// The durable queue as the sync engine drives it. Every transition is one transaction, so a crash
/// at any point leaves each mutation pending, in flight (resent on restart: the idempotency key makes
/// that safe), finished (out of the queue, its key kept) or failed, never in between.
extension LocalStore {
    /// The mutations to send now, first in first out, marked in flight in the same transaction: pending,
    /// of `syncClass`, due, not behind an unfinished earlier mutation of the same record, and not
    /// waiting on the unacknowledged create of a record they reference. Unrelated mutations never
    /// wait on each other, so one that keeps failing holds back only what depends on it. A mutation
    /// that cannot be read (its payload or its audit entry damaged or gone) is failed with why, in the
    /// same transaction, instead of stopping every other one.
    ///
    /// The claim names this store as its owner and holds for `lease`: another store on the file (the
    /// app's share extension, a second `outpost sync`) leaves it alone while it holds, and takes it
    /// once it ran out or its process is gone. A lease longer than the longest exchange keeps a slow
    /// push from being sent twice; a shorter one would only cost a duplicate the server recognizes.
    /// One longer than `longestWait` is taken as reckoned by a wrong clock, and not held.
    func claimMutations(
        syncClass: SyncClass = .structured, limit: Int, now: Date, lease: Duration = .seconds(300)
    ) throws(StoreError) -> [Mutation] {
        try claimMutationsCountingUnreadable(syncClass: syncClass, limit: limit, now: now, lease: lease).claimed
    }

    /// `claimMutations`, and how many mutations it failed as unreadable on the way: a run's report
    /// counts them among its failures (it said "failed 0" while one went unreadable, attack 59 finding 6).
    func claimMutationsCountingUnreadable(
        syncClass: SyncClass = .structured, limit: Int, now: Date, lease: Duration = .seconds(300), answersLost: Bool = false
    ) throws(StoreError) -> (claimed: [Mutation], unreadable: Int) {
        let owner = claimOwner.text
        let expires = now.addingTimeInterval(Double(lease.components.seconds)).storageMilliseconds
        return try write { db in
            let stale = try Self.staleClaimArguments(now: now, in: db)
            var unreadable = 0
            // Until something readable is claimed or nothing is left: an empty answer means "nothing to
            // send", so a batch of unreadable mutations alone must not end a run with others waiting.
            while true {
                let (claimed, failed) = try Self.claim(
                    syncClass: syncClass, limit: limit, now: now, owner: owner, expires: expires, stale: stale,
                    answersLost: answersLost, in: db)
                unreadable += failed
                if !claimed.isEmpty || failed == 0 { return (claimed, unreadable) }
            }
        }
    }

    /// The owners of claims in flight whose processes are gone, as a JSON array for `json_each`.
    private static func goneOwners(in db: Database) throws -> String {
        let owners = try String.fetchAll(
            db, sql: "SELECT DISTINCT claimed_by FROM mutation_queue WHERE status = 'inFlight' AND claimed_by IS NOT NULL")
        let gone = owners.filter(ClaimOwner.isGone)
        return String(decoding: try JSONEncoder().encode(gone), as: UTF8.self)
    }

    /// Whether an in-flight mutation's claim may be taken: its lease ran out (or it has none, from an
    /// older build), its owner's process is gone, or it names no owner (no build claims so: a row edited
    /// by hand, whose lease may lie years ahead; attack 60, finding 4), or its lease lies further ahead
    /// than `longestWait` (reckoned by a wrong clock). Arguments: `staleClaimArguments`.
    private static let claimIsStale =
        "(m.claimed_by IS NULL OR m.claim_expires_at <= ? OR m.claim_expires_at > ? OR m.claimed_by IN (SELECT value FROM json_each(?)))"

    /// `claimIsStale`'s arguments at `now`.
    private static func staleClaimArguments(now: Date, in db: Database) throws -> StatementArguments {
        [now.storageMilliseconds, now.addingTimeInterval(longestWait).storageMilliseconds, try goneOwners(in: db)]
    }

    /// The furthest ahead any rule puts a change's retry or lease: the default retry policy's cap on a
    /// server's `Retry-After` (an hour; backoff itself stops at a minute, a lease at five). A time further
    /// ahead was reckoned by a wrong clock: a sync run while the device's date was a day ahead left its
    /// change waiting that day, or until 2100, once the date was right (attack 62, findings M1 and M2).
    /// An app whose policy waits longer than this only gets an earlier retry.
    static let longestWait: TimeInterval = 3_600

    /// One claim of `claimMutations`; also says how many claimed mutations were failed as unreadable.
    /// With `answersLost`, only changes sent before and never answered (`sent`, still waiting), due or
    /// not and in any order: asked about (`POST /push/answers`), not sent, so nothing waits its turn.
    private static func claim(
        syncClass: SyncClass, limit: Int, now: Date, owner: String, expires: Int64, stale: StatementArguments,
        answersLost: Bool = false, in db: Database
    ) throws -> (claimed: [Mutation], failed: Int) {
        // A `depends_on` that is not JSON is read as none here, so its row is claimed and failed alone as
        // unreadable (`MutationQueue.readable`): json_each over it failed the whole claim, and no change of
        // the device went out again (attack 60, finding 1).
        let seqs = answersLost ? try Int64.fetchAll(db, sql: """
            SELECT m.seq FROM mutation_queue AS m
            WHERE (m.status = 'pending' OR (m.status = 'inFlight' AND \(claimIsStale))) AND m.sent = 1 AND m.sync_class = ?
            ORDER BY m.seq LIMIT ?
            """, arguments: stale + [syncClass.rawValue, limit]) : try Int64.fetchAll(db, sql: """
            SELECT m.seq FROM mutation_queue AS m
            WHERE (m.status = 'pending' OR (m.status = 'inFlight' AND \(claimIsStale)))
              AND m.sync_class = ? AND m.next_attempt_at <= ?
              AND NOT EXISTS (
                SELECT 1 FROM mutation_queue AS e
                WHERE e.record_id = m.record_id AND e.seq < m.seq AND e.status != 'done')
              AND NOT EXISTS (
                SELECT 1 FROM json_each(CASE WHEN json_valid(m.depends_on) THEN m.depends_on ELSE '[]' END) AS d
                JOIN mutation_queue AS p ON p.record_id = d.value
                WHERE p.operation = 'create' AND p.status != 'done')
            ORDER BY m.seq LIMIT ?
            """, arguments: stale + [syncClass.rawValue, now.storageMilliseconds, limit])
        guard !seqs.isEmpty else { return ([], 0) }
        let marks = Array(repeating: "?", count: seqs.count).joined(separator: ", ")
        // A stale claim taken over was in flight when its process stopped: whether the server took it is
        // unknown (`unheard`, as `requeueInFlightMutations` marks one it puts back).
        try db.execute(
            sql: """
                UPDATE mutation_queue SET unheard = CASE WHEN status = 'inFlight' THEN 1 ELSE unheard END, status = 'inFlight',
                    sent = 1, claimed_by = ?, claim_expires_at = ? WHERE seq IN (\(marks))
                """,
            arguments: [owner, expires] + StatementArguments(seqs))
        let (claimed, unreadable) = try MutationQueue.readable(sequences: seqs, in: db)
        for (sequence, reason) in unreadable {
            try db.execute(
                sql: "UPDATE mutation_queue SET status = 'failed', attempts = attempts + 1, last_error = ? WHERE seq = ?",
                arguments: [reason, sequence])
        }
        return (claimed, unreadable.count)
    }

    /// Puts mutations found in flight whose claim is stale back in line: the process that claimed them
    /// is gone (the app stopped before the server answered) or its lease ran out. A claim another live
    /// process holds (the share extension mid-push) is left alone. Returns how many were put back.
    ///
    /// A row with a status no build writes (edited by hand) is put in line too, as it reads
    /// (`MutationQueue.mutation(from:)`): no claim took it, and it stayed parked for good (attack 60,
    /// finding 4). Its idempotency key makes sending it again safe. So is one whose retry time lies further
    /// ahead than `longestWait`, reckoned by a wrong clock: it is due now. Both here, once a run, rather
    /// than in every claim, whose query then could not use the status index.
    @discardableResult
    func requeueInFlightMutations(now: Date = Timestamp.now()) throws(StoreError) -> Int {
        try write { db in
            // One sent before is marked as a change the server may have taken (`unheard`): the app was
            // stopped or killed with its request under way, the commonest way an answer is lost, and
            // put back unmarked it won under client wins over a teammate's later edit once its answer
            // was gone (attack 122, F1).
            try db.execute(sql: """
                UPDATE mutation_queue SET status = 'pending', unheard = max(unheard, sent)
                WHERE status NOT IN ('pending', 'inFlight', 'done', 'failed')
                """)
            let strays = db.changesCount
            try db.execute(
                sql: "UPDATE mutation_queue AS m SET status = 'pending', unheard = 1 WHERE m.status = 'inFlight' AND \(Self.claimIsStale)",
                arguments: try Self.staleClaimArguments(now: now, in: db))
            let requeued = db.changesCount
            // Not counted: a change due again was not in flight.
            try db.execute(
                sql: "UPDATE mutation_queue SET next_attempt_at = ? WHERE status = 'pending' AND next_attempt_at > ?",
                arguments: [now.storageMilliseconds, now.addingTimeInterval(Self.longestWait).storageMilliseconds])
            return strays + requeued
        }
    }

    /// The server applied the mutation, or answered that it already had: done. The record takes the
    /// server's version (and id, when the server assigns its own) and is synced unless more is queued for it.
    ///
    /// The record's later mutations that wait their turn were made on top of this one, so they move onto
    /// `serverVersion`: left on the old base they would meet this very change as a "newer" server version
    /// and come back as a conflict. The fields it carried are now the server's, at their clocks, so a
    /// later pull or merge knows the device has seen them (see `FieldClocks.Stored.server`).
    ///
    /// The record's row changes (its version, server id and status, or a delete set aside until now), so
    /// the acknowledgement reaches `changes()` as any other commit does: a screen showing what is
    /// still to sync refreshes.
    ///
    /// Returns false, writing only the reason into the change's `lastError`, when `serverID` names another
    /// record here: a server id names one record, and a reference to one given twice resolved to either
    /// (attack 132, F5: a hostile server's answers named two new issues by one id, and both were stored).
    /// Checked in the write that stores the mapping, so two processes settling answers at once cannot
    /// both take one id. The caller leaves the change waiting, as for any answer that settles nothing.
    @discardableResult
    func acknowledge(_ mutation: Mutation, serverVersion: Int64, serverID: String?, now: Date) throws(StoreError) -> Bool {
        try writeAnnouncing { db, changed in
            if let serverID, let holder = try ServerIDs.clientID(of: mutation.entity, serverID: serverID, in: db),
                holder != mutation.recordID
            {
                try db.execute(
                    sql: "UPDATE mutation_queue SET last_error = ? WHERE seq = ? AND lower(idempotency_key) = ?",
                    arguments: [
                        "the server named this record by server id \(serverID), which names another \(mutation.entity.rawValue) "
                            + "here; the change waits for an answer that does not",
                        mutation.sequence, mutation.idempotencyKey.storageText,
                    ])
                return false
            }
            // An answer for the request as it was sent, when a merge has since moved the mutation onto a
            // newer version (the answer was lost; a pull brought a teammate's change on top and the merge
            // decided what this device still sends): that request is settled, and what the merge left goes
            // again as a new request. Acknowledged as it stood, the server's answer to the old key closed
            // it, and the device kept a value the server never took.
            if try MutationQueue.requeueAfterStaleAnswer(mutation, answeredAt: serverVersion, now: now, in: db) {
                if let serverID { try ServerIDs.remember(serverID, for: mutation.entity, clientID: mutation.recordID, in: db, now: now) }
                return true
            }
            // Only the mutation that was sent: one sent again since under a new key (a conflict rebased it,
            // a retry re-keyed it) is another request, and this late answer must not settle it.
            // The server took a write that brought the record back from a delete its user never saw (a
            // copy read before it): that delete lost, and is offered back now that it did (once).
            let undone = try Row.fetchOne(
                db, sql: "SELECT payload, status FROM mutation_queue WHERE seq = ? AND lower(idempotency_key) = ?",
                arguments: [mutation.sequence, mutation.idempotencyKey.storageText]
            ).flatMap { row in
                row["status"] == MutationStatus.done.rawValue ? nil : try MutationQueue.Payload.undoesAnUnseenDelete(row["payload"])
            }
            // An answer to a request already finished (a late copy of one) settles it again, as it did
            // while finished mutations stayed in the queue as `done`.
            guard try MutationQueue.finish(mutation.sequence, key: mutation.idempotencyKey, in: db)
                || MutationQueue.isFinished(mutation.idempotencyKey, in: db)
            else { return true }
            try db.execute(
                sql: """
                    UPDATE mutation_queue SET base_version = ?
                    WHERE entity = ? AND record_id = ? AND seq > ? AND status = 'pending' AND base_version < ?
                    """,
                arguments: [
                    serverVersion, mutation.entity.rawValue, mutation.recordID.storageText, mutation.sequence, serverVersion,
                ])
            do {
                if !mutation.clocks.isEmpty, var clocks = try FieldClocks.read(mutation.entity, mutation.recordID, in: db) {
                    clocks.server = (clocks.server ?? [:]).merging(mutation.clocks) { _, acknowledged in acknowledged }
                    try FieldClocks.write(clocks, mutation.entity, mutation.recordID, in: db)
                }
            } catch is FieldClocks.Unreadable {
                // A damaged row (attack 60): replaced by what this answer tells, the acknowledged fields'
                // clocks, the server's as well. The others are unknown; a field without a clock here
                // takes a server value newer than the device's, as it should after this acknowledgement.
                let known = FieldClocks.Stored(fields: mutation.clocks, deletion: mutation.deletion, server: mutation.clocks)
                try FieldClocks.write(known, mutation.entity, mutation.recordID, in: db)
            }
            guard var record = try EntityTables.fetchRecord(mutation.entity, id: mutation.recordID, in: db) else { return true }
            record.sync.version = max(record.sync.version, serverVersion)
            if let serverID {
                record.sync.serverID = serverID
                try ServerIDs.remember(serverID, for: mutation.entity, clientID: mutation.recordID, in: db, now: now)
            }
            let unfinished = try Int.fetchOne(
                db, sql: "SELECT count(*) FROM mutation_queue WHERE record_id = ? AND status != 'done'",
                arguments: [mutation.recordID.storageText]) ?? 0
            if unfinished == 0, record.sync.syncStatus == .pending { record.sync.syncStatus = .synced }
            try EntityTables.save(record, in: db)
            if let undone {
                try Conflicts.lostDeletion(
                    undone, of: record, thisNode: node, strategy: ConflictStrategy(record.entity.description.defaultPolicy),
                    in: db, now: now)
            }
            let deleted = try Self.applyDeferredTombstone(of: record, acknowledgedAt: serverVersion, unfinished: unfinished, in: db)
            changed.append(StoreChange(
                entity: record.entity, recordID: record.id, operation: deleted || record.sync.isDeleted ? .delete : .update))
            return true
        }
    }

    /// A delete pulled without contents while the record had a change to send (see
    /// `FieldClocks.Stored.deferredTombstone`): once nothing of the record waits, the server's later
    /// delete applies, the row's values being those of the acknowledged version.
    /// Returns whether it deleted the record.
    private static func applyDeferredTombstone(
        of record: EntityRecord, acknowledgedAt serverVersion: Int64, unfinished: Int, status: SyncStatus = .synced,
        in db: Database
    ) throws -> Bool {
        // A damaged row holds no deferred delete this device can read: the next pull of the record settles it.
        guard var clocks = try FieldClocks.readIfReadable(record.entity, record.id, in: db), let deferred = clocks.deferredTombstone,
            serverVersion >= deferred.version || unfinished == 0
        else { return false }
        clocks.deferredTombstone = nil
        if serverVersion < deferred.version {
            var deleted = record
            deleted.sync.version = deferred.version
            deleted.sync.deletedAt = deferred.deletion.date
            deleted.sync.syncStatus = status
            clocks.deletion = deferred.deletion
            clocks.heldVersion = serverVersion
            try EntityTables.save(deleted, in: db)
            _ = try EntityTables.flagOrphans(childrenOf: record.entity, id: record.id, in: db)
        }
        try FieldClocks.write(clocks, record.entity, record.id, in: db)
        return serverVersion < deferred.version
    }

    /// The server's record moved on since the mutation was made (a push conflict). Once that record is
    /// merged into the store, the mutation goes back in line based on the server's version, with one
    /// more attempt counted so a server that keeps refusing cannot hold the run forever. It gets a new
    /// idempotency key: it is a new request, and the server answers the old key with the old conflict.
    /// A mutation the merge left with nothing to send has already finished and left the queue.
    /// The base only ever moves forward: a conflict answered again after a crash carries the server's
    /// record as it was then, older than what the store may have pulled and merged since.
    func rebase(_ mutation: Mutation, onto serverVersion: Int64) throws(StoreError) {
        try write { db in
            try db.execute(
                sql: """
                    UPDATE mutation_queue SET status = 'pending', attempts = attempts + 1, base_version = max(base_version, ?),
                        idempotency_key = ?
                    WHERE seq = ? AND status = 'inFlight' AND lower(idempotency_key) = ?
                    """,
                arguments: [serverVersion, UUID.timeOrdered().storageText, mutation.sequence, mutation.idempotencyKey.storageText])
        }
    }

    /// Mutations claimed but not answered (a paused run, a batch cut short): back in line as they were.
    func release(_ mutations: [Mutation]) throws(StoreError) {
        try write { db in
            for mutation in mutations {
                try db.execute(
                    sql: "UPDATE mutation_queue SET status = 'pending' WHERE seq = ? AND status = 'inFlight' AND lower(idempotency_key) = ?",
                    arguments: [mutation.sequence, mutation.idempotencyKey.storageText])
            }
        }
    }

    /// Records when a sync run finished with nothing left to send or fetch, for the status bar.
    func recordSuccessfulSync(at date: Date) throws(StoreError) {
        try write { db in
            try db.execute(
                sql: "INSERT OR REPLACE INTO sync_state (key, value) VALUES ('last_successful_sync', ?)",
                arguments: [String(date.storageMilliseconds)])
            try db.execute(sql: "DELETE FROM sync_state WHERE key = 'clock_warning'")
        }
    }

    /// A transient failure: back in line with one more attempt counted, not before `retryAt`.
    func scheduleRetry(_ mutation: Mutation, reason: String, retryAt: Date) throws(StoreError) {
        try write { db in
            try db.execute(
                sql: """
                    UPDATE mutation_queue SET status = 'pending', attempts = attempts + 1, last_error = ?, next_attempt_at = ?
                    WHERE seq = ? AND status != 'done' AND lower(idempotency_key) = ?
                    """,
                arguments: [reason, retryAt.storageMilliseconds, mutation.sequence, mutation.idempotencyKey.storageText])
        }
    }

    /// A permanent refusal, or retries used up: failed, with the reason, and the record marked failed so
    /// the user sees it. Returns the mutations that can no longer go because they wait on this one.
    @discardableResult
    func fail(_ mutation: Mutation, reason: String) throws(StoreError) -> [Mutation] {
        try writeAnnouncing { db, changed in
            // Not a mutation a merge just settled (done): failing it would hold its record back for nothing.
            try db.execute(
                sql: """
                    UPDATE mutation_queue SET status = 'failed', attempts = attempts + 1, last_error = ?
                    WHERE seq = ? AND status != 'done' AND lower(idempotency_key) = ?
                    """,
                arguments: [reason, mutation.sequence, mutation.idempotencyKey.storageText])
            guard db.changesCount > 0,
                var record = try EntityTables.fetchRecord(mutation.entity, id: mutation.recordID, in: db)
            else { return }
            record.sync.syncStatus = .failed  // the record shows as failed
            // A server delete a pull set aside for this change's answer (`deferredTombstone`) applies once
            // nothing of the record goes out any more, as a pull applies one a failed change meets: the
            // refusal is that answer. Kept aside, the record stayed alive here for good, while the server
            // and every other device held it deleted (attack 51: a crew member's refused edit of a
            // teammate's log deleted meanwhile).
            try EntityTables.save(record, in: db)
            let goingOut = try Int.fetchOne(
                db, sql: "SELECT count(*) FROM mutation_queue WHERE entity = ? AND record_id = ? AND status NOT IN ('done', 'failed')",
                arguments: [mutation.entity.rawValue, mutation.recordID.storageText]) ?? 0
            // As an acknowledgement applies it, at the version the record's values are of.
            let deleted = try goingOut == 0 && !record.sync.isDeleted
                && Self.applyDeferredTombstone(of: record, acknowledgedAt: record.sync.version, unfinished: 0, status: .failed, in: db)
            changed.append(StoreChange(entity: record.entity, recordID: record.id, operation: deleted ? .delete : .update))
        }
        return try blockedMutations().filter { $0.blockedBy.contains(mutation.sequence) }.map(\.mutation)
    }

    /// Puts every failed mutation back in line, its attempts counted from zero, once the cause is fixed
    /// (the app updated, the server's limits raised, a long outage over, the value the server refused
    /// edited): a failed mutation otherwise holds back every later change of its record for good. The
    /// record's updates queued behind it are folded into it, so a fix goes with it. Each goes under a
    /// new idempotency key, since the server answers the old one with the old refusal; a change the
    /// server did apply comes back as a conflict on its own version and merges to nothing left to send.
    /// Returns how many.
    @discardableResult
    public func retryFailedMutations() throws(StoreError) -> Int {
        try writeAnnouncing { db, changed in
            // Read by key only: a mutation failed because its payload no longer reads is retried too (and
            // fails again at its claim, with why), rather than keeping every other one from its retry.
            let failed = try Row.fetchAll(
                db, sql: "SELECT seq, entity, record_id FROM mutation_queue WHERE status = 'failed' ORDER BY seq")
            for row in failed {
                // Not marked as sent: under its new key it is a new request, so later edits may fold into it.
                try db.execute(
                    sql: """
                        UPDATE mutation_queue SET status = 'pending', attempts = 0, next_attempt_at = 0, last_error = NULL,
                            idempotency_key = ?, sent = 0
                        WHERE seq = ?
                        """,
                    arguments: [UUID.timeOrdered().storageText, row["seq"] as Int64])
                try MutationQueue.foldLaterUpdates(into: row["seq"], in: db)
                guard let entity = EntityType(rawValue: row["entity"]), let id = UUID(uuidString: row["record_id"]) else {
                    continue
                }
                if var record = try EntityTables.fetchRecord(entity, id: id, in: db), record.sync.syncStatus == .failed {
                    record.sync.syncStatus = .pending  // the record shows as pending again
                    try EntityTables.save(record, in: db)
                    changed.append(StoreChange(entity: entity, recordID: id, operation: .update))
                }
            }
            return failed.count
        }
    }

    /// Mutations that can never be sent as things stand, each with what holds it: the failed mutations
    /// it waits on (directly or through others), or the members of a cycle of waits it is in or waits
    /// on. The queue never builds such a cycle (`MutationQueue.enqueue`), but a queue damaged or written
    /// by an older build may hold one, and a mutation stuck in it must show, not wait unseen.
    public func blockedMutations() throws(StoreError) -> [(mutation: Mutation, blockedBy: [Int64])] {
        try read { db in WaitGraph(try MutationQueue.all(in: db).filter { $0.status != .done }).blocked() }
    }

    /// The id the server gave the record, when the server assigns its own.
    public func serverID(of entity: EntityType, clientID: UUID) throws(StoreError) -> String? {
        try read { db in
            try String.fetchOne(
                db, sql: "SELECT server_id FROM server_id_map WHERE entity = ? AND client_id = ?",
                arguments: [entity.rawValue, clientID.storageText])
        }
    }
}

import Foundation
import GRDB
import OutpostConflicts
import OutpostSchema

/// The durable queue in `mutation_queue`: written in the same transaction as the row it describes.
enum MutationQueue {
    /// The part of a mutation kept as JSON in the `payload` column. When every field carries the same
    /// clock (every plain write), the clock is stored once (`"clock"`) instead of once per field; rows
    /// with a clock per field (`"clocks"`, all rows before this form and folded edits) read the same.
    /// A write's own mutation leaves its fields in its audit entry (`"fieldsInAudit":true`, the entry
    /// `audit_seq` names): that entry holds the very same encoding, and storing it twice was a quarter
    /// of the database (v12 on; see the package README).
    struct Payload {
        var fields: [String: FieldValue]
        var clocks: [String: HybridTimestamp]
        var deletion: HybridTimestamp?
        /// Of a write that brings a deleted record back: the fields its user did not change, sent only
        /// because the server needs a value newer than the delete for each. When the change meets the
        /// server's record (a merge), they take its values: the record comes back with the newest values
        /// the server holds, not with ones this device held from before the delete (`"carried"`).
        var carried: Set<String>
        /// Of such a write: the delete it undoes, as this device knew it. A merge that meets that very
        /// delete judges the write as made after it, and does not surface it (`"revives"`).
        var revives: HybridTimestamp?
        /// Of such a write: its user never saw the delete (a copy read before it). Once the server takes
        /// the write or a merge keeps the record back, that delete is surfaced: it lost, unseen. Cleared
        /// when a merge settled it, so it is surfaced once (`"deleteUnseen"`).
        var deleteUnseen: Bool
        /// Sent again after a server restore (`LocalStore.beginHistoryRebuild`): values this device wrote
        /// before, which the restored server lost (`"resent"`). A server value the merge of its answer
        /// beats is not surfaced when this device's own write replaced that very value: the restore
        /// brought back what the device had already written over.
        var resent = false
        /// Per field (the delete under `deletionKey`), of a write stamped after a clock of its record that
        /// ran more than the drift allowance ahead of this device's time (`"followedAhead"`): when the
        /// field was written, and the newest clock of the record within the allowance then. A server
        /// refuses such a stamp when no server holds that clock (a hostile answer put it here), and the
        /// field is then stamped again by these, not by the time of the refusal after every clock pulled
        /// since (`StoreWriter.restamp`). Per field, since a change folds writes made at different times
        /// (attack 64, finding F1): each field is judged by when it was written.
        var followedAhead: [String: FollowedAhead] = [:]

        /// The `followedAhead` key of a delete: no field is named by the empty string.
        static let deletionKey = ""

        init(
            fields: [String: FieldValue], clocks: [String: HybridTimestamp], deletion: HybridTimestamp?,
            carried: Set<String> = [], revives: HybridTimestamp? = nil, deleteUnseen: Bool = false,
            followedAhead: [String: FollowedAhead] = [:]
        ) {
            self.fields = fields
            self.clocks = clocks
            self.deletion = deletion
            self.carried = carried
            self.revives = revives
            self.deleteUnseen = deleteUnseen
            self.followedAhead = followedAhead
        }

        /// The column's keys; `fields` is absent when `fieldsInAudit` is true.
        private struct Stored: Decodable {
            var fields: [String: FieldValue]?
            var clock: HybridTimestamp?
            var clocks: [String: HybridTimestamp]?
            var deletion: HybridTimestamp?
            var fieldsInAudit: Bool?
            var carried: [String]?
            var revives: HybridTimestamp?
            var deleteUnseen: Bool?
            var resent: Bool?
            var followedAhead: [String: FollowedAhead]?
        }

        /// Whether a `payload` column holds a write that brings a record back from a delete its user never
        /// saw, not yet settled by a merge: read without the fields, for an acknowledgement.
        static func undoesAnUnseenDelete(_ text: String) throws -> HybridTimestamp? {
            let stored = try decoder.decode(Stored.self, from: Data(text.utf8))
            return stored.deleteUnseen == true ? stored.revives : nil
        }

        /// Reads the payload of a queue row selected with `auditFieldsColumn`: a write that keeps its fields
        /// in its audit entry reads them through `AuditTrail.storedFields`, the reader the walk uses too.
        static func read(_ row: Row, in db: Database) throws -> Payload {
            var fields: Data?
            if let stored = row["audit_fields"] as Data? {
                fields = try AuditTrail.storedFields(seq: row["audit_entry"], entity: row["audit_entity"], payload: stored, in: db)
            }
            return try read(row["payload"], auditFields: fields, sequence: row["seq"])
        }

        /// Reads a `payload` column of mutation `sequence`. `auditFields` is the payload of the audit entry
        /// the row names, where a row written with `"fieldsInAudit":true` keeps its fields.
        static func read(_ text: String, auditFields: Data?, sequence: Int64) throws -> Payload {
            let stored = try decoder.decode(Stored.self, from: Data(text.utf8))
            let fields: [String: FieldValue]
            if stored.fieldsInAudit == true {
                guard let auditFields else {
                    throw StoreError(
                        .databaseFailure, path: "",
                        message: "mutation \(sequence) keeps its fields in its audit entry, which is missing or records another write (`outpost audit verify` names what changed)")
                }
                fields = try decoder.decode([String: FieldValue].self, from: auditFields)
            } else {
                guard let inline = stored.fields else {
                    throw StoreError(.databaseFailure, path: "", message: "mutation \(sequence) has a payload without fields")
                }
                fields = inline
            }
            let clocks: [String: HybridTimestamp]
            if let clock = stored.clock {
                clocks = fields.mapValues { _ in clock }
            } else if let perField = stored.clocks {
                clocks = perField
            } else {
                throw StoreError(.databaseFailure, path: "", message: "mutation \(sequence) has a payload without clocks")
            }
            var payload = Payload(
                fields: fields, clocks: clocks, deletion: stored.deletion, carried: Set(stored.carried ?? []),
                revives: stored.revives, deleteUnseen: stored.deleteUnseen ?? false)
            payload.resent = stored.resent ?? false
            payload.followedAhead = stored.followedAhead ?? [:]
            return payload
        }

        /// Takes in a later write of the same record that the server has not seen either: each field's
        /// newest value and the newer of the two clocks.
        mutating func fold(_ later: Payload) {
            // A field either write changed is its user's; a field is carried only if no write changed it.
            let usersBefore = Set(fields.keys).subtracting(carried)
            let usersLater = Set(later.fields.keys).subtracting(later.carried)
            carried = carried.union(later.carried).subtracting(usersBefore).subtracting(usersLater)
            fields.merge(later.fields) { _, new in new }
            clocks.merge(later.clocks) { old, new in max(old, new) }
            revives = revives ?? later.revives
            deleteUnseen = deleteUnseen || later.deleteUnseen
            resent = resent || later.resent
            // Each field by its last write: a field the later write followed nothing ahead for has none.
            for field in later.fields.keys { followedAhead[field] = later.followedAhead[field] }
        }

        /// Keeps only the fields `keep` names, with their clocks and their carried mark.
        mutating func keepFields(where keep: (String) -> Bool) {
            fields = fields.filter { keep($0.key) }
            clocks = clocks.filter { fields[$0.key] != nil }
            carried = carried.filter { fields[$0] != nil }
        }

        /// The one clock all fields carry, when there is one and it covers exactly the fields.
        var sharedClock: HybridTimestamp? {
            guard let first = clocks.first?.value, clocks.count == fields.count,
                clocks.allSatisfy({ $0.value == first && fields[$0.key] != nil })
            else { return nil }
            return first
        }
    }

    /// What a write stamped after a clock ahead of this device's allowance saw (`Payload.followedAhead`).
    struct FollowedAhead: Decodable, Equatable {
        /// The device's time when the write was made, in milliseconds since 1970.
        var at: Int64
        /// The newest clock of the record then within the allowance (nil when it held none).
        var floor: HybridTimestamp?

        /// For a write stamped `stamp` at `now` over a record holding `clocks`: nil when the stamp lies
        /// within `allowance` of `now` (it followed nothing beyond it).
        static func of(
            _ stamp: HybridTimestamp, over clocks: FieldClocks.Stored?, now: Date, allowance: Duration
        ) -> FollowedAhead? {
            let limit = now.addingTimeInterval(Double(allowance.components.seconds))
            guard stamp.date > limit else { return nil }
            let held = (clocks.map { Array($0.fields.values) + Array(($0.server ?? [:]).values) } ?? [])
                + [clocks?.deletion].compactMap { $0 }
            return FollowedAhead(at: now.storageMilliseconds, floor: held.filter { $0.date <= limit }.max())
        }
    }

    /// The payload column with its audit entry's payload, for `Payload.read` (`SELECT` them after the row's own).
    /// Only an entry that records this very write (entity, record and operation) counts: a row pointed
    /// at another entry reads as one whose entry is missing, held back, never sent with another
    /// write's fields (`AuditTrail.verify` names it). And the entry's time must be the row's: a write
    /// and its mutation are made in one transaction at one `now`, so a row pointed at an earlier write
    /// of the same record (whose own mutation finished) is held back too (attack 59, finding 1). The
    /// payload is read as a blob, as the walk reads it, so both see the same bytes however stored.
    static let auditFieldsColumn = """
        (SELECT CAST(payload AS BLOB) FROM audit_log WHERE audit_log.seq = mutation_queue.audit_seq
            AND audit_log.entity = mutation_queue.entity
            AND \(LocalStore.idTextSQL(of: "audit_log.record_id")) = mutation_queue.record_id
            AND audit_log.operation = mutation_queue.operation AND audit_log.at = mutation_queue.created_at) AS audit_fields,
        mutation_queue.audit_seq AS audit_entry, mutation_queue.entity AS audit_entity
        """

    /// Queues a write. An update of a record whose earlier create or update has never been sent is
    /// folded into that mutation: the server has seen neither, so sending the union once, with each
    /// field's newest value and clock, is the same as sending both in order. The folded mutation also
    /// takes on the new write's parents, so it still waits for every create it now refers to.
    ///
    /// Not when the write names a record whose create is queued after that mutation: the earlier
    /// mutation would then wait on a later one, and that create may itself wait on this record (a
    /// clock-in edited into a clock-out naming a clock-out that names it), a cycle nothing could send.
    /// Every wait points to an earlier mutation, so the queue never deadlocks (`blockedMutations`
    /// reports one all the same, should a damaged queue hold it).
    static func enqueue(
        entity: EntityType, recordID: UUID, operation: MutationOperation, baseVersion: Int64,
        payload: Payload, fieldsInAudit: Bool = false, dependsOn: [UUID], syncClass: SyncClass, auditSequence: Int64,
        now: Date, in db: Database
    ) throws {
        let id = recordID.storageText
        if operation == .update,
            let pending = try Row.fetchOne(db.cachedStatement(sql: """
                SELECT seq, payload, depends_on, \(auditFieldsColumn) FROM mutation_queue
                WHERE entity = ? AND record_id = ? AND status = 'pending' AND sent = 0
                  AND operation IN ('create', 'update')
                  AND NOT EXISTS (SELECT 1 FROM mutation_queue AS later
                                  WHERE later.record_id = mutation_queue.record_id AND later.seq > mutation_queue.seq)
                ORDER BY seq DESC LIMIT 1
                """), arguments: [entity.rawValue, id]),
            try !waitsOnLaterCreates(dependsOn.map(\.storageText), after: pending["seq"], in: db)
        {
            // The union is written whole: the new audit entry holds only this write's fields.
            var merged = try Payload.read(pending, in: db)
            merged.fold(payload)
            let earlier = try parents(in: pending)
            let parents = earlier + dependsOn.map(\.storageText).filter { !earlier.contains($0) }
            try db.cachedStatement(sql: "UPDATE mutation_queue SET payload = ?, audit_seq = ?, depends_on = ? WHERE seq = ?").execute(
                arguments: [
                    try merged.encoded(), auditSequence, parents.isEmpty ? nil : encode(strings: parents),
                    pending["seq"] as Int64,
                ])
            return
        }
        let encodedPayload = try payload.encoded(fieldsInAudit: fieldsInAudit)
        try db.cachedStatement(sql: """
                INSERT INTO mutation_queue (idempotency_key, entity, record_id, operation, payload, status, attempts,
                    created_at, sync_class, base_version, depends_on, next_attempt_at, audit_seq)
                VALUES (?, ?, ?, ?, ?, 'pending', 0, ?, ?, ?, ?, 0, ?)
                """).execute { row in
            row.bind(UUID.timeOrdered().storageText)
            row.bind(entity.rawValue)
            row.bind(id)
            row.bind(operation.rawValue)
            row.bind(encodedPayload)
            row.bind(now.storageMilliseconds)
            row.bind(syncClass.rawValue)
            row.bind(baseVersion)
            row.bind(dependsOn.isEmpty ? nil : encode(strings: dependsOn.map(\.storageText)))
            row.bind(auditSequence)
        }
    }

    /// Adds `payload`'s fields to the record's delete still waiting to go out (a delete carries the
    /// writes its device made before it, kept as the tombstone's last values). False when none waits.
    static func carry(_ payload: Payload, intoWaitingDeleteOf entity: EntityType, _ id: UUID, in db: Database) throws -> Bool {
        guard let row = try Row.fetchOne(
            db, sql: """
                SELECT seq, payload, \(auditFieldsColumn) FROM mutation_queue
                WHERE entity = ? AND record_id = ? AND status != 'done' AND operation = 'delete'
                ORDER BY seq DESC LIMIT 1
                """, arguments: [entity.rawValue, id.storageText])
        else { return false }
        var merged = try Payload.read(row, in: db)
        merged.fold(payload)
        try db.execute(
            sql: "UPDATE mutation_queue SET payload = ? WHERE seq = ?", arguments: [try merged.encoded(), row["seq"] as Int64])
        return true
    }

    /// Folds into mutation `sequence` (a create or update going out again after it failed) the updates
    /// of its record queued behind it since: they never went out, and the fix for what made it fail is
    /// likely among them, so sending it alone again would fail again and keep them waiting. Stops at the
    /// first later mutation that is not such an update (a delete, or one that went out). Every payload
    /// is read before anything is written: one that no longer reads leaves all of them as they were.
    static func foldLaterUpdates(into sequence: Int64, in db: Database) throws {
        guard let head = try Row.fetchOne(
                db, sql: "SELECT seq, record_id, operation, payload, depends_on, audit_seq, \(auditFieldsColumn) FROM mutation_queue WHERE seq = ?",
                arguments: [sequence]),
            ["create", "update"].contains(head["operation"] as String)
        else { return }
        let later = try Row.fetchAll(
            db,
            sql: """
                SELECT seq, operation, status, sent, payload, depends_on, audit_seq, \(auditFieldsColumn) FROM mutation_queue
                WHERE record_id = ? AND seq > ? AND status != 'done' ORDER BY seq
                """,
            arguments: [head["record_id"] as String, sequence])
        var merged: Payload
        var parents: [String]
        var auditSequence: Int64? = head["audit_seq"]
        var folded: [Row] = []
        do {
            // As `enqueue` folds: not an update naming a record created after the head (see there).
            for row in later {
                guard row["operation"] == "update", row["status"] == "pending", row["sent"] == 0,
                    try !waitsOnLaterCreates(try Self.parents(in: row), after: sequence, in: db)
                else { break }
                folded.append(row)
            }
            guard !folded.isEmpty else { return }
            merged = try Payload.read(head, in: db)
            parents = try Self.parents(in: head)
            for row in folded {
                let payload = try Payload.read(row, in: db)
                merged.fold(payload)
                let more = try Self.parents(in: row)
                parents += more.filter { !parents.contains($0) }
                auditSequence = row["audit_seq"] ?? auditSequence
            }
        } catch {
            return  // sent as they are: the claim fails the unreadable one with why
        }
        for row in folded {
            try db.execute(sql: "DELETE FROM mutation_queue WHERE seq = ?", arguments: [row["seq"] as Int64])
        }
        try db.execute(
            sql: "UPDATE mutation_queue SET payload = ?, audit_seq = ?, depends_on = ? WHERE seq = ?",
            arguments: [try merged.encoded(), auditSequence, parents.isEmpty ? nil : encode(strings: parents), sequence])
    }

    /// Whether any of `parents` (record ids as stored) has an unfinished create queued after `sequence`.
    private static func waitsOnLaterCreates(_ parents: [String], after sequence: Int64, in db: Database) throws -> Bool {
        guard !parents.isEmpty else { return false }
        return try Bool.fetchOne(
            db.cachedStatement(sql: """
                SELECT EXISTS (SELECT 1 FROM json_each(?) AS d JOIN mutation_queue AS p ON p.record_id = d.value
                               WHERE p.operation = 'create' AND p.status != 'done' AND p.seq > ?)
                """),
            arguments: [encode(strings: parents), sequence]) ?? false
    }

    /// The ids of the records a queued row waits on (its `depends_on` column), as stored.
    private static func parents(in row: Row) throws -> [String] {
        try (row["depends_on"] as String?).map { try decoder.decode([String].self, from: Data($0.utf8)) } ?? []
    }

    /// Every mutation of `status` (all when nil), in queue order. `listingUnreadable`: one whose fields
    /// cannot be read is listed with none and why (`Mutation.unreadable`) instead of failing the whole
    /// list: one damaged row made `outpost unsent` list nothing (attack 59, finding 5).
    static func all(status: MutationStatus? = nil, listingUnreadable: Bool = false, in db: Database) throws -> [Mutation] {
        let rows =
            if let status {
                try Row.fetchAll(
                    db, sql: "SELECT *, \(auditFieldsColumn) FROM mutation_queue WHERE status = ? ORDER BY seq",
                    arguments: [status.rawValue])
            } else {
                try Row.fetchAll(db, sql: "SELECT *, \(auditFieldsColumn) FROM mutation_queue ORDER BY seq")
            }
        return try rows.map { try mutation(from: $0, listingUnreadable: listingUnreadable, in: db) }
    }

    /// What the record's mutations the server has not acknowledged hold: the fields they write (a delete
    /// counts as no field) and the oldest server version they were made on, or nil when nothing of the
    /// record is waiting.
    ///
    /// The base version, not the row's: a pre-sync import moves the row to a newer server version
    /// around a waiting change (`EntityTables.refreshUnchangedFields`), yet the change was still made
    /// without seeing that version, and the role-based strategies must see it as concurrent with it.
    static func unfinishedChange(_ entity: EntityType, _ id: UUID, in db: Database) throws -> UnfinishedChange? {
        let rows = try Row.fetchAll(
            db, sql: """
                SELECT seq, payload, base_version, status, unheard, \(auditFieldsColumn) FROM mutation_queue
                WHERE record_id = ? AND entity = ? AND status != 'done'
                """,
            arguments: [id.storageText, entity.rawValue])
        guard !rows.isEmpty else { return nil }
        var change = UnfinishedChange(fields: [], baseVersion: .max)
        var users: Set<String> = []
        for row in rows {
            let payload = try Payload.read(row, in: db)
            change.fields.formUnion(payload.fields.keys)
            change.clocks.merge(payload.clocks) { max($0, $1) }
            users.formUnion(Set(payload.fields.keys).subtracting(payload.carried))
            change.carried.formUnion(payload.carried)
            change.revives = change.revives ?? payload.revives
            change.deleteUnseen = change.deleteUnseen || payload.deleteUnseen
            change.resent = change.resent || payload.resent
            change.unheard = change.unheard || row["unheard"] as Bool
            change.baseVersion = min(change.baseVersion, row["base_version"])
            if row["status"] != MutationStatus.failed.rawValue { change.goesOut = true }
        }
        change.carried.subtract(users)
        return change
    }

    /// The fields of `unfinishedChange`, or nil when nothing of the record is waiting.
    static func unfinishedFields(_ entity: EntityType, _ id: UUID, in db: Database) throws -> Set<String>? {
        try unfinishedChange(entity, id, in: db)?.fields
    }

    /// A record's change the server has not acknowledged: its fields and the server version it was made on.
    struct UnfinishedChange {
        var fields: Set<String>
        var baseVersion: Int64
        /// The newest clock each field of it was written at.
        var clocks: [String: HybridTimestamp] = [:]
        /// Fields sent only to bring the record back, which no unfinished write of its user changed
        /// (`Payload.carried`).
        var carried: Set<String> = []
        /// The delete an unfinished write brings the record back from, as this device knew it.
        var revives: HybridTimestamp?
        /// Whether that write's user never saw that delete (`Payload.deleteUnseen`).
        var deleteUnseen = false
        /// Whether any of it was sent again after a server restore (`Payload.resent`).
        var resent = false
        /// Whether a request carried any of it and its answer never came (`mark(_:unheard:in:)`): the
        /// server may have taken it, and a server change of the record since may have been made on top of it.
        var unheard = false
        /// Whether any of it will go out without the user's say: pending or in flight, not only failed
        /// changes, which wait for `retryFailedMutations`.
        var goesOut = false
    }

    /// Whether a delete of the record waits unsent (or unanswered) in the queue.
    static func hasUnfinishedDelete(_ entity: EntityType, _ id: UUID, in db: Database) throws -> Bool {
        try Bool.fetchOne(
            db, sql: """
                SELECT EXISTS (SELECT 1 FROM mutation_queue
                WHERE record_id = ? AND entity = ? AND operation = 'delete' AND status NOT IN ('done', 'failed'))
                """,
            arguments: [id.storageText, entity.rawValue]) ?? false
    }

    /// After a merge, what is still to be sent for the record: each unfinished mutation keeps only the
    /// fields whose merged value came from this device (the rest lost, and is surfaced instead of being
    /// pushed over the winner), drops a delete that lost, moves onto the server's version, and becomes an
    /// update when the server already has the record. One left with nothing to send finishes (`finish`).
    static func rebaseUnfinished(
        _ entity: EntityType, _ id: UUID, keepingField keep: (String) -> Bool, deletionLost: Bool,
        serverVersion: Int64, merged: EntityRecord? = nil, settlingUnseenDelete: Bool = false, in db: Database
    ) throws {
        let rows = try Row.fetchAll(
            db, sql: """
                SELECT seq, operation, payload, \(auditFieldsColumn) FROM mutation_queue
                WHERE record_id = ? AND entity = ? AND status NOT IN ('done', 'failed') ORDER BY seq
                """,
            arguments: [id.storageText, entity.rawValue])
        var rebased: [(sequence: Int64, operation: MutationOperation, payload: Payload)] = []
        // Whether each row wrote fields before the merge dropped the ones that lost.
        var wroteFields: [Bool] = []
        for row in rows {
            // Written back whole: what is left to send is no longer what the audit entry recorded.
            var payload = try Payload.read(row, in: db)
            wroteFields.append(!payload.fields.isEmpty)
            payload.keepFields(where: keep)
            // A carried field goes out with the value the merge took from the server.
            if let merged {
                for field in payload.carried { payload.fields[field] = merged[field] }
            }
            if settlingUnseenDelete { payload.deleteUnseen = false }  // the merge surfaced the delete if it lost
            if deletionLost { payload.deletion = nil }
            var operation = MutationOperation(rawValue: row["operation"]) ?? .update
            if operation == .delete, payload.deletion == nil { operation = .update }
            if operation == .create, serverVersion > 0 { operation = .update }
            rebased.append((row["seq"], operation, payload))
        }
        // The merge judged the record's unfinished writes as one (its values, then its delete); the server
        // judges each mutation alone. What a later unfinished write replaced does not go out before it:
        // a delete the user's later write brought the record back from, and a field a later write wrote
        // again. Sent alone, the older one met a conflict on its own version under last write wins at
        // every try while the merge, seeing the newer write, kept it; it failed, and the newer write
        // behind it never left the device (attack 65, findings F1 and F2). A create keeps its fields: the
        // server has not got the record.
        // Told by what the later write wrote, not by what the merge left of it: a revival whose every value
        // lost (server wins, manual, append only) undid the delete all the same, and the delete, sent alone
        // on the server's version, was applied over a teammate's edit that had won, while this device kept
        // the record live and nobody was told (attack 133, F1).
        for index in rebased.indices.dropLast() {
            let later = rebased[(index + 1)...]
            if rebased[index].payload.deletion != nil, wroteFields[(index + 1)...].contains(true) {
                rebased[index].payload.deletion = nil
                if rebased[index].operation == .delete { rebased[index].operation = .update }
            }
            guard rebased[index].operation != .create else { continue }
            let rewritten = Set(later.flatMap { $0.payload.fields.keys })
            rebased[index].payload.keepFields { !rewritten.contains($0) }
        }
        // An edit before a delete that stands goes out inside the delete, as
        // the delete's hidden values: sent alone, an edit older than the server's newest write met a
        // conflict on its own version under last write wins at every try, while the merge, seeing the
        // newer delete, kept sending it.
        if let last = rebased.lastIndex(where: { $0.operation == .delete && $0.payload.deletion != nil }), last > 0 {
            var fields: [String: FieldValue] = [:], clocks: [String: HybridTimestamp] = [:]
            for index in 0...last {
                fields.merge(rebased[index].payload.fields) { _, later in later }
                clocks.merge(rebased[index].payload.clocks) { earlier, later in max(earlier, later) }
                if index < last { (rebased[index].payload.fields, rebased[index].payload.clocks) = ([:], [:]) }
            }
            rebased[last].payload.fields = fields
            rebased[last].payload.clocks = clocks
        }
        for (sequence, operation, payload) in rebased {
            if payload.fields.isEmpty && payload.deletion == nil {
                try finish(sequence, in: db)
                continue
            }
            try db.execute(
                sql: "UPDATE mutation_queue SET payload = ?, operation = ?, base_version = ? WHERE seq = ?",
                arguments: [try payload.encoded(), operation.rawValue, serverVersion, sequence])
        }
    }

    /// Marks `mutations` as sent in a request whose answer never came (toolkit step 7), or, with
    /// `unheard` false, as changes the server says it never took (`PushResponse.keepsEveryAnswer`). Kept
    /// while each waits, under whatever key it goes next, until the server tells.
    static func mark(_ mutations: [Mutation], unheard: Bool, in db: Database) throws {
        for mutation in mutations {
            try db.cachedStatement(sql: "UPDATE mutation_queue SET unheard = ? WHERE seq = ? AND lower(idempotency_key) = ?")
                .execute(arguments: [unheard, mutation.sequence, mutation.idempotencyKey.storageText])
        }
    }

    /// When `mutation`, answered as applied at `version` under the key it was sent with, has since been
    /// moved by a merge onto a newer version (its row's base), the request it was is done, and what the
    /// merge left of it goes again as a new request: folded into the record's next unfinished mutation
    /// (the next write, which came after it) or queued anew under a new key. Returns whether it did.
    static func requeueAfterStaleAnswer(_ mutation: Mutation, answeredAt version: Int64, now: Date, in db: Database) throws -> Bool {
        guard let row = try Row.fetchOne(
                db, sql: """
                    SELECT seq, operation, payload, base_version, depends_on, audit_seq, \(auditFieldsColumn) FROM mutation_queue
                    WHERE seq = ? AND lower(idempotency_key) = ? AND status != 'done'
                    """,
                arguments: [mutation.sequence, mutation.idempotencyKey.storageText]),
            (row["base_version"] as Int64) > version
        else { return false }
        let left = try Payload.read(row, in: db)
        let next = try Row.fetchOne(
            db, sql: """
                SELECT seq, payload, \(auditFieldsColumn) FROM mutation_queue
                WHERE record_id = ? AND entity = ? AND seq > ? AND status NOT IN ('done', 'failed') ORDER BY seq LIMIT 1
                """,
            arguments: [mutation.recordID.storageText, mutation.entity.rawValue, row["seq"] as Int64])
        if left.deletion != nil, next != nil {
            // A delete a later write brings back: it keeps its place, sent again under a new key.
            try db.execute(
                sql: "UPDATE mutation_queue SET status = 'pending', idempotency_key = ? WHERE seq = ?",
                arguments: [UUID.timeOrdered().storageText, row["seq"] as Int64])
            return true
        }
        try finish(row["seq"], in: db)
        guard !left.fields.isEmpty || left.deletion != nil else { return true }
        if let next {
            // Before the next write, which wins where both wrote; a delete keeps its delete.
            let later = try Payload.read(next, in: db)
            var merged = left
            merged.fold(later)
            merged.deletion = later.deletion
            try db.execute(sql: "UPDATE mutation_queue SET payload = ? WHERE seq = ?", arguments: [try merged.encoded(), next["seq"] as Int64])
            return true
        }
        try db.execute(
            sql: """
                INSERT INTO mutation_queue (idempotency_key, entity, record_id, operation, payload, status, attempts,
                    created_at, sync_class, base_version, depends_on, next_attempt_at, audit_seq)
                VALUES (?, ?, ?, ?, ?, 'pending', 0, ?, ?, ?, ?, 0, ?)
                """,
            arguments: [
                UUID.timeOrdered().storageText, mutation.entity.rawValue, mutation.recordID.storageText, row["operation"] as String,
                try left.encoded(), now.storageMilliseconds, mutation.syncClass.rawValue, row["base_version"] as Int64,
                row["depends_on"] as String?, row["audit_seq"] as Int64?,
            ])
        return true
    }

    /// The mutations with the given sequence numbers, in queue order, and those that cannot be read
    /// (a payload or an audit entry that is damaged or gone), each with why.
    static func readable(sequences: [Int64], in db: Database) throws
        -> (mutations: [Mutation], unreadable: [(sequence: Int64, reason: String)])
    {
        let marks = Array(repeating: "?", count: sequences.count).joined(separator: ", ")
        let rows = try Row.fetchAll(
            db, sql: "SELECT *, \(auditFieldsColumn) FROM mutation_queue WHERE seq IN (\(marks)) ORDER BY seq",
            arguments: StatementArguments(sequences))
        var mutations: [Mutation] = []
        var unreadable: [(sequence: Int64, reason: String)] = []
        for row in rows {
            do {
                mutations.append(try mutation(from: row, in: db))
            } catch {
                unreadable.append((row["seq"], unreadableReason(error)))
            }
        }
        return (mutations, unreadable)
    }

    /// Takes mutation `sequence` out of the queue, finished: the server acknowledged it, or a merge left
    /// it nothing to send. Only its idempotency key stays (`finished_mutations`, toolkit step 3): kept
    /// whole as `done`, it cost a synced record 420 bytes for good. With `key`, only while the row is
    /// still the request sent under that key. Returns whether a row was finished.
    @discardableResult
    static func finish(_ sequence: Int64, key: UUID? = nil, in db: Database) throws -> Bool {
        let keyed = key == nil ? "" : " AND lower(idempotency_key) = ?"
        try moveToFinished(where: "seq = ?" + keyed, key.map { [sequence, $0.storageText] } ?? [sequence], in: db)
        return db.changesCount > 0
    }

    /// Takes out of the queue, as `finish` does, every mutation an older build left in it as `done`: run
    /// when the store opens, since a migration step only adds (the migrator refuses one that deletes).
    static func finishLeftovers(in db: Database) throws {
        guard try Bool.fetchOne(db, sql: "SELECT EXISTS (SELECT 1 FROM mutation_queue WHERE status = 'done')") == true else { return }
        try moveToFinished(where: "status = 'done'", [], in: db)
    }

    /// The rows of the queue `condition` selects, keys into `finished_keys` (toolkit step 5: their 16
    /// bytes) and rows out: the one move `finish` and `finishLeftovers` make. `db.changesCount` is then
    /// the rows it took out. A key that is not a UUID (a queue edited by hand) is kept as its text in
    /// `finished_mutations`, as before the step, rather than lost.
    private static func moveToFinished(where condition: String, _ arguments: StatementArguments, in db: Database) throws {
        let keys = try String.fetchAll(
            db.cachedStatement(sql: "SELECT idempotency_key FROM mutation_queue WHERE " + condition), arguments: arguments)
        for text in keys {
            if let key = UUID(uuidString: text) {
                try db.cachedStatement(sql: "INSERT OR IGNORE INTO finished_keys (key) VALUES (?)").execute(arguments: [key.storageBytes])
            } else {
                try db.cachedStatement(sql: "INSERT OR IGNORE INTO finished_mutations (idempotency_key) VALUES (lower(?))")
                    .execute(arguments: [text])
            }
        }
        try db.cachedStatement(sql: "DELETE FROM mutation_queue WHERE " + condition).execute(arguments: arguments)
    }

    /// Whether the mutation sent under `key` has finished (see `finish`): its key in either form.
    static func isFinished(_ key: UUID, in db: Database) throws -> Bool {
        try Bool.fetchOne(
            db.cachedStatement(sql: """
                SELECT EXISTS (SELECT 1 FROM finished_keys WHERE key = ?)
                    OR EXISTS (SELECT 1 FROM finished_mutations WHERE idempotency_key = ?)
                """),
            arguments: [key.storageBytes, key.storageText]) ?? false
    }

    /// The keys of every finished mutation, in either form.
    static func finishedKeys(in db: Database) throws -> Set<UUID> {
        let bytes = try Data.fetchAll(db, sql: "SELECT key FROM finished_keys").compactMap(UUID.init(storageBytes:))
        let texts = try String.fetchAll(db, sql: "SELECT idempotency_key FROM finished_mutations").compactMap(UUID.init(uuidString:))
        return Set(bytes + texts)
    }

    static func count(status: MutationStatus, in db: Database) throws -> Int {
        try Int.fetchOne(db, sql: "SELECT count(*) FROM mutation_queue WHERE status = ?", arguments: [status.rawValue]) ?? 0
    }

    /// Why a queue row cannot be read, as its claim fails it and as `unsentChanges()` lists it.
    private static func unreadableReason(_ error: any Error) -> String {
        (error as? StoreError)?.message ?? "its payload is unreadable: \(error)"
    }

    private static func mutation(from row: Row, listingUnreadable: Bool = false, in db: Database) throws -> Mutation {
        var payload = Payload(fields: [:], clocks: [:], deletion: nil)
        var dependsOn: [UUID] = []
        var unreadable: String?
        do {
            payload = try Payload.read(row, in: db)
            dependsOn = try parents(in: row).compactMap(UUID.init(uuidString:))
        } catch where listingUnreadable {
            unreadable = unreadableReason(error)
        }
        guard let key = UUID(uuidString: row["idempotency_key"]), let entity = EntityType(rawValue: row["entity"]),
            let recordID = UUID(uuidString: row["record_id"]), let operation = MutationOperation(rawValue: row["operation"]),
            let syncClass = SyncClass(rawValue: row["sync_class"])
        else {
            throw StoreError(.databaseFailure, path: "", message: "mutation \(row["seq"] as Int64) is unreadable")
        }
        // A status no build writes (a row edited by hand) is read as waiting, as the claim takes it
        // (`LocalStore.claimMutations`): its idempotency key makes sending it again safe, and refused it
        // stayed parked unlisted for good (attack 60, finding 4).
        let status = MutationStatus(rawValue: row["status"]) ?? .pending
        return Mutation(
            sequence: row["seq"], idempotencyKey: key, entity: entity, recordID: recordID, operation: operation,
            baseVersion: row["base_version"], fields: payload.fields, clocks: payload.clocks, deletion: payload.deletion,
            dependsOn: dependsOn, syncClass: syncClass, status: status, attempts: row["attempts"],
            nextAttemptAt: Date(storageMilliseconds: row["next_attempt_at"]), lastError: row["last_error"],
            auditSequence: row["audit_seq"], unreadable: unreadable)
    }

    static let encoder = JSONEncoder()
    static let decoder = JSONDecoder()

    private static func encode(strings: [String]) -> String {
        var json = JSONWriter(capacity: 40 * strings.count + 2)
        json.strings(strings)
        return json.text
    }
}

/// Per-field clocks of every record, one compact JSON row per record in `field_clocks`. The local
/// clocks are stored grouped by clock (`"byClock": {clock: [fields]}`: a write stamps all the fields it
/// changes with one clock, so a record usually has one or two), or as `"allFieldsAt": clock` when every
/// catalog field of the entity has that one clock, as after a create or the first pull of a record
/// (v12 on; the list of names was half of each row). Rows written before keep a clock per field
/// (`"fields"`) and read the same. The server's clocks are stored the same way (`"serverByClock"`), or
/// as `"serverAsFields": true` when they are the local ones, as after every plain pull: writing them
/// out clock by clock was a third of a pulled record's apply. A row that holds only those two is `@`
/// and the clock (`Stored.shortFormMarker`).
enum FieldClocks {
    struct Stored {
        var fields: [String: HybridTimestamp]
        var deletion: HybridTimestamp?
        /// The server's clocks as this device last pulled them: a server value that loses to a local
        /// change is a conflict only if the server changed it since (otherwise the device saw it and
        /// deliberately wrote over it).
        var server: [String: HybridTimestamp]?
        /// Per field, the last few values a pull replaced, oldest first: what a copy of the record read
        /// at an older version held, so saving that copy can tell the fields its user changed from
        /// those that are merely out of date (see `StaleCopy`).
        var pulled: [String: [PulledChange]]?
        /// Per field, the last few values a local write replaced, oldest first, keyed by the
        /// `updatedAt` milliseconds of the writes (each write moves it forward, see `StoreWriter.save`):
        /// what a copy read before another task's or process's write held, so saving it changes only
        /// what its own user changed (see `StaleCopy.reconcileLocal`).
        var written: [String: [PulledChange]]?
        /// Set on a record deleted by a tombstone pulled without contents: the server version this
        /// device's values are of, older than the row's. A save over the tombstone goes out on it, so the
        /// server answers with its last values for the merge instead of applying the save over values
        /// this device never saw.
        var heldVersion: Int64?
        /// A tombstone pulled without contents while a change of the record waited to be sent. The
        /// change goes out first: a conflict answer brings the tombstone whole for the merge, and an
        /// acknowledgement (a change the server had applied before the delete, answered again) deletes
        /// the record then, since the pull that carried the tombstone has moved on.
        var deferredTombstone: DeferredTombstone?

        init(
            fields: [String: HybridTimestamp], deletion: HybridTimestamp?, server: [String: HybridTimestamp]?,
            pulled: [String: [PulledChange]]? = nil, written: [String: [PulledChange]]? = nil, heldVersion: Int64? = nil,
            deferredTombstone: DeferredTombstone? = nil
        ) {
            self.fields = fields
            self.deletion = deletion
            self.server = server
            self.pulled = pulled
            self.written = written
            self.heldVersion = heldVersion
            self.deferredTombstone = deferredTombstone
        }

        /// The newest clock of a value or of the delete: what a local write over this record must follow.
        var newest: HybridTimestamp? {
            fields.values.reduce(deletion) { newest, clock in newest.map { max($0, clock) } ?? clock }
        }

        /// The newest clock of this record a fresh stamp must follow when a refused change is stamped
        /// again (`LocalStore.restampRefusedClocks`): `newest` and the server's clocks as last pulled (a
        /// value the change beat in a local merge must stay beaten on the server), less this device's
        /// own stamps from a time its clock ran more than the drift allowance ahead of `now` that no
        /// server took (not among `server`). No server holds those, and following them would stamp it
        /// as far ahead.
        func newestToFollow(by clock: HybridLogicalClock, now: Date) -> HybridTimestamp? {
            let limit = now.addingTimeInterval(Double(clock.maximumDrift.components.seconds))
            let taken = Set(server.map { Array($0.values) } ?? [])
            func follows(_ stamp: HybridTimestamp) -> Bool {
                stamp.node != clock.node || stamp.date <= limit || taken.contains(stamp)
            }
            return (Array(fields.values) + (deletion.map { [$0] } ?? []) + Array(taken)).filter(follows).max()
        }

        /// Starts the short form of a row (toolkit step 4 on): `@` and the clock every catalog field and
        /// the server's copy of each carry, with no delete and no history. It stands for
        /// `{"allFieldsAt":clock,"serverAsFields":true}`, the row of nearly every synced record, in a
        /// third of the bytes; an older build, which would not read it, refuses a file past step 4.
        static let shortFormMarker = "@"

        /// Starts the compact short form (toolkit step 5 on): the same row, the clock as its 16 bytes
        /// (milliseconds, counter, node, big-endian) in base64 without padding, 22 characters where
        /// its text takes 34 (12 of the ~600 bytes a synced issue cost the device, issue 41). Builds
        /// before step 5, which would not read it, refuse a file past that step.
        static let compactFormMarker = "#"

        /// The compact form's text for `clock`.
        ///
        /// Written into one 23-byte buffer: through `Data.base64EncodedString` and two more strings it
        /// was 4% of a pulled record's apply (`perf`). `clock(ofCompactForm:)` reads it with Foundation's
        /// decoder, so the two stay checked against each other (`ShortFieldClocksTests`).
        static func compactForm(of clock: HybridTimestamp) -> String {
            let milliseconds = UInt64(clock.physicalMilliseconds), node = clock.node.rawValue
            return String(unsafeUninitializedCapacity: 23) { text in
                text[0] = UInt8(ascii: "#")
                var at = 1
                // 16 bytes are five groups of three and one byte left: 21 characters and 2 for the last.
                func byte(_ index: Int) -> UInt32 {
                    let byte: UInt8 = switch index {
                    case 0..<6: UInt8(truncatingIfNeeded: milliseconds >> (8 * (5 - index)))
                    case 6: UInt8(truncatingIfNeeded: clock.counter >> 8)
                    case 7: UInt8(truncatingIfNeeded: clock.counter)
                    default: UInt8(truncatingIfNeeded: node >> (8 * (15 - index)))
                    }
                    return UInt32(byte)
                }
                for group in 0..<5 {
                    let triple = byte(3 * group) << 16 | byte(3 * group + 1) << 8 | byte(3 * group + 2)
                    for shift in [18, 12, 6, 0] {
                        text[at] = base64Alphabet[Int(triple >> UInt32(shift) & 63)]
                        at += 1
                    }
                }
                let last = byte(15)
                text[at] = base64Alphabet[Int(last >> 2)]
                text[at + 1] = base64Alphabet[Int(last << 4 & 63)]
                return 23
            }
        }

        private static let base64Alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)

        /// The clock of a compact form's text; throws for anything but a marker and 22 base64 characters.
        static func clock(ofCompactForm text: String) throws -> HybridTimestamp {
            guard text.utf8.count == 23, let data = Data(base64Encoded: String(text.dropFirst()) + "=="), data.count == 16 else {
                throw ConflictError(.invalidClockEncoding, message: "'\(text.prefix(40))' is not a compact field clock")
            }
            let bytes = [UInt8](data)
            let milliseconds = bytes[0..<6].reduce(Int64(0)) { $0 << 8 | Int64($1) }
            let counter = UInt16(bytes[6]) << 8 | UInt16(bytes[7])
            let node = bytes[8..<16].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
            return HybridTimestamp(physicalMilliseconds: milliseconds, counter: counter, node: NodeID(node))
        }

        /// The column's keys, as written by every version.
        private struct Columns: Decodable {
            var fields: [String: HybridTimestamp]?
            var byClock: [String: [String]]?
            var allFieldsAt: HybridTimestamp?
            var deletion: HybridTimestamp?
            var server: [String: HybridTimestamp]?
            var serverByClock: [String: [String]]?
            var serverAsFields: Bool?
            var pulled: [String: [PulledChange]]?
            var written: [String: [PulledChange]]?
            var heldVersion: Int64?
            var deferredTombstone: DeferredTombstone?
        }

        /// `read(_:entity:)` for the record `id`, its failure as `Unreadable`.
        static func read(_ text: String, entity: EntityType, id: UUID) throws(Unreadable) -> Stored {
            do {
                return try read(text, entity: entity)
            } catch {
                throw Unreadable(entity: entity, id: id, cause: error)
            }
        }

        /// Reads a `clocks` column of a record of `entity`. `"allFieldsAt"` stands for each of the
        /// entity's catalog fields as this build knows them: a step that adds a catalog field rewrites
        /// such rows as lists first (Workspace.md, "How to add a migration step").
        static func read(_ text: String, entity: EntityType) throws -> Stored {
            if text.hasPrefix(shortFormMarker) || text.hasPrefix(compactFormMarker) {
                let shared = text.hasPrefix(compactFormMarker)
                    ? try clock(ofCompactForm: text) : try HybridTimestamp(encoded: String(text.dropFirst()))
                let fields = Dictionary(uniqueKeysWithValues: FieldClocks.catalogNames(of: entity).map { ($0, shared) })
                return Stored(fields: fields, deletion: nil, server: fields)
            }
            let columns = try MutationQueue.decoder.decode(Columns.self, from: Data(text.utf8))
            var fields = try clocks(columns.fields, columns.byClock) ?? [:]
            if let shared = columns.allFieldsAt {
                for name in FieldClocks.catalogNames(of: entity) { fields[name] = shared }
            }
            let server = columns.serverAsFields == true ? fields : try clocks(columns.server, columns.serverByClock)
            return Stored(
                fields: fields, deletion: columns.deletion, server: server, pulled: columns.pulled,
                written: columns.written, heldVersion: columns.heldVersion, deferredTombstone: columns.deferredTombstone)
        }

        /// Clocks stored one per field, grouped by clock, or both; nil if neither.
        private static func clocks(
            _ single: [String: HybridTimestamp]?, _ groups: [String: [String]]?
        ) throws -> [String: HybridTimestamp]? {
            guard let groups else { return single }
            var clocks = single ?? [:]
            for (clock, names) in groups {
                let stamp = try HybridTimestamp(encoded: clock)
                for name in names { clocks[name] = stamp }
            }
            return clocks
        }

        /// The one clock every catalog field of `entity` has in `clocks`, if there is one.
        static func allFieldsClock(of clocks: [String: HybridTimestamp], _ entity: EntityType) -> HybridTimestamp? {
            let names = FieldClocks.catalogNames(of: entity)
            guard clocks.count == names.count, let first = clocks.first?.value,
                names.allSatisfy({ clocks[$0] == first })
            else { return nil }
            return first
        }
    }

    /// Each entity's catalog field names, built once.
    static func catalogNames(of entity: EntityType) -> [String] {
        catalogNamesByEntity[entity] ?? []
    }

    private static let catalogNamesByEntity: [EntityType: [String]] = Dictionary(
        uniqueKeysWithValues: EntityCatalog.all.map { ($0.type, $0.fields.map(\.name)) })

    /// A server's delete of a record at `version`, stamped `deletion`, not yet applied (see
    /// `Stored.deferredTombstone`).
    struct DeferredTombstone: Codable, Hashable {
        var version: Int64
        var deletion: HybridTimestamp
    }

    /// A field's value replaced by a pull: `previous` was held from version `since` (0: as far back as
    /// the device knows) until version `version` brought another. In `Stored.written`, by a local write:
    /// the same, with `updatedAt` milliseconds for versions.
    struct PulledChange: Codable, Hashable {
        var version: Int64
        var since: Int64
        var previous: FieldValue?
    }

    /// How many replaced values are kept per field. A copy older than all of them is still handled
    /// safely (see `StaleCopy`), only less precisely.
    static let keptChanges = 4

    /// Notes, in `clocks`, the fields a local write changed on their way from `before` to `after`, by
    /// `after`'s `updatedAt`.
    static func noteLocalChanges(of fields: [String], from before: EntityRecord, to after: EntityRecord, in clocks: inout Stored) {
        note(fields, from: before, to: after, at: after.sync.updatedAt.storageMilliseconds, in: &clocks.written)
    }

    /// Notes, in `clocks`, the fields a pull or merge changed on their way from `before` to `after`.
    static func notePulledChanges(from before: EntityRecord, to after: EntityRecord, in clocks: inout Stored) {
        note(after.entity.description.fields.map(\.name), from: before, to: after, at: after.sync.version, in: &clocks.pulled)
    }

    /// Appends to `history` the value of each of `fields` that changed from `before` to `after`,
    /// replaced at position `at`, keeping the last `keptChanges` per field.
    private static func note(
        _ fields: [String], from before: EntityRecord, to after: EntityRecord, at position: Int64,
        in history: inout [String: [PulledChange]]?
    ) {
        for field in fields where before[field] != after[field] {
            var changes = history?[field] ?? []
            changes.append(PulledChange(version: position, since: changes.last?.version ?? 0, previous: before[field]))
            if changes.count > keptChanges { changes.removeFirst(changes.count - keptChanges) }
            history = history ?? [:]
            history?[field] = changes
        }
    }

    /// The record's clocks: its `field_clocks` row, or where it has none, the clock its entity row keeps
    /// (`LocalApp.rowClocksColumn`: the compact form, which a pull storing the record whole over nothing
    /// held writes there, and `write` wherever the row exists); nil when it has neither. Clocks that do
    /// not read throw `Unreadable`.
    static func read(_ entity: EntityType, _ id: UUID, in db: Database) throws -> Stored? {
        if let text = try db.cachedStatement(sql: "SELECT clocks FROM field_clocks WHERE entity = ? AND record_id = ?")
            .firstRow(arguments: [entity.rawValue, id.storageText], { $0.text(at: 0) }) ?? nil
        {
            return try Stored.read(text, entity: entity, id: id)
        }
        let layout = TableLayout.of(entity)
        guard try layout.keepsClocksInRow(in: db),
            let text = try db.cachedStatement(sql: layout.selectRowClocks).firstRow(arguments: [id.storageText], { $0.text(at: 0) }) ?? nil
        else { return nil }
        return try Stored.read(text, entity: entity, id: id)
    }

    /// Forgets the record's clocks, its `field_clocks` row and its row's clock alike: a row's clock left
    /// behind would stand for clocks the record no longer has.
    static func forget(_ entity: EntityType, _ id: UUID, in db: Database) throws {
        try db.execute(
            sql: "DELETE FROM field_clocks WHERE entity = ? AND record_id = ?", arguments: [entity.rawValue, id.storageText])
        let layout = TableLayout.of(entity)
        guard try layout.keepsClocksInRow(in: db) else { return }
        try db.cachedStatement(sql: layout.updateRowClocks).execute(arguments: [nil as String?, id.storageText])
    }

    /// `read`, nil for a row that does not read as for none: for a reader looking for something a
    /// damaged row cannot tell (a deferred delete), which leaves it for a pull to replace.
    static func readIfReadable(_ entity: EntityType, _ id: UUID, in db: Database) throws -> Stored? {
        do {
            return try read(entity, id, in: db)
        } catch is Unreadable {
            return nil
        }
    }

    /// A record's `field_clocks` row that does not read (damaged: `@` alone, a clock cut short, not
    /// JSON). It holds back that record alone: an acknowledgement of a change of the record replaces it
    /// with the acknowledged fields' clocks, and a pull of the record with the pulled ones
    /// (`LocalStore.settleUnreadableClocks`); a local write of the record fails with it meanwhile. Before,
    /// one such row stopped every sync (attack 59, finding 10), and then every acknowledgement of it
    /// (attack 60, finding 2).
    struct Unreadable: Error, CustomStringConvertible {
        let entity: EntityType
        let id: UUID
        let cause: any Error

        var description: String {
            "the field clocks of \(entity.rawValue) \(id.storageText) cannot be read: \(cause)"
        }
    }

    static let upsertSQL = "INSERT OR REPLACE INTO field_clocks (entity, record_id, clocks) VALUES (?, ?, ?)"

    /// Writes the record's clocks. Their compact form (one clock for every field, the server's the same,
    /// nothing else: a record the server took as this device wrote it) goes into the record's row where
    /// its table keeps clocks there (`LocalApp.rowClocksColumn`), and its `field_clocks` row goes: 72 of
    /// the ~500 bytes a synced issue cost the device (issue 41). Any other form is a `field_clocks` row,
    /// which stands over the row's.
    static func write(_ clocks: Stored, _ entity: EntityType, _ id: UUID, in db: Database) throws {
        let encoded = try clocks.encoded(for: entity)
        let layout = TableLayout.of(entity)
        if encoded.hasPrefix(Stored.compactFormMarker), try layout.keepsClocksInRow(in: db) {
            try db.cachedStatement(sql: layout.updateRowClocks).execute(arguments: [encoded, id.storageText])
            // No row yet (clocks written before their record): a clocks row, as in any table without the column.
            if db.changesCount > 0 {
                try db.cachedStatement(sql: "DELETE FROM field_clocks WHERE entity = ? AND record_id = ?")
                    .execute(arguments: [entity.rawValue, id.storageText])
                return
            }
        }
        try write(encoded: encoded, entity, id, with: db.cachedStatement(sql: upsertSQL))
    }

    /// `write` through `upsert`, a statement of `upsertSQL` the caller looked up once for many records.
    static func write(_ clocks: Stored, _ entity: EntityType, _ id: UUID, with upsert: Statement) throws {
        try write(encoded: clocks.encoded(for: entity), entity, id, with: upsert)
    }

    /// `write` of clocks already encoded (`Stored.encoded(for:)`).
    static func write(encoded: String, _ entity: EntityType, _ id: UUID, with upsert: Statement) throws {
        try upsert.execute { row in
            row.bind(entity.rawValue)
            row.bind(id.storageText)
            row.bind(encoded)
        }
    }
}

import Foundation
import OutpostConflicts
import OutpostSchema
import OutpostWire
import Synchronization

/// What the server does with a push, in memory and for any backend: per mutation, answer a repeated
/// idempotency key with its original result, check the shape and clocks, translate server-id
/// references, check the caller may touch every project concerned, compare the base version, resolve
/// with the entity's `ConflictPolicy` (the devices' own), validate the result against the catalog and
/// take the next change sequence. It reads and updates a `PushSnapshot` the backend loaded and returns
/// a `PushPlan` the backend writes in the same transaction.
///
/// A refusal becomes the mutation's `rejected` outcome (its wire code and message) and changes nothing
/// in the snapshot, so one bad mutation never fails the batch.
struct PushRules: Sendable {
    let assignsServerIDs: Bool
    /// The server's configured policy (`ServerConfiguration.conflictPolicy`), the devices' own.
    let policy: ConflictPolicy
    /// The largest media file the server takes (`ServerConfiguration.maximumMediaBytes`).
    let maximumMediaBytes: Int64
    /// The scope, membership and media entities of the schema served.
    let schema = ServedSchema.current

    /// How many projects a member may belong to and still create one, and how many fields and clocks a
    /// push's answer may carry: the protocol's figures, lower only in tests, which would otherwise need
    /// thousands of records (and the CPU a parallel run shares) to reach them.
    /// The records quotas are the configuration's (`ServerConfiguration.maximumRecordBytesPerProject`).
    struct Bounds: Sendable, Hashable {
        var projectsPerMember = PushRules.maximumProjectsPerMember
        var answerFields = PushResponse.maximumFieldsPerAnswer
        var recordBytesPerProject: Int64 = ServerConfiguration.defaultRecordBytesPerProject
        var recordBytesPerUser: Int64 = ServerConfiguration.defaultRecordBytesPerUser
        var answersKeptPerUser = PushRules.answersKeptPerUser
        var answerPruningInterval = PushRules.answerPruningInterval
    }

    /// How many of a member's idempotency answers the server keeps, the newest; a push that passes a
    /// multiple of `answerPruningInterval` in the change sequence lets the older ones go. Kept for ever,
    /// they grew a database by 85 MB a minute from one crew token pushing 500 edits that add no bytes,
    /// past every records quota (attack 119, F1). An answer matters while its device has not heard it, a
    /// push or two; a key sent again past this many newer ones is answered as a new change, and a create
    /// of a record that exists, or a change on a version since passed, is a conflict its device merges,
    /// never a second write. About 5 MB a member.
    static let answersKeptPerUser = 20_000

    /// The applied answers a member's pushes add between prunings of their answers (`AnswerPruning`):
    /// a push of 500 prunes every other push; a push of one, one in 1,024. Pruning reads the member's kept
    /// answers in time order, 20,000 index entries: done on every push of 500, it held a 100,000-create
    /// push run back.
    static let answerPruningInterval: Int64 = 1_024

    /// Counts, per member, the answers their pushes added since the last pruning of their answers.
    let answerPruning: AnswerPruning

    let bounds: Bounds
    /// The bytes a record's fields and clocks take as its backend stores them (`record_usage` counts
    /// the same), for the records quotas.
    let storedBytes: @Sendable (_ fields: [String: FieldValue], _ clocks: [String: HybridTimestamp]) throws -> Int

    init(
        assignsServerIDs: Bool, policy: ConflictPolicy = ConflictPolicy(), maximumMediaBytes: Int64 = .max, bounds: Bounds = Bounds(),
        storedBytes: @escaping @Sendable (_ fields: [String: FieldValue], _ clocks: [String: HybridTimestamp]) throws -> Int =
            PushRules.storedJSONBytes,
        answerPruning: AnswerPruning = AnswerPruning()
    ) {
        self.storedBytes = storedBytes
        self.answerPruning = answerPruning
        self.bounds = bounds
        self.assignsServerIDs = assignsServerIDs
        self.policy = policy
        self.maximumMediaBytes = maximumMediaBytes
    }

    /// The most bytes of records (conflicts' server copies, duplicates' stored answers) one push's
    /// answer carries when it holds more than one mutation. Each conflict carries its record whole: 40
    /// stale edits of one 1 MB issue in 1.4 KB of gzip made a 40 MB answer, and at the documented limits
    /// one request asked for 4 GB (attack 46 finding 1). Past it the push is refused whole (413
    /// `batch_too_large`, nothing applied) and a device sends halves, down to one mutation, which this
    /// never refuses. Twice the default body limit, so an answer stays of a request's order.
    static let maximumAnswerRecordBytes = 16 << 20

    /// The most projects a member may belong to and still create one from a device. Each pull of theirs
    /// reads, checks and writes a cursor position per project: one crew token that made 40,000 projects
    /// took its own empty pull to 1.7 s and another member's pull from 0.02 s to 16 s while it pulled
    /// (attack 85, F6). The office is not bound by it (`outpost admin create-project`, `add-member`).
    static let maximumProjectsPerMember = 1_000

    /// The longest message a refusal carries. Some name what the caller sent (an unknown field, a value
    /// outside its choices), and one push of such refusals made a 20 MB answer (attack 47 finding 2).
    static let maximumRefusalMessageCharacters = 1_000

    /// `body` with its message cut at `maximumRefusalMessageCharacters`.
    static func bounded(_ body: ErrorBody) -> ErrorBody {
        guard body.message.count > maximumRefusalMessageCharacters else { return body }
        var cut = body
        cut.message = String(body.message.prefix(maximumRefusalMessageCharacters)) + "…"
        return cut
    }

    /// Runs the whole batch against `snapshot` (which the backend loaded for `batch`).
    func plan(_ batch: PushBatch, snapshot initial: PushSnapshot) throws -> PushPlan {
        var snapshot = initial
        var plan = PushPlan()
        plan.results.reserveCapacity(batch.mutations.count)
        let caller = batch.caller
        var answerBytes = 0, answerFields = 0
        func count(_ bytes: Int, of outcome: MutationOutcome) throws(ServerError) {
            answerBytes += bytes
            guard batch.mutations.count == 1 || answerBytes <= Self.maximumAnswerRecordBytes else {
                throw ServerError(
                    status: 413, .batchTooLarge,
                    "the answer to this push would carry more than \(Self.maximumAnswerRecordBytes >> 20) MiB of records "
                        + "(conflicts answer with the whole record): send fewer mutations at once")
            }
            // A device refuses an answer whose conflicts hold more (`PushResponse(wire:answering:)`).
            if case .conflict(let record) = outcome.unwrapped { answerFields += record.fields.count + record.clocks.count }
            guard batch.mutations.count == 1 || answerFields <= bounds.answerFields else {
                throw ServerError(
                    status: 413, .batchTooLarge,
                    "the answer to this push would carry more than \(bounds.answerFields) fields and clocks "
                        + "(conflicts answer with the whole record): send fewer mutations at once")
            }
        }
        for mutation in batch.mutations {
            let key = mutation.idempotencyKey
            if let stored = snapshot.applied[key] {
                let outcome: MutationOutcome
                if stored.userID != caller.userID {
                    // Someone else's key: never reveal its answer, and never apply it again.
                    outcome = .rejected(reason: ErrorBody(code: .forbidden, message: "this idempotency key belongs to another user"))
                } else if stored.entity != mutation.entity.rawValue || stored.recordID != mutation.recordID.storageText {
                    // A key names one change of one record. Answered as the first change's duplicate, another
                    // record's change under it (a copied queue, a client reusing keys) was taken by its
                    // device as saved, and never was (attack 92, F4): refused, it stays on the device, shown.
                    outcome = .rejected(reason: ErrorBody(
                        code: .invalidRequest,
                        message: "this idempotency key was used for a change of another record; a key names one change: send this one under a key of its own"))
                } else if let digest = stored.changeDigest, digest != changeDigest(of: mutation, by: caller, snapshot: snapshot) {
                    // Nor another change of the same record: other values, another field, another clock, a
                    // delete under an update's key. Answered as the first change's duplicate, its device took
                    // it as saved, and it never was (attacks 93 F3, 96 F2). The same change under another
                    // base version (a device rebased it) or in the other clock form is the same change.
                    outcome = .rejected(reason: ErrorBody(
                        code: .invalidRequest,
                        message: "this idempotency key was used for another change of this record; a key names one change: send this one under a key of its own"))
                } else if let record = snapshot.records[RecordKey(entity: mutation.entity, id: mutation.recordID)],
                    !record.summary.isVisible(to: caller, memberships: snapshot.memberships)
                        || Self.deletedBeforeJoining(record, snapshot: snapshot)
                {
                    // A record the caller may no longer see (they left its project, or hold no role there,
                    // or it was deleted while they were away): answered as any change of it now is, as
                    // `/push/answers` leaves its key out (`Access.canSee`). Answered `duplicate`, its
                    // checkpoint followed the record, and a removed member polling the key learnt of each
                    // edit and delete the office made since (attacks 110 F1, 111 F4).
                    outcome = .rejected(reason: Self.noSuchRecord(mutation.entity, mutation.recordID).errorBody)
                } else {
                    outcome = .duplicate(original: try OutcomeJSON.decode(stored.outcome))
                    try count(stored.outcome.utf8.count, of: outcome)
                }
                plan.results.append(MutationResult(idempotencyKey: key, outcome: outcome))
                continue
            }
            let outcome: MutationOutcome
            do {
                outcome = try apply(mutation, by: caller, to: &snapshot, plan: &plan, now: batch.now)
            } catch let error as ServerError where error.wireCode != nil {
                outcome = .rejected(reason: Self.bounded(error.errorBody))
            } catch let error as ConflictError {
                outcome = .rejected(reason: Self.bounded(ServerError.badRequest(error.description).errorBody))
            }
            guard case .applied = outcome else {
                // A conflict or a refusal applied nothing, so its key needs no answer kept: sent again,
                // it is answered anew, from the record as it then stands. Kept, a conflict stored the whole
                // record for good (45 MB from two small requests, attack 46 finding 1), and any token, a
                // viewer's or a stranger's, grew the disk with refusals (attack 44 finding 7; 13.7 MB
                // from one 7 KB push of refusals echoing its input, attack 47 finding 1).
                try count(try OutcomeJSON.encode(outcome).utf8.count, of: outcome)
                plan.results.append(MutationResult(idempotencyKey: key, outcome: outcome))
                continue
            }
            let text = try OutcomeJSON.encode(outcome)
            let digest = changeDigest(of: mutation, by: caller, snapshot: snapshot)
            snapshot.applied[key] = AppliedMutation(
                userID: caller.userID, entity: mutation.entity.rawValue, recordID: mutation.recordID.storageText, outcome: text,
                changeDigest: digest)
            plan.applied.append((key, caller.userID, mutation.entity, mutation.recordID, text, digest))
            // The change an applied mutation took: the caller's device holds that version exactly (every
            // value it sent stands, on the version it was based on), so its next pull need not bring it.
            var sequence: Int64?
            if case .applied = outcome {
                sequence = snapshot.records[RecordKey(entity: mutation.entity, id: mutation.recordID)]?.sequence
            }
            plan.results.append(MutationResult(idempotencyKey: key, outcome: outcome, sequence: sequence))
        }
        plan.changeSequence = snapshot.changeSequence
        plan.lastServerID = snapshot.lastServerID
        if !plan.applied.isEmpty, answerPruning.add(plan.applied.count, by: caller.userID, every: bounds.answerPruningInterval) {
            plan.answersToKeep = (caller.userID, bounds.answersKeptPerUser)
        }
        return plan
    }

    /// What `mutation` writes, its parents named by client id: a device that learned a parent's server
    /// id between a send and its resend names the parent by it, and it is the same change.
    private func changeDigest(of mutation: PushMutation, by caller: Caller, snapshot: PushSnapshot) -> String {
        ChangeDigest.of(mutation, fields: (try? clientReferences(in: mutation, caller: caller, snapshot: snapshot)) ?? mutation.fields)
    }

    /// One mutation: every check first, then (only once nothing can fail) its effects on the snapshot
    /// and the plan.
    private func apply(
        _ mutation: PushMutation, by caller: Caller, to snapshot: inout PushSnapshot, plan: inout PushPlan, now: Date
    ) throws -> MutationOutcome {
        try checkShape(mutation, now: now)
        let fields = try clientReferences(in: mutation, caller: caller, snapshot: snapshot)
        let key = RecordKey(entity: mutation.entity, id: mutation.recordID)
        let existing = snapshot.records[key]
        // A record the caller may not see is answered exactly as one that does not exist: a different
        // answer told anyone which ids other projects hold. So is one deleted before the caller joined its
        // project: its last values were never theirs to read (a conflict answer carries them whole) nor to
        // bring back.
        if let existing, !existing.summary.isVisible(to: caller, memberships: snapshot.memberships)
            || Self.deletedBeforeJoining(existing, snapshot: snapshot)
        {
            throw Self.noSuchRecord(mutation.entity, mutation.recordID)
        }
        // Before the version check: a conflict answer carries the record whole (a tombstone's last
        // values too), and a member who may not write it (a viewer; crew, for money) got them back by
        // writing on an old version.
        if let existing, let project = existing.projectID {
            try checkRole(of: mutation.entity, in: project, snapshot: snapshot)
            // Nor to an office role weaker than the role a member record gives (a tombstone's last values
            // carry a private e-mail address; attack 104, F3): judged on the record as it stands.
            try checkRoleGiven(by: mutation, judging: [existing.fields], existing: existing, in: project, snapshot: snapshot)
            // Nor to a member who may not write this author's record (crew, another's log or comment),
            // which a stale edit, or a create at its id, answered whole, a deleted one's text included
            // (attack 51); an append-only record's edit was answered so even on its version.
            if let authorship = Authorship(mutation.entity, in: project, snapshot: snapshot) {
                let before = existing.fields[authorship.field]
                guard authorship.writes(for: before) || (mutation.operation == .delete && authorship.deletesOthers) else {
                    throw authorship.refusingChange(of: mutation.entity)
                }
            }
        }
        let merged: VersionedRecord
        switch (mutation.operation, existing) {
        case (.create, nil):
            let record = EntityRecord(
                entity: mutation.entity, id: mutation.recordID, fields: fields,
                sync: SyncMetadata(createdAt: mutation.createdAt ?? now, updatedAt: now))
            merged = try VersionedRecord(record: record, clocks: mutation.clocks)
        case (.update, nil), (.delete, nil):
            throw Self.noSuchRecord(mutation.entity, mutation.recordID)
        case (_, let current?) where current.version != mutation.baseVersion:
            // A create of a record the server holds is a stale base too (0); after merging, the engine
            // sends it again on the returned version and it resolves like an update.
            return .conflict(serverRecord: wireRecord(current) { snapshot.summary($0) })
        case (_, let current?):
            let change = EntityRecord(
                entity: mutation.entity, id: mutation.recordID, fields: fields,
                sync: SyncMetadata(version: mutation.baseVersion, createdAt: current.createdAt))
            let client = try VersionedRecord(
                record: change, clocks: mutation.clocks,
                deletion: mutation.operation == .delete ? mutation.deletion : nil)
            let resolution = try policy.resolve(client: client, server: current.versionedRecord)
            // An append-only record's edit is answered with the record as it stands, as a conflict: the
            // device merges it by the same strategy, goes back to the original and offers the attempted
            // values to its user. Refused as an error, the edit stayed on the device as a failed change,
            // shown for good and offered nowhere, and kept a later delete of the record from applying.
            if resolution.isRefusal {
                return .conflict(serverRecord: wireRecord(current) { snapshot.summary($0) })
            }
            // `applied` tells the client its values stand. A value that lost on the very version it was
            // based on (stamped before a newer clock the server holds: a client stamping by its own
            // time after another wrote within the allowance ahead) is answered as a conflict, so the
            // client merges and its user is told, instead of the next pull replacing it unseen.
            if !Self.stands(fields, operation: mutation.operation, in: resolution.merged) {
                return .conflict(serverRecord: wireRecord(current) { snapshot.summary($0) })
            }
            merged = resolution.merged
        }
        if let problem = merged.record.validationErrors.first {
            throw ServerError.badRequest(problem.description)
        }
        // An attachment whose file this server would never take is refused now, with why, rather than
        // accepted and its upload refused for ever after.
        if schema.media.contains(merged.record.entity), merged.deletion == nil,
            case .integer(let size) = merged.record["byteSize"], size > maximumMediaBytes
        {
            throw ServerError.badRequest(
                "the attached file has \(size) bytes; this server takes files of at most \(maximumMediaBytes) bytes")
        }
        let project = try projectOf(merged.record, existing: existing, caller: caller, snapshot: snapshot)
        // A record stays in its project: moved, it would carry its children's references across the
        // boundary, show up for the new project's members and vanish unseen from the old one's devices.
        if let before = existing?.projectID, let project, before != project {
            throw ServerError.badRequest(
                "\(mutation.entity.rawValue) \(mutation.recordID.storageText) belongs to project \(before.storageText); "
                    + "a record cannot move to another project: create it there instead")
        }
        try checkReferences(merged.record, existing: existing, project: project, caller: caller, snapshot: snapshot)
        // The creator of a new project is its owner; in any other project the caller's role decides.
        if mutation.entity == schema.scope, existing == nil, snapshot.access.membershipCount >= bounds.projectsPerMember {
            throw ServerError.forbidden(
                "you belong to \(bounds.projectsPerMember) projects, the most a member may make more in; "
                    + "the office can archive one you no longer need and take you off it, or create this one (outpost admin create-project)")
        }
        if let project, !(mutation.entity == schema.scope && existing == nil) {
            try checkRole(of: mutation.entity, in: project, snapshot: snapshot)
            try checkAuthorship(mutation, merged: merged, existing: existing, in: project, snapshot: snapshot)
            try checkRoleGiven(
                by: mutation, judging: [existing?.fields, merged.record.fields], existing: existing, in: project, snapshot: snapshot)
            try checkOneRecordPerUser(mutation, merged: merged, existing: existing, in: project, snapshot: snapshot)
            try checkUserKept(by: mutation, merged: merged, existing: existing)
        }
        // After the access checks: only a member learns that a project is archived.
        if let project, snapshot.archivedProjects.contains(project) {
            throw ServerError.projectArchived(project)
        }
        // What the change adds to its project's records, and to those the caller wrote last. A change
        // that adds bytes makes the record the caller's, whole; one that adds none (a delete, a shorter
        // or same-size text) leaves it its writer's: taken over so, an office user who deleted a crew
        // member's junk was left holding it past their quota for good, and two members passed a record
        // back and forth past both quotas (attack 120, N1).
        let bytes = Int64(try storedBytes(merged.record.fields, merged.clocks))
        let before = existing.flatMap { snapshot.storedBytes[$0.key] }
        let growth = bytes - Int64(before?.bytes ?? 0)
        let writer = growth > 0 ? caller.userID : before?.writer ?? caller.userID
        let taken = before?.writer == caller.userID ? growth : (writer == caller.userID ? bytes : 0)
        try checkRecordQuotas(growth: growth, taken: taken, project: project, caller: caller, snapshot: snapshot)

        // Nothing below can fail: the mutation is applied.
        if mutation.entity == schema.scope { link(aboveScopeOf: merged.record, by: caller, snapshot: &snapshot, plan: &plan) }
        snapshot.changeSequence += 1
        // A tombstone's `updatedAt` is when it was deleted, by the server's time: a write that leaves it
        // deleted (a second delete) does not move it. The late-joiner rule reads it
        // (`deletedBeforeJoining`); moved, a member who joined in between got the deleted text whole
        // on an old version, and brought the record back on its current one.
        let updatedAt = if let existing, existing.deletion != nil, merged.deletion != nil { existing.updatedAt } else { now }
        var stored = StoredRecord(
            entity: mutation.entity, id: mutation.recordID, serverID: existing?.serverID,
            projectID: project, ownerID: existing?.ownerID ?? caller.userID, version: (existing?.version ?? 0) + 1,
            sequence: snapshot.changeSequence, fields: merged.record.fields, clocks: merged.clocks,
            deletion: merged.deletion, createdAt: existing?.createdAt ?? merged.record.sync.createdAt, updatedAt: updatedAt,
            writtenBy: writer)
        if stored.serverID == nil, assignsServerIDs {
            snapshot.lastServerID += 1
            stored.serverID = snapshot.lastServerID
        }
        snapshot.records[key] = stored
        snapshot.summaries[key] = stored.summary
        snapshot.storedBytes[key] = StoredSize(bytes: Int(bytes), writer: writer)
        if let project { snapshot.recordBytes[.project(project), default: 0] += growth }
        snapshot.recordBytes[.writer(caller.userID), default: 0] += taken
        if let serverID = stored.serverID {
            snapshot.serverIDs[ServerIDKey(entity: stored.entity, serverID: serverID)] = key
        }
        plan.records[key] = stored
        plan.moves[key] = nil
        if let project { noteRoleGivenAgain(by: stored, before: existing, in: project, snapshot: snapshot, plan: &plan) }
        if mutation.entity == schema.scope, !snapshot.memberships.contains(stored.id) {
            makeOwner(of: stored, caller: caller, snapshot: &snapshot, plan: &plan)
        }
        return .applied(version: stored.version, serverID: stored.serverID.map(String.init))
    }

    /// The bytes `StoredJSON` writes a record's fields and clocks in, as the SQLite backend stores them.
    @Sendable static func storedJSONBytes(_ fields: [String: FieldValue], _ clocks: [String: HybridTimestamp]) throws -> Int {
        try StoredJSON.fields(fields).utf8.count + StoredJSON.clocks(clocks).utf8.count
    }

    /// Refuses a change that adds bytes past its project's records quota or past the caller's own
    /// (`Bounds.recordBytesPerProject`, `recordBytesPerUser`): 413 `payload_too_large` for the mutation,
    /// which its device keeps, shown as refused. A change that adds nothing (a shorter text, a delete)
    /// always goes, so a full project can still be tidied. One member's pushes of large texts grew a
    /// database by 1.9 GB a minute until the disk was full and every project's pushes failed (attack
    /// 118, F3); a member may create a thousand projects, so their own quota is what bounds one member.
    /// It counts the records they wrote last (`taken`: the whole record when it adds bytes to another's),
    /// not those they created: counted for the creator, one member's edits of another's records filled
    /// the other's quota and blocked them in projects the first was not in, and the refusal told the
    /// first the other's total (attack 119, F2, F3). Only a project's total is told, to its members; not
    /// even the caller's own. A project adopting its creator's opportunity (`link`) takes it whole,
    /// unchecked: bounded by that member's own quota, which already counts it.
    private func checkRecordQuotas(
        growth: Int64, taken: Int64, project: UUID?, caller: Caller, snapshot: PushSnapshot
    ) throws(ServerError) {
        guard growth > 0 else { return }
        if let project {
            let held = snapshot.recordBytes[.project(project)] ?? 0
            guard held + growth <= bounds.recordBytesPerProject else {
                throw ServerError(
                    status: 413, .payloadTooLarge,
                    "this change adds \(growth) bytes to this project's records, which hold \(held) of their quota of "
                        + "\(bounds.recordBytesPerProject): shorten some texts, or ask the office to raise the quota")
            }
        }
        let held = snapshot.recordBytes[.writer(caller.userID)] ?? 0
        guard held + taken <= bounds.recordBytesPerUser else {
            // Not how much they hold: others' edits of records they wrote move it, in projects they may
            // have left (attack 120, N3).
            let whole = taken > growth ? " (another member wrote this record last: its \(taken) bytes would become yours)" : ""
            throw ServerError(
                status: 413, .payloadTooLarge,
                "this change adds \(growth) bytes\(whole), past your quota of \(bounds.recordBytesPerUser) bytes for the records you "
                    + "wrote last: shorten some texts, or ask the office to raise the quota")
        }
    }

    /// A member record that gives its user a role they had none of (brought back, made anew, or naming a
    /// role this server knows again) begins their membership again (`PushPlan.roleRestarts`): with no
    /// role they reached nothing, and what was deleted meanwhile was never theirs to read. Given a role
    /// again, their membership had begun long before, and an edit of such a record on an old version was
    /// answered `conflict` with its deleted text whole (attack 104, F1).
    private func noteRoleGivenAgain(
        by record: StoredRecord, before: StoredRecord?, in project: UUID, snapshot: PushSnapshot, plan: inout PushPlan
    ) {
        guard record.entity == schema.membership, record.deletion == nil,
            case .uuid(let user) = record.fields[schema.userField] ?? .null, Roles.role(in: record.fields, of: user) != nil
        else { return }
        func givesRole(_ stored: StoredRecord?) -> Bool {
            guard let stored, stored.deletion == nil else { return false }
            return Roles.role(in: stored.fields, of: user) != nil
        }
        if givesRole(before) { return }
        // The user's other live member records as the batch began, or as it left them.
        let others = (snapshot.access.memberRecordsOfUser[project]?[user] ?? []).subtracting([record.id])
        let ranks = snapshot.access.memberRanks[project] ?? [:]
        let hadRole = others.contains { id in
            if let current = snapshot.records[RecordKey(entity: schema.membership, id: id)] { return givesRole(current) }
            return ranks[id] != nil
        }
        if !hadRole, !plan.roleRestarts.contains(where: { $0.projectID == project && $0.userID == user }) {
            plan.roleRestarts.append((project, user))
        }
    }

    /// The creator of a project made on a device is its owner, by a member record the server writes with
    /// it (at the next change sequence, so the creator's device pulls it): never by a default role.
    private func makeOwner(of project: StoredRecord, caller: Caller, snapshot: inout PushSnapshot, plan: inout PushPlan) {
        let id = Roles.memberRecordID(project: project.id, user: caller.userID, salt: snapshot.memberIDSalt)
        let fields = schema.membershipFields(
            scope: project.id, user: caller.userID, role: schema.strongestRole,
            name: snapshot.callerName.isEmpty ? "Owner" : snapshot.callerName, email: nil, now: project.updatedAt)
        let stamp = project.clocks.values.max() ?? HybridTimestamp(physicalMilliseconds: 0, counter: 0, node: NodeID(0))
        snapshot.changeSequence += 1
        var member = StoredRecord(
            entity: schema.membership, id: id, serverID: nil, projectID: project.id, ownerID: caller.userID, version: 1,
            sequence: snapshot.changeSequence, fields: fields, clocks: fields.mapValues { _ in stamp }, deletion: nil,
            createdAt: project.createdAt, updatedAt: project.updatedAt)
        if assignsServerIDs {
            snapshot.lastServerID += 1
            member.serverID = snapshot.lastServerID
            snapshot.serverIDs[ServerIDKey(entity: schema.membership, serverID: snapshot.lastServerID)] = member.key
        }
        snapshot.records[member.key] = member
        snapshot.summaries[member.key] = member.summary
        plan.records[member.key] = member
        snapshot.access.roles[project.id] = schema.strongestRole
        snapshot.access.membershipCount += 1
        snapshot.access.ownMemberRecords[project.id] = [id]
        snapshot.access.joinedAt[project.id] = 0
        snapshot.projectsWithMembers.insert(project.id)
        plan.memberships.append((project.id, caller.userID))
    }

    /// Whether `record` was deleted before the caller's membership of its project began, by the server's
    /// time (its `updatedAt`, which a tombstone keeps from its delete: a write that leaves it deleted does
    /// not move it): a device's deletion clock runs by the device's time, which may be anything within the
    /// allowance, and a membership begins by the server's.
    private static func deletedBeforeJoining(_ record: StoredRecord, snapshot: PushSnapshot) -> Bool {
        snapshot.access.deletedBeforeJoining(
            record.projectID, deleted: record.deletion != nil, updatedAt: record.updatedAt.milliseconds)
    }

    /// The answer to a record that does not exist, or that the caller may not see: one answer for both.
    private static func noSuchRecord(_ entity: EntityType, _ id: UUID) -> ServerError {
        ServerError.notFound("no \(entity.rawValue) \(id.storageText) on the server")
    }

    /// A record's author field names whoever writes it (their own member record), except for a role that
    /// writes for others; only its author or the office deletes an authored record (`Roles`). An authored
    /// record's contents are its author's as much as the field is: changing another member's record, or
    /// bringing it back from a delete, is writing for them.
    private func checkAuthorship(
        _ mutation: PushMutation, merged: VersionedRecord, existing: StoredRecord?, in project: UUID, snapshot: PushSnapshot
    ) throws {
        guard let authorship = Authorship(mutation.entity, in: project, snapshot: snapshot) else { return }
        let (field, role) = (authorship.field, authorship.role)
        let before = existing?.fields[field]
        let deleting = merged.deletion != nil && (existing.map { $0.deletion == nil } ?? false)
        if deleting {
            guard authorship.isOwn(before) || authorship.deletesOthers else {
                throw ServerError.forbidden(
                    "only its author or a \(mutation.entity.description.access.deletesOthers.sorted().joined(separator: " or ")) "
                        + "deletes a \(mutation.entity.rawValue)")
            }
        }
        // Any change of a record another member wrote, live or deleted: crew rewrote a teammate's log and
        // the project manager's time note, a foreman moved the office's clock-in time, and crew's edit of
        // a teammate's deleted log brought it back (attack 50 recheck). A delete's last values are written
        // as an update's are, so a delete that changes them is judged as that change too, its author
        // field as a move below: crew deleted its own log naming a teammate as its author, and the
        // teammate's next edit brought it back in their name with crew's text (attack 52).
        if let existing, !authorship.writes(for: before),
            !deleting || merged.record.fields.contains(where: { existing.fields[$0.key] != $0.value })
        {
            throw authorship.refusingChange(of: mutation.entity)
        }
        let author = merged.record[field]
        guard existing == nil || before != author else { return }
        guard authorship.isOwn(author) || authorship.writesForOthers else {
            throw ServerError.forbidden(
                "a \(role) writes \(mutation.entity.rawValue) records as themselves: \(field) must name your own "
                    + "member record in this project")
        }
        guard authorship.writes(for: author) else {
            throw ServerError.forbidden(
                "a \(role) writes \(mutation.entity.rawValue) records for members of weaker roles only: \(field) must "
                    + "name your own member record or one of theirs in this project")
        }
        // Whose a record is decides who may delete it, so taking another member's record is checked as
        // deleting it would be: a role that writes for others may move it between others, and only one
        // that also deletes others' records may take it into its own name (crew renaming a teammate's
        // log as theirs, then deleting it, took the text from every member).
        if existing != nil, !authorship.isOwn(before), authorship.isOwn(author), !authorship.deletesOthers {
            throw ServerError.forbidden(
                "a \(role) does not take a \(mutation.entity.rawValue) another member wrote: its \(field) changes "
                    + "to your own member record only by a "
                    + mutation.entity.description.access.deletesOthers.sorted().joined(separator: " or "))
        }
    }

    /// Whether what a mutation brings is what the merge kept: a delete leaves the record deleted; an
    /// update of a live record leaves each of its values. An update of a record a newer delete keeps
    /// deleted is merged into the tombstone's last values (what a revival brings back) and goes through:
    /// the device meets the tombstone in its pull and surfaces the delete there.
    private static func stands(_ fields: [String: FieldValue], operation: PushMutation.Operation, in merged: VersionedRecord) -> Bool {
        if operation == .delete { return merged.deletion != nil }
        guard merged.deletion == nil else { return true }
        return fields.allSatisfy { merged.record.fields[$0.key] == $0.value }
    }

    /// A mutation whose shape no server takes: fields outside the entity, a field without its clock, a
    /// delete without its deletion clock, forbidden characters, clocks too far ahead of the server's time.
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
        // What the mutation brings, not the stored record: a value stored before the rule stays editable.
        let incoming = EntityRecord(
            entity: mutation.entity, id: mutation.recordID, fields: mutation.fields, sync: SyncMetadata(createdAt: now, updatedAt: now))
        if let error = incoming.unbundlableValueError(in: mutation.fields.keys.sorted()) {
            throw ServerError.badRequest(error.description)
        }
        let limit = now.addingTimeInterval(Double(HybridLogicalClock.defaultMaximumDrift.components.seconds))
        let clocks = Array(mutation.clocks.values) + (mutation.deletion.map { [$0] } ?? [])
        if let ahead = clocks.first(where: { $0.date > limit }) {
            throw ServerError(
                status: 400, .clockAhead,
                "clock \(ahead.encoded) runs more than 5 minutes ahead of the server: check the device's date and time")
        }
    }

    /// The fields with every parent reference sent as a server id (text) turned into the client id. A
    /// server id of a record the caller may not see is answered as one no record holds: server ids are
    /// sequential, and a different answer let anyone count other projects' records.
    private func clientReferences(in mutation: PushMutation, caller: Caller, snapshot: PushSnapshot) throws -> [String: FieldValue] {
        var fields = mutation.fields
        for relation in mutation.entity.description.parents {
            guard case .text(let text) = fields[relation.field] ?? .null else { continue }
            guard let serverID = Int64(text),
                let key = snapshot.serverIDs[ServerIDKey(entity: relation.entity, serverID: serverID)],
                snapshot.summary(key)?.isVisible(to: caller, memberships: snapshot.memberships) ?? false
            else {
                throw ServerError.notFound("\(relation.field): no \(relation.entity.rawValue) with server id '\(text)'")
            }
            fields[relation.field] = .uuid(key.id)
        }
        return fields
    }

    /// The project a record belongs to: itself for a project, else that of the first parent it names;
    /// an opportunity keeps the project that links it (none until one does). The caller must be a
    /// member of it, except of a project they are creating (they become its first member).
    private func projectOf(_ record: EntityRecord, existing: StoredRecord?, caller: Caller, snapshot: PushSnapshot)
        throws -> UUID?
    {
        if record.entity == schema.scope {
            let hasMembers = snapshot.projectsWithMembers.contains(record.id)
            if existing != nil || hasMembers, !snapshot.memberships.contains(record.id) {
                throw ServerError.forbidden("you are not a member of project \(record.id.storageText)")
            }
            return record.id
        }
        if schema.isAboveScope(record.entity) { return existing?.projectID }
        for relation in record.entity.description.parents {
            guard case .uuid(let parentID) = record[relation.field] else { continue }
            // One answer for a parent that does not exist and one the caller may not see.
            let missing = ServerError.notFound(
                "\(relation.field): no \(relation.entity.rawValue) \(parentID.storageText) on the server")
            guard let parent = snapshot.summary(RecordKey(entity: relation.entity, id: parentID)) else { throw missing }
            let project = relation.entity == schema.scope ? parentID : parent.projectID
            guard let project, snapshot.memberships.contains(project) else { throw missing }
            return project
        }
        throw ServerError.badRequest("a \(record.entity.rawValue) must name its parent")
    }

    /// Every other record the record names must be one the caller may see, so ids of other projects'
    /// records cannot be probed or linked, and one of the record's own project: a member of two
    /// projects could otherwise tie one project's records to the other's (an issue of P2 assigned to
    /// her P1 member record), and every export and bundle of P1 would then carry them to P1's members.
    /// A reference to a record the server does not hold is kept (the device flags such records
    /// orphaned rather than dropping them); an opportunity no project has linked yet belongs to none.
    ///
    /// Only a reference the write sets is the writer's: one the stored record already holds is left as
    /// it stands. A member who could not see the other project set such a reference (answered as one to
    /// a record that does not exist), and then every edit of the record by a member of both projects was
    /// refused for a value none of them wrote (attack 45 finding 4).
    private func checkReferences(
        _ record: EntityRecord, existing: StoredRecord?, project: UUID?, caller: Caller, snapshot: PushSnapshot
    ) throws {
        for relation in record.entity.description.parents where existing?.fields[relation.field] != record[relation.field] {
            // A record the caller may not see is treated as one the server does not hold: kept as a
            // reference (the device flags the record orphaned), never told apart from a missing one.
            guard case .uuid(let parentID) = record[relation.field],
                let parent = snapshot.summary(RecordKey(entity: relation.entity, id: parentID)),
                parent.isVisible(to: caller, memberships: snapshot.memberships)
            else { continue }
            let parentProject = relation.entity == schema.scope ? parentID : parent.projectID
            if let project, let parentProject, parentProject != project {
                throw ServerError.badRequest(
                    "\(relation.field) names \(relation.entity.rawValue) \(parentID.storageText) of project "
                        + "\(parentProject.storageText); a record may name only records of its own project (\(project.storageText))")
            }
        }
    }

    /// A project naming an opportunity no project had yet makes the opportunity that project's: it moves
    /// to the end of the change sequence, just before the project itself, so the project's other members
    /// pull it, parent first. Only the caller's own: one that belongs to no project is its owner's alone,
    /// and a member who named another user's took it over (its fields, its edits, its owner's access).
    /// Another's stays a reference to a record the caller cannot see, as any such reference does.
    private func link(
        aboveScopeOf project: EntityRecord, by caller: Caller, snapshot: inout PushSnapshot, plan: inout PushPlan
    ) {
        for relation in schema.scopeParents {
            link(relation, of: project, by: caller, snapshot: &snapshot, plan: &plan)
        }
    }

    private func link(
        _ relation: ParentRelation, of project: EntityRecord, by caller: Caller, snapshot: inout PushSnapshot,
        plan: inout PushPlan
    ) {
        guard case .uuid(let id) = project[relation.field] else { return }
        let key = RecordKey(entity: relation.entity, id: id)
        guard var above = snapshot.summary(key), above.projectID == nil, above.ownerID == caller.userID else { return }
        snapshot.changeSequence += 1
        above.projectID = project.id
        above.sequence = snapshot.changeSequence
        snapshot.summaries[key] = above
        if var whole = snapshot.records[key] {
            whole.projectID = project.id
            whole.sequence = above.sequence
            snapshot.records[key] = whole
            plan.records[key] = whole
        } else {
            plan.moves[key] = (project.id, above.sequence)
        }
    }

    /// A member record is a role, so the office gives, changes and takes away none stronger than its
    /// own: a project manager made its own record the owner's, made a second record of itself as owner,
    /// and deleted the owner's, who then reached nothing (attack 88). Judged on the record as it stood
    /// (a tombstone's last values too: bringing one back gives its role) and as the change leaves it; a
    /// role this server does not know is no role, and gives nothing to guard.
    private func checkRoleGiven(
        by mutation: PushMutation, judging versions: [[String: FieldValue]?], existing: StoredRecord?, in project: UUID,
        snapshot: PushSnapshot
    ) throws {
        guard mutation.entity == schema.membership else { return }
        guard let role = snapshot.access.roles[project], let rank = schema.rank(of: role) else {
            throw ServerError.forbidden("you have no role in this project: the office has to give you one")
        }
        // The change's values count deleted too: a tombstone keeps them, and a revive brings them back (a
        // delete carrying `role: owner` planted it, attack 97).
        for fields in versions {
            guard case .text(let given) = fields?[schema.roleField] ?? .null, let givenRank = schema.rank(of: given),
                givenRank < rank
            else { continue }
            throw ServerError.forbidden(
                "a \(role) gives, changes and takes away no role stronger than its own: this member record "
                    + (fields == existing?.fields ? "is" : "would be") + " a \(given)'s")
        }
    }

    /// A member record names one user for good: membership is given and taken by `outpost admin`, and a
    /// device pushing a member record's user to someone else locked its member out (no record, so no
    /// role) while the office's member list, the admin log and `remove-member` knew nothing of it, and
    /// every device held a live record of a user the server never saw (attack 95, F2). Judged against the
    /// record as stored, a tombstone's last values too, and on a delete's carried values (attack 97).
    private func checkUserKept(by mutation: PushMutation, merged: VersionedRecord, existing: StoredRecord?) throws {
        // A delete's carried values too: the tombstone keeps them, and a revive brings them back.
        guard mutation.entity == schema.membership, let existing,
            merged.record[schema.userField] != existing.fields[schema.userField] ?? .null
        else { return }
        throw ServerError.forbidden(
            "a member record names one user for good: to give someone else this member's place, the office removes "
                + "this member and adds the other (outpost admin)")
    }

    /// One live member record per user and project: with two, the stronger decided, so an office device
    /// that made a second, weaker record for a member (two office devices adding the same person offline)
    /// demoted no one, and every member list showed both (attack 91, F1). A write that leaves a record
    /// live naming a user another live record names is refused; the device changes that one instead.
    /// Records this push wrote count as they now stand.
    private func checkOneRecordPerUser(
        _ mutation: PushMutation, merged: VersionedRecord, existing: StoredRecord?, in project: UUID, snapshot: PushSnapshot
    ) throws {
        guard mutation.entity == schema.membership, merged.deletion == nil,
            case .uuid(let user) = merged.record[schema.userField],
            existing.map({ $0.deletion != nil || $0.fields[schema.userField] != .uuid(user) }) ?? true
        else { return }
        var others = snapshot.access.memberRecordsOfUser[project]?[user] ?? []
        for (key, record) in snapshot.records where key.entity == schema.membership && record.projectID == project {
            if record.deletion == nil, record.fields[schema.userField] == .uuid(user) { others.insert(key.id) } else { others.remove(key.id) }
        }
        others.remove(mutation.recordID)
        guard let other = others.min(by: { $0.uuidString < $1.uuidString }) else { return }
        throw ServerError.forbidden(
            "user \(user.storageText) has a member record in this project already (\(other.storageText)): change its role "
                + "instead of giving them a second")
    }

    /// Refuses a write of `entity` in `project` the caller's role there does not allow, and any write
    /// where no role is established: authorization fails closed.
    private func checkRole(of entity: EntityType, in project: UUID, snapshot: PushSnapshot) throws {
        guard let role = snapshot.access.roles[project] else {
            throw ServerError.forbidden("you have no role in this project: the office has to give you one")
        }
        guard Roles.mayWrite(entity, as: role) else {
            throw ServerError.forbidden(
                "a \(role) may not change \(entity.rawValue) records in this project: the schema gives them to "
                    + entity.description.access.writers.sorted { (schema.rank(of: $0) ?? 0) < (schema.rank(of: $1) ?? 0) }
                    .joined(separator: ", "))
        }
    }

    /// The record as pull and conflicts send it. In server-id mode a reference names the parent's server
    /// id when the client can already map it: the parent changed before the record (so a client reading
    /// in sequence has pulled it, or created it) or it travels in the same page (`page`). A parent that
    /// moved later in the sequence (an opportunity linked after its project) is named by client id,
    /// since the client would meet its server id only afterwards. `parent` finds a parent's summary.
    ///
    /// Only a parent of the record's own project is named by server id (or, for a record of no project,
    /// one of its owner's of no project): a reference to another project's record stays the client id it
    /// was pushed as, exactly as one to a record the server does not hold. Translated, it told every
    /// reader that the record exists and its server id, and left a server id the reader's device can
    /// never map in a uuid field.
    func wireRecord(
        _ record: StoredRecord, page: Set<RecordKey> = [], parent: (RecordKey) throws -> RecordSummary?
    ) rethrows -> ServerRecord {
        var wire = record.serverRecord
        guard assignsServerIDs else { return wire }
        for relation in record.entity.description.parents {
            guard case .uuid(let parentID) = wire.fields[relation.field] ?? .null else { continue }
            let key = RecordKey(entity: relation.entity, id: parentID)
            guard let summary = try parent(key), let serverID = summary.serverID,
                summary.sequence < record.sequence || page.contains(key),
                summary.projectID.map({ $0 == record.projectID }) ?? (record.projectID == nil && summary.ownerID == record.ownerID)
            else { continue }
            wire.fields[relation.field] = .text(String(serverID))
        }
        return wire
    }

    /// A record the seed defines, stamped with the server's clock, at the next change sequence (and
    /// server id, in server-id mode) after `counters`, which it advances.
    func seededRecord(
        _ entity: EntityType, id: UUID, projectID: UUID, owner: UUID, fields: [String: FieldValue],
        stamp: HybridTimestamp, now: Date, counters: inout (changeSequence: Int64, lastServerID: Int64)
    ) throws(ServerError) -> StoredRecord {
        counters.changeSequence += 1
        var serverID: Int64?
        if assignsServerIDs {
            counters.lastServerID += 1
            serverID = counters.lastServerID
        }
        let record = StoredRecord(
            entity: entity, id: id, serverID: serverID, projectID: projectID, ownerID: owner, version: 1,
            sequence: counters.changeSequence, fields: fields, clocks: fields.mapValues { _ in stamp }, deletion: nil,
            createdAt: now, updatedAt: now)
        try record.checkAsOperatorsWrite()
        return record
    }
}

extension StoredRecord {
    /// Refuses a record the operator's tools write (a seed's, `createProject`'s, `addMember`'s) that a
    /// device's push of the same values would be refused: the entity's rules, and text no bundle can
    /// carry (a U+FFFF in a member's name made every XML bundle of the project end empty).
    func checkAsOperatorsWrite() throws(ServerError) {
        let record = entityRecord
        if let problem = record.validationErrors.first ?? record.unbundlableValueError(in: fields.keys.sorted()) {
            throw ServerError(.invalidSeed, message: problem.description)
        }
    }
}

/// The caller's standing towards an authored entity's records in one project: which member records are
/// their own, and whose records their role writes (`PushRules.checkAuthorship`, and the check before a
/// stale version is answered with the record whole).
private struct Authorship {
    let field: String
    let role: String
    let writesForOthers: Bool
    let deletesOthers: Bool
    private let own: Set<UUID>
    private let ranks: [UUID: Int]
    private let rank: Int

    /// Nil for an entity with no author field, or a caller with no role in `project` (refused elsewhere).
    init?(_ entity: EntityType, in project: UUID, snapshot: PushSnapshot) {
        guard let field = Roles.authorField(of: entity), let role = snapshot.access.roles[project] else { return nil }
        self.field = field
        self.role = role
        writesForOthers = Roles.writesForOthers(entity, as: role)
        deletesOthers = Roles.deletesOthers(entity, as: role)
        own = snapshot.access.ownMemberRecords[project] ?? []
        ranks = snapshot.access.memberRanks[project] ?? [:]
        rank = ServedSchema.current.rank(of: role) ?? Int.max
    }

    /// Whether `value` names one of the caller's own member records.
    func isOwn(_ value: FieldValue?) -> Bool {
        if case .uuid(let id)? = value { own.contains(id) } else { false }
    }

    /// Whether the caller writes a record `value` names as its author: their own; anyone's for a role
    /// that also deletes others' records (the office); for a role that writes for others without
    /// deleting theirs (a foreman, for time), members of weaker roles only, his crew: not the office's nor
    /// another foreman's records, nor an id that names no member (a foreman moved the owner's time to
    /// crew, who then deleted it).
    func writes(for value: FieldValue?) -> Bool {
        if isOwn(value) || (writesForOthers && deletesOthers) { return true }
        guard writesForOthers, case .uuid(let id)? = value, let other = ranks[id] else { return false }
        return other > rank
    }

    /// The refusal of a change to a record another member wrote, which the caller may not write.
    func refusingChange(of entity: EntityType) -> ServerError {
        ServerError.forbidden(
            writesForOthers
                ? "a \(role) changes \(entity.rawValue) records of members of weaker roles only, and their own"
                : "a \(role) changes only their own \(entity.rawValue) records: this one's \(field) names another member")
    }
}

/// How many applied answers each member's pushes added since their older answers were last let go, in
/// this process (`PushRules.answersKeptPerUser`). Pruning went by the change sequence, which every
/// member's pushes move: a member whose pushes stopped one short of each multiple of the interval, another
/// member's push crossing it, was never pruned, and grew a database by 128 MB a minute (attack 121, F2).
/// Counted in memory: a restart starts each count again, which delays a pruning by at most one interval,
/// and several servers on one database each prune after an interval of the pushes they applied.
final class AnswerPruning: Sendable {
    private let counts = Mutex<[UUID: Int64]>([:])

    init() {}

    /// Adds `applied` answers of `user`; true (and the count starts again) once they reach `interval`.
    func add(_ applied: Int, by user: UUID, every interval: Int64) -> Bool {
        counts.withLock { counts in
            let total = counts[user, default: 0] + Int64(applied)
            guard total >= interval else {
                counts[user] = total
                return false
            }
            counts[user] = nil
            return true
        }
    }
}

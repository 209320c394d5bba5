import Foundation
import OutpostConflicts
import OutpostSchema
import OutpostWire

/// The device-side owner of replicated state, as the sync engine drives it: a handful of calls, each
/// one or more whole transactions, so the engine decides when and what to send and never reaches into
/// tables. `LocalStore` is the one implementation; the merge (pulled pages, conflict answers and
/// imported bundles through one rule), the queue's transitions and the server-id mapping in both
/// directions all happen behind it.
public protocol Replica: Sendable {
    /// Where the replica lives, for errors that name it.
    var path: String { get }

    /// Puts back what a run that stopped half-way left in flight (a killed process, a lost answer) and
    /// removes the files it left; returns how many changes went back in line. The first run calls it.
    func recoverInterruptedRun(now: Date) throws(StoreError) -> Int

    /// Where the next pull starts: the cursor saved with the last page applied, nil before the first.
    func pullCursor(stream: String) throws(StoreError) -> String?

    /// Applies a pulled page and saves its cursor in one transaction, merging each record with any
    /// waiting local change by `policy` and surfacing whatever loses.
    func applyPulledPage(_ page: PulledPage, policy: ConflictPolicy, now: Date) async throws(StoreError) -> PullReport

    /// The next changes to push, claimed for this run, in their wire form (references to records the
    /// server has named rewritten to its ids); empty when nothing is ready.
    func nextBatch(limit: Int, now: Date) throws(StoreError) -> OutgoingBatch

    /// The changes sent before whose answers never came (a lost answer, a stopped app), claimed for this
    /// run, at most `limit`: the engine asks the server what it kept for their keys before it pulls
    /// (`SyncTransport.pushAnswers`) and settles them by its answer, which puts back those it leaves out.
    func nextUnansweredBatch(limit: Int, now: Date) throws(StoreError) -> OutgoingBatch

    /// Settles a batch by the server's answers: acknowledged (noting server ids), merged with the
    /// server's record and sent again on its version (a conflict, surfaced by `policy`; failed after
    /// `retryLimit` attempts), stamped again (a clock refused as ahead), or failed (refused). A change
    /// the answer leaves out goes back in line.
    func settle(_ batch: OutgoingBatch, with response: PushResponse, policy: ConflictPolicy, retryLimit: Int, now: Date)
        async throws(StoreError) -> Settlement

    /// Settles a batch the server never answered, as the engine's retry policy decided for each change;
    /// each is marked as one the server may have taken (a change absent from `failures` goes back in line).
    func settle(_ batch: OutgoingBatch, failures: [UUID: PushFailure]) throws(StoreError) -> Settlement

    /// Puts claimed changes back in line as they were, no attempt charged.
    func putBack(_ mutations: [Mutation]) throws(StoreError)

    /// Ends a run: a complete one that left nothing unsent is remembered as the last successful sync,
    /// and a complete one that left a quarter of the file free (a drained queue) packs the file.
    func finishRun(complete: Bool, at date: Date) throws(StoreError)

    /// The last checkpoint of the server's history this device was given (sent with each pull; the
    /// push batches carry it already), nil before the first answer.
    func historyCheckpoint() throws(StoreError) -> String?

    /// Checkpoints imported bundles carried that the server has not confirmed, oldest first: the
    /// engine sends each before it pulls, and a server that no longer holds one starts a rebuild.
    func importedCheckpoints() throws(StoreError) -> [String]

    /// Where bundles downloaded from the server left their projects, for the first request of the next
    /// pull (`PullRequest.bundlePositions`); a page applied with them forgets them.
    func bundlePositions() throws(StoreError) -> [String]

    /// Projects bundle files brought records of, to read again from their beginning with the first
    /// request of the next pull (`PullRequest.rereadProjects`).
    func rereadProjects() throws(StoreError) -> [UUID]

    /// Once a pull reached its last page: what bundle files brought of the projects it read again and it
    /// did not bring goes (queued as creates where this device wrote to them).
    func settleRereadImports(asked: Set<UUID>?, now: Date) async throws(StoreError) -> HistoryRebuildReport

    /// The change sequences this device's own accepted pushes took, for every request of the next pull
    /// (`PullRequest.ownSequences`); a completed pull forgets those it passed.
    func ownSequences() throws(StoreError) -> [String]

    /// Forgets an imported checkpoint the server confirmed.
    func confirmImportedCheckpoint(_ checkpoint: String) throws(StoreError)

    /// Whether a rebuild after a server restore is under way (`beginHistoryRebuild`).
    func isRebuildingHistory() throws(StoreError) -> Bool

    /// Starts over against a server restored from a backup (it answered `history_changed`): the next
    /// pull brings everything again as pages that rebuild the history.
    func beginHistoryRebuild(now: Date) throws(StoreError)

    /// Ends that rebuild once its pull reached the end, given every record it brought: the device's own
    /// records the server lost go again as creates, the others it lost are removed here.
    func finishHistoryRebuild(seen: [EntityType: Set<UUID>], now: Date) async throws(StoreError) -> HistoryRebuildReport

    /// Photos and voice notes whose original still has to reach the server, oldest first.
    func pendingMediaUploads(limit: Int) throws(StoreError) -> [MediaUpload]

    /// Saves how much of an original the server holds, so an upload resumes there.
    /// A finished upload's `checkpoint` (the change it took on the server) becomes this device's own.
    func recordMediaProgress(of attachmentID: UUID, uploadedBytes: Int64, complete: Bool, checkpoint: String?) throws(StoreError)

    /// Notes a failed upload: tried again later, or given up with why.
    func recordMediaFailure(of attachmentID: UUID, reason: String, permanently: Bool) throws(StoreError)
}

/// Changes claimed for one push, and the request that carries them.
public struct OutgoingBatch: Sendable {
    /// The claimed changes, in the request's order.
    public let mutations: [Mutation]
    /// Changes the claim failed because they could not be read (a payload or audit entry damaged or
    /// gone), each with why (`LocalStore.unsentChanges()`): a run counts them among its failures.
    public let failedAsUnreadable: Int
    /// The push request: each change in its wire form.
    public let request: PushRequest

    /// Whether nothing was ready.
    public var isEmpty: Bool { mutations.isEmpty }
}

/// What the engine's retry policy decided for one change of a batch the server never answered.
public enum PushFailure: Sendable, Hashable {
    /// Back in line as it was, no attempt charged (the run was cancelled, or sending is paused).
    case putBack
    /// Tried again from `at`, with why it failed.
    case retry(at: Date, reason: String)
    /// Given up with why; what depends on it is held back.
    case fail(reason: String)
}

/// What settling a batch did, for the run's report.
public struct Settlement: Sendable, Hashable {
    /// Changes the server applied (or had applied, under the same key).
    public var acknowledged = 0
    /// Changes that met a newer server version, merged and sent again on it.
    public var rebased = 0
    /// Changes scheduled to be sent again after a transport failure.
    public var retried = 0
    /// Changes given up on.
    public var failed = 0
    /// Changes held back because one they depend on failed.
    public var blocked = 0
    /// Losing values and deletes written to the conflicts table by the merges.
    public var conflictsSurfaced = 0
    /// Changes refused for a clock ahead of the server's, stamped again and sent in this run.
    public var restamped = 0
    /// Changes refused for a clock ahead that wait for this device's clock to be right.
    public var heldForClock = 0
    /// Changes the answer did not settle (no result under their key, or a duplicate of a duplicate),
    /// put back in line as they were.
    public var unanswered = 0

    /// An empty settlement.
    public init() {}
}

extension LocalStore: Replica {
    public func recoverInterruptedRun(now: Date) throws(StoreError) -> Int {
        let recovered = try requeueInFlightMutations(now: now)
        // Files a crash left (a copy or a download of a process that is gone, a photo whose record
        // never committed): a failure here costs only disk, so it does not fail the recovery.
        _ = try? collectMediaLeftovers()
        return recovered
    }

    public func nextBatch(limit: Int, now: Date) throws(StoreError) -> OutgoingBatch {
        try outgoingBatch(claiming: limit, now: now, answersLost: false)
    }

    public func nextUnansweredBatch(limit: Int, now: Date) throws(StoreError) -> OutgoingBatch {
        try outgoingBatch(claiming: limit, now: now, answersLost: true)
    }

    private func outgoingBatch(claiming limit: Int, now: Date, answersLost: Bool) throws(StoreError) -> OutgoingBatch {
        let (claimed, unreadable) = try claimMutationsCountingUnreadable(
            syncClass: .structured, limit: limit, now: now, answersLost: answersLost)
        do {
            return OutgoingBatch(
                mutations: claimed, failedAsUnreadable: unreadable,
                request: PushRequest(mutations: try claimed.map(outgoing), checkpoint: claimed.isEmpty ? nil : try historyCheckpoint()))
        } catch {
            // Not left in flight until a restart: the claim goes back as it was.
            try? release(claimed)
            throw error
        }
    }

    public func putBack(_ mutations: [Mutation]) throws(StoreError) {
        try release(mutations)
    }

    public func finishRun(complete: Bool, at date: Date) throws(StoreError) {
        guard complete else { return }
        if try status().pendingChanges == 0 { try recordSuccessfulSync(at: date) }
        compactIfWorthwhile()
    }

    public func settle(_ batch: OutgoingBatch, failures: [UUID: PushFailure]) throws(StoreError) -> Settlement {
        var settlement = Settlement()
        // The request may have reached the server: whether it took each change stays unknown.
        try write { db in try MutationQueue.mark(batch.mutations, unheard: true, in: db) }
        var back: [Mutation] = []
        for mutation in batch.mutations {
            switch failures[mutation.idempotencyKey] ?? .putBack {
            case .putBack:
                back.append(mutation)
            case .retry(let at, let reason):
                try scheduleRetry(mutation, reason: reason, retryAt: at)
                settlement.retried += 1
            case .fail(let reason):
                settlement.blocked += try fail(mutation, reason: reason).count
                settlement.failed += 1
            }
        }
        try release(back)
        return settlement
    }

    public func settle(
        _ batch: OutgoingBatch, with response: PushResponse, policy: ConflictPolicy, retryLimit: Int, now: Date
    ) async throws(StoreError) -> Settlement {
        var settlement = Settlement()
        // Saved before any change is settled: were it saved after, a stop in between would leave the
        // older checkpoint, which a server restored to a backup taken between the two still holds, and
        // the changes it then lost would stay acknowledged here, unnoticed.
        if let checkpoint = response.checkpoint {
            try write { db in try HistoryState.save(checkpoint: checkpoint, in: db) }
        }
        let results = Dictionary(response.results.map { ($0.idempotencyKey, $0.outcome) }, uniquingKeysWith: { first, _ in first })
        // Changes answered as applied whose answer settled nothing: their sequences are not this device's.
        var refused: Set<UUID> = []
        // After the changes are acknowledged (below): a sequence noted before its version was held here
        // would let the next pull skip a record this device did not hold yet. Nor is one noted for an
        // answer that was refused: the next pull sent the record back as a version alone, which the
        // device, holding none, quarantined under a misleading reason (review 137).
        defer {
            let asked = Set(batch.mutations.map(\.idempotencyKey)).subtracting(refused)
            let taken = response.results.compactMap { result -> Int64? in
                guard asked.contains(result.idempotencyKey), case .applied(let version, _) = result.outcome,
                    SyncProtocol.recordVersions.contains(version)
                else { return nil }
                return result.sequence
            }
            if !taken.isEmpty { try? write { db in try OwnSequences.note(taken, in: db) } }
        }
        var unanswered: [Mutation] = [], leftOut: [Mutation] = []
        for mutation in batch.mutations {
            guard let outcome = results[mutation.idempotencyKey] else {
                unanswered.append(mutation)
                leftOut.append(mutation)
                continue
            }
            // An answer naming a version no server gives, applied or a conflict's record, fresh or answered
            // again, settles nothing: the change waits in line, and an answer that settled none of its
            // batch ends the run's pushing. Applied at Int64.max, the version was stored and every real
            // version pulled after it looked older; at 0 or below the same batch went 300 times in 15 s
            // (attack 72, findings 2 and 3). A conflict at version 0 answered again read as merged already
            // and went eleven times, then failed; answered fresh, its record was quarantined and the change
            // failed (attack 73, finding 3).
            if let version = Self.versionNamed(by: outcome), !SyncProtocol.recordVersions.contains(version) {
                unanswered.append(mutation)
                continue
            }
            // Nor does a conflict whose record is not the change's own: a hostile server's conflict carrying
            // an issue of a project this device does not hold was stored as synced, and one naming another
            // record held here replaced that record's row, moved to another project (attack 86, F6).
            if case .conflict(let record) = outcome.unwrapped, record.entity != mutation.entity || record.recordID != mutation.recordID {
                unanswered.append(mutation)
                continue
            }
            switch outcome.unwrapped {
            case .applied(let version, let serverID), .duplicate(.applied(let version, let serverID)):
                // Nor does one giving a server id that another record holds (`acknowledge`, which keeps the
                // reason in the change's `lastError`).
                guard try acknowledge(mutation, serverVersion: version, serverID: serverID, now: now) else {
                    unanswered.append(mutation)
                    refused.insert(mutation.idempotencyKey)
                    continue
                }
                settlement.acknowledged += 1
            case .conflict(let serverRecord):
                // Merge the server's current record with the pending change, then send the change again
                // on top of the server's version; the merge surfaces whatever lost. A conflict answered
                // again (`duplicate`: the app stopped between the answer and the rebase) carries the
                // record as it was then; if the store already holds that version or a newer one, the
                // merge happened (before the stop, or in this run's pull) and must not run twice, nor
                // take the record back to the older version. Either way the change goes once more, under
                // a new key, since the old key's answer will stay that conflict.
                let mergedAlready = Self.isAnsweredAgain(outcome) ? try isMergedAlready(mutation, serverVersion: serverRecord.version) : false
                if !mergedAlready {
                    // Sent again without a merge, the change would overwrite the server's record unseen.
                    guard let remote = try? serverRecord.versionedRecord else {
                        settlement.blocked += try fail(mutation, reason: Self.unmergeable(serverRecord)).count
                        settlement.failed += 1
                        continue
                    }
                    let merged = try await merge(PulledPage(changes: [remote], cursor: nil), policy: policy, now: now)
                    settlement.conflictsSurfaced += merged.conflictsSurfaced
                    if merged.quarantined > 0 {
                        settlement.blocked += try fail(mutation, reason: Self.unmergeable(serverRecord)).count
                        settlement.failed += 1
                        continue
                    }
                }
                if mutation.attempts + 1 > retryLimit {
                    try fail(mutation, reason: "the server kept reporting a newer version")
                    settlement.failed += 1
                } else {
                    try rebase(mutation, onto: serverRecord.version)
                    settlement.rebased += 1
                }
            case .rejected(let reason) where reason.code == .clockAhead:
                // The change is sound; this device's date was, or is, wrong. Stamped again, it goes in this
                // run; otherwise it waits for the clock to be right, and the status says so.
                let why = "\(reason.code.rawValue): \(reason.message)"
                if try await restampRefusedClocks(of: mutation, reason: why, now: now) {
                    settlement.restamped += 1
                } else {
                    settlement.heldForClock += 1
                }
            case .rejected(let reason):
                settlement.blocked += try fail(mutation, reason: "\(reason.code.rawValue): \(reason.message)").count
                settlement.failed += 1
            case .duplicate:
                unanswered.append(mutation)  // a duplicate of a duplicate is not an answer
            }
        }
        // A server that still keeps every answer it gave this member never took a change it leaves out:
        // merged from now on by its strategy, as any change the server never got.
        if response.keepsEveryAnswer == true, !leftOut.isEmpty {
            try write { db in try MutationQueue.mark(leftOut, unheard: false, in: db) }
        }
        try release(unanswered)
        settlement.unanswered = unanswered.count
        return settlement
    }

    /// The wire form of a queued mutation, with references to records the server has named rewritten
    /// to the server's ids (for servers that assign their own): the outbound half of the server-id
    /// mapping, whose inbound half a pulled page goes through (`ServerIDs.clientReferences`).
    private func outgoing(_ mutation: Mutation) throws(StoreError) -> PushMutation {
        var fields = mutation.fields
        for relation in mutation.entity.description.parents {
            guard case .uuid(let parent) = fields[relation.field] ?? .null,
                let serverID = try serverID(of: relation.entity, clientID: parent)
            else { continue }
            fields[relation.field] = .text(serverID)
        }
        let operation: PushMutation.Operation =
            switch mutation.operation {
            case .create: .create
            case .update: .update
            case .delete: .delete
            }
        // Only a create carries the record's creation time, so only a create reads the row.
        let createdAt = mutation.operation == .create ? try record(mutation.entity, id: mutation.recordID)?.sync.createdAt : nil
        return PushMutation(
            idempotencyKey: mutation.idempotencyKey, entity: mutation.entity, operation: operation,
            recordID: mutation.recordID, serverID: try serverID(of: mutation.entity, clientID: mutation.recordID),
            baseVersion: mutation.baseVersion, fields: fields, clocks: mutation.clocks, deletion: mutation.deletion,
            createdAt: createdAt)
    }

    /// Why a change was failed when the server's newer record could not be merged into the store.
    private static func unmergeable(_ record: ServerRecord) -> String {
        "the server's newer \(record.entity.rawValue) \(record.recordID.uuidString.lowercased()) does not fit this app's catalog "
            + "(it may come from a newer app), so this change cannot be merged with it; update the app, then retry"
    }

    /// The record version an answer names (an applied version, or a conflict's server record's), however
    /// often answered again; nil for a refusal.
    private static func versionNamed(by outcome: MutationOutcome) -> Int64? {
        switch outcome.unwrapped {
        case .applied(let version, _): version
        case .conflict(let record): record.version
        default: nil
        }
    }

        private static func isAnsweredAgain(_ outcome: MutationOutcome) -> Bool {
        if case .duplicate = outcome { true } else { false }
    }

    /// Whether a merge already took in the server's record at `serverVersion`: every merge moves the
    /// record's unfinished mutations onto the version it merged, in its own transaction. Judged by the
    /// mutation, not by the record's version: a tombstone a pull brought without contents, or a write
    /// over it, moves the row's version without its values, and a conflict answered again that carries
    /// the tombstone whole was then skipped, so a write bringing the record back went out with the
    /// values this device held from before the delete, over the server's newer ones.
    private func isMergedAlready(_ mutation: Mutation, serverVersion: Int64) throws(StoreError) -> Bool {
        let base = try read {
            try Int64.fetchOne($0, sql: "SELECT base_version FROM mutation_queue WHERE seq = ?", arguments: [mutation.sequence])
        }
        // A mutation a merge left nothing to send has left the queue (finished): the record is merged
        // again, which changes nothing when the store holds that version or a newer one.
        return (base ?? 0) >= serverVersion
    }
}

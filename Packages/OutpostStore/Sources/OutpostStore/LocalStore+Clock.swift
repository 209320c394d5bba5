import Foundation
import GRDB
import OutpostConflicts
import OutpostSchema

extension LocalStore {
    /// A mutation the server refused because a clock of it runs more than 5 minutes ahead of the
    /// server's time (`clock_ahead`): never failed for that, since the user's change is sound and only
    /// the device's date was wrong.
    ///
    /// When one of its clocks runs more than the drift allowance ahead of this device's own time now (a
    /// stamp from a time its clock ran ahead, since corrected), every stamp of this device in it and in
    /// the record's mutations queued behind it (none went out yet) is stamped again, one fresh stamp per
    /// mutation in queue order, after every clock of the record a server holds, in the queue and in the record's field clocks
    /// alike: device and server then judge the change by the same clocks, and a later edit of a field
    /// still follows the write it edited. It goes back in line at once, under a new idempotency key
    /// (the server answers the old one with the old refusal); returns true. Otherwise this device's
    /// clock itself still runs ahead: the change goes back in line as it
    /// is, no attempt counted (the engine sends no more in this run), and the store's status says the
    /// clock is off (`StoreStatus.clockWarning`) until a sync completes; returns false. Clocks of the
    /// record that would keep the fresh stamps from being any earlier than the refused ones are not
    /// followed (no honest server holds them); if the stamps still could not be earlier, the same as
    /// when the device's clock runs ahead: sent again, the change would be refused again. No later attempt
    /// time is set: it would be reckoned by the very clock that is wrong, and once the date is corrected
    /// the change would wait that far.
    @discardableResult
    func restampRefusedClocks(of mutation: Mutation, reason: String, now: Date) async throws(StoreError) -> Bool {
        try await StoreError.mapping(path: path) {
            try await writer.restamp(mutation, reason: reason, in: pool, now: now)
        }
    }
}

extension StoreWriter {
    func restamp(_ mutation: Mutation, reason: String, in pool: DatabasePool, now: Date) throws -> Bool {
        try transaction(in: pool) { db in
            // The refused mutation and every one of its record queued behind it: none went out yet.
            let rows = try Row.fetchAll(
                db, sql: """
                    SELECT seq, payload, \(MutationQueue.auditFieldsColumn) FROM mutation_queue
                    WHERE record_id = ? AND entity = ? AND seq >= ? AND status != 'done' ORDER BY seq
                    """,
                arguments: [mutation.recordID.storageText, mutation.entity.rawValue, mutation.sequence])
            guard let head = rows.first, head["seq"] == mutation.sequence else { return false }
            let payloads = try rows.map { row in
                (sequence: row["seq"] as Int64,
                 payload: try MutationQueue.Payload.read(row, in: db))
            }
            let node = clock.node
            let limit = now.addingTimeInterval(Double(clock.maximumDrift.components.seconds))
            let refusedAhead = (Array(payloads[0].payload.clocks.values) + [payloads[0].payload.deletion].compactMap { $0 })
                .filter { $0.node == node && $0.date > limit }.max()
            // The change back in line as it is, under a new key, and the status saying why; returns false.
            func hold(warning: String) throws -> Bool {
                try db.execute(
                    sql: "UPDATE mutation_queue SET status = 'pending', idempotency_key = ?, last_error = ? WHERE seq = ?",
                    arguments: [UUID.timeOrdered().storageText, reason, mutation.sequence])
                try db.execute(
                    sql: "INSERT OR REPLACE INTO sync_state (key, value) VALUES ('clock_warning', ?)", arguments: [warning])
                return false
            }
            guard let refusedAhead else {
                return try hold(warning: "the server refused changes stamped by this device's clock as more than 5 minutes ahead of its own time; check the device's date and time (\(reason))")
            }
            // Every stamp of this device in those mutations gets a fresh one, in the same order, so a later
            // edit still follows the write it edited; all after the record's clocks a server holds.
            let own = Set(payloads.flatMap { Array($0.payload.clocks.values) + [$0.payload.deletion].compactMap { $0 } }
                .filter { $0.node == node })
            let clocks = try FieldClocks.read(mutation.entity, mutation.recordID, in: db)
            let following = clock  // its node and drift allowance, for the nested function
            func floorToFollow(followingClocksAhead: Bool) -> HybridTimestamp? {
                clocks.flatMap { stored in
                    var rest = stored
                    rest.fields = rest.fields.filter { !own.contains($0.value) }
                    if let deletion = rest.deletion, own.contains(deletion) { rest.deletion = nil }
                    if !followingClocksAhead {
                        rest.fields = rest.fields.filter { $0.value.date <= limit }
                        rest.server = rest.server?.filter { $0.value.date <= limit }
                        if let deletion = rest.deletion, deletion.date > limit { rest.deletion = nil }
                    }
                    return rest.newestToFollow(by: following, now: now)
                }
            }
            // Stamped again, the change must still follow the record's clocks a server holds. When that
            // moves it no earlier than the stamp refused, the server refuses it again, for good: sent again
            // at once it went round (attack 61, finding 1), held it waited even after the server was honest
            // again (attack 62, finding M3). The clocks that hold it up run further ahead than the server
            // took the refused stamp to be, which no server that refuses clocks ahead of its time holds: a
            // broken or hostile server's answer put them here. They are not followed then; the server
            // judges the change by the clocks it holds. Followed or not, a change that still cannot be
            // stamped earlier waits, and the status says why.
            //
            // A write that followed such a clock when it was made, with this device's date right (attack 63,
            // finding F1), is stamped by what it saw then: the time it was made, after the newest clock of
            // the record within the allowance then. Not by the time of the refusal after every clock pulled
            // since: a teammate's later edit of the field, pulled meanwhile, lost to the refused stamp in
            // the local merge, and would lose to that fresh stamp on the server too, silently overwritten.
            // Stamped by its time, the server judges the two edits by when they were made. Field by field
            // (attack 64, finding F1): a change folds writes made at different times, and a field written
            // before a teammate's edit of it must not take the time of a later write of another field. In
            // such a change, a stamp of the device's own time within the allowance stays as it is.
            func byItsTime(_ payload: MutationQueue.Payload, _ key: String, after previous: HybridTimestamp?) -> HybridTimestamp? {
                guard let ahead = payload.followedAhead[key], ahead.at <= limit.storageMilliseconds else { return nil }
                let made = HybridTimestamp(
                    physicalMilliseconds: min(max(ahead.at, 0), HybridTimestamp.maximumPhysicalMilliseconds), counter: 0,
                    node: node)
                let stamp = ([made] + [previous, ahead.floor].compactMap { $0?.successor(on: node) }).max() ?? made
                // One that would run beyond the allowance itself (a row edited by hand) is stamped afresh.
                return stamp.date <= limit ? stamp : nil
            }
            // Every mutation's new stamps are settled before any is written: the first may have to wait.
            var floor: HybridTimestamp?
            var previous: HybridTimestamp?
            var restamped: [(sequence: Int64, payload: MutationQueue.Payload)] = []
            // The first mutation's fresh stamp cannot go below the refused one: it waits, and says why.
            func holdUnstampable() throws -> Bool {
                try hold(
                    warning: "the server refused a change of \(mutation.entity.rawValue) \(mutation.recordID.storageText) as stamped "
                        + "more than 5 minutes ahead of its own time, and it cannot be stamped earlier: it follows the clock "
                        + "\(floor.map(\.encoded) ?? "?") of that record; check this device's and the server's date and time "
                        + "(\(reason))")
            }
            var latest: [String: HybridTimestamp] = [:]
            var deletion: HybridTimestamp?
            for index in payloads.indices {
                var payload = payloads[index].payload
                let byTime = !payload.followedAhead.isEmpty
                // One fresh stamp per mutation for what is not stamped by its time, in queue order: the
                // order the user wrote in, which the old stamps, some from a wrong date, no longer tell.
                var fresh: HybridTimestamp?
                func freshStamp() -> HybridTimestamp? {
                    if let fresh { return fresh }
                    guard index == 0 else {
                        fresh = clock.tick(now: now, after: previous)
                        return fresh
                    }
                    floor = floorToFollow(followingClocksAhead: true)
                    var first = clock.tick(now: now, after: floor)
                    if first >= refusedAhead {
                        floor = floorToFollow(followingClocksAhead: false)
                        first = clock.tick(now: now, after: floor)
                    }
                    fresh = first < refusedAhead ? first : nil
                    return fresh
                }
                func stamp(_ key: String, _ old: HybridTimestamp) -> HybridTimestamp? {
                    guard old.node == node else { return old }
                    if let made = byItsTime(payload, key, after: previous) { return made }
                    if byTime && old.date <= limit { return old }
                    return freshStamp()
                }
                var newest: HybridTimestamp?
                for (field, old) in payload.clocks.sorted(by: { $0.key < $1.key }) {
                    guard let new = stamp(field, old) else { return try holdUnstampable() }
                    payload.clocks[field] = new
                    if old.node == node {
                        latest[field] = new
                        newest = max(newest ?? new, new)
                    }
                }
                if let old = payload.deletion, old.node == node {
                    guard let new = stamp(MutationQueue.Payload.deletionKey, old) else { return try holdUnstampable() }
                    payload.deletion = new
                    deletion = new
                    newest = max(newest ?? new, new)
                }
                previous = newest ?? previous
                payload.followedAhead = [:]
                restamped.append((payloads[index].sequence, payload))
            }
            for (sequence, payload) in restamped {
                try db.execute(sql: "UPDATE mutation_queue SET payload = ? WHERE seq = ?", arguments: [try payload.encoded(), sequence])
            }
            if var stored = clocks {
                for (field, clock) in stored.fields where own.contains(clock) { stored.fields[field] = latest[field] ?? clock }
                if let old = stored.deletion, own.contains(old) { stored.deletion = deletion ?? old }
                try FieldClocks.write(stored, mutation.entity, mutation.recordID, in: db)
            }
            // A new request: the server answers the old key with the old refusal.
            try db.execute(
                sql: "UPDATE mutation_queue SET status = 'pending', idempotency_key = ?, last_error = NULL WHERE seq = ?",
                arguments: [UUID.timeOrdered().storageText, mutation.sequence])
            try db.execute(sql: "DELETE FROM sync_state WHERE key = 'clock_warning'")
            return true
        }
    }
}

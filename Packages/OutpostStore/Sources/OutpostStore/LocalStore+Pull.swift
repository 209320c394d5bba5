import Foundation
import GRDB
import OutpostConflicts
import OutpostSchema
import OutpostWire

/// One page of remote changes, as the sync engine hands it over: the server's version of each record
/// (with its server id, version, tombstone and per-field clocks) and the cursor that follows the page.
public struct PulledPage: Sendable {
    /// The server's versions, in the server's change order.
    public let changes: [VersionedRecord]
    /// Where the next pull starts; saved in the same transaction as the page. Nil for records that did
    /// not come from a pull (the server's current record sent back with a push conflict).
    public let cursor: String?
    /// Which cursor this page advances.
    public let stream: String
    /// Records of the page the engine could not even convert: quarantined with the page, so the
    /// cursor can move past them (see `QuarantinedRecord`).
    public let unreadable: [QuarantinedRecord]
    /// Projects the server says this device's user is no longer a member of: remembered with the
    /// page (`StoreStatus.leftProjects`) until a project record of theirs arrives again.
    public let leftProjects: [UUID]
    /// The projects this device asked for, nil for every project its user belongs to. A record of
    /// another project is quarantined, not stored: a broken or hostile server's answer must not put
    /// other projects' data here.
    public let projects: Set<UUID>?
    /// Where the server's history stood when it read the page (`PullResponse.checkpoint`): saved with
    /// the page and sent with the next request, so a server restored from a backup is noticed.
    public let checkpoint: String?
    /// A page of the pull that follows a restore of the server (`LocalStore.beginHistoryRebuild`):
    /// every record is taken as the server has it now, except for this device's own writes the server
    /// no longer holds, which are queued again and merged by the entity's strategy.
    public let rebuildsHistory: Bool
    /// The bundle positions the request for this page carried (`LocalStore.bundlePositions()`):
    /// forgotten with the page, whose cursor holds them now (or the server left them out and read those
    /// projects from their beginning).
    public let sentBundlePositions: [String]
    /// Records of the page whose latest change this device's own push made (`PullResponse.ownRecords`),
    /// as their versions only: each must be the version held here, so nothing is written for them.
    public let ownRecords: [OwnRecord]
    /// Set on the last page of a pull: the own sequences sent up to here (`ownSequences()`) are passed,
    /// and forgotten with the page.
    public let passedOwnSequencesThrough: Int64?
    /// The projects the server named back as read again from their beginning (`PullResponse.rereadProjects`,
    /// of those `LocalStore.rereadProjects()` gave the request): noted with the page, for
    /// `LocalStore.settleRereadImports(asked:)` once the pull reaches its last page.
    public let sentRereadProjects: [UUID]
    /// What `init(prepared:…)` took worked out of each of `changes`, in the same order; empty for a
    /// page made of plain records, whose writer works all of it out itself.
    private(set) var checks: [PreparedChange.Checks] = []

    /// Creates a page of the `structured` stream unless told otherwise.
    public init(
        changes: [VersionedRecord], cursor: String?, stream: String = "structured", unreadable: [QuarantinedRecord] = [],
        leftProjects: [UUID] = [], projects: Set<UUID>? = nil, checkpoint: String? = nil, rebuildsHistory: Bool = false,
        sentBundlePositions: [String] = [], ownRecords: [OwnRecord] = [], passedOwnSequencesThrough: Int64? = nil,
        sentRereadProjects: [UUID] = []
    ) {
        self.sentRereadProjects = sentRereadProjects
        self.sentBundlePositions = sentBundlePositions
        self.ownRecords = ownRecords
        self.passedOwnSequencesThrough = passedOwnSequencesThrough
        self.changes = changes
        self.cursor = cursor
        self.stream = stream
        self.unreadable = unreadable
        self.leftProjects = leftProjects
        self.projects = projects
        self.checkpoint = checkpoint
        self.rebuildsHistory = rebuildsHistory
    }

    /// A page of records the sync engine prepared where it decoded them (`PreparedChange`), which the
    /// store's writer then has less to do for; otherwise as `init(changes:…)`.
    public init(
        prepared: [PreparedChange], cursor: String?, stream: String = "structured", unreadable: [QuarantinedRecord] = [],
        leftProjects: [UUID] = [], projects: Set<UUID>? = nil, checkpoint: String? = nil, rebuildsHistory: Bool = false,
        sentBundlePositions: [String] = [], ownRecords: [OwnRecord] = [], passedOwnSequencesThrough: Int64? = nil,
        sentRereadProjects: [UUID] = []
    ) {
        self.init(
            changes: prepared.map(\.change), cursor: cursor, stream: stream, unreadable: unreadable, leftProjects: leftProjects,
            projects: projects, checkpoint: checkpoint, rebuildsHistory: rebuildsHistory, sentBundlePositions: sentBundlePositions,
            ownRecords: ownRecords, passedOwnSequencesThrough: passedOwnSequencesThrough, sentRereadProjects: sentRereadProjects)
        checks = prepared.map(\.checks)
    }

    /// The page with the records of projects this device did not ask for moved to `unreadable`.
    func scoped(to projects: Set<UUID>, reading record: (EntityType, UUID) throws -> EntityRecord?, at now: Date) throws -> PulledPage {
        let page = Dictionary(changes.map { ($0.record.id, $0.record) }, uniquingKeysWith: { first, _ in first })
        var kept: [VersionedRecord] = []
        var keptChecks: [PreparedChange.Checks] = []
        var outside = unreadable
        for index in changes.indices {
            let change = changes[index]
            if let project = try Self.project(of: change.record, in: page, reading: record), !projects.contains(project) {
                outside.append(QuarantinedRecord(
                    entity: change.record.entity, recordID: change.record.id,
                    reason: "it belongs to project \(project.uuidString.lowercased()), which this device did not ask for",
                    quarantinedAt: now))
            } else {
                kept.append(change)
                if !checks.isEmpty { keptChecks.append(checks[index]) }
            }
        }
        var scoped = PulledPage(
            changes: kept, cursor: cursor, stream: stream, unreadable: outside, leftProjects: leftProjects, projects: nil,
            checkpoint: checkpoint, rebuildsHistory: rebuildsHistory, sentBundlePositions: sentBundlePositions,
            ownRecords: ownRecords, passedOwnSequencesThrough: passedOwnSequencesThrough, sentRereadProjects: sentRereadProjects)
        scoped.checks = keptChecks
        return scoped
    }

    /// The project `record` belongs to, following its owning parents (the first parent each names)
    /// through the page and the store: nil when that cannot be told (an opportunity, a parent held
    /// nowhere, a reference sent as a server id, a tombstone of a record never held). An import asks it
    /// of what the store holds, with an empty page.
    static func project(
        of record: EntityRecord, in page: [UUID: EntityRecord], reading stored: (EntityType, UUID) throws -> EntityRecord?
    ) throws -> UUID? {
        let scope = EntityCatalog.schema.scope
        var current = record
        if current.fields.isEmpty, let held = try stored(current.entity, current.id) { current = held }
        for _ in 0..<EntityCatalog.all.count {
            if current.entity == scope { return current.id }
            let owner = current.entity.description.parents.lazy.compactMap { relation -> (EntityType, UUID)? in
                guard case .uuid(let parent) = current[relation.field] else { return nil }
                return (relation.entity, parent)
            }.first
            guard let (entity, id) = owner else { return nil }
            if entity == scope { return id }
            guard let parent = try page[id] ?? stored(entity, id) else { return nil }
            current = parent
        }
        return nil
    }
}

/// What applying one page did.
public struct PullReport: Sendable, Hashable {
    /// Records written as the server has them (new, or with no local change waiting).
    public var applied = 0
    /// Records with a local change waiting, settled by the entity's conflict strategy.
    public var merged = 0
    /// Conflicts written to the conflicts table for the user (each losing value or delete is one).
    public var conflictsSurfaced = 0
    /// Records flagged orphaned because their parent is missing or was deleted.
    public var orphaned = 0
    /// Records skipped because they do not fit the catalog or could not be converted; see
    /// `LocalStore.quarantinedRecords()`.
    public var quarantined = 0
    /// Of `quarantined`: versions the server sent as this device's own changes (`PulledPage.ownRecords`)
    /// that are not the version held here. They are not among the page's records, which a count of the
    /// records pulled must know (a sync printed "pulled -1").
    public var refusedOwnVersions = 0
    /// Records an earlier build of the app quarantined that this build can store, applied with this
    /// page (once after the store opens): the pulls that brought them will not come again.
    public var revived: Int { revivedRecords.count }
    /// This device's own writes a restored server no longer held, queued again by a page that rebuilds
    /// the history (`PulledPage.rebuildsHistory`).
    public var resent = 0
    /// The projects the page said this device's user left, of those it holds (`StoreStatus.leftProjects`).
    public var leftProjects: [UUID] = []
    /// Records the page brought exactly as the device held them (its own accepted writes coming back,
    /// say): nothing is written for them and `changes()` subscribers hear nothing.
    public var unchanged: Int { unchangedRecords.count }
    /// The server's versions behind `revived`, for the store's subscribers.
    var revivedRecords: [VersionedRecord] = []
    /// The records behind `unchanged`, left out of what subscribers hear.
    var unchangedRecords: Set<UUID> = []
    /// The page's records refused into the quarantine: nothing was written for them, so neither
    /// subscribers nor the change journal hear of them (a page of a thousand refused records told of a
    /// thousand updates, 50 KB of journal a page; round 67 F1).
    var refusedRecords: Set<UUID> = []
}

extension LocalStore {
    /// Applies a page of remote changes and saves its cursor in one transaction: a crash between pages
    /// leaves the previous cursor and none of this page. A record with a local change waiting goes
    /// through `policy`; every value that loses, on either side, lands in the conflicts table.
    @discardableResult
    public func applyPulledPage(
        _ page: PulledPage, policy: ConflictPolicy = ConflictPolicy(), now: Date = Timestamp.now()
    ) async throws(StoreError) -> PullReport {
        try checkRoomForPulledData()
        return try await merge(page, policy: policy, now: now)
    }

    /// `applyPulledPage` without the room check: also the merge of one record a push's conflict answer
    /// brings, which must go in whatever the free space (refused, the batch's acknowledgements were
    /// never recorded and everything behind the conflicting change stayed unsent; attack 66 F3).
    func merge(_ page: PulledPage, policy: ConflictPolicy, now: Date) async throws(StoreError) -> PullReport {
        var page = page
        if let projects = page.projects {
            page = try StoreError.mapping(path: path) {
                try page.scoped(to: projects, reading: { entity, id in try self.record(entity, id: id) }, at: now)
            }
        }
        let report = try await StoreError.mapping(path: path) {
            try await writer.applyPulled(page, policy: policy, in: pool, now: now)
        }
        // Told only when someone listens: each record took the subscribers' lock and copied their list.
        if observers.hasSubscribers {
            for change in report.revivedRecords + page.changes
            where !report.unchangedRecords.contains(change.record.id) && !report.refusedRecords.contains(change.record.id) {
                observers.publish(change.storeChange)
            }
        }
        return report
    }

    /// Throws `storageFull` while the store's volume has less free space than the store keeps free
    /// (`open(at:app:synchronous:busyTimeout:keepingFree:)`), as a pulled page is refused: for a download
    /// into the store's folder (a pre-sync's bundle) to stop before it takes the room kept for the user's
    /// own writes. A pre-sync wrote a 1 GB bundle into a volume with 200 MB free (attack 68).
    public func checkRoomForDownload() throws(StoreError) {
        try checkRoomForPulledData(waiting: "downloads wait")
    }

    /// Throws `storageFull` while the store's volume has less free space than `keptFreeBytes`, or than
    /// `needing` bytes more than that. A volume whose free space cannot be read is not judged full:
    /// SQLite's own "disk full" still stops a write.
    func checkRoomForPulledData(waiting: String = "pulled pages wait", needing: Int64 = 0) throws(StoreError) {
        guard keptFreeBytes > 0 || needing > 0 else { return }
        let folder = (path as NSString).deletingLastPathComponent
        let wanted = keptFreeBytes.addingReportingOverflow(max(needing, 0))
        let limit = wanted.overflow ? Int64.max : wanted.partialValue
        guard let free = volume.freeBytes(folder.isEmpty ? "." : folder), free < limit else { return }
        let more = needing > 0 ? " and the \(needing >> 20) MB this step writes" : ""
        throw StoreError(
            .storageFull, path: path,
            message: "the device has \(free >> 20) MB free, less than the \(keptFreeBytes >> 20) MB the store keeps free for its own writes\(more): \(waiting) until space is freed")
    }

    /// The saved cursor of `stream`, nil before the first pull.
    public func pullCursor(stream: String = "structured") throws(StoreError) -> String? {
        try read { try String.fetchOne($0, sql: "SELECT cursor FROM sync_cursors WHERE stream = ?", arguments: [stream]) }
    }
}

extension StoreWriter {
    /// The writer connection's page cache once a pull has applied a page (SQLite's default is 2 MB).
    static let pullCacheKilobytes = 32 * 1024

    func applyPulled(_ page: PulledPage, policy: ConflictPolicy, in pool: DatabasePool, now: Date) throws -> PullReport {
        // Merge the server's clocks into ours, so a local write after a pull is stamped after what it saw.
        // A stamp too far ahead of this device's time is not merged (the device's own clock may be wrong);
        // the change itself still applies, since the server's stamps are the server's business.
        // Walked by index here and below: `for change in` copied each record out of the page (a retain of
        // every string and dictionary it holds, and their releases), some 10% of the writer's own work.
        for index in page.changes.indices {
            if let newest = page.changes[index].newestClock { _ = try? receive(newest, now: now) }
        }
        let recheckQuarantine = !quarantineRechecked
        let report = try transaction(in: pool) { db in
            // A page writes its records all over random-id B-trees; with SQLite's default 2 MB page
            // cache the writer re-read most pages from the file (and spilled dirty ones into the WAL
            // mid-transaction) for every page. The pages are allocated only as they are used.
            try db.execute(sql: "PRAGMA cache_size = -\(Self.pullCacheKilobytes)")
            var report = PullReport()
            // Records an earlier build quarantined that this one can store (an app update taught it a
            // field or a choice) are applied first, as the pulls that brought them would have been:
            // the cursor moved past them long ago. A newer version in this page supersedes its entry.
            if recheckQuarantine {
                let inPage = Set(page.changes.map(\.record.id))
                report.revivedRecords = try Quarantine.storableNow(in: db).filter { !inPage.contains($0.record.id) }
            }
            // Concatenated only when there is something to add: `+` copied every record of the page (a
            // retain of each of its strings and dictionaries), 5% of a fresh pull's apply.
            let changes = report.revivedRecords.isEmpty ? page.changes : report.revivedRecords + page.changes
            // The records the page brings live, which a child in it may name as present: a parent the page
            // holds deleted (its last state in the page) is as gone as one never sent. Counted present,
            // a fresh device kept the live issue of a deleted project as a plain one, where a device that
            // held the project flagged it orphaned (attack 125, F3).
            var arrivesDeleted: [UUID: Bool] = [:]
            arrivesDeleted.reserveCapacity(changes.count)
            for index in changes.indices { arrivesDeleted[changes[index].record.id] = changes[index].isDeleted }
            var pageIDs = Set<UUID>(minimumCapacity: arrivesDeleted.count)
            for (id, deleted) in arrivesDeleted where !deleted { pageIDs.insert(id) }
            // A server id names one record. One the server gave two records (a broken or hostile server)
            // would make a reference to it resolve to either: the second record is quarantined instead.
            var named: [ServerIDs.Name: UUID] = [:]
            var sharedServerID: [PulledPageReads.Key: String] = [:]
            for index in changes.indices {
                guard let serverID = changes[index].record.sync.serverID else { continue }
                let entity = changes[index].record.entity, id = changes[index].record.id
                let name = ServerIDs.Name(entity: entity, serverID: serverID)
                if let holder = try named[name] ?? ServerIDs.clientID(of: entity, serverID: serverID, in: db), holder != id {
                    sharedServerID[.init(entity: entity, id: id)] =
                        "the server gave server id \(serverID) to \(entity.rawValue) \(holder.storageText) as well; a server id names one record"
                    continue
                }
                named[name] = id
                try ServerIDs.remember(serverID, for: entity, clientID: id, in: db, now: now)
            }
            var quarantine = Quarantine.PageLog(stream: page.stream)
            for unreadable in page.unreadable {
                try quarantine.add(unreadable, in: db)
                report.quarantined += 1
            }
            // This device's own accepted changes, as versions only. Each is the version held here (it was
            // noted only once its answer was settled); one that is not cannot be written without its
            // fields, and is quarantined to be seen rather than dropped unseen.
            for own in page.ownRecords where try EntityTables.storedVersion(own.entity, id: own.recordID, in: db) != own.version {
                try quarantine.add(
                    QuarantinedRecord(
                        entity: own.entity, recordID: own.recordID,
                        reason: "the server sent version \(own.version) as this device's own change, and this device holds another",
                        quarantinedAt: now),
                    in: db)
                report.quarantined += 1
                report.refusedOwnVersions += 1
            }
            // Read once for the whole page what each record needs, after the mappings above linked
            // the references that waited for them.
            var reads = try PulledPageReads(changes, in: db)
            var statements = PageStatements()
            var changedHere = Set<UUID>(minimumCapacity: changes.count)
            var pageRecords: [UUID: EntityRecord]?
            // The page's records as the engine prepared them (`PreparedChange`), after any revived ones.
            let firstPrepared = page.checks.isEmpty ? changes.endIndex : report.revivedRecords.count
            for index in changes.indices {
                let remote = changes[index]
                let prepared = index >= firstPrepared ? page.checks[index - firstPrepared] : nil
                // Only a parent named by a server id (text) is translated, which `prepared` knows.
                let translation = prepared?.namesParentByServerID == false ? nil : try ServerIDs.clientReferences(in: remote, db: db)
                let translated = translation ?? remote
                // What was prepared holds for the record as the server sent it, not once a reference
                // of it is translated (rare: a server that names parents by its own ids).
                let ready = translation == nil ? prepared : nil
                let entity = remote.record.entity, id = remote.record.id
                // One record that cannot be stored must not hold back its page, nor every later run.
                // A pulled tombstone comes without its contents: there is nothing to check.
                let contentless = translated.isContentlessTombstone
                let sharesServerID = sharedServerID[.init(entity: entity, id: id)]
                let unstorable = ready.map(\.unstorable) ?? Quarantine.unstorableValue(in: translated.record)
                let moved = contentless ? nil : try Self.projectMove(of: translated.record, reads: reads, in: db) {
                    // The page's own records count as parents of the new version, its latest copy of each:
                    // gathered once a page, the first time a record's parents change.
                    if let pageRecords { return pageRecords }
                    let gathered = Dictionary(changes.map { ($0.record.id, $0.record) }, uniquingKeysWith: { _, later in later })
                    pageRecords = gathered
                    return gathered
                }
                if let problem = sharesServerID ?? unstorable ?? moved
                    ?? (contentless ? nil : ready.map(\.shapeProblem) ?? Quarantine.problem(with: translated.record))
                {
                    // Only a record refused for its shape is kept for a later build: no update of the
                    // app makes a server id the server gave twice name one record, nor takes a value no
                    // server gives (`Quarantine.unstorableValue`), nor moves a record across projects.
                    try quarantine.add(
                        QuarantinedRecord(entity: entity, recordID: id, reason: problem, quarantinedAt: now),
                        held: sharesServerID == nil && unstorable == nil && moved == nil ? remote : nil, in: db)
                    report.refusedRecords.insert(id)
                    reads.quarantine(entity, id)
                    report.quarantined += 1
                    continue
                }
                if try Self.settleUnreadableClocks(of: translated, reads: reads, in: db) {
                    reads.wrote(entity, id)  // read exactly: its clocks were rebuilt
                }
                if reads.quarantined.contains(.init(entity: entity, id: id)) {
                    try Quarantine.clear(entity, id, in: db)
                    reads.clearQuarantine(entity, id)
                }
                if page.rebuildsHistory {
                    report.resent += try resendLostOwnWrites(of: translated, in: db, now: now)
                    reads.wrote(entity, id)  // read exactly: the record may now have a change waiting
                }
                try apply(
                    translated, prepared: ready, policy: policy, pageIDs: pageIDs, reads: &reads, statements: &statements,
                    report: &report, rebuildsHistory: page.rebuildsHistory, db: db, now: now)
                if !report.unchangedRecords.contains(id) { changedHere.insert(id) }
                report.refusedRecords.remove(id)  // an earlier copy in the page was refused, this one stored
                reads.wrote(entity, id)
            }
            // A record the page changed and then brought again as it now stands was still changed.
            report.unchangedRecords.subtract(changedHere)
            // The server sends changes in the order it took them: a project renamed after its issues comes
            // pages after them, and a fresh device flagged every one of them orphaned for good.
            try EntityTables.settleOrphans(childrenOf: reads.arrivedParents, in: db)
            for index in page.changes.indices where page.changes[index].record.entity == EntityCatalog.schema.scope {
                try LeftProjects.forget(page.changes[index].record.id, in: db)
            }
            // Only a project this device holds: of any other there is nothing to hand over, and a hostile
            // server's pages of random ids were each stored (attack 85, F1).
            for project in page.leftProjects where try EntityTables.storedVersion(EntityCatalog.schema.scope, id: project, in: db) != nil {
                try LeftProjects.remember(project, at: now, in: db)
                report.leftProjects.append(project)
            }
            if let cursor = page.cursor {
                try db.cachedStatement(sql: "INSERT OR REPLACE INTO sync_cursors (stream, cursor, updated_at) VALUES (?, ?, ?)")
                    .execute(arguments: [page.stream, cursor, now.storageMilliseconds])
            }
            if let checkpoint = page.checkpoint { try HistoryState.save(checkpoint: checkpoint, in: db) }
            try BundlePositions.forget(page.sentBundlePositions, in: db)
            try RereadProjects.started(page.sentRereadProjects, in: db)
            if let last = page.passedOwnSequencesThrough { try OwnSequences.forget(through: last, in: db) }
            let told = changes.lazy.filter {
                !report.unchangedRecords.contains($0.record.id) && !report.refusedRecords.contains($0.record.id)
            }
            try ChangeJournal.append(Array(told.map(\.storeChange)), origin: origin, in: db)
            return report
        }
        quarantineRechecked = true
        return report
    }

    /// Why the server's version `remote` of a record held here cannot be stored: it puts the record in
    /// another project than the one it belongs to here (`projectMove(from:to:arriving:in:)`). A hostile
    /// server's conflict answer moved a device's own issue so, and its edits went to the conflicts list
    /// (attack 101, F3).
    private static func projectMove(
        of remote: EntityRecord, reads: PulledPageReads, in db: Database, arriving: () -> [UUID: EntityRecord]
    ) throws -> String? {
        let entity = remote.entity, id = remote.id
        guard !entity.description.parents.isEmpty else { return nil }
        let held = reads.needsExactReads(entity, id) ? try EntityTables.fetchRecord(entity, id: id, in: db) : reads.stored(entity, id)?.record
        guard let held, let move = try projectMove(from: held, to: remote, arriving: arriving, in: db) else { return nil }
        return "the server's version puts it in project \(move.to.storageText), and it belongs to project \(move.from.storageText) here: "
            + "a record cannot move to another project"
    }

    /// The project `record` would put `held` in and the one it is held in, when they differ. A record
    /// stays in its project, on the device as on the server (`PushRules`), whoever writes it: a pull, a
    /// conflict's answer, an import (`ImportSession`) or this device's own save. Moved, it would vanish
    /// from its project's lists, its children would follow it out, and a project its user was never
    /// given could hold it. Nil when no parent reference changed (nearly every write, at no cost but a
    /// comparison), when either project cannot be told (a parent held nowhere yet), or when it stays.
    /// `arriving` gives records not stored yet that count as parents (a pulled page's).
    static func projectMove(
        from held: EntityRecord, to record: EntityRecord, arriving: () -> [UUID: EntityRecord], in db: Database
    ) throws -> (from: UUID, to: UUID)? {
        guard record.entity.description.parents.contains(where: { held[$0.field] != record[$0.field] }) else { return nil }
        let stored = { (entity: EntityType, id: UUID) in try EntityTables.fetchRecord(entity, id: id, in: db) }
        guard let before = try PulledPage.project(of: held, in: [:], reading: stored),
            let after = try PulledPage.project(of: record, in: arriving(), reading: stored), before != after
        else { return nil }
        return (before, after)
    }

    /// Whether `remote` carries a write this device has never seen: a field's clock newer than any it
    /// holds for that field (its own, the server's as last pulled, or a delete's), or a delete newer than
    /// every clock it holds. A version read before a newer one carries none: every write it holds the
    /// newer one holds too, or one later. Only for a record whose server clocks the device has (a bundle
    /// carries none, and an imported row's numbers are judged by `ImportedVersions`).
    static func bringsUnseenWrite(_ remote: VersionedRecord, over held: FieldClocks.Stored?) -> Bool {
        guard let held, let server = held.server else { return false }
        let heldDeletion = max(held.deletion ?? .origin, held.deferredTombstone?.deletion ?? .origin)
        for (field, stamp) in remote.clocks
        where stamp > max(held.fields[field] ?? .origin, server[field] ?? .origin, heldDeletion) {
            return true
        }
        guard let deletion = remote.deletion else { return false }
        let newestHeld = max(heldDeletion, held.fields.values.max() ?? .origin, server.values.max() ?? .origin)
        return deletion > newestHeld
    }

    /// A pulled record whose stored clocks do not read (`FieldClocks.Unreadable`, a damaged row): the row
    /// goes, and the record is settled without it. With no change of it waiting, the caller applies the
    /// server's version as for a record held without clocks (returns false). With one waiting, the clocks
    /// are rebuilt from what is known: the waiting writes' own, and for the fields the device did not
    /// change a stamp older than any, so they take the server's values (without them, every edit lost to
    /// the server's value); returns true, and the caller merges the pulled record as over an intact row,
    /// so the edits are settled by their true clocks and a value that lost is listed as a conflict.
    /// Settled only by the push, a lost value went without a trace (attack 69, finding 2). Before, one
    /// such row stopped every sync (attack 59, finding 10).
    private static func settleUnreadableClocks(of remote: VersionedRecord, reads: PulledPageReads, in db: Database) throws -> Bool {
        let entity = remote.record.entity, id = remote.record.id
        if reads.needsExactReads(entity, id) {
            do {
                _ = try FieldClocks.read(entity, id, in: db)
                return false
            } catch is FieldClocks.Unreadable {}
        } else {
            guard reads.hasUnreadableClocks(entity, id) else { return false }
        }
        try FieldClocks.forget(entity, id, in: db)
        guard let waiting = try MutationQueue.unfinishedChange(entity, id, in: db) else { return false }
        // The waiting writes' own stamps; the values no change of this device waits on are older than
        // any stamp, so the pulled values replace them.
        var fields = Dictionary(uniqueKeysWithValues: FieldClocks.catalogNames(of: entity).map { ($0, HybridTimestamp.origin) })
        fields.merge(waiting.clocks) { _, own in own }
        try FieldClocks.write(FieldClocks.Stored(fields: fields, deletion: nil, server: nil), entity, id, in: db)
        return true
    }

    private func apply(
        _ remote: VersionedRecord, prepared: PreparedChange.Checks?, policy: ConflictPolicy, pageIDs: Set<UUID>, reads: inout PulledPageReads,
        statements: inout PageStatements, report: inout PullReport, rebuildsHistory: Bool = false, db: Database, now: Date
    ) throws {
        let entity = remote.record.entity, id = remote.record.id
        let local: EntityRecord?
        let waiting: MutationQueue.UnfinishedChange?
        let before: FieldClocks.Stored?
        let imported: Bool
        if reads.needsExactReads(entity, id) {
            local = try EntityTables.fetchRecord(entity, id: id, in: db)
            waiting = try MutationQueue.unfinishedChange(entity, id, in: db)
            before = local == nil ? nil : try FieldClocks.read(entity, id, in: db)
            imported = try reads.anyImported && local.map { try ImportedVersions.isUnconfirmed(entity, id, version: $0.sync.version, in: db) } ?? false
        } else {
            // No local change waiting (the page's reads found none) and not written by this page yet.
            let stored = reads.stored(entity, id)
            (local, waiting, before) = (stored?.record, nil, stored?.clocks)
            imported = local.map { reads.isImported(entity, id, version: $0.sync.version) } ?? false
        }
        // A page read before one already applied (two pulls at once, from two processes of one app)
        // must not move a record back to an older version; one an import wrote is the bundle's word, and
        // the server's copy replaces it (`ImportedVersions`). So does a version carrying a write this
        // device never saw, whatever its number: no page read before a newer one does, and the number
        // held is wrong (attack 132 F1: a broken push answer 1,000 versions ahead left every later
        // change of the record behind it, and the record stuck, for good).
        let unseen = local.map { remote.record.sync.version < $0.sync.version } == true
            && Self.bringsUnseenWrite(remote, over: before)
        let arrival = ServerArrival.decide(
            stored: local, incomingVersion: remote.record.sync.version, changeWaiting: waiting != nil, carriesClocks: true,
            storedIsImported: imported, bringsUnseenWrite: unseen)
        if arrival == .keepNewerStored || arrival == .keepWaitingChange { return }
        if imported { try ImportedVersions.forget(entity, id, in: db) }
        if local == nil, !remote.isContentlessTombstone, reads.isKnownDeleted(entity, id) {
            // Stored now (the server brought it back): no longer known only as a delete.
            try KnownDeletions.forget(entity, id, in: db)
            reads.forgetDeletion(entity, id)
        }
        if remote.isContentlessTombstone {
            // Only a change that will go out keeps the delete aside for its answer. A failed one waits for
            // the user's retry, perhaps for ever: the delete applies now (the failed change stays listed,
            // and a retry meets the tombstone's conflict answer and merges by the entity's strategy).
            try applyContentless(
                remote, over: local, waiting: waiting?.goesOut ?? false, failedWaiting: waiting != nil, clocks: before,
                report: &report, db: db)
            return
        }
        // The same version with the same values, clocks and state as held (this device's own accepted
        // writes, pulled back): nothing to write and nothing to tell. A pulled-back page of 150 own
        // issues fired 150 "issue update" events with nothing new.
        if waiting == nil, let local, let before, !remote.isDeleted, !local.sync.isDeleted, !local.sync.isOrphaned,
            local.sync.syncStatus == .synced, local.sync.version == remote.record.sync.version,
            local.sync.serverID == remote.record.sync.serverID || remote.record.sync.serverID == nil,
            local.fields == remote.record.fields, before.deletion == nil, before.deferredTombstone == nil,
            before.fields == remote.clocks
        {
            report.unchangedRecords.insert(id)
            if before.server == remote.clocks { return }
            var clocks = before
            clocks.server = remote.clocks
            try FieldClocks.write(clocks, entity, id, with: statements.fieldClocks(in: db))
            return
        }
        var written: EntityRecord
        var clocks: FieldClocks.Stored
        // Set when the row takes the server's version as it is, of which `prepared` worked some out.
        var asPrepared: PreparedChange.Checks?
        if arrival == .mergeWithWaitingChange, let local, let waiting {
            let stored = before ?? FieldClocks.Stored(fields: [:], deletion: nil, server: nil)
            // The change is judged on the version it was made on, which an import may have moved the row past.
            var base = local
            base.sync.version = min(local.sync.version, waiting.baseVersion)
            // A base above the server's own version that an import wrote is the bundle's word, which may
            // have been edited: believed, it made the change look based on everything the server took,
            // and a role-based strategy let it overwrite a concurrent write unseen. It is judged as
            // concurrent instead: the strategy decides, and what loses is surfaced.
            // So is a base above the server's version that a wrong number held here made (`unseen`).
            if imported || unseen, base.sync.version > remote.record.sync.version { base.sync.version = 0 }
            // A write bringing the record back from the very delete this device knew of was made after
            // it, whatever version it went out on (`heldVersion`); the fields it only carried take the
            // server's values, the newest there are, not the ones this device held from before the delete.
            let revivesThisDelete = waiting.revives != nil && waiting.revives == remote.deletion
            // Nor is a change concurrent with the device's own writes: a server version that differs from
            // what this device last saw only by its own stamps is its own change, taken by the server with
            // the answer lost (then a pull brings it back before the push goes again). Judged concurrent,
            // server wins refused the device's next write of the record, its own later delete included.
            let seen = stored.server ?? [:]
            let onlyOwnWrites = remote.clocks.allSatisfy { field, stamp in stamp == seen[field] || stamp.node == clock.node }
                && (remote.deletion.map { $0.node == clock.node } ?? true)
            // After a restore, a server record this device has seen newer values of in every field (an
            // older state of its history) did not change concurrently with the change: the change is
            // this device's own write the restore lost, sent again (`resendLostOwnWrites`).
            let olderThanSeen = rebuildsHistory && remote.deletion == nil
                && remote.clocks.allSatisfy { field, stamp in stamp <= (stored.fields[field] ?? .origin) }
            if revivesThisDelete || onlyOwnWrites || olderThanSeen { base.sync.version = remote.record.sync.version }
            for field in waiting.carried { base[field] = remote.record[field] }
            let client = try VersionedRecord(
                record: base,
                clocks: Dictionary(uniqueKeysWithValues: local.fields.keys.map { ($0, stored.fields[$0] ?? .origin) }),
                deletion: local.sync.isDeleted ? (stored.deletion ?? .origin) : nil
            ).change(of: waiting.fields)
            // A change a request carried whose answer never came may be on the server already, and the
            // server's change of the record since may have been made on top of it: once the server keeps
            // its answer no longer, nothing tells that from a concurrent change. It does not win over a
            // change it cannot place: under client wins the server's version stands and the change is
            // offered to its user, like any value that loses. Won, it went again over a teammate's later
            // edit, lost without a trace (attack 121, F1).
            var strategy = policy[entity]
            if waiting.unheard, strategy == .clientWins { strategy = .serverWins }
            let resolution = try strategy.resolve(client: client, server: remote)
            written = resolution.merged.record
            written.sync = SyncMetadata(
                serverID: remote.record.sync.serverID ?? local.sync.serverID, version: remote.record.sync.version,
                createdAt: local.sync.createdAt, updatedAt: max(local.sync.updatedAt, remote.record.sync.updatedAt),
                deletedAt: resolution.merged.record.sync.deletedAt, syncStatus: .pending,
                isOrphaned: local.sync.isOrphaned)
            clocks = FieldClocks.Stored(
                fields: resolution.merged.clocks, deletion: resolution.merged.deletion, server: remote.clocks)
            report.merged += 1
            // A server value this device already had when it wrote over it is not a conflict.
            // Nor is the delete this device's write brought the record back from: it knew of it (a copy
            // read before it surfaced it when saved).
            // Nor is a field a revival only carried (its user never wrote it, and it holds the server's
            // value): a restore with an edit that met another delete listed five "—" against "—" beside
            // the edit (attack 132, F6). A restore that lost with no value of its user's is listed as one.
            let usersValueLost = resolution.losingValues.contains { $0.side == .client && !waiting.carried.contains($0.field) }
            report.conflictsSurfaced += try Conflicts.record(
                resolution, strategy: strategy, in: db, now: now,
                // After a restore, a server value that a write of this device replaced is one the restore
                // brought back, not a concurrent write (told by value: the restored history's clocks are
                // not the ones this device saw, and a teammate's write since may carry an older clock).
                // So is one an import brought, which the user saw and wrote over: a bundle carries no
                // clocks, so the value is all there is to tell it by.
                // Nor is a server value this device holds the same: it saw that value when it wrote over
                // it or deleted the record. A restore stamps every field anew, and a delete that won over
                // one listed each as hidden, "—" against "—" among them (attack 133, F4).
                surfacing: { losing in
                    losing.side == .client ? !waiting.carried.contains(losing.field)
                        : seen[losing.field] != losing.clock && local[losing.field] != losing.value
                        && !((rebuildsHistory || waiting.resent || imported)
                            && (stored.written?[losing.field] ?? []).contains { $0.previous == losing.value })
                },
                surfacingDeletion: { $0.side == .client || $0.clock != waiting.revives })
            // A restore this device's user made (its latest word: the record live), undone by a delete, with
            // no value of its user's listed: the restore itself is (override brings the record back). It
            // went unlisted under every strategy but append only, which listed each field it only carried.
            if waiting.revives != nil, !local.sync.isDeleted, let deletion = resolution.merged.deletion, !usersValueLost {
                try Conflicts.insert(
                    written, kind: .restore, field: nil, strategy: strategy, local: nil, remote: nil,
                    localClock: waiting.clocks.values.max(), remoteClock: deletion, losingSide: .client, db: db, now: now)
                report.conflictsSurfaced += 1
            }
            // A write whose user never saw the delete it undid: that delete lost, unseen, once the record is
            // back by that write, kept by this merge or already taken by the server (its answer lost, the
            // pull brings the write back: its own stamps). Settled too, with nothing to surface, when the
            // server moved on past the write's base otherwise (a teammate brought the record back first).
            var settlesUnseenDelete = revivesThisDelete || remote.record.sync.version > waiting.baseVersion
            if waiting.deleteUnseen, let revived = waiting.revives, resolution.merged.deletion == nil {
                let ownWriteTaken = remote.deletion == nil
                    && waiting.fields.contains { remote.clocks[$0] != nil && remote.clocks[$0] == stored.fields[$0] }
                // This device's own delete, still queued under the write that undid it: the server never
                // had it, and the record stays live, so it did not stand, whether the write's values won or
                // lost. Settled silently, it went without a trace (review 138 of attack 133's F1 fix: the
                // rebase then drops the delete as superseded).
                let ownDeleteUnsent = try revived.node == clock.node && MutationQueue.hasUnfinishedDelete(entity, id, in: db)
                if revivesThisDelete || ownWriteTaken || ownDeleteUnsent {
                    try Conflicts.lostDeletion(
                        remote.deletion ?? revived, of: written, thisNode: clock.node, strategy: strategy, in: db, now: now)
                    report.conflictsSurfaced += 1
                    settlesUnseenDelete = true
                }
            }
            try MutationQueue.rebaseUnfinished(
                entity, id, keepingField: { resolution.sources[$0] == .client },
                deletionLost: resolution.losingDeletion?.side == .client, serverVersion: remote.record.sync.version,
                merged: resolution.merged.record,
                // Not settled by the same version pulled again while this device's own delete has yet to
                // reach the server.
                settlingUnseenDelete: settlesUnseenDelete, in: db)
            if try MutationQueue.unfinishedFields(entity, id, in: db) == nil { written.sync.syncStatus = .synced }
        } else {
            written = remote.record
            written.sync.syncStatus = .synced
            // `updatedAt` only moves forward (`StoreWriter.writeTime`): a copy read before a local write is
            // told by it. The server's time may run behind this device's, and taken as it is, a pull moved
            // it back below that write, so a screen's unchanged copy saved after reverted the device's own
            // write (found by the conflict model, seed 319).
            if let local { written.sync.updatedAt = max(local.sync.updatedAt, remote.record.sync.updatedAt) }
            clocks = FieldClocks.Stored(fields: remote.clocks, deletion: remote.deletion, server: remote.clocks)
            asPrepared = prepared
            report.applied += 1
        }
        if let deferred = before?.deferredTombstone, deferred.version > remote.record.sync.version {
            clocks.deferredTombstone = deferred  // an answer older than the delete this device has heard of
        }
        if let local {
            clocks.pulled = before?.pulled
            clocks.written = before?.written
            FieldClocks.notePulledChanges(from: local, to: written, in: &clocks)
        }
        if !written.sync.isDeleted {
            written.sync.isOrphaned = try reads.hasMissingParent(written, besides: pageIDs, in: db)
            if written.sync.isOrphaned { report.orphaned += 1 }
            // Here at last, or back: children an earlier page flagged may have their parent now.
            if local?.sync.isDeleted ?? true { reads.arrived(entity, id) }
        }
        // Over nothing held, the row is the server's clocks as both sides' with no history: with one
        // clock for every field, that clock's compact form, which the new row keeps itself where its
        // table has the column and no `field_clocks` row of the record would stand over it. Written as a
        // second row, it was a fifth of a fresh pull's apply (`outpost-bench pull`, issue 41).
        let encoded = local == nil
            ? try asPrepared?.sharedClock.map(FieldClocks.Stored.compactForm(of:)) ?? clocks.encoded(for: entity) : nil
        let rowClock = encoded.flatMap {
            $0.hasPrefix(FieldClocks.Stored.compactFormMarker) && reads.mayKeepClockInRow(entity, id) ? $0 : nil
        }
        if let rowClock {
            try EntityTables.save(written, rowClock: rowClock, with: statements.upsertWithRowClock(of: entity, in: db))
        } else {
            try EntityTables.save(written, with: statements.upsert(of: entity, in: db))
        }
        if asPrepared?.namesParentByServerID ?? true { try ServerIDs.noteUnmapped(in: written, db: db) }
        if rowClock == nil {
            if let encoded {
                try FieldClocks.write(encoded: encoded, entity, id, with: statements.fieldClocks(in: db))
            } else {
                try FieldClocks.write(clocks, entity, id, with: statements.fieldClocks(in: db))
            }
        }
        if remote.isDeleted {
            report.orphaned += try EntityTables.flagOrphans(childrenOf: entity, id: id, in: db)
            reads.parentGone(entity, id)
        }
    }

    /// A tombstone a pull sent without its contents (the server keeps them). A record this device never
    /// held stores no row, only the note that it was deleted (`KnownDeletions`), so that no older copy
    /// of it (a bundle, an export) brings it back. One with a change still to send is left as it is: without the server's last
    /// values the device cannot tell which of its edits lost to a change the delete hid, so the change
    /// goes out on the version it was made on and its conflict answer brings the tombstone whole (the
    /// delete is kept as `deferredTombstone`, for an answer that acknowledges the change instead). Else
    /// the held copy is deleted at the tombstone's version, keeping its values, and `heldVersion` names
    /// the version they are of: a later save over it goes out on that version, for the same reason.
    private func applyContentless(
        _ remote: VersionedRecord, over local: EntityRecord?, waiting: Bool, failedWaiting: Bool,
        clocks before: FieldClocks.Stored?, report: inout PullReport, db: Database
    ) throws {
        guard let deletion = remote.deletion else { return }
        guard let local else {
            try KnownDeletions.remember(
                remote.record.entity, remote.record.id, version: remote.record.sync.version,
                deletedAt: remote.record.sync.deletedAt ?? deletion.date, in: db)
            return
        }
        var clocks = before ?? FieldClocks.Stored(fields: [:], deletion: nil, server: nil)
        if waiting {
            if (clocks.deferredTombstone?.version ?? 0) < remote.record.sync.version {
                clocks.deferredTombstone = .init(version: remote.record.sync.version, deletion: deletion)
                try FieldClocks.write(clocks, local.entity, local.id, in: db)
            }
            return
        }
        var written = local
        written.sync.version = remote.record.sync.version
        written.sync.deletedAt = remote.record.sync.deletedAt ?? remote.deletion?.date
        written.sync.updatedAt = max(local.sync.updatedAt, remote.record.sync.updatedAt)
        written.sync.syncStatus = failedWaiting ? .failed : .synced
        clocks.deletion = deletion
        clocks.heldVersion = clocks.heldVersion ?? local.sync.version
        clocks.deferredTombstone = nil
        try EntityTables.save(written, in: db)
        try FieldClocks.write(clocks, local.entity, local.id, in: db)
        report.applied += 1
        report.orphaned += try EntityTables.flagOrphans(childrenOf: local.entity, id: local.id, in: db)
    }

    private func receive(_ stamp: HybridTimestamp, now: Date) throws -> HybridTimestamp {
        try clock.receive(stamp, now: now)
    }
}

/// The statements a page's apply runs for every record, looked up once a page: GRDB's statement cache
/// hashes and compares a statement's whole SQL text on each lookup, and an issue's upsert is about
/// 1,000 characters.
private struct PageStatements {
    private var upserts: [EntityType: Statement] = [:]
    private var upsertsWithRowClock: [EntityType: Statement] = [:]
    private var fieldClocksUpsert: Statement?

    mutating func upsert(of entity: EntityType, in db: Database) throws -> Statement {
        if let statement = upserts[entity] { return statement }
        let statement = try db.cachedStatement(sql: TableLayout.of(entity).upsert)
        upserts[entity] = statement
        return statement
    }

    mutating func upsertWithRowClock(of entity: EntityType, in db: Database) throws -> Statement {
        if let statement = upsertsWithRowClock[entity] { return statement }
        let statement = try db.cachedStatement(sql: TableLayout.of(entity).upsertWithRowClocks)
        upsertsWithRowClock[entity] = statement
        return statement
    }

    mutating func fieldClocks(in db: Database) throws -> Statement {
        if let fieldClocksUpsert { return fieldClocksUpsert }
        let statement = try db.cachedStatement(sql: FieldClocks.upsertSQL)
        fieldClocksUpsert = statement
        return statement
    }
}

extension HybridTimestamp {
    /// Older than any real write: the clock of a value whose write time the device never learned.
    static let origin = HybridTimestamp(physicalMilliseconds: 0, counter: 0, node: NodeID(0))
}

/// The conflicts table: every value or delete that lost, kept for the user to override or discard.
enum Conflicts {
    /// Writes one open conflict per losing value and losing delete; returns how many.
    static func record(
        _ resolution: ConflictResolution, strategy: ConflictStrategy, in db: Database, now: Date,
        surfacing isConflict: (LosingValue) -> Bool = { _ in true },
        surfacingDeletion isDeletionConflict: (LosingDeletion) -> Bool = { _ in true }
    ) throws -> Int {
        let record = resolution.merged.record
        var count = 0
        // A value that lost to a delete lost to the delete: the winner is no value, stamped with the
        // delete's clock. The deleted record still carries a value for the field (its last values, for
        // a revival), often the very one that lost, which read as both sides holding the same value.
        let deletion = resolution.merged.deletion
        for losing in resolution.losingValues where isConflict(losing) {
            let winner: FieldValue? = deletion == nil ? record[losing.field] : nil
            let (local, remote) = losing.side == .client ? (losing.value, winner) : (winner, losing.value)
            let winnerClock = deletion ?? resolution.merged.clocks[losing.field]
            let (localClock, remoteClock) = losing.side == .client ? (losing.clock, winnerClock) : (winnerClock, losing.clock)
            try insert(
                record, kind: .value, field: losing.field, strategy: strategy, local: local, remote: remote,
                localClock: localClock, remoteClock: remoteClock, losingSide: losing.side, db: db, now: now)
            count += 1
        }
        if let deletion = resolution.losingDeletion, isDeletionConflict(deletion) {
            try insert(
                record, kind: .delete, field: nil, strategy: strategy, local: nil, remote: nil,
                localClock: deletion.side == .client ? deletion.clock : nil,
                remoteClock: deletion.side == .server ? deletion.clock : nil, losingSide: deletion.side, db: db, now: now)
            count += 1
        }
        return count
    }

    /// Writes the open conflict of a delete that a write brought the record back from: this device's
    /// own delete (its clock's node) or one from elsewhere.
    static func lostDeletion(
        _ deletion: HybridTimestamp, of record: EntityRecord, thisNode: NodeID, strategy: ConflictStrategy, in db: Database,
        now: Date
    ) throws {
        let own = deletion.node == thisNode
        try insert(
            record, kind: .delete, field: nil, strategy: strategy, local: nil, remote: nil, localClock: own ? deletion : nil,
            remoteClock: own ? nil : deletion, losingSide: own ? .client : .server, db: db, now: now)
    }

    /// Writes one open conflict; `losingSide` is whose value (delete, restore) lost, which `override` brings back.
    static func insert(
        _ record: EntityRecord, kind: OpenConflict.Kind, field: String?, strategy: ConflictStrategy, local: FieldValue?, remote: FieldValue?,
        localClock: HybridTimestamp?, remoteClock: HybridTimestamp?, losingSide: Side, db: Database, now: Date
    ) throws {
        func json(_ value: FieldValue?) throws -> String? {
            try value.map { String(decoding: try MutationQueue.encoder.encode($0), as: UTF8.self) }
        }
        try db.execute(
            sql: """
                INSERT INTO conflicts (entity, record_id, kind, field, strategy, local_value, remote_value, local_clock,
                    remote_clock, losing_side, status, created_at)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'open', ?)
                """,
            arguments: [
                record.entity.rawValue, record.id.storageText, kind.rawValue, field, strategy.name.rawValue, try json(local),
                try json(remote), localClock?.encoded, remoteClock?.encoded, losingSide.rawValue, now.storageMilliseconds,
            ])
    }
}

/// The map between client ids and the ids a server assigns, for servers that assign their own. The
/// device keeps client ids everywhere; references travel as server ids once the server has named the
/// record, and come back to client ids here.
enum ServerIDs {
    /// A server id of one entity.
    struct Name: Hashable {
        let entity: EntityType
        let serverID: String
    }

    /// Records the mapping and, in the same transaction, links the references that arrived earlier
    /// holding `serverID` because the mapping was not known yet.
    static func remember(_ serverID: String, for entity: EntityType, clientID: UUID, in db: Database, now: Date) throws {
        try db.cachedStatement(
            sql: "INSERT OR REPLACE INTO server_id_map (entity, client_id, server_id, mapped_at) VALUES (?, ?, ?, ?)"
        ).execute(arguments: [entity.rawValue, clientID.storageText, serverID, now.storageMilliseconds])
        try linkWaitingReferences(to: entity, serverID: serverID, clientID: clientID, db: db)
    }

    /// The record `serverID` names. In a store an earlier build let name two records by one id (attack
    /// 132, F5), the one mapped first, the same one every time.
    static func clientID(of entity: EntityType, serverID: String, in db: Database) throws -> UUID? {
        try String.fetchOne(
            db.cachedStatement(sql: """
                SELECT client_id FROM server_id_map WHERE entity = ? AND server_id = ? ORDER BY mapped_at, client_id LIMIT 1
                """),
            arguments: [entity.rawValue, serverID]
        ).flatMap(UUID.init(uuidString:))
    }

    /// The change with every parent reference that arrived as a server id (text) turned back into the
    /// client id; nil when it has none to turn (nearly every record).
    static func clientReferences(in change: VersionedRecord, db: Database) throws -> VersionedRecord? {
        // The record is copied only once a reference is translated: nearly every pulled record has
        // none, and the copy was a retain and a release of each of its strings and dictionaries.
        var record: EntityRecord?
        for relation in change.record.entity.description.parents {
            // The copy once there is one: a field two relations name is translated by the first (a later
            // relation sees the id it became), as the server's push rules do.
            let value = record.map { $0[relation.field] } ?? change.record[relation.field]
            guard case .text(let serverID) = value,
                let clientID = try clientID(of: relation.entity, serverID: serverID, in: db)
            else { continue }
            if record == nil { record = change.record }
            record?[relation.field] = .uuid(clientID)
        }
        guard let record else { return nil }
        return try VersionedRecord(record: record, clocks: change.clocks, deletion: change.deletion)
    }
}

extension VersionedRecord {
    /// A tombstone as a server's pull sends it, without the record's last values and clocks.
    var isContentlessTombstone: Bool { deletion != nil && record.fields.isEmpty }
}

extension VersionedRecord {
    /// A pulled record as `changes()` subscribers see it.
    var storeChange: StoreChange {
        StoreChange(entity: record.entity, recordID: record.id, operation: isDeleted ? .delete : .update)
    }
}

/// Reads the free bytes of the volume holding a folder; nil when they cannot be read.
struct StoreVolume: Sendable {
    let freeBytes: @Sendable (_ folder: String) -> Int64?

    /// The file system's own count.
    static let system = StoreVolume { folder in
        guard let attributes = try? FileManager.default.attributesOfFileSystem(forPath: folder) else { return nil }
        return (attributes[.systemFreeSize] as? NSNumber)?.int64Value
    }
}

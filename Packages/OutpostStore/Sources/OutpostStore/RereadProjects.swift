import Foundation
import GRDB
import OutpostConflicts
import OutpostSchema
import OutpostWire

/// Projects whose records a bundle FILE brought, to be read again from their beginning (`sync_state`).
///
/// A file is its holder's word: an edited one put records the server never had on a device, stored as
/// synced, which no pull ever replaced (a pull brings only what the server holds) and every status
/// showed as sent, for good (attack 45 finding 3). Its versions are held as the bundle's
/// (`ImportedVersions`) until a pull brings the server's; what no read of the whole project brings is
/// not the server's. So an import of a file asks for its project to be read again (`pending`); the pull
/// that the server answers naming it back moves it to `reading`; and once a pull reaches its last page,
/// the records of each project read again that still hold a version the import wrote are settled
/// (`LocalStore.settleRereadImports`). An import of the same project after that pull began puts it back
/// to `pending`, so a read that began before the import never settles the import's records.
enum RereadProjects {
    static let pendingKey = "reread_pending"
    static let readingKey = "reread_reading"

    /// Projects waiting for a pull to ask for them, oldest first.
    static func pending(in db: Database) throws -> [UUID] {
        try SyncState.list(of: pendingKey, in: db).compactMap { UUID(uuidString: $0) }
    }

    /// Projects a pull reads again now, oldest first.
    static func reading(in db: Database) throws -> [UUID] {
        try SyncState.list(of: readingKey, in: db).compactMap { UUID(uuidString: $0) }
    }

    /// An import of a file wrote records of `project`: read it again from its beginning.
    static func request(_ project: UUID, in db: Database) throws {
        try save(pending: try pending(in: db).filter { $0 != project } + [project], reading: try reading(in: db).filter { $0 != project }, in: db)
    }

    /// The server named `projects` back (`PullResponse.rereadProjects`) on a page now applied: the pull
    /// reads them from their beginning.
    static func started(_ projects: [UUID], in db: Database) throws {
        guard !projects.isEmpty else { return }
        let reading = try reading(in: db)
        try save(
            pending: try pending(in: db).filter { !projects.contains($0) },
            reading: reading + projects.filter { !reading.contains($0) }, in: db)
    }

    /// Forgets `projects` once settled.
    static func finish(_ projects: Set<UUID>, in db: Database) throws {
        try save(pending: try pending(in: db), reading: try reading(in: db).filter { !projects.contains($0) }, in: db)
    }

    private static func save(pending: [UUID], reading: [UUID], in db: Database) throws {
        try SyncState.setList(pendingKey, to: pending.map(\.storageText), in: db)
        try SyncState.setList(readingKey, to: reading.map(\.storageText), in: db)
    }
}

extension LocalStore {
    /// Projects a bundle file brought records of, for the next pull's first request
    /// (`PullRequest.rereadProjects`); empty when none waits.
    public func rereadProjects() throws(StoreError) -> [UUID] {
        try read { try RereadProjects.pending(in: $0) }
    }

    /// Settles, once a pull reached its last page, what bundle files brought of the projects that pull
    /// read again from their beginning (`PulledPage.sentRereadProjects`), among `asked` (the projects
    /// the pull asked for; nil for all). A record still holding the version an import wrote is one the
    /// server did not send, so one it does not hold or this device's user may not see: removed, as a
    /// device that never imported the file would not hold it; queued as a create with the values held
    /// here when this device wrote to it (a change waiting), so nothing its user wrote is lost and it
    /// shows as unsent, for the server to take or refuse. A record whose project no held parent tells
    /// (its parent never came) goes too once the pull read every project (`asked` nil) and no import
    /// waits. One transaction.
    @discardableResult
    public func settleRereadImports(asked: Set<UUID>?, now: Date = Timestamp.now()) async throws(StoreError) -> HistoryRebuildReport {
        let (report, changes) = try await StoreError.mapping(path: path) {
            try await writer.settleRereadImports(asked: asked, in: pool, now: now)
        }
        for change in changes { observers.publish(change) }
        return report
    }
}

extension StoreWriter {
    func settleRereadImports(asked: Set<UUID>?, in pool: DatabasePool, now: Date) throws -> (HistoryRebuildReport, [StoreChange]) {
        try transaction(in: pool) { db in
            let settled = Set(try RereadProjects.reading(in: db).filter { asked?.contains($0) ?? true })
            guard !settled.isEmpty else { return (HistoryRebuildReport(), []) }
            var unheld: [UnheldKey: EntityRecord] = [:]
            var order: [UnheldKey] = []
            // A record the read brought and this build could not take in (quarantined) is the server's all
            // the same: its copy stays, as the quarantine keeps the server's for a later build.
            let quarantined = Set(try Quarantine.keys(in: db).map { UnheldKey(entity: $0.0, id: $0.1) })
            // A record no held parent places in a project (a comment naming an issue no read brought, an
            // opportunity no project names): a read of every project the user may see, with no import
            // since it began, brought none of them, so the server does not hold them for this user (the
            // server places every record but an unlinked opportunity, its creator's own, in a project, and
            // a bundle carries only linked ones). Kept otherwise: the read was not of everything.
            let waiting = try RereadProjects.pending(in: db)
            let placesNone = asked == nil && waiting.isEmpty
            let notes = try Row.fetchAll(db, sql: "SELECT entity, record_id, version FROM imported_versions ORDER BY entity, record_id")
            for note in notes {
                guard let entity = EntityType(rawValue: note["entity"]), let id = UUID(uuidString: note["record_id"]),
                    !quarantined.contains(UnheldKey(entity: entity, id: id)),
                    let record = try EntityTables.fetchRecord(entity, id: id, in: db), record.sync.version == note["version"] as Int64,
                    try PulledPage.project(of: record, in: [:], reading: { try EntityTables.fetchRecord($0, id: $1, in: db) })
                        .map(settled.contains) ?? placesNone
                else { continue }
                let key = UnheldKey(entity: entity, id: id)
                unheld[key] = record
                order.append(key)
            }
            let outcome = try settleUnheld(unheld, order: order, ownWritesByClocks: false, db: db, now: now)
            for key in order { try ImportedVersions.forget(key.entity, key.id, in: db) }
            try RereadProjects.finish(settled, in: db)
            try ChangeJournal.append(outcome.1, origin: origin, in: db)
            return outcome
        }
    }
}

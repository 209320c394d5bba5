@testable import OutpostStore
import Foundation
import GRDB
import GRDBSQLite
import OutpostConflicts
import OutpostFieldService
import OutpostFieldServiceTesting
import OutpostModels
import OutpostSchema
import OutpostTesting
import Synchronization
import Testing

/// Counts the steps SQLite takes through whole tables (and into automatic indexes it builds) on a
/// store's writer between `start` and `stop`, by statement: those that finish (SQLite's profile
/// callback, which is handed this counter, so tests running at once count apart) and those still
/// prepared at the end.
private final class ScanCount: Sendable {
    private let steps = Mutex<[String: Int]>([:])

    /// Adds `statement`'s full-scan and automatic-index steps and sets them back to zero.
    func collect(_ statement: OpaquePointer) {
        let taken = Int(sqlite3_stmt_status(statement, SQLITE_STMTSTATUS_FULLSCAN_STEP, 1))
            + Int(sqlite3_stmt_status(statement, SQLITE_STMTSTATUS_AUTOINDEX, 1))
        guard taken > 0 else { return }
        let sql = sqlite3_sql(statement).map { String(cString: $0) } ?? "?"
        steps.withLock { $0[sql, default: 0] += taken }
    }

    func start(_ store: LocalStore) {
        let context = Unmanaged.passUnretained(self).toOpaque()
        store.pool.writeWithoutTransaction { db in
            let connection = db.sqliteConnection
            sqlite3_trace_v2(connection, UInt32(SQLITE_TRACE_PROFILE), { _, context, statement, _ in
                if let context, let statement {
                    Unmanaged<ScanCount>.fromOpaque(context).takeUnretainedValue().collect(OpaquePointer(statement))
                }
                return 0
            }, context)
            walk(connection)
        }
        steps.withLock { $0 = [:] }
    }

    func stop(_ store: LocalStore) -> [String: Int] {
        store.pool.writeWithoutTransaction { db in
            walk(db.sqliteConnection)
            sqlite3_trace_v2(db.sqliteConnection, 0, nil, nil)
        }
        return steps.withLock { $0 }
    }

    /// Runs `work` on the store's writer connection, the one traced.
    static func onTheWriter(of store: LocalStore, _ work: (Database) throws -> Void) throws {
        try store.pool.writeWithoutTransaction(work)
    }

    private func walk(_ connection: OpaquePointer?) {
        var statement = sqlite3_next_stmt(connection, nil)
        while let current = statement {
            collect(current)
            statement = sqlite3_next_stmt(connection, current)
        }
    }
}

/// A pulled page costs what its records need, not what the store holds: none of the statements it runs
/// reads a whole table. Settling the orphans of a parent a page brought read the whole child table
/// where the parent's column had no index, and applying 100,000 pulled records into a store holding as
/// many ran at 0.03× sqlite3's `.import` (found by `outpost-bench pull`).
@Suite(.fieldService) struct PulledPageScanTests {
    /// The server's versions, as the project-move tests make them.
    func remote(_ record: EntityRecord, version: Int64, at milliseconds: Int64, deleted: Bool = false) -> VersionedRecord {
        ProjectMoveTests().remote(record: record, version: version, at: milliseconds, deleted: deleted)
    }

    /// A new record of `entity` and the ancestors it needs: in `project` when it belongs to one, else
    /// (a project, an opportunity) with a value of its kind in every field and no parent.
    func fresh(_ entity: EntityType, in project: UUID, using random: inout SeededGenerator) -> [EntityRecord] {
        if entity != EntityCatalog.schema.scope, ProjectMoveTests.belongsThroughParents(entity) {
            return ProjectMoveTests.chain(entity, in: project, using: &random)
        }
        var fields: [String: FieldValue] = [:]
        for field in entity.description.fields { fields[field.name] = ProjectMoveTests.value(of: field.kind) }
        for relation in entity.description.parents { fields[relation.field] = .null }
        return [EntityRecord(entity: entity, id: UUID(), fields: fields, sync: SyncMetadata(createdAt: Date(timeIntervalSince1970: 1)))]
    }

    /// Records of every entity a store holds a few hundred of: a statement that reads a table whole
    /// takes at least this many steps.
    let perEntity = 120

    /// A store holding `perEntity` records of every entity (and their ancestors) in one project, pulled.
    func heldStore(using random: inout SeededGenerator) async throws -> (TemporaryDatabase, LocalStore, Project, [EntityRecord]) {
        let database = try TemporaryDatabase()
        let store = try LocalStore.open(at: database.path)
        let project = Project(name: "Tower")
        var held: [EntityRecord] = [project.record]
        for description in EntityCatalog.all where description.type != EntityCatalog.schema.scope {
            for _ in 0..<perEntity { held += fresh(description.type, in: project.id, using: &random) }
        }
        for start in stride(from: 0, to: held.count, by: 1_000) {
            let report = try await store.applyPulledPage(PulledPage(
                changes: held[start..<min(start + 1_000, held.count)].map { remote($0, version: 1, at: 1_000) }, cursor: "c-\(start)"))
            #expect(report.quarantined == 0, "\(report)")
        }
        return (database, store, project, held)
    }

    /// The law, over every parent entity: a store holding a few hundred records of every entity takes
    /// a page that brings a new record of each parent kind, deletes a held one of each, moves held
    /// children under the new parents and edits others; the page reads no table whole.
    @Test(arguments: 0..<3)
    func aPulledPageReadsNoTableWhole(seed: Int) async throws {
        var random = SeededGenerator(seed: 0x5CA_0000 + UInt64(seed))
        let (database, store, project, held) = try await heldStore(using: &random)
        defer { withExtendedLifetime(database) {} }
        var time: Int64 = 2_000

        // The count sees a scan: a query by a column no index starts with.
        let control = ScanCount()
        control.start(store)
        try ScanCount.onTheWriter(of: store) { db in
            _ = try Int.fetchOne(db, sql: "SELECT count(*) FROM issues WHERE title = 'none'")
        }
        let seen = control.stop(store)
        #expect(seen.values.reduce(0, +) >= perEntity, "\(seen)")

        let parents = Set(EntityCatalog.all.flatMap { $0.parents.map(\.entity) })
        var page: [VersionedRecord] = []
        var arrived: [EntityType: UUID] = [:]
        time += 1_000
        for parent in parents.sorted(by: { $0.rawValue < $1.rawValue }) {
            let records = fresh(parent, in: project.id, using: &random)
            page += records.map { remote($0, version: 1, at: time) }
            arrived[parent] = records.last?.id
            // A held one deleted (not the project: every record would go with it).
            if parent != EntityCatalog.schema.scope, let gone = held.filter({ $0.entity == parent }).randomElement(using: &random) {
                page.append(remote(gone, version: 2, at: time, deleted: true))
            }
        }
        for _ in 0..<40 {
            guard var child = held.randomElement(using: &random), child.entity != EntityCatalog.schema.scope else { continue }
            if let relation = child.entity.description.parents.dropFirst().randomElement(using: &random),
                let parent = arrived[relation.entity], Bool.random(using: &random)
            {
                child[relation.field] = .uuid(parent)
            } else if let text = child.entity.description.fields.first(where: { $0.kind == .text }) {
                child[text.name] = .text("edited on the server")
            }
            page.append(remote(child, version: 3, at: time + 1))
        }
        page.shuffle(using: &random)
        let count = ScanCount()
        count.start(store)
        let report = try await store.applyPulledPage(PulledPage(changes: page, cursor: "c-last"))
        let steps = count.stop(store)
        #expect(report.applied > 0, "\(report)")
        // A scan of any entity table takes at least `perEntity` steps; a handful are tables of the
        // toolkit's that hold a row or two.
        #expect(steps.values.reduce(0, +) < perEntity / 2, "seed \(seed): \(steps)")
    }

    /// The same law for the device's own writes: new parents of every kind saved, held ones deleted,
    /// held records edited, each its own transaction with its queued change and audit entry. (A local
    /// delete flags the children once the server takes it, `flagOrphans`, whose plan
    /// `everyLookupOfChildrenByTheirParentUsesAnIndex` holds.)
    @Test(arguments: 0..<2)
    func aLocalWriteReadsNoTableWhole(seed: Int) async throws {
        var random = SeededGenerator(seed: 0x5CB_0000 + UInt64(seed))
        let (database, store, project, held) = try await heldStore(using: &random)
        defer { withExtendedLifetime(database) {} }
        let parents = Set(EntityCatalog.all.flatMap { $0.parents.map(\.entity) })
        let count = ScanCount()
        count.start(store)
        var deleted = 0
        for parent in parents.sorted(by: { $0.rawValue < $1.rawValue }) {
            for record in fresh(parent, in: project.id, using: &random) { _ = try await store.save(record) }
            if parent != EntityCatalog.schema.scope, let gone = held.filter({ $0.entity == parent }).randomElement(using: &random),
                try await store.delete(parent, id: gone.id)
            {
                deleted += 1
            }
        }
        for _ in 0..<30 {
            guard let pick = held.randomElement(using: &random), pick.entity != EntityCatalog.schema.scope,
                var child = try store.record(pick.entity, id: pick.id), !child.sync.isDeleted
            else { continue }
            if let text = child.entity.description.fields.first(where: { $0.kind == .text }) { child[text.name] = .text("edited here") }
            _ = try? await store.save(child)
        }
        let steps = count.stop(store)
        #expect(deleted > 5)
        #expect(steps.values.reduce(0, +) < perEntity / 2, "seed \(seed): \(steps)")
    }
}

@testable import OutpostStore
import Foundation
import GRDB
import OutpostFieldService
import OutpostFieldServiceTesting
import OutpostModels
import OutpostSchema
import OutpostTesting
import Testing

@Suite(.fieldService) struct EntityTablesTests {
    /// Property: any valid-shaped record of any entity survives a save and a fetch unchanged.
    @Test func recordsRoundTripThroughTheirTables() throws {
        let database = try TemporaryDatabase()
        try LocalSchema.migrator.migrate(database.queue)
        var random = SeededGenerator(seed: 2026)
        var saved: [EntityRecord] = []
        try database.queue.write { db in
            for _ in 0..<60 {
                for description in EntityCatalog.all {
                    let record = RandomRecord.make(description, using: &random)
                    try EntityTables.save(record, in: db)
                    saved.append(record)
                }
            }
        }
        try database.queue.read { db in
            for record in saved {
                let fetched = try EntityTables.fetchRecord(record.entity, id: record.id, in: db)
                #expect(fetched == record, "seed 2026: \(record.entity) \(record.id) changed in its table")
            }
            #expect(try EntityTables.fetchAll(.issue, in: db).count == 60)
        }
    }

    /// Property: the typed read path (`RowDecoder`, straight from the row) gives exactly what the
    /// record path gives, for every entity, optional fields null or not.
    @Test func typedReadsFromRowsEqualTheRecordPath() throws {
        let database = try TemporaryDatabase()
        try LocalSchema.migrator.migrate(database.queue)
        var random = SeededGenerator(seed: 77)
        try database.queue.write { db in
            for _ in 0..<30 {
                for description in EntityCatalog.all {
                    let record = RandomRecord.make(description, using: &random)
                    try EntityTables.save(record, in: db)
                    func check<Model: Syncable>(_ type: Model.Type) throws {
                        let viaRecord = try Model(record: #require(try EntityTables.fetchRecord(record.entity, id: record.id, in: db)))
                        let viaRow = try EntityTables.fetchModel(Model.self, id: record.id, in: db)
                        #expect(viaRow == viaRecord, "seed 77: \(record.entity) \(record.id) decodes differently from its row")
                    }
                    try check(description.modelType)
                }
            }
        }
    }

    /// A project's issue list reads `issues_by_list_order` (v15) in its order, never a sort of its own (a
    /// temporary B-tree took a third of SQLite's time) nor a scan of the table; a windowed list's ids
    /// (`RecordList`) come from the index alone, and a whole typed list looks each row up by key.
    @Test(arguments: [false, true])
    func aProjectsIssueListReadsItsIndexInOrder(idsAlone: Bool) throws {
        let database = try TemporaryDatabase()
        try LocalSchema.migrator.migrate(database.queue)
        let layout = TableLayout.of(.issue)
        let column = EntityTables.column(for: "projectID")
        let sql = idsAlone ? layout.selectLiveIDs(where: column) : layout.selectLive(where: column)
        let plan = try database.queue.read { db in
            try Row.fetchAll(db, sql: "EXPLAIN QUERY PLAN " + sql, arguments: [UUID().storageText]).map { $0["detail"] as String }
        }
        #expect(plan.contains { $0.contains(idsAlone ? "USING COVERING INDEX issues_by_list_order" : "USING INDEX issues_by_list_order") }, "\(plan)")
        #expect(!plan.contains { $0.hasPrefix("SCAN issues") }, "\(plan)")
        #expect(!plan.contains { $0.contains("TEMP B-TREE") }, "\(plan)")
    }

    /// A windowed list's window looks its rows up by key, in the ids' order: a scan of the table, or of
    /// the project's index, would make every window cost what the whole list does.
    @Test func aListWindowLooksItsRowsUpByKey() throws {
        let database = try TemporaryDatabase()
        try LocalSchema.migrator.migrate(database.queue)
        let sql = TableLayout.of(.issue).selectLiveByIDList(where: EntityTables.column(for: "projectID"))
        let plan = try database.queue.read { db in
            try Row.fetchAll(db, sql: "EXPLAIN QUERY PLAN " + sql, arguments: ["[]", UUID().storageText]).map { $0["detail"] as String }
        }
        #expect(plan.contains { $0.hasPrefix("SEARCH issues USING PRIMARY KEY (id=?)") }, "\(plan)")
        #expect(!plan.contains { $0.hasPrefix("SCAN issues") }, "\(plan)")
        #expect(!plan.contains { $0.contains("TEMP B-TREE") }, "\(plan)")
    }

    /// The upsert binds with SQLite's C API: a row SQLite refuses is a `DatabaseError` naming the
    /// constraint, and the same cached statement then saves the next record normally.
    @Test func aRowSQLiteRefusesIsAnErrorAndTheUpsertStaysUsable() throws {
        let database = try TemporaryDatabase()
        try LocalSchema.migrator.migrate(database.queue)
        var broken = Issue(projectID: UUID(), title: "Leak").record
        broken.fields["title"] = nil
        try database.queue.write { db in
            #expect { try EntityTables.save(broken, in: db) } throws: { error in
                guard let error = error as? DatabaseError else { return false }
                return error.resultCode == .SQLITE_CONSTRAINT && "\(error)".contains("title")
            }
            let issue = Issue(projectID: UUID(), title: "")
            try EntityTables.save(issue.record, in: db)
            #expect(try EntityTables.fetchRecord(.issue, id: issue.id, in: db) == issue.record)
            #expect(try EntityTables.fetchRecord(.issue, id: broken.id, in: db) == nil)
        }
    }

    @Test func savingTheSameIdReplacesTheRow() throws {
        let database = try TemporaryDatabase()
        try LocalSchema.migrator.migrate(database.queue)
        var issue = Issue(projectID: UUID(), title: "Leak").record
        try database.queue.write { db in
            try EntityTables.save(issue, in: db)
            issue["title"] = .text("Leak under sink")
            issue.sync.version = 3
            try EntityTables.save(issue, in: db)
        }
        let stored = try database.queue.read { try EntityTables.fetchRecord(.issue, id: issue.id, in: $0) }
        #expect(stored == issue)
        #expect(try database.queue.read { try Int.fetchOne($0, sql: "SELECT count(*) FROM issues") } == 1)
        #expect(try database.queue.read { try EntityTables.fetchRecord(.issue, id: UUID(), in: $0) } == nil)
    }
}

/// Random records of any entity, valid in shape, with millisecond instants (the stored precision).
enum RandomRecord {
    static func make(_ description: EntityDescription, using random: inout SeededGenerator) -> EntityRecord {
        var fields: [String: FieldValue] = [:]
        for field in description.fields {
            fields[field.name] = field.isOptional && Bool.random(using: &random) ? .null : value(field.kind, using: &random)
        }
        let sync = SyncMetadata(
            serverID: Bool.random(using: &random) ? "srv-\(random.next() % 100_000)" : nil,
            version: Int64(random.next() % 1_000), createdAt: date(using: &random), updatedAt: date(using: &random),
            deletedAt: Bool.random(using: &random) ? date(using: &random) : nil,
            syncStatus: SyncStatus.allCases.randomElement(using: &random)!, isOrphaned: Bool.random(using: &random))
        return EntityRecord(entity: description.type, id: UUID(), fields: fields, sync: sync)
    }

    static func value(_ kind: FieldKind, using random: inout SeededGenerator) -> FieldValue {
        switch kind {
        case .text: .text(["", "Zoë's kitchen", "检查屋顶 🚧", "line\nbreak"].randomElement(using: &random)!)
        case .integer: .integer(Int64.random(in: Int64.min...Int64.max, using: &random))
        case .money, .count: .integer(Int64.random(in: 0...Int64.max, using: &random))
        case .real: .real(Double.random(in: -1e9...1e9, using: &random))
        case .quantity: .real(Double.random(in: 0...1e6, using: &random))
        case .bool: .bool(Bool.random(using: &random))
        case .date: .date(date(using: &random))
        case .uuid: .uuid(UUID())
        case .blob: .blob(Data((0..<Int.random(in: 0...32, using: &random)).map { _ in UInt8.random(in: 0...255, using: &random) }))
        case .day: .text("2026-11-22")
        case .sha256: .text(String(repeating: "0f", count: 32))
        case .choice(let values): .text(values.randomElement(using: &random)!)
        }
    }

    static func date(using random: inout SeededGenerator) -> Date {
        Date(timeIntervalSince1970: Double(Int64.random(in: 0...4_102_444_800_000, using: &random)) / 1000)
    }
}

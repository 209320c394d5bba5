@testable import OutpostModels
@testable import OutpostSchema
import Foundation
import OutpostFieldServiceTesting
import OutpostTesting
import Testing

@Suite(.fieldService) struct RoundTripTests {
    @Test(arguments: [true, false])
    func everyEntityConvertsToARecordAndBack(full: Bool) throws {
        let samples = Samples.all(full: full)
        #expect(Set(samples.map { type(of: $0).entityType }) == Set(EntityType.allCases))
        for sample in samples {
            #expect(try survivesRecordForm(sample), "\(type(of: sample).entityType) changed on the way through a record")
        }
    }

    @Test(arguments: [true, false])
    func everyEntityRoundTripsThroughJSON(full: Bool) throws {
        for sample in Samples.all(full: full) {
            #expect(try survivesJSON(sample), "\(type(of: sample).entityType) changed through JSON")
            let record = sample.record
            let decoded = try JSONDecoder().decode(EntityRecord.self, from: JSONEncoder().encode(record))
            #expect(decoded == record, "\(record.entity) record changed through JSON")
        }
    }

    @Test func recordsCarryExactlyTheCatalogFields() {
        for sample in Samples.all(full: true) {
            let record = sample.record
            let expected = Set(record.entity.description.fields.map(\.name))
            #expect(Set(record.fields.keys) == expected, "\(record.entity) properties differ from its catalog fields")
            #expect(record.shapeErrors().isEmpty, "\(record.entity): \(record.shapeErrors())")
            #expect(record.validationErrors.isEmpty, "\(record.entity): \(record.validationErrors)")
        }
    }

    @Test func absentOptionalFieldsAreNullNotMissing() {
        let issue = Issue(projectID: Samples.project, title: "Leak")
        #expect(issue.record.fields["assigneeID"] == .null)
        #expect(issue.record.fields.count == EntityType.issue.description.fields.count)
    }

    /// Property: any record built from the catalog's kinds converts to its typed model and back, and through
    /// JSON, unchanged.
    @Test(arguments: 0..<8)
    func randomRecordsSurviveTypedConversion(batch: Int) throws {
        var random = SeededGenerator(seed: UInt64(0xC0FFEE + batch))
        for _ in 0..<125 {
            for description in EntityCatalog.all {
                let record = RandomRecords.make(description, using: &random)
                let typed = try description.modelType.init(record: record)
                #expect(typed.record == record, "seed \(0xC0FFEE + batch): \(description.type) changed")
                let json = try JSONDecoder().decode(EntityRecord.self, from: JSONEncoder().encode(record))
                #expect(json == record, "seed \(0xC0FFEE + batch): \(description.type) changed through JSON")
            }
        }
    }

    private func survivesRecordForm<T: Syncable>(_ value: T) throws -> Bool {
        try T(record: value.record) == value
    }

    private func survivesJSON<T: Syncable>(_ value: T) throws -> Bool {
        try JSONDecoder().decode(T.self, from: JSONEncoder().encode(value)) == value
    }
}

/// Random records of any entity, valid in shape (kinds and choices), drawn from the catalog.
enum RandomRecords {
    static func make(_ description: EntityDescription, using random: inout SeededGenerator) -> EntityRecord {
        var fields: [String: FieldValue] = [:]
        for field in description.fields {
            fields[field.name] =
                field.isOptional && Bool.random(using: &random) ? .null : value(field.kind, using: &random)
        }
        let sync = SyncMetadata(
            serverID: Bool.random(using: &random) ? String(Int.random(in: 1...1_000_000, using: &random)) : nil,
            version: Int64.random(in: 0...1_000, using: &random),
            createdAt: date(using: &random), updatedAt: date(using: &random),
            deletedAt: Bool.random(using: &random) ? date(using: &random) : nil,
            syncStatus: SyncStatus.allCases.randomElement(using: &random)!,
            isOrphaned: Bool.random(using: &random))
        return EntityRecord(entity: description.type, id: uuid(using: &random), fields: fields, sync: sync)
    }

    static func value(_ kind: FieldKind, using random: inout SeededGenerator) -> FieldValue {
        switch kind {
        case .text: .text(text(using: &random))
        case .integer: .integer(Int64.random(in: Int64.min...Int64.max, using: &random))
        case .money, .count: .integer(Int64.random(in: 0...Int64(Int32.max) * 1_000, using: &random))
        case .real: .real(Double.random(in: -1e12...1e12, using: &random))
        case .quantity: .real(Double.random(in: 0...1e9, using: &random))
        case .bool: .bool(Bool.random(using: &random))
        case .date: .date(date(using: &random))
        case .uuid: .uuid(uuid(using: &random))
        case .blob: .blob(Data((0..<Int.random(in: 0...64, using: &random)).map { _ in UInt8.random(in: 0...255, using: &random) }))
        case .day: .text(String(format: "%04d-%02d-%02d", Int.random(in: 1990...2100, using: &random),
                                Int.random(in: 1...12, using: &random), Int.random(in: 1...28, using: &random)))
        case .sha256: .text(String((0..<64).map { _ in "0123456789abcdef".randomElement(using: &random)! }))
        case .choice(let values): .text(values.randomElement(using: &random)!)
        }
    }

    static func text(using random: inout SeededGenerator) -> String {
        let alphabet = Array("abcXYZ 0123 éüß 漢字 🚧\n\"'<&>")
        return String((0..<Int.random(in: 0...24, using: &random)).map { _ in alphabet.randomElement(using: &random)! })
    }

    static func date(using random: inout SeededGenerator) -> Date {
        Date(timeIntervalSince1970: Double(Int64.random(in: 0...4_102_444_800_000, using: &random)) / 1000)
    }

    static func uuid(using random: inout SeededGenerator) -> UUID {
        let high = random.next(), low = random.next()
        return withUnsafeBytes(of: (high, low)) { UUID(uuid: $0.load(as: uuid_t.self)) }
    }
}

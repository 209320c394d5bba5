import Foundation
import Testing
@testable import OutpostModels
import OutpostTesting

/// The field tables replace `Mirror` (records from models) and `Codable` (models from records and rows):
/// they must give exactly what the reflective paths gave, for every entity.
@Suite struct FieldTableTests {
    @Test(arguments: 0..<4)
    func tablesAgreeWithTheCodablePath(batch: Int) throws {
        var random = SeededGenerator(seed: UInt64(0xF1E1D + batch))
        for _ in 0..<50 {
            for description in EntityCatalog.all {
                let record = RandomRecords.make(description, using: &random)
                #expect(try agrees(description.modelType, record), "\(description.type) differs between the table and Codable")
            }
        }
    }

    @Test func everyModelListsEveryCatalogFieldOnce() {
        for description in EntityCatalog.all {
            #expect(names(of: description.modelType) == description.fields.map(\.name), "\(description.type)")
        }
    }

    @Test func aValueOfTheWrongKindNamesItsField() throws {
        let record = Issue(projectID: UUID(), title: "Leak").record
        var fields: [FieldValue] = Issue.fieldTable.names.map { record[$0] }
        fields[1] = .integer(3)
        do {
            _ = try Issue(id: record.id, sync: record.sync) { fields[$0] }
            Testing.Issue.record("decoded a title held as an integer")
        } catch let error as ModelError {
            #expect(error.code == .typeMismatch)
            #expect(error.field == "title")
        }
        fields[3] = .text("reopened-ish")  // status: not one of the choices
        fields[1] = .text("Leak")
        #expect(throws: ModelError.self) { try Issue(id: record.id, sync: record.sync) { fields[$0] } }
    }

    private func names<Model: Syncable>(of _: Model.Type) -> [String] { Model.fieldTable.names }

    private func agrees<Model: Syncable>(_: Model.Type, _ record: EntityRecord) throws -> Bool {
        let codable = try Model(from: RecordDecoder(record: record))
        let table = try Model(record: record)
        let names = Model.fieldTable.names
        let fromColumns = try Model(id: record.id, sync: record.sync) { record[names[$0]] }
        return codable == table && table == fromColumns && table.record == record
    }
}

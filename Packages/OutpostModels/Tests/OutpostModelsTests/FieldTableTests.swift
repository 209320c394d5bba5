@testable import OutpostModels
@testable import OutpostSchema
import Foundation
import OutpostFieldServiceTesting
import OutpostTesting
import Testing

/// The field tables replace `Mirror` (records from models) and `Codable` (models from records and rows):
/// they must give exactly what the reflective paths gave, for every entity.
@Suite(.fieldService) struct FieldTableTests {
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

    /// Every model's fields are stored properties, so rows are decoded in place; a model that gains a
    /// computed field still decodes (through its accessors), only slower, and this says which one.
    @Test func everyModelDecodesInPlace() {
        for description in EntityCatalog.all {
            let inPlace = decodesInPlace(description.modelType)
            #expect(inPlace, "\(description.type) has a field that is not a stored property")
        }
    }

    /// A value of the wrong kind, or a choice outside its list, is refused the same way on both paths,
    /// for every field of every entity, and leaves nothing half-written behind (the value is not built).
    @Test(arguments: [true, false])
    func everyWrongKindIsRefusedOnBothPaths(inPlace: Bool) throws {
        var random = SeededGenerator(seed: 0x5107)
        for description in EntityCatalog.all {
            let record = RandomRecords.make(description, using: &random)
            for (index, field) in description.fields.enumerated() {
                var wrongs: [FieldValue] = [field.kind.storageKind == "text" ? .real(1.5) : .text("x")]
                if case .choice = field.kind { wrongs.append(.text("not-a-choice")) }
                if !field.isOptional { wrongs.append(.null) }
                for wrong in wrongs {
                    let named = refuses(description.modelType, record, index: index, wrong, inPlace: inPlace)
                    #expect(named == field.name, "\(description.type).\(field.name) holding \(wrong)")
                }
            }
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

    private func decodesInPlace<Model: Syncable>(_: Model.Type) -> Bool { Model.fieldTable.slots != nil }

    /// The field the decoder names when field `index` holds `wrong`; nil when it decoded anyway.
    private func refuses<Model: Syncable>(
        _: Model.Type, _ record: EntityRecord, index: Int, _ wrong: FieldValue, inPlace: Bool
    ) -> String? {
        let names = Model.fieldTable.names
        do {
            _ = try Model(id: record.id, sync: record.sync, inPlace: inPlace) { $0 == index ? wrong : record[names[$0]] }
            return nil
        } catch let error as ModelError {
            return error.code == .typeMismatch ? error.field : "unexpected \(error)"
        } catch {
            return "unexpected \(error)"
        }
    }

    private func agrees<Model: Syncable>(_: Model.Type, _ record: EntityRecord) throws -> Bool {
        let codable = try Model(from: RecordDecoder(record: record))
        let table = try Model(record: record)
        let names = Model.fieldTable.names
        let fromColumns = try Model(id: record.id, sync: record.sync) { record[names[$0]] }
        let throughAccessors = try Model(id: record.id, sync: record.sync, inPlace: false) { record[names[$0]] }
        return codable == table && table == fromColumns && fromColumns == throughAccessors && table.record == record
    }
}

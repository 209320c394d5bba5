import Foundation
import OutpostModels
import Testing
@testable import OutpostBundles

/// The embedded schemas are the frozen files, and both agree with the entity catalog.
@Suite struct BundleSchemaTests {
    @Test func embeddedSchemasEqualTheFilesByteForByte() throws {
        let folder = RepositorySchemas.folder
        #expect(try Data(contentsOf: folder.appendingPathComponent("bundle.xsd")) == Data(BundleSchema.xsd.utf8))
        #expect(try Data(contentsOf: folder.appendingPathComponent("bundle.schema.json")) == Data(BundleSchema.jsonSchema.utf8))
    }

    @Test func theJSONSchemaDescribesEveryCatalogFieldAndRequirement() throws {
        let schema = try #require(JSONSerialization.jsonObject(with: Data(BundleSchema.jsonSchema.utf8)) as? [String: Any])
        let definitions = try #require(schema["$defs"] as? [String: Any])
        for description in EntityCatalog.all {
            let entity = try #require(definitions[description.type.rawValue] as? [String: Any], "\(description.type)")
            let properties = try #require(entity["properties"] as? [String: Any])
            let fields = try #require(properties["fields"] as? [String: Any])
            let names = try #require((fields["properties"] as? [String: Any])?.keys)
            #expect(Set(names) == Set(description.fields.map(\.name)), "\(description.type)")
            let required = try #require(fields["required"] as? [String])
            #expect(required == description.fields.filter { !$0.isOptional }.map(\.name), "\(description.type)")
        }
    }

    @Test func theXSDListsEveryCatalogFieldInOrder() {
        for description in EntityCatalog.all {
            let start = BundleSchema.xsd.range(of: "<xs:complexType name=\"\(description.type.rawValue)\">")
            #expect(start != nil, "\(description.type)")
            guard let start, let end = BundleSchema.xsd[start.upperBound...].range(of: "</xs:complexType>") else { continue }
            let body = BundleSchema.xsd[start.upperBound..<end.lowerBound]
            let names = body.components(separatedBy: "<xs:element name=\"").dropFirst().map { $0.prefix { $0 != "\"" } }
            #expect(names.map(String.init) == description.fields.map(\.name), "\(description.type)")
            for field in description.fields {
                let optional = body.contains("<xs:element name=\"\(field.name)\" type=\"\(field.kind)\" minOccurs=\"0\"/>")
                    || body.contains("name=\"\(field.name)\"") && body.contains("name=\"\(field.name)\" minOccurs=\"0\"")
                    || body.range(of: "name=\"\(field.name)\"[^/]*minOccurs=\"0\"", options: .regularExpression) != nil
                #expect(optional == field.isOptional, "\(description.type).\(field.name)")
            }
        }
    }
}

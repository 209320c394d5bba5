@testable import OutpostBundles
import Foundation
import OutpostFieldService
import OutpostFieldServiceTesting
import OutpostModels
import OutpostSchema
import Testing

/// The embedded schemas are the frozen files, and both agree with the entity catalog.
@Suite(.fieldService) struct BundleSchemaTests {
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

/// The schemas are generated for any declared app schema, not only the field-service one.
@Suite(.fieldService) struct GeneratedBundleSchemaTests {
    static let site = EntityType(declaring: "site"), crew = EntityType(declaring: "crew"), job = EntityType(declaring: "job")

    static func jobs() throws -> AppSchema {
        let everyone = EntityAccess(writers: ["boss", "hand"])
        return try AppSchema(
            name: "jobs",
            entities: [
                EntityDescription(site, table: "sites", model: Issue.self, policy: .fieldMerge, fields: [FieldDescription("name", .text)], access: everyone),
                EntityDescription(
                    crew, table: "crews", model: Member.self, policy: .serverWins,
                    fields: [FieldDescription("siteID", .uuid), FieldDescription("userID", .uuid), FieldDescription("role", .choice(["boss", "hand"]))],
                    parents: [ParentRelation("siteID", site)], access: EntityAccess(writers: ["boss"])),
                EntityDescription(
                    job, table: "jobs", model: Issue.self, policy: .lastWriteWins,
                    fields: [
                        FieldDescription("siteID", .uuid), FieldDescription("title", .text, required: true),
                        FieldDescription("status", .choice(["open", "done"])), FieldDescription("hours", .quantity, optional: true),
                    ],
                    parents: [ParentRelation("siteID", site)], access: everyone),
            ],
            scope: site, membership: .init(entity: crew, userField: "userID", roleField: "role", roles: ["boss", "hand"]))
    }

    @Test func aDeclaredSchemasXSDValidatesItsRecordsAndRefusesOthers() throws {
        let xsd = BundleSchema.xsd(for: try Self.jobs())
        #expect(xsd.contains("<xs:element name=\"job\" type=\"job\"/>") && !xsd.contains("opportunity"))
        let valid = """
            <bundle formatVersion="2" projectID="0b5e55ed-0000-4000-8000-000000000002">
              <records>
                <job id="0b5e55ed-0000-4000-8000-000000000003" version="1" createdAt="2026-11-18T11:06:40.125Z" updatedAt="2026-11-18T11:06:40.125Z">
                  <siteID>0b5e55ed-0000-4000-8000-000000000002</siteID>
                  <title>Fit the door</title>
                  <status>open</status>
                </job>
              </records>
            </bundle>
            """
        #expect(try LibXMLCheck.errors(validating: valid, against: xsd).isEmpty)
        let wrong = valid.replacingOccurrences(of: "<status>open</status>", with: "<status>lost</status>")
        #expect(try !LibXMLCheck.errors(validating: wrong, against: xsd).isEmpty)
        let foreign = valid.replacingOccurrences(of: "<job ", with: "<issue ").replacingOccurrences(of: "</job>", with: "</issue>")
        #expect(try !LibXMLCheck.errors(validating: foreign, against: xsd).isEmpty)
    }

    @Test func aDeclaredSchemasJSONSchemaNamesItsEntitiesAndRequirements() throws {
        let text = BundleSchema.jsonSchema(for: try Self.jobs())
        let schema = try #require(JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
        let definitions = try #require(schema["$defs"] as? [String: Any])
        #expect(Set(definitions.keys).isSuperset(of: ["site", "crew", "job"]) && definitions["issue"] == nil)
        let job = try #require(((definitions["job"] as? [String: Any])?["properties"] as? [String: Any])?["fields"] as? [String: Any])
        #expect(job["required"] as? [String] == ["siteID", "title", "status"])
    }
}

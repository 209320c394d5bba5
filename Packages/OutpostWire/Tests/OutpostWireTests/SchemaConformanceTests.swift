@testable import OutpostWire
import Foundation
import OutpostFieldService
import OutpostFieldServiceTesting
import OutpostModels
import OutpostSchema
import OutpostTesting
import Testing

/// `schemas/sync-api.yaml` and the Swift wire types must describe the same protocol.
@Suite(.fieldService) struct SchemaConformanceTests {
    let document: YAMLNode
    let schemas: YAMLNode

    init() async throws {
        document = try await YAMLNode.parse(contentsOf: try Fixtures.syncAPIPath())
        schemas = try #require(document["components"]?["schemas"])
    }

    /// The device's part of the document: the admin API (`/admin/…`, its `Admin…` schemas) is the
    /// server's operators', held to the running server by `ContractTests`, and no device type mirrors it.
    @Test func everySchemaWithPropertiesHasSwiftSamples() {
        let described = Set(schemas.keys.filter { schemas[$0]?["properties"] != nil && !$0.hasPrefix("Admin") })
        #expect(described == Set(Fixtures.samplesBySchema.keys))
    }

    @Test(arguments: Fixtures.samplesBySchema.keys.sorted())
    func propertyNamesMatchTheSwiftEncoding(schema name: String) throws {
        let schema = try #require(schemas[name], "no schema \(name) in sync-api.yaml")
        let properties = Set(try #require(schema["properties"]).keys)
        let samples = try #require(Fixtures.samplesBySchema[name])
        var encoded: Set<String> = []
        for sample in samples {
            let keys = try Fixtures.jsonKeys(of: sample)
            encoded.formUnion(keys)
            let required = Set(schema["required"]?.scalars ?? [])
            #expect(required.isSubset(of: keys), "\(name) sample lacks \(required.subtracting(keys).sorted())")
        }
        #expect(encoded == properties, "\(name): Swift encodes \(encoded.sorted()), YAML lists \(properties.sorted())")
    }

    @Test func enumerationsMatchTheSwiftTypes() throws {
        let codes = schemas["ErrorBody"]?["properties"]?["code"]?["enum"]?.scalars
        #expect(codes == ServerErrorCode.all.map(\.rawValue))
        #expect(Set(schemas["EntityType"]?["enum"]?.scalars ?? []) == Set(EntityType.allCases.map(\.rawValue)))
        let operations = schemas["PushMutation"]?["properties"]?["operation"]?["enum"]?.scalars
        #expect(operations == PushMutation.Operation.allCases.map(\.rawValue))
        let statuses = schemas["MutationResult"]?["properties"]?["status"]?["enum"]?.scalars
        #expect(statuses == ["applied", "duplicate", "conflict", "rejected"])
        let formats = document["paths"]?["/projects/{projectID}/bundle"]?["get"]?["parameters"]
        guard case .sequence(let parameters)? = formats else {
            Issue.record("bundle route has no parameters")
            return
        }
        let format = parameters.first { $0["name"]?.text == "format" }
        #expect(format?["schema"]?["enum"]?.scalars == BundleFormat.allCases.map(\.rawValue))
    }

    @Test func routesAndVersionHeadersAreTheOnesTheClientUses() throws {
        // The client's routes, the two probes a load balancer calls and the metrics a scraper reads (no
        // protocol headers).
        #expect(document["paths"]?.keys.filter { !$0.hasPrefix("/admin/") } == [
            "/health", "/livez", "/metrics", "/readyz", "/push", "/push/answers", "/pull", "/media/{attachmentID}/upload",
            "/media/{attachmentID}", "/projects/{projectID}/bundle",
        ])
        let parameters = try #require(document["components"]?["parameters"])
        #expect(parameters["ProtocolVersion"]?["name"]?.text == SyncProtocol.protocolVersionHeader)
        #expect(parameters["SchemaVersion"]?["name"]?.text == SyncProtocol.schemaVersionHeader)
        #expect(document["info"]?["version"]?.text == String(SyncProtocol.version))
        let description = try #require(document["info"]?["description"]?.text)
        #expect(description.contains("`\(SyncProtocol.acceptsHeader)`") && description.contains("`\(SyncProtocol.sharedClockForm)`"))
    }

    @Test func theDocumentIsOpenAPI3AsARealValidatorReadsIt() async throws {
        // openapi-spec-validator (PyPI, installed by the Makefile) over the document PyYAML reads: the
        // purpose-built reader these tests had accepted a file with an unquoted "): " that no YAML parser
        // reads (line 583 of the 2026-11 document), and schemathesis refused it.
        try await YAMLNode.validateOpenAPI(at: try Fixtures.syncAPIPath())
        let broken = FileManager.default.temporaryDirectory.appendingPathComponent("outpost-broken-\(UUID()).yaml")
        try Data("a: first (b): c\n".utf8).write(to: broken)
        defer { try? FileManager.default.removeItem(at: broken) }
        await #expect(throws: (any Error).self) { _ = try await YAMLNode.parse(contentsOf: broken.path) }
    }
}

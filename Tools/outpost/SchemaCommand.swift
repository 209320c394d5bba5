import ArgumentParser
import Foundation
import OutpostBundles
import OutpostFieldService
import OutpostModels
import OutpostSchema
import OutpostWire

/// `outpost schema xsd|json-schema|openapi`: the contracts generated from the field-service schema, as
/// `schemas/bundle.xsd`, `schemas/bundle.schema.json` and `schemas/sync-api.yaml` hold them (tests keep
/// the files equal).
struct SchemaCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "schema",
        abstract: "Print a contract generated from the schema: the bundle XSD or JSON Schema, or the sync API document.",
        discussion: "The frozen files under schemas/ are this output for the field-service schema.",
        subcommands: [XSD.self, JSONSchema.self, OpenAPI.self]
    )

    /// `outpost schema xsd`.
    struct XSD: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "xsd", abstract: "Print the bundle XSD (XML encoding) of the schema.")

        func run() {
            print(BundleSchema.xsd(for: EntityCatalog.schema), terminator: "")
        }
    }

    /// `outpost schema json-schema`.
    struct JSONSchema: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "json-schema", abstract: "Print the bundle JSON Schema (JSON encoding) of the schema.")

        func run() {
            print(BundleSchema.jsonSchema(for: EntityCatalog.schema), terminator: "")
        }
    }

    /// `outpost schema openapi DOCUMENT`.
    struct OpenAPI: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "openapi",
            abstract: "Print the sync API document with its entity part (the EntityType component) written for the schema.",
            discussion: "The protocol's part is the document's own: give it (schemas/sync-api.yaml).")

        @Argument(help: "The sync API document (OpenAPI 3, YAML).")
        var document: String

        func run() throws {
            let text = try String(contentsOf: URL(fileURLWithPath: document), encoding: .utf8)
            print(try SyncAPIDocument.withEntities(of: EntityCatalog.schema, in: text), terminator: "")
        }
    }
}

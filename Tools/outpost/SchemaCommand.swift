import ArgumentParser
import OutpostBundles
import OutpostModels

/// `outpost schema xsd|json-schema`: the bundle schemas generated from the field-service schema, as
/// `schemas/bundle.xsd` and `schemas/bundle.schema.json` hold them (a test keeps the files equal).
struct SchemaCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "schema",
        abstract: "Print a contract generated from the schema: the bundle XSD or JSON Schema.",
        discussion: "The frozen files under schemas/ are this output for the field-service schema.",
        subcommands: [XSD.self, JSONSchema.self]
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
}

import OutpostSchema

/// The entity part of the sync API document (`schemas/sync-api.yaml`), generated from a schema: the
/// document's `EntityType` component lists the entity names the app declares and its `Role` component
/// the roles. Everything else in the document is the protocol's and the same for every schema.
public enum SyncAPIDocument {
    /// Why a document could not take a schema's entities.
    public struct NotADocument: Error, Sendable, CustomStringConvertible {
        /// What is missing.
        public var description: String
    }

    /// `document` (the text of an OpenAPI document in the form `schemas/sync-api.yaml` has) with its
    /// `components.schemas.EntityType` and `Role` components written for `schema`: a description, and an
    /// `enum` of the entity names in declaration order and of the roles, strongest first. Throws when the
    /// document lacks either component.
    public static func withEntities(of schema: AppSchema, in document: String) throws(NotADocument) -> String {
        var lines = document.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        try replace(
            "EntityType", in: &lines,
            describing: "The entity names the app's schema ('\(schema.name)') declares, parents first",
            values: schema.entities.map(\.type.rawValue))
        try replace(
            "Role", in: &lines, describing: "The roles the app's schema ('\(schema.name)') declares, strongest first",
            values: schema.membership.roles)
        return lines.joined(separator: "\n")
    }

    /// Writes the string component `name` (under `components.schemas`, at 4 spaces) as an `enum` of `values`.
    private static func replace(
        _ name: String, in lines: inout [String], describing description: String, values: [String]
    ) throws(NotADocument) {
        guard let start = lines.firstIndex(of: "    \(name):") else {
            throw NotADocument(description: "the document has no components.schemas.\(name) (at 4 spaces)")
        }
        // The component ends where the next one at its indentation, or a shallower line, begins.
        var end = start + 1
        while end < lines.count, lines[end].isEmpty || lines[end].hasPrefix("      ") { end += 1 }
        let component = [
            "    \(name):",
            "      type: string",
            "      description: \(description) (outpost schema openapi writes this list).",
            "      enum:",
        ] + values.map { "        - \($0)" }
        lines.replaceSubrange(start..<end, with: component)
    }
}

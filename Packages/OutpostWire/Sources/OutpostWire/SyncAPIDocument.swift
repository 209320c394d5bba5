import OutpostSchema

/// The entity part of the sync API document (`schemas/sync-api.yaml`), generated from a schema: the
/// document's `EntityType` component lists the entity names the app declares. Everything else in the
/// document is the protocol's and the same for every schema.
public enum SyncAPIDocument {
    /// Why a document could not take a schema's entities.
    public struct NotADocument: Error, Sendable, CustomStringConvertible {
        /// What is missing.
        public var description: String
    }

    /// `document` (the text of an OpenAPI document in the form `schemas/sync-api.yaml` has) with its
    /// `components.schemas.EntityType` component written for `schema`: its description, and an
    /// `enum` of the entity names in declaration order. Throws when the document has no such component.
    public static func withEntities(of schema: AppSchema, in document: String) throws(NotADocument) -> String {
        var lines = document.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        guard let start = lines.firstIndex(of: "    EntityType:") else {
            throw NotADocument(description: "the document has no components.schemas.EntityType (at 4 spaces)")
        }
        // The component ends where the next one at its indentation, or a shallower line, begins.
        var end = start + 1
        while end < lines.count, lines[end].isEmpty || lines[end].hasPrefix("      ") { end += 1 }
        let component = [
            "    EntityType:",
            "      type: string",
            "      description: The entity names the app's schema ('\(schema.name)') declares, parents first (outpost schema openapi writes this list).",
            "      enum:",
        ] + schema.entities.map { "        - \($0.type.rawValue)" }
        lines.replaceSubrange(start..<end, with: component)
        return lines.joined(separator: "\n")
    }
}

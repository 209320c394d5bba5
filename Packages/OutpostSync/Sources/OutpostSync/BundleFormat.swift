/// The serialization of a pre-sync project bundle, chosen with the `format` query parameter.
public enum BundleFormat: String, Sendable, Hashable, Codable, CaseIterable {
    case json, xml
}

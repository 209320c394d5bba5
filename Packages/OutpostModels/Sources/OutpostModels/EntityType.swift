/// Every kind of record Outpost stores and syncs; the raw value is the name used on the wire,
/// in bundles and in the CLI.
public enum EntityType: String, Sendable, Hashable, Codable, CaseIterable, Comparable {
    // Time tracking
    case timeEntry, dailyLog
    // Estimates
    case opportunity, project, scope, measureSheet, measure, scopeItem, discount, financeOption, fee
    // Site work
    case issue, comment, asset, referenceDocument, mediaAttachment
    // People
    case member

    /// The catalog entry for this entity type.
    public var description: EntityDescription { EntityCatalog.description(of: self) }

    public static func < (lhs: EntityType, rhs: EntityType) -> Bool {
        lhs.rawValue < rhs.rawValue
    }
}

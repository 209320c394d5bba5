/// The name of a kind of record Outpost stores and syncs: the name used on the wire, in bundles and in
/// the CLI.
///
/// An open value, not an enum: the set of entities is the schema's, and an app declares its own (and
/// names its entities as constants: `extension EntityType { static let job = EntityType(declaring: "job") }`).
/// Made from text with `init?(rawValue:)`, which answers nil for a name the catalog does not declare,
/// so a decoded or typed-in name never reaches a table that does not exist (a force-unwrapped unknown name traps at the call site, not deep inside).
public struct EntityType: RawRepresentable, Sendable, Hashable, Codable, Comparable, CaseIterable, TextOutputStreamable {
    /// The entity's name.
    public let rawValue: String

    /// The entity the catalog declares under `rawValue`; nil for a name it does not declare.
    public init?(rawValue: String) {
        guard EntityCatalog.declares(rawValue) else { return nil }
        self.rawValue = rawValue
    }

    /// A name as a schema declares it (`EntityDescription`, `AppSchema`), whether or not the catalog
    /// in use holds it.
    public init(declaring name: String) {
        rawValue = name
    }

    /// Every declared entity, parents before children (`EntityCatalog.all`'s order).
    public static var allCases: [EntityType] { EntityCatalog.all.map(\.type) }

    /// The catalog entry for this entity type.
    public var description: EntityDescription { EntityCatalog.description(of: self) }

    /// Prints as its name, as the enum's cases did, in messages and interpolations (`description` is
    /// the catalog entry, so the name comes through this instead).
    public func write<Target: TextOutputStream>(to target: inout Target) {
        target.write(rawValue)
    }

    /// Orders by name, as the enum's raw values did.
    public static func < (lhs: EntityType, rhs: EntityType) -> Bool {
        lhs.rawValue < rhs.rawValue
    }
}

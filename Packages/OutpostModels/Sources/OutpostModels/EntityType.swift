/// The name of a kind of record Outpost stores and syncs: the name used on the wire, in bundles and in
/// the CLI.
///
/// An open value, not an enum: the set of entities is the schema's, and an app declares its own (the
/// field-service entities below are the first schema's). Made from text with `init?(rawValue:)`, which
/// answers nil for a name the catalog does not declare, so a decoded or typed-in name never reaches a
/// table that does not exist (a force-unwrapped unknown name traps at the call site, not deep inside).
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

    // Time tracking
    /// A crew member's clock-in and clock-out.
    public static let timeEntry = EntityType(declaring: "timeEntry")
    /// A project's daily log.
    public static let dailyLog = EntityType(declaring: "dailyLog")
    // Estimates
    /// A sales opportunity.
    public static let opportunity = EntityType(declaring: "opportunity")
    /// A project: the entity that scopes access and sync.
    public static let project = EntityType(declaring: "project")
    /// A scope of work.
    public static let scope = EntityType(declaring: "scope")
    /// A measure sheet.
    public static let measureSheet = EntityType(declaring: "measureSheet")
    /// One measure of a sheet.
    public static let measure = EntityType(declaring: "measure")
    /// One priced item of a scope.
    public static let scopeItem = EntityType(declaring: "scopeItem")
    /// A discount.
    public static let discount = EntityType(declaring: "discount")
    /// A finance option.
    public static let financeOption = EntityType(declaring: "financeOption")
    /// A fee.
    public static let fee = EntityType(declaring: "fee")
    // Site work
    /// An issue raised on site.
    public static let issue = EntityType(declaring: "issue")
    /// A comment on an issue.
    public static let comment = EntityType(declaring: "comment")
    /// An asset (equipment, a fixture) with its QR code.
    public static let asset = EntityType(declaring: "asset")
    /// A drawing or document for reference.
    public static let referenceDocument = EntityType(declaring: "referenceDocument")
    /// A photo or voice note.
    public static let mediaAttachment = EntityType(declaring: "mediaAttachment")
    // People
    /// A project's member record: the membership entity, whose role field grants access.
    public static let member = EntityType(declaring: "member")
}

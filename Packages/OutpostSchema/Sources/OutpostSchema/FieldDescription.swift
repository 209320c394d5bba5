/// What a field holds. Beyond the storage kind, some kinds carry a domain rule
/// (money is never negative, a day is `YYYY-MM-DD`), checked in one place for every entity.
public enum FieldKind: Sendable, Hashable {
    case text
    case integer
    case real
    case bool
    case date
    case uuid
    case blob
    /// Minor currency units (cents) as an integer: never negative, never a float.
    case money
    /// A measured amount (square feet, hours): a real number, never negative.
    case quantity
    /// A whole number that is never negative (bytes, months, basis points, sort positions).
    case count
    /// A calendar day, `YYYY-MM-DD`, with no time zone: a daily log belongs to a site's day.
    case day
    /// A SHA-256 digest as 64 lowercase hex digits.
    case sha256
    /// Text restricted to the listed values (an enum's raw values).
    case choice([String])

    /// The `FieldValue` case this kind is stored as, by name.
    public var storageKind: String {
        switch self {
        case .text, .day, .sha256, .choice: "text"
        case .integer, .money, .count: "integer"
        case .real, .quantity: "real"
        case .bool: "bool"
        case .date: "date"
        case .uuid: "uuid"
        case .blob: "blob"
        }
    }

    /// Whether a non-null `value` is of this kind's storage kind: `value.kindName == storageKind`,
    /// without comparing strings (it runs for every field of every record checked).
    func holds(_ value: FieldValue) -> Bool {
        switch (self, value) {
        case (.text, .text), (.day, .text), (.sha256, .text), (.choice, .text): true
        case (.integer, .integer), (.money, .integer), (.count, .integer): true
        case (.real, .real), (.quantity, .real): true
        case (.bool, .bool), (.date, .date), (.uuid, .uuid), (.blob, .blob): true
        default: false
        }
    }
}

/// One domain field of an entity: its name (the typed model's property), kind and rules.
public struct FieldDescription: Sendable, Hashable {
    /// The property name, used in records, bundles and the wire.
    public let name: String
    /// What the field holds.
    public let kind: FieldKind
    /// Whether the field may be null.
    public let isOptional: Bool
    /// Whether text must hold more than white space (a title, a name).
    public let isRequiredText: Bool
    /// The value a record the server makes itself starts with (a scope record an operator's seed
    /// names, a creator's membership record); nil for the kind's blank value.
    public let initialValue: FieldValue?

    /// Describes a field; `required` marks text that may not be empty.
    public init(_ name: String, _ kind: FieldKind, optional: Bool = false, required: Bool = false, initially initialValue: FieldValue? = nil) {
        self.name = name
        self.kind = kind
        self.isOptional = optional
        self.isRequiredText = required
        self.initialValue = initialValue
    }
}

/// A reference from one entity to another. Parents drive sync order (a child's create waits for
/// its parent's) and orphan detection (a record whose parent is gone is flagged, not dropped).
public struct ParentRelation: Sendable, Hashable {
    /// The field holding the parent's id.
    public let field: String
    /// The parent's entity type.
    public let entity: EntityType
    /// Whether every record must have this parent.
    public let isRequired: Bool

    /// Describes a parent reference held in `field`.
    public init(_ field: String, _ entity: EntityType, required: Bool = true) {
        self.field = field
        self.entity = entity
        self.isRequired = required
    }
}

/// How a record's data travels: structured data on any connection, media only on a good one.
public enum SyncClass: String, Sendable, Hashable, Codable, CaseIterable {
    case structured
    case media
}

/// The name of a conflict strategy, as the catalog assigns it; `OutpostConflicts` implements them.
public enum ConflictPolicyName: String, Sendable, Hashable, Codable, CaseIterable {
    case serverWins, clientWins, lastWriteWins, fieldMerge, manual, appendOnly
}

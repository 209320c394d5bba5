import OutpostSchema

/// The field-service schema's entities, by name (`EntityCatalog.fieldService` declares them).
extension EntityType {
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

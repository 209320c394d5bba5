import OutpostSchema

// Every model's field table: its catalog fields as key paths, in `EntityCatalog`'s order. A new field
// goes into the catalog, the model and here; `FieldTable` checks the three agree when first used.
extension Opportunity {
    /// The model's catalog fields, for conversions without reflection.
    public static let fieldTable = FieldTable<Opportunity>(\.name, \.customerName, \.address, \.stage, \.estimatedValueCents)
}

extension Project {
    /// The model's catalog fields, for conversions without reflection.
    public static let fieldTable = FieldTable<Project>(\.opportunityID, \.name, \.number, \.address, \.status, \.startDay)
}

extension Member {
    /// The model's catalog fields, for conversions without reflection.
    public static let fieldTable = FieldTable<Member>(\.projectID, \.userID, \.name, \.email, \.role)
}

extension Scope {
    /// The model's catalog fields, for conversions without reflection.
    public static let fieldTable = FieldTable<Scope>(\.projectID, \.name, \.notes, \.sortOrder)
}

extension MeasureSheet {
    /// The model's catalog fields, for conversions without reflection.
    public static let fieldTable = FieldTable<MeasureSheet>(\.scopeID, \.name, \.notes)
}

extension Measure {
    /// The model's catalog fields, for conversions without reflection.
    public static let fieldTable = FieldTable<Measure>(\.measureSheetID, \.label, \.quantity, \.unit, \.sortOrder)
}

extension ScopeItem {
    /// The model's catalog fields, for conversions without reflection.
    public static let fieldTable = FieldTable<ScopeItem>(\.scopeID, \.measureID, \.name, \.quantity, \.unit, \.unitPriceCents, \.sortOrder)
}

extension Discount {
    /// The model's catalog fields, for conversions without reflection.
    public static let fieldTable = FieldTable<Discount>(\.projectID, \.name, \.kind, \.value)
}

extension FinanceOption {
    /// The model's catalog fields, for conversions without reflection.
    public static let fieldTable = FieldTable<FinanceOption>(\.projectID, \.lender, \.termMonths, \.aprBasisPoints, \.downPaymentCents)
}

extension Fee {
    /// The model's catalog fields, for conversions without reflection.
    public static let fieldTable = FieldTable<Fee>(\.projectID, \.name, \.amountCents, \.isTaxable)
}

extension Asset {
    /// The model's catalog fields, for conversions without reflection.
    public static let fieldTable = FieldTable<Asset>(\.projectID, \.name, \.qrCode, \.category, \.location)
}

extension ReferenceDocument {
    /// The model's catalog fields, for conversions without reflection.
    public static let fieldTable = FieldTable<ReferenceDocument>(\.projectID, \.title, \.kind, \.revision, \.fileName, \.byteSize, \.sha256)
}

extension Issue {
    /// The model's catalog fields, for conversions without reflection.
    public static let fieldTable = FieldTable<Issue>(\.projectID, \.title, \.details, \.status, \.priority, \.assigneeID, \.latitude, \.longitude, \.assetID, \.modelElementID)
}

extension Comment {
    /// The model's catalog fields, for conversions without reflection.
    public static let fieldTable = FieldTable<Comment>(\.issueID, \.authorID, \.body)
}

extension DailyLog {
    /// The model's catalog fields, for conversions without reflection.
    public static let fieldTable = FieldTable<DailyLog>(\.projectID, \.authorID, \.day, \.notes, \.weather, \.crew, \.crewSize, \.hours)
}

extension TimeEntry {
    /// The model's catalog fields, for conversions without reflection.
    public static let fieldTable = FieldTable<TimeEntry>(\.projectID, \.memberID, \.kind, \.recordedAt, \.clockInID, \.latitude, \.longitude, \.note)
}

extension MediaAttachment {
    /// The model's catalog fields, for conversions without reflection.
    public static let fieldTable = FieldTable<MediaAttachment>(\.issueID, \.dailyLogID, \.kind, \.fileName, \.contentType, \.byteSize, \.sha256, \.thumbnail, \.capturedAt, \.durationSeconds)
}

import Foundation
import OutpostSchema

/// The field-service schema: the first app declared on Outpost, and the product's own domain.
extension EntityCatalog {
    /// The field-service schema's entities, parents before children.
    public static let fieldServiceEntities: [EntityDescription] = [
        entity(.opportunity, "opportunities", Opportunity.self, policy: .fieldMerge, fields: [
            FieldDescription("name", .text, required: true),
            FieldDescription("customerName", .text, required: true),
            FieldDescription("address", .text),
            FieldDescription("stage", .choice(names(Opportunity.Stage.self))),
            FieldDescription("estimatedValueCents", .money),
        ]),
        entity(.project, "projects", Project.self, policy: .fieldMerge, fields: [
            FieldDescription("opportunityID", .uuid, optional: true),
            FieldDescription("name", .text, required: true),
            FieldDescription("number", .text, optional: true),
            FieldDescription("address", .text),
            FieldDescription("status", .choice(names(Project.Status.self)), initially: .text(Project.Status.active.rawValue)),
            FieldDescription("startDay", .day, optional: true),
        ], parents: [ParentRelation("opportunityID", .opportunity, required: false)]),
        entity(.member, "members", Member.self, policy: .serverWins, fields: [
            FieldDescription("projectID", .uuid),
            FieldDescription("userID", .uuid),
            FieldDescription("name", .text, required: true),
            FieldDescription("email", .text),
            FieldDescription("role", .choice(names(Member.Role.self))),
        ], parents: [ParentRelation("projectID", .project)]),
        entity(.scope, "scopes", Scope.self, policy: .fieldMerge, fields: [
            FieldDescription("projectID", .uuid),
            FieldDescription("name", .text, required: true),
            FieldDescription("notes", .text),
            FieldDescription("sortOrder", .count),
        ], parents: [ParentRelation("projectID", .project)]),
        entity(.measureSheet, "measure_sheets", MeasureSheet.self, policy: .fieldMerge, fields: [
            FieldDescription("scopeID", .uuid),
            FieldDescription("name", .text, required: true),
            FieldDescription("notes", .text),
        ], parents: [ParentRelation("scopeID", .scope)]),
        entity(.measure, "measures", Measure.self, policy: .fieldMerge, fields: [
            FieldDescription("measureSheetID", .uuid),
            FieldDescription("label", .text, required: true),
            FieldDescription("quantity", .quantity),
            FieldDescription("unit", .text, required: true),
            FieldDescription("sortOrder", .count),
        ], parents: [ParentRelation("measureSheetID", .measureSheet)]),
        entity(.scopeItem, "scope_items", ScopeItem.self, policy: .fieldMerge, fields: [
            FieldDescription("scopeID", .uuid),
            FieldDescription("measureID", .uuid, optional: true),
            FieldDescription("name", .text, required: true),
            FieldDescription("quantity", .quantity),
            FieldDescription("unit", .text, required: true),
            FieldDescription("unitPriceCents", .money),
            FieldDescription("sortOrder", .count),
        ], parents: [ParentRelation("scopeID", .scope), ParentRelation("measureID", .measure, required: false)]),
        entity(.discount, "discounts", Discount.self, policy: .serverWins, fields: [
            FieldDescription("projectID", .uuid),
            FieldDescription("name", .text, required: true),
            FieldDescription("kind", .choice(names(Discount.Kind.self))),
            FieldDescription("value", .count),
        ], parents: [ParentRelation("projectID", .project)], rules: [Rules.percentageAtMostWhole]),
        entity(.financeOption, "finance_options", FinanceOption.self, policy: .serverWins, fields: [
            FieldDescription("projectID", .uuid),
            FieldDescription("lender", .text, required: true),
            FieldDescription("termMonths", .count),
            FieldDescription("aprBasisPoints", .count),
            FieldDescription("downPaymentCents", .money),
        ], parents: [ParentRelation("projectID", .project)], rules: [Rules.termAtLeastOneMonth]),
        entity(.fee, "fees", Fee.self, policy: .serverWins, fields: [
            FieldDescription("projectID", .uuid),
            FieldDescription("name", .text, required: true),
            FieldDescription("amountCents", .money),
            FieldDescription("isTaxable", .bool),
        ], parents: [ParentRelation("projectID", .project)]),
        entity(.asset, "assets", Asset.self, policy: .serverWins, fields: [
            FieldDescription("projectID", .uuid),
            FieldDescription("name", .text, required: true),
            FieldDescription("qrCode", .text, required: true),
            FieldDescription("category", .text),
            FieldDescription("location", .text),
        ], parents: [ParentRelation("projectID", .project)]),
        entity(.referenceDocument, "reference_documents", ReferenceDocument.self, policy: .serverWins, fields: [
            FieldDescription("projectID", .uuid),
            FieldDescription("title", .text, required: true),
            FieldDescription("kind", .choice(names(ReferenceDocument.Kind.self))),
            FieldDescription("revision", .text),
            FieldDescription("fileName", .text, required: true),
            FieldDescription("byteSize", .count),
            FieldDescription("sha256", .sha256),
        ], parents: [ParentRelation("projectID", .project)]),
        entity(.issue, "issues", Issue.self, policy: .fieldMerge, fields: [
            FieldDescription("projectID", .uuid),
            FieldDescription("title", .text, required: true),
            FieldDescription("details", .text),
            FieldDescription("status", .choice(names(Issue.Status.self))),
            FieldDescription("priority", .choice(names(Issue.Priority.self))),
            FieldDescription("assigneeID", .uuid, optional: true),
            FieldDescription("latitude", .real, optional: true),
            FieldDescription("longitude", .real, optional: true),
            FieldDescription("assetID", .uuid, optional: true),
            FieldDescription("modelElementID", .text, optional: true),
        ], parents: [
            ParentRelation("projectID", .project),
            ParentRelation("assigneeID", .member, required: false),
            ParentRelation("assetID", .asset, required: false),
        ], rules: [Rules.coordinates]),
        entity(.comment, "comments", Comment.self, policy: .appendOnly, fields: [
            FieldDescription("issueID", .uuid),
            FieldDescription("authorID", .uuid),
            FieldDescription("body", .text, required: true),
        ], parents: [ParentRelation("issueID", .issue), ParentRelation("authorID", .member)]),
        entity(.dailyLog, "daily_logs", DailyLog.self, policy: .fieldMerge, fields: [
            FieldDescription("projectID", .uuid),
            FieldDescription("authorID", .uuid),
            FieldDescription("day", .day),
            FieldDescription("notes", .text),
            FieldDescription("weather", .text),
            FieldDescription("crew", .text),
            FieldDescription("crewSize", .count),
            FieldDescription("hours", .quantity),
        ], parents: [ParentRelation("projectID", .project), ParentRelation("authorID", .member)]),
        entity(.timeEntry, "time_entries", TimeEntry.self, policy: .clientWins, fields: [
            FieldDescription("projectID", .uuid),
            FieldDescription("memberID", .uuid),
            FieldDescription("kind", .choice(names(TimeEntry.Kind.self))),
            FieldDescription("recordedAt", .date),
            FieldDescription("clockInID", .uuid, optional: true),
            FieldDescription("latitude", .real, optional: true),
            FieldDescription("longitude", .real, optional: true),
            FieldDescription("note", .text),
        ], parents: [
            ParentRelation("projectID", .project),
            ParentRelation("memberID", .member),
            ParentRelation("clockInID", .timeEntry, required: false),
        ], rules: [Rules.clockOutPairing, Rules.coordinates]),
        entity(.mediaAttachment, "media_attachments", MediaAttachment.self, syncClass: .media, policy: .appendOnly,
            fields: [
                FieldDescription("issueID", .uuid, optional: true),
                FieldDescription("dailyLogID", .uuid, optional: true),
                FieldDescription("kind", .choice(names(MediaAttachment.Kind.self))),
                FieldDescription("fileName", .text, required: true),
                FieldDescription("contentType", .text, required: true),
                FieldDescription("byteSize", .count),
                FieldDescription("sha256", .sha256),
                FieldDescription("thumbnail", .blob, optional: true),
                FieldDescription("capturedAt", .date),
                FieldDescription("durationSeconds", .quantity, optional: true),
            ],
            parents: [
                ParentRelation("issueID", .issue, required: false),
                ParentRelation("dailyLogID", .dailyLog, required: false),
            ], rules: [Rules.exactlyOneOwner, Rules.thumbnailSize]),
    ]

    /// The field-service schema: its entities, scoped by `project`, with `member` records granting
    /// roles (strongest first: `Member.Role`'s order). Checked when first used; a wrong declaration
    /// stops the process at start with the entity and field at fault.
    public static let fieldService: AppSchema = {
        do {
            return try AppSchema(
                name: "field-service", entities: fieldServiceEntities, scope: .project,
                membership: .init(
                    entity: .member, userField: "userID", roleField: "role", roles: Member.Role.allCases.map(\.rawValue),
                    defaultRole: Member.Role.crew.rawValue),
                // Outpost served this app alone before apps named their schemas.
                adoptsUnnamedDatabases: true)
        } catch {
            preconditionFailure("\(error)")
        }
    }()

    /// Who writes each entity: money (discounts, finance options, fees) and membership are the
    /// office's, the crew records the field; a viewer writes nothing. A comment's and a daily log's
    /// `authorID` and a time entry's `memberID` name the author: the office writes for anyone and a
    /// foreman records his crew's time, and only the office deletes what another member wrote.
    private static func access(of type: EntityType) -> EntityAccess {
        let office: Set<String> = [Member.Role.owner, .projectManager].map(\.rawValue).reduce(into: []) { $0.insert($1) }
        let estimating = office.union([Member.Role.estimator.rawValue])
        let field = estimating.union([Member.Role.foreman, .crew].map(\.rawValue))
        switch type {
        // The project record itself is the office's once it exists: crew that renamed or deleted it left
        // every device with the project gone and its records orphaned (attack 52). Anyone still creates
        // a project: its creator is its owner, whose role no declaration decides.
        case .member, .project: return EntityAccess(writers: office)
        case .discount, .financeOption, .fee: return EntityAccess(writers: estimating)
        case .comment, .dailyLog:
            return EntityAccess(writers: field, authorField: "authorID", writesForOthers: office, deletesOthers: office)
        case .timeEntry:
            return EntityAccess(
                writers: field, authorField: "memberID", writesForOthers: office.union([Member.Role.foreman.rawValue]),
                deletesOthers: office)
        case .opportunity, .scope, .measureSheet, .measure, .scopeItem, .issue, .asset, .referenceDocument,
            .mediaAttachment:
            return EntityAccess(writers: field)
        default:
            // An entity added to the catalog and to no case above: the office's until someone decides,
            // never the crew's by omission.
            return EntityAccess(writers: office)
        }
    }

    private static func entity(
        _ type: EntityType, _ table: String, _ model: any Syncable.Type, syncClass: SyncClass = .structured,
        policy: ConflictPolicyName, fields: [FieldDescription], parents: [ParentRelation] = [],
        rules: [EntityDescription.Rule] = []
    ) -> EntityDescription {
        EntityDescription(
            type, table: table, model: model, syncClass: syncClass, policy: policy, fields: fields, parents: parents,
            access: access(of: type), rules: rules)
    }

    private static func names<Choice: CaseIterable & RawRepresentable>(_: Choice.Type) -> [String]
    where Choice.RawValue == String {
        Choice.allCases.map(\.rawValue)
    }
}

/// Rules that span several fields of one record.
enum Rules {
    static let coordinates: EntityDescription.Rule = { record in
        switch (record["latitude"], record["longitude"]) {
        case (.null, .null):
            return nil
        case (.real(let latitude), .real(let longitude)):
            if !(-90...90).contains(latitude) {
                return record.error(.outOfRange, "latitude", "is \(latitude), must lie within -90…90")
            }
            if !(-180...180).contains(longitude) {
                return record.error(.outOfRange, "longitude", "is \(longitude), must lie within -180…180")
            }
            return nil
        default:
            return record.error(.inconsistentFields, "latitude", "latitude and longitude are given together or not at all")
        }
    }

    static let clockOutPairing: EntityDescription.Rule = { record in
        switch (record["kind"], record["clockInID"]) {
        case (.text(TimeEntry.Kind.clockOut.rawValue), .null):
            return record.error(.inconsistentFields, "clockInID", "a clock-out names the clock-in it closes")
        case (.text(TimeEntry.Kind.clockIn.rawValue), .uuid):
            return record.error(.inconsistentFields, "clockInID", "only a clock-out names a clock-in")
        case (_, .uuid(let clockIn)) where clockIn == record.id:
            return record.error(.inconsistentFields, "clockInID", "a clock-out cannot close itself")
        default:
            return nil
        }
    }

    static let percentageAtMostWhole: EntityDescription.Rule = { record in
        guard case .text(Discount.Kind.percentage.rawValue) = record["kind"], case .integer(let points) = record["value"],
            points > 10_000
        else { return nil }
        return record.error(.outOfRange, "value", "is \(points) basis points, a percentage is at most 10,000 (100 %)")
    }

    static let termAtLeastOneMonth: EntityDescription.Rule = { record in
        guard case .integer(let months) = record["termMonths"], months < 1 else { return nil }
        return record.error(.outOfRange, "termMonths", "is \(months), a loan runs at least one month")
    }

    static let exactlyOneOwner: EntityDescription.Rule = { record in
        let owners = [record["issueID"], record["dailyLogID"]].filter { !$0.isNull }.count
        guard owners != 1 else { return nil }
        return record.error(.inconsistentFields, "issueID", "an attachment belongs to exactly one issue or daily log")
    }

    static let thumbnailSize: EntityDescription.Rule = { record in
        guard case .blob(let data) = record["thumbnail"], data.count > MediaAttachment.maximumThumbnailBytes else {
            return nil
        }
        return record.error(
            .outOfRange, "thumbnail",
            "is \(data.count) bytes, inline thumbnails are at most \(MediaAttachment.maximumThumbnailBytes)")
    }
}

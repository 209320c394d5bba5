@testable import OutpostModels
@testable import OutpostSchema
import Foundation
import OutpostFieldServiceTesting
import Testing

/// An app's schema is checked whole when made: each wrong declaration is refused with the entity and
/// field at fault, and the field-service schema declares the product's access rule.
@Suite(.fieldService) struct AppSchemaTests {
    static let site = EntityType(declaring: "site"), crew = EntityType(declaring: "crew")
    static let job = EntityType(declaring: "job"), note = EntityType(declaring: "note")
    static let roles = ["boss", "hand"]

    static func entity(
        _ type: EntityType, table: String? = nil, fields: [FieldDescription] = [], parents: [ParentRelation] = [],
        access: EntityAccess = EntityAccess(writers: ["boss", "hand"])
    ) -> EntityDescription {
        EntityDescription(
            type, table: table ?? type.rawValue + "s", model: Issue.self, policy: .fieldMerge, fields: fields,
            parents: parents, access: access)
    }

    /// A small valid schema: sites scope jobs, crew records grant roles, notes hang from jobs.
    static func entities() -> [EntityDescription] {
        [
            entity(site, fields: [FieldDescription("name", .text)]),
            entity(crew, fields: [FieldDescription("siteID", .uuid), FieldDescription("userID", .uuid), FieldDescription("role", .text)],
                   parents: [ParentRelation("siteID", site)], access: EntityAccess(writers: ["boss"])),
            entity(job, fields: [FieldDescription("siteID", .uuid), FieldDescription("title", .text)], parents: [ParentRelation("siteID", site)]),
            entity(note, fields: [FieldDescription("jobID", .uuid), FieldDescription("authorID", .uuid), FieldDescription("body", .text)],
                   parents: [ParentRelation("jobID", job), ParentRelation("authorID", crew)],
                   access: EntityAccess(writers: ["boss", "hand"], authorField: "authorID", writesForOthers: ["boss"], deletesOthers: ["boss"])),
        ]
    }

    static func make(_ entities: [EntityDescription], scope: EntityType = site, membership: AppSchema.Membership? = nil) throws(ModelError) -> AppSchema {
        try AppSchema(
            name: "jobs", entities: entities, scope: scope,
            membership: membership ?? .init(entity: crew, userField: "userID", roleField: "role", roles: roles))
    }

    @Test func aConsistentSchemaIsMade() throws {
        let schema = try Self.make(Self.entities())
        #expect(schema.entity(Self.note)?.access.authorField == "authorID")
    }

    /// Each case: the entities changed one way, and the entity and field the error must name.
    struct WrongDeclaration: Sendable, CustomTestStringConvertible {
        let name: String
        let change: @Sendable (inout [EntityDescription]) -> Void
        let entity: String
        let field: String?
        init(_ item: (String, @Sendable (inout [EntityDescription]) -> Void, String, String?)) {
            (name, change, entity, field) = item
        }
        var testDescription: String { name }
    }

    @Test(arguments: [
        ("an undeclared parent", { @Sendable (e: inout [EntityDescription]) in
            e[2] = entity(job, fields: [FieldDescription("siteID", .uuid), FieldDescription("ownerID", .uuid)],
                          parents: [ParentRelation("siteID", site), ParentRelation("ownerID", EntityType(declaring: "owner"))]) }, "job", "ownerID"),
        ("a parent listed after its child", { @Sendable (e: inout [EntityDescription]) in e.swapAt(2, 3) }, "note", "jobID"),
        ("a required parent of its own entity", { @Sendable (e: inout [EntityDescription]) in
            e[2] = entity(job, fields: [FieldDescription("siteID", .uuid), FieldDescription("previousID", .uuid)],
                          parents: [ParentRelation("siteID", site), ParentRelation("previousID", job)]) }, "job", "previousID"),
        ("a parent named by no uuid field", { @Sendable (e: inout [EntityDescription]) in
            e[2] = entity(job, fields: [FieldDescription("siteID", .text)], parents: [ParentRelation("siteID", site)]) }, "job", "siteID"),
        ("two entities on one table", { @Sendable (e: inout [EntityDescription]) in
            e[3] = entity(note, table: "jobs", fields: [FieldDescription("jobID", .uuid)], parents: [ParentRelation("jobID", job)]) }, "note", nil),
        ("two entities on one table, told apart by case only", { @Sendable (e: inout [EntityDescription]) in
            e[3] = entity(note, table: "Jobs", fields: [FieldDescription("jobID", .uuid)], parents: [ParentRelation("jobID", job)]) }, "note", nil),
        ("an entity declared twice", { @Sendable (e: inout [EntityDescription]) in e.append(e[2]) }, "job", nil),
        ("a field declared twice", { @Sendable (e: inout [EntityDescription]) in
            e[0] = entity(site, fields: [FieldDescription("name", .text), FieldDescription("name", .text)]) }, "site", "name"),
        ("an author field that is no reference to the membership", { @Sendable (e: inout [EntityDescription]) in
            e[3] = entity(note, fields: [FieldDescription("jobID", .uuid), FieldDescription("authorID", .uuid)],
                          parents: [ParentRelation("jobID", job)], access: EntityAccess(writers: ["hand"], authorField: "authorID")) }, "note", "authorID"),
        ("a role the membership does not declare", { @Sendable (e: inout [EntityDescription]) in
            e[2] = entity(job, fields: [FieldDescription("siteID", .uuid)], parents: [ParentRelation("siteID", site)],
                          access: EntityAccess(writers: ["owner"])) }, "job", nil),
        ("an entity named as the bundle format's own", { @Sendable (e: inout [EntityDescription]) in
            e.append(entity(EntityType(declaring: "file"), fields: [FieldDescription("siteID", .uuid)], parents: [ParentRelation("siteID", site)])) }, "file", nil),
        ("more fields than the wire reads in a record", { @Sendable (e: inout [EntityDescription]) in
            e[0] = entity(site, fields: (0...JSONReader.maximumFields).map { FieldDescription("f\($0)", .text) }) }, "site", nil),
        ("a field whose name needs escaping", { @Sendable (e: inout [EntityDescription]) in
            e[0] = entity(site, fields: [FieldDescription("R&D", .text)]) }, "site", "R&D"),
        ("an entity that reaches the scope by no parent", { @Sendable (e: inout [EntityDescription]) in
            e.append(entity(EntityType(declaring: "tool"), fields: [FieldDescription("name", .text)])) }, "tool", nil),
        ("a membership that names no scope record", { @Sendable (e: inout [EntityDescription]) in
            e[1] = entity(crew, fields: [FieldDescription("siteID", .uuid), FieldDescription("userID", .uuid), FieldDescription("role", .text)],
                          parents: [ParentRelation("siteID", site, required: false)], access: EntityAccess(writers: ["boss"])) }, "crew", nil),
        ("a media entity without its file's digest", { @Sendable (e: inout [EntityDescription]) in
            e.append(EntityDescription(
                EntityType(declaring: "video"), table: "videos", model: Issue.self, syncClass: .media, policy: .appendOnly,
                fields: [FieldDescription("jobID", .uuid), FieldDescription("fileName", .text), FieldDescription("contentType", .text),
                         FieldDescription("byteSize", .count)],
                parents: [ParentRelation("jobID", job)], access: EntityAccess(writers: ["hand"]))) }, "video", "sha256"),
    ].map(WrongDeclaration.init))
    func aWrongDeclarationIsRefusedNamingWhere(_ wrong: WrongDeclaration) {
        let (name, entity, field) = (wrong.name, wrong.entity, wrong.field)
        var entities = Self.entities()
        wrong.change(&entities)
        #expect(throws: ModelError.self, "\(name)") { try Self.make(entities) }
        do {
            _ = try Self.make(entities)
        } catch {
            #expect(error.code == .invalidSchema && error.entity.rawValue == entity && error.field == field, "\(name): \(error)")
            #expect(error.description.contains("schema 'jobs'"), "\(name): \(error)")
        }
    }

    @Test func aMembershipThatIsNotDeclaredIsRefused() {
        #expect(throws: ModelError.self) {
            try Self.make(Self.entities(), membership: .init(entity: Self.crew, userField: "personID", roleField: "role", roles: Self.roles))
        }
        #expect(throws: ModelError.self) {
            try Self.make(Self.entities(), membership: .init(entity: Self.crew, userField: "userID", roleField: "role", roles: ["boss", "boss"]))
        }
        #expect(throws: ModelError.self) { try Self.make(Self.entities(), scope: EntityType(declaring: "yard")) }
        // The user field is a uuid; the role field text, or a choice of exactly the roles.
        #expect(throws: ModelError.self) {
            try Self.make(Self.entities(), membership: .init(entity: Self.crew, userField: "role", roleField: "role", roles: Self.roles))
        }
        #expect(throws: ModelError.self) {
            try Self.make(Self.entities(), membership: .init(entity: Self.crew, userField: "userID", roleField: "siteID", roles: Self.roles))
        }
    }

    @Test func aDefaultRoleIsOneOfTheRoles() throws {
        #expect(throws: ModelError.self) {
            try Self.make(Self.entities(), membership: .init(entity: Self.crew, userField: "userID", roleField: "role", roles: Self.roles, defaultRole: "owner"))
        }
        let schema = try Self.make(Self.entities(), membership: .init(entity: Self.crew, userField: "userID", roleField: "role", roles: Self.roles, defaultRole: "hand"))
        #expect(schema.membershipScopeField == "siteID")
    }

    /// One schema per process: the one in use installs again as a no-op; another is refused naming both,
    /// and the catalog still answers with the schema in use.
    @Test func aProcessRunsOnOneSchema() throws {
        try EntityCatalog.install(EntityCatalog.fieldService)
        let jobs = try Self.make(Self.entities())
        do {
            try EntityCatalog.install(jobs)
            Testing.Issue.record("a second schema was installed")
        } catch {
            #expect(error.code == .invalidSchema)
            #expect(error.description.contains("'jobs'") && error.description.contains("'field-service'"), "\(error)")
        }
        #expect(EntityCatalog.schema.name == "field-service")
        #expect(EntityType(rawValue: "job") == nil && EntityType(rawValue: "project") == .project)
    }

    /// The field-service schema declares the product's rule, as the server README's table gives it
    /// (written out here by hand, not derived from the declaration).
    @Test func theFieldServiceSchemaDeclaresTheProductsAccessRule() {
        let money: Set<EntityType> = [.discount, .financeOption, .fee]
        for description in EntityCatalog.schema.entities {
            let type = description.type
            for role in Member.Role.allCases {
                let expected: Bool = switch role {
                case .owner, .projectManager: true
                // The project record once it exists (its creator owns it, whatever the declaration).
                case .estimator: type != .member && type != .project
                case .foreman, .crew: type != .member && type != .project && !money.contains(type)
                case .viewer: false
                }
                #expect(description.access.writers.contains(role.rawValue) == expected, "\(role) writes \(type)")
            }
        }
        #expect(EntityCatalog.schema.entities.compactMap { d in d.access.authorField.map { "\(d.type).\($0)" } }.sorted()
            == ["comment.authorID", "dailyLog.authorID", "timeEntry.memberID"])
        #expect(EntityType.timeEntry.description.access.writesForOthers.contains("foreman"))
        #expect(!EntityType.comment.description.access.writesForOthers.contains("foreman"))
        #expect(EntityCatalog.schema.membership.roles.first == "owner" && EntityCatalog.schema.scope == .project)
    }
}

/// A model that does not match its declaration is named, field and all, for `EntityCatalog.install` to
/// refuse the schema at start (a field table used to stop the process at its first use instead).
@Suite(.fieldService) struct ModelDeclarationTests {
    struct CommentWithANumberBody: Syncable {
        static let entityType = EntityType.comment
        static let fieldTable = FieldTable<CommentWithANumberBody>(\.issueID, \.authorID, \.body)
        var id = UUID()
        var sync = SyncMetadata(createdAt: Date(timeIntervalSince1970: 0))
        var issueID = UUID(), authorID = UUID()
        var body = 0
    }

    struct CommentMissingAField: Syncable {
        static let entityType = EntityType.comment
        static let fieldTable = FieldTable<CommentMissingAField>(\.issueID, \.body)
        var id = UUID()
        var sync = SyncMetadata(createdAt: Date(timeIntervalSince1970: 0))
        var issueID = UUID()
        var body = ""
    }

    @Test func aMistypedFieldIsNamed() throws {
        let problem = try #require(CommentWithANumberBody.fieldTableProblem)
        #expect(problem.field == "body" && problem.message.contains("Int"), "\(problem)")
    }

    @Test func aMissingFieldIsNamed() throws {
        let problem = try #require(CommentMissingAField.fieldTableProblem)
        #expect(problem.message.contains("lists 2 key paths, the schema 3 fields"), "\(problem)")
    }

    @Test func everyFieldServiceModelMatchesItsDeclaration() {
        for description in EntityCatalog.fieldService.entities {
            #expect(description.modelType.fieldTableProblem == nil, "\(description.type)")
            #expect(description.modelType.entityType == description.type)
        }
    }
}

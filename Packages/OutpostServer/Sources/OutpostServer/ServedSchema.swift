import Foundation
import OutpostSchema

/// What the server reads from the schema it serves (`EntityCatalog.schema`): the entity that scopes
/// access and sync, the membership entity and its fields, the roles, and the media entities. The
/// server names no entity of its own; a field-service `project` is just this schema's scope.
struct ServedSchema: Sendable {
    /// The scope entity (the field-service schema's `project`).
    let scope: EntityType
    /// The membership entity (`member`).
    let membership: EntityType
    /// The membership's fields naming the user, the role and the scope record.
    let userField: String, roleField: String, scopeField: String
    /// Every role, strongest first.
    let roles: [String]
    /// The role of a member added without one; nil when one must be given.
    let defaultRole: String?
    /// The entities whose records carry a file.
    let media: Set<EntityType>
    /// The scope entity's references to records above it (a project's opportunity): such a record
    /// belongs to no scope until a scope record names it, and then to that one.
    let scopeParents: [ParentRelation]
    private let aboveScope: Set<EntityType>

    /// The schema this process serves: read once, at the first request or start (the catalog then
    /// holds that schema for the process's life).
    static let current = ServedSchema(EntityCatalog.schema)

    init(_ schema: AppSchema) {
        scope = schema.scope
        membership = schema.membership.entity
        userField = schema.membership.userField
        roleField = schema.membership.roleField
        scopeField = schema.membershipScopeField
        roles = schema.membership.roles
        defaultRole = schema.membership.defaultRole
        media = Set(schema.mediaEntities)
        scopeParents = schema.scopeParents
        aboveScope = Set(scopeParents.map(\.entity))
    }

    /// Why this process may not serve a database that names `recorded` as its app (nil: it may). A
    /// database that names none but holds records is from before servers named their app: only a schema
    /// that adopts such databases (`AppSchema.adoptsUnnamedDatabases`) serves it. The answer names both
    /// apps and changes nothing.
    static func refusal(recorded: String?, holdsRecords: Bool, path: String? = nil) -> ServerError? {
        let serving = EntityCatalog.schema
        if let recorded, recorded != serving.name {
            return ServerError(
                .invalidConfiguration,
                message: "this server database belongs to the app '\(recorded)', not to '\(serving.name)': serve it with that app's schema",
                path: path)
        }
        guard recorded == nil, holdsRecords, !serving.adoptsUnnamedDatabases else { return nil }
        return ServerError(
            .invalidConfiguration,
            message: "this server database was made before servers named their app, for the app that adopts such databases (AppSchema.adoptsUnnamedDatabases), not for '\(serving.name)'",
            path: path)
    }

    /// The strongest role: the creator of a scope record has it.
    var strongestRole: String { roles[0] }

    /// Whether `entity` stands above the scope (belongs to none until a scope record names it).
    func isAboveScope(_ entity: EntityType) -> Bool { aboveScope.contains(entity) }

    /// The rank of `role`, strongest 0; nil for a role the schema does not declare.
    func rank(of role: String) -> Int? { roles.firstIndex(of: role) }

    /// A new record's fields: those `given` that the entity declares, and for every other field its
    /// declared initial value or the value a blank record starts with (null where optional, empty
    /// text, the first choice, zero, false, `now` for a date, today for a day).
    func blankFields(of entity: EntityType, given: [String: FieldValue], now: Date) -> [String: FieldValue] {
        var fields: [String: FieldValue] = [:]
        for field in entity.description.fields {
            if let value = given[field.name] ?? field.initialValue {
                fields[field.name] = value
                continue
            }
            if field.isOptional {
                fields[field.name] = .null
                continue
            }
            fields[field.name] = switch field.kind {
            case .text, .sha256: .text("")
            case .choice(let values): .text(values.first ?? "")
            case .integer, .money, .count: .integer(0)
            case .real, .quantity: .real(0)
            case .bool: .bool(false)
            case .date: .date(now)
            case .day: .text(Self.day(of: now))
            case .blob: .blob(Data())
            case .uuid: .null
            }
        }
        return fields
    }

    /// A membership record's fields: the scope, the user, the role, and `name`/`email` where the
    /// entity declares them.
    func membershipFields(scope id: UUID, user: UUID, role: String, name: String, email: String?, now: Date)
        -> [String: FieldValue]
    {
        blankFields(of: membership, given: [
            scopeField: .uuid(id), userField: .uuid(user), roleField: .text(role), "name": .text(name),
            "email": .text(email ?? ""),
        ], now: now)
    }

    private static func day(of date: Date) -> String {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        let parts = calendar.dateComponents([.year, .month, .day], from: date)
        return String(format: "%04d-%02d-%02d", parts.year ?? 1970, parts.month ?? 1, parts.day ?? 1)
    }
}

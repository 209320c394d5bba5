/// Who may write an entity's records, declared with the entity rather than coded in the server: the
/// server checks each mutation against it, and a role the declaration does not name gets nothing
/// (access fails closed).
public struct EntityAccess: Sendable, Hashable {
    /// The roles that may create, change and delete records of the entity.
    public var writers: Set<String>
    /// The field naming a record's author (a reference to the membership entity), when records have
    /// one: a caller writes them as their own member record unless their role is in `writesForOthers`,
    /// and only their author or a role in `deletesOthers` deletes them.
    public var authorField: String?
    /// The roles that may write records naming another member as author, and change such records.
    public var writesForOthers: Set<String>
    /// The roles that may delete a record another member wrote.
    public var deletesOthers: Set<String>

    /// Declares who writes an entity; the author rules apply only with an `authorField`.
    public init(
        writers: Set<String>, authorField: String? = nil, writesForOthers: Set<String> = [], deletesOthers: Set<String> = []
    ) {
        self.writers = writers
        self.authorField = authorField
        self.writesForOthers = writesForOthers
        self.deletesOthers = deletesOthers
    }
}

/// An app's schema: its entities, the entity that scopes access and sync, and the membership entity
/// whose role field grants access. Checked whole when made, so a wrong declaration is refused at start
/// with an error naming the entity and field, never found by a failing sync.
public struct AppSchema: Sendable {
    /// How membership is declared: the entity whose records grant a user a role in a scope.
    public struct Membership: Sendable, Hashable {
        /// The membership entity (a field-service app's `member`).
        public var entity: EntityType
        /// Its field naming the user.
        public var userField: String
        /// Its field naming the role, one of `roles`.
        public var roleField: String
        /// Every role, strongest first: a user named by several live member records has the strongest,
        /// and the creator of a scope record gets the first.
        public var roles: [String]
        /// The role a member added without one gets (the operator's seed and commands); nil when a
        /// role must always be given.
        public var defaultRole: String?

        /// Declares the membership entity and its roles, strongest first.
        public init(entity: EntityType, userField: String, roleField: String, roles: [String], defaultRole: String? = nil) {
            self.entity = entity
            self.userField = userField
            self.roleField = roleField
            self.roles = roles
            self.defaultRole = defaultRole
        }
    }

    /// The app's name: it tells one app's database from another's.
    public let name: String
    /// Every entity, parents before children.
    public let entities: [EntityDescription]
    /// The entity that scopes access and sync (a field-service app's `project`).
    public let scope: EntityType
    /// The membership entity and its roles.
    public let membership: Membership
    /// Whether a database Outpost made before apps named their schemas is this app's: a local file
    /// with a migration ledger and no app's name, a server database holding records and no app's
    /// name. Outpost served one app then, so only that app (the field-service schema) says yes; for any
    /// other such a database is refused, unchanged, rather than adopted by a guess.
    public let adoptsUnnamedDatabases: Bool

    /// Checks and makes a schema. Refused, with the entity and field at fault: two entities with one
    /// name or on one table; a field declared twice; a parent that is not declared, or not a field of
    /// the entity, or not a reference; a cycle of required parents; an entity listed before a parent;
    /// an entity that reaches the scope by no chain of parents (nor is named by the scope); a
    /// membership or author field that is not a field of the right kind; a role no membership declares.
    public init(
        name: String, entities: [EntityDescription], scope: EntityType, membership: Membership,
        adoptsUnnamedDatabases: Bool = false
    ) throws(ModelError) {
        self.name = name
        self.entities = entities
        self.scope = scope
        self.membership = membership
        self.adoptsUnnamedDatabases = adoptsUnnamedDatabases
        try Self.check(self)
    }

    /// The description of `type`, if the schema declares it.
    public func entity(_ type: EntityType) -> EntityDescription? {
        entities.first { $0.type == type }
    }

    /// The membership entity's field naming its scope record (a required parent reference to the scope).
    public var membershipScopeField: String {
        // `check` made sure there is one.
        entity(membership.entity)?.parents.first { $0.entity == scope && $0.isRequired }?.field ?? ""
    }

    /// The scope entity's references to records above it (a project's opportunity): such a record
    /// belongs to no scope until a scope record names it, and then travels with that scope.
    public var scopeParents: [ParentRelation] {
        entity(scope)?.parents.filter { $0.entity != scope } ?? []
    }

    /// The entities whose records carry a file (sync class media).
    public var mediaEntities: [EntityType] {
        entities.filter { $0.syncClass == .media }.map(\.type)
    }

    /// The fields naming a file: its name, size and digest, which bundles ship files by.
    static let fileFields: [(name: String, kind: FieldKind)] = [("fileName", .text), ("byteSize", .count), ("sha256", .sha256)]

    /// The fields every media entity declares: a file's, and its type, which uploads and downloads read.
    static let mediaFields = fileFields + [("contentType", .text)]

    /// Whether `other` declares what this schema declares: the same name, entities, tables, fields and
    /// kinds, parents, policies and access (rules are closures and cannot be compared).
    func isSameDeclaration(as other: AppSchema) -> Bool {
        guard name == other.name, scope == other.scope, membership == other.membership,
            adoptsUnnamedDatabases == other.adoptsUnnamedDatabases, entities.count == other.entities.count
        else { return false }
        return zip(entities, other.entities).allSatisfy { mine, theirs in
            mine.type == theirs.type && mine.table == theirs.table && mine.syncClass == theirs.syncClass
                && mine.defaultPolicy == theirs.defaultPolicy && mine.access == theirs.access
                && mine.fields.map(\.name) == theirs.fields.map(\.name) && mine.fields.map(\.kind) == theirs.fields.map(\.kind)
                && mine.parents.map(\.field) == theirs.parents.map(\.field)
        }
    }

    /// The names the bundle format itself uses for elements, types and definitions.
    static let reservedNames: Set<String> = [
        "bundle", "files", "file", "records", "sync", "uuid", "timestamp", "day", "sha256", "text", "filePath", "count",
        "quantity", "checkpoint", "checkpoints",
    ]

    /// A name made of an ASCII letter then ASCII letters and digits: valid as an XML name, a JSON key and
    /// (snake-cased) an SQL column, with nothing to escape anywhere.
    static func isXMLName(_ name: String) -> Bool {
        guard let first = name.unicodeScalars.first, first.isASCII, first.properties.isAlphabetic else { return false }
        return name.unicodeScalars.allSatisfy { $0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0)) }
    }

    private static func check(_ schema: AppSchema) throws(ModelError) {
        func fail(_ entity: EntityType, _ field: String?, _ message: String) -> ModelError {
            ModelError(.invalidSchema, entity: entity, field: field, message: "schema '\(schema.name)': \(message)")
        }
        var byName: [EntityType: EntityDescription] = [:]
        var tables: [String: EntityType] = [:]
        for description in schema.entities {
            guard byName.updateValue(description, forKey: description.type) == nil else {
                throw fail(description.type, nil, "the entity is declared twice")
            }
            // Names become XML elements and JSON Schema definitions beside the bundle format's own.
            guard isXMLName(description.type.rawValue), !reservedNames.contains(description.type.rawValue) else {
                throw fail(description.type, nil, "an entity is named by letters and digits, and not one of the bundle format's own names (\(reservedNames.sorted().joined(separator: ", ")))")
            }
            for field in description.fields where !isXMLName(field.name) {
                throw fail(description.type, field.name, "a field is named by letters and digits")
            }
            // SQLite compares table names without case: `Jobs` and `jobs` are one table.
            if let other = tables.updateValue(description.type, forKey: description.table.lowercased()) {
                throw fail(description.type, nil, "its table '\(description.table)' is \(other)'s too")
            }
            // The wire refuses a record of more (`JSONReader.maximumFields`).
            guard description.fields.count <= JSONReader.maximumFields else {
                throw fail(description.type, nil, "an entity declares at most \(JSONReader.maximumFields) fields")
            }
            var names: Set<String> = []
            for field in description.fields where !names.insert(field.name).inserted {
                throw fail(description.type, field.name, "the field is declared twice")
            }
        }
        let declaredRoles = Set(schema.membership.roles)
        guard let scope = byName[schema.scope] else { throw fail(schema.scope, nil, "the scope is not a declared entity") }
        guard let member = byName[schema.membership.entity] else {
            throw fail(schema.membership.entity, nil, "the membership entity is not declared")
        }
        guard member.field(named: schema.membership.userField)?.kind == .uuid else {
            throw fail(member.type, schema.membership.userField, "the membership's user field is a uuid field of the membership entity")
        }
        switch member.field(named: schema.membership.roleField)?.kind {
        case .text?: break
        case .choice(let values)? where Set(values) == Set(schema.membership.roles): break
        case .choice?:
            throw fail(member.type, schema.membership.roleField, "the role field's choices are not the roles the membership lists")
        default:
            throw fail(member.type, schema.membership.roleField, "the membership's role field is a text or choice field of the membership entity")
        }
        if schema.membership.roles.isEmpty || declaredRoles.count != schema.membership.roles.count {
            throw fail(member.type, schema.membership.roleField, "roles must be listed, each once")
        }
        if let role = schema.membership.defaultRole, !declaredRoles.contains(role) {
            throw fail(member.type, schema.membership.roleField, "the default role '\(role)' is not one of the roles")
        }
        // A membership record grants a role in one scope record: it names it, and cannot be without it.
        guard member.parents.contains(where: { $0.entity == scope.type && $0.isRequired }) else {
            throw fail(member.type, nil, "the membership entity names its \(scope.type) by a required parent reference")
        }
        // Uploads, downloads and bundles read a media record's file name, type, size and digest.
        for description in schema.entities where description.syncClass == .media {
            for (name, kind) in mediaFields where description.field(named: name)?.kind != kind {
                throw fail(description.type, name, "a media entity declares '\(name)' as a \(kind) field")
            }
        }
        var position: [EntityType: Int] = [:]
        for (index, description) in schema.entities.enumerated() {
            position[description.type] = index
            for parent in description.parents {
                guard let declared = byName[parent.entity] else {
                    throw fail(description.type, parent.field, "its parent \(parent.entity) is not a declared entity")
                }
                guard let field = description.field(named: parent.field), field.kind == .uuid else {
                    throw fail(description.type, parent.field, "a parent is named by a uuid field of the entity")
                }
                if declared.type == description.type, parent.isRequired {
                    throw fail(description.type, parent.field, "a required parent of its own entity is a cycle no record can start")
                }
                if declared.type != description.type, position[declared.type] == nil {
                    throw fail(
                        description.type, parent.field,
                        "its parent \(declared.type) is listed after it: list parents first (a cycle of parents cannot be)")
                }
            }
            let access = description.access
            for role in access.writers.union(access.writesForOthers).union(access.deletesOthers) where !declaredRoles.contains(role) {
                throw fail(description.type, nil, "role '\(role)' is not one the membership declares")
            }
            if let author = access.authorField {
                guard description.parents.contains(where: { $0.field == author && $0.entity == member.type }) else {
                    throw fail(description.type, author, "an author field is a parent reference to \(member.type)")
                }
            }
        }
        // Every entity reaches the scope: it is the scope, the scope names it, or a parent reaches it.
        var reaching: Set<EntityType> = [scope.type]
        reaching.formUnion(scope.parents.map(\.entity))
        for description in schema.entities where !reaching.contains(description.type) {
            // Parents come first, so one pass in order settles every entity.
            if description.parents.contains(where: { reaching.contains($0.entity) && $0.entity != description.type }) {
                reaching.insert(description.type)
            } else {
                throw fail(description.type, nil, "it reaches the scope \(scope.type) by no chain of parents")
            }
        }
    }
}

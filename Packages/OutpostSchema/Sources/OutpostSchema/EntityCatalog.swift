import Foundation

/// Everything the toolkit needs to know about one entity type: where it is stored, what its fields
/// are, which records it depends on, how it syncs and how its conflicts are settled by default.
public struct EntityDescription: Sendable {
    /// A domain rule that spans fields; nil when the record keeps it.
    public typealias Rule = @Sendable (EntityRecord) -> ModelError?

    /// The entity type described.
    public var type: EntityType { storage.type }
    /// The local table's name.
    public var table: String { storage.table }
    /// The typed model.
    public var modelType: any Syncable.Type { storage.modelType }
    /// The domain fields, in the order tables and bundles list them.
    public var fields: [FieldDescription] { storage.fields }
    /// References to other records; a child's create is sent only after its parents'.
    public var parents: [ParentRelation] { storage.parents }
    /// Whether the record's payload is structured data or media.
    public var syncClass: SyncClass { storage.syncClass }
    /// The conflict strategy used unless the app chooses another.
    public var defaultPolicy: ConflictPolicyName { storage.defaultPolicy }
    /// Who may write the entity's records.
    public var access: EntityAccess { storage.access }
    var rules: [Rule] { storage.rules }

    /// The description's values, shared by its copies: every record's conversion, validation and
    /// write looks its entity's description up, and a copy of ten stored properties retained and
    /// released each of them (4% of a pulled record's apply, `perf`).
    private let storage: Storage

    private final class Storage: Sendable {
        let type: EntityType
        let table: String
        let modelType: any Syncable.Type
        let fields: [FieldDescription]
        let parents: [ParentRelation]
        let syncClass: SyncClass
        let defaultPolicy: ConflictPolicyName
        let access: EntityAccess
        let rules: [Rule]
        /// `fields` by name: conversions and validation look fields up once per value.
        let fieldsByName: [String: FieldDescription]

        init(
            type: EntityType, table: String, modelType: any Syncable.Type, fields: [FieldDescription],
            parents: [ParentRelation], syncClass: SyncClass, defaultPolicy: ConflictPolicyName, access: EntityAccess,
            rules: [Rule]
        ) {
            self.access = access
            self.type = type
            self.table = table
            self.modelType = modelType
            self.fields = fields
            self.parents = parents
            self.syncClass = syncClass
            self.defaultPolicy = defaultPolicy
            self.rules = rules
            // The first of a name that is declared twice: `AppSchema` refuses the declaration, naming it.
            self.fieldsByName = Dictionary(fields.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
        }
    }

    /// Declares an entity of an app's schema (`AppSchema` checks the whole).
    public init(
        _ type: EntityType, table: String, model: any Syncable.Type, syncClass: SyncClass = .structured,
        policy: ConflictPolicyName, fields: [FieldDescription], parents: [ParentRelation] = [], access: EntityAccess,
        rules: [Rule] = []
    ) {
        self.init(
            type: type, table: table, modelType: model, fields: fields, parents: parents, syncClass: syncClass,
            defaultPolicy: policy, access: access, rules: rules)
    }

    init(
        type: EntityType, table: String, modelType: any Syncable.Type, fields: [FieldDescription],
        parents: [ParentRelation], syncClass: SyncClass, defaultPolicy: ConflictPolicyName, access: EntityAccess,
        rules: [Rule]
    ) {
        storage = Storage(
            type: type, table: table, modelType: modelType, fields: fields, parents: parents, syncClass: syncClass,
            defaultPolicy: defaultPolicy, access: access, rules: rules)
    }

    /// The field called `name`, if the entity has one.
    public func field(named name: String) -> FieldDescription? {
        storage.fieldsByName[name]
    }

    /// Whether the entity's records name a file by `fileName`, `byteSize` and `sha256` (every media
    /// entity does; a structured one may): a zip bundle ships such files.
    public var namesFile: Bool {
        AppSchema.fileFields.allSatisfy { field(named: $0.name)?.kind == $0.kind }
    }

    /// The parent entity types, each once, in declaration order.
    public var parentEntities: [EntityType] {
        var seen: Set<EntityType> = []
        return parents.map(\.entity).filter { seen.insert($0).inserted }
    }
}

/// The schema this process runs on.
///
/// An app installs its schema once, at start, before it opens a store or serves (`install(_:)`; the
/// store's and the server's initializers that take a schema do it). One schema per process: entity
/// names are process-wide values, and a record read under one schema cannot be reinterpreted under
/// another, so a second, different schema is refused rather than swapped in. The toolkit serves no
/// schema of its own: a lookup before any schema is installed stops the process with a message saying
/// so (a programming error, like an unknown entity's name forced through), never guesses an app.
public enum EntityCatalog {
    /// Installs `schema` as the one this process runs on. Installing the schema in use again does
    /// nothing; any other schema, once one is installed, is refused with
    /// `invalidSchema` naming both, and the schema in use stays.
    public static func install(_ schema: AppSchema) throws(ModelError) {
        let outcome: (error: ModelError?, installed: Bool) = state.withLock { installed in
            if let current = installed {
                return current.schema.isSameDeclaration(as: schema) ? (nil, false) : (ModelError(
                    .invalidSchema, entity: schema.scope, field: nil,
                    message: "schema '\(schema.name)' cannot be installed: this process already runs on schema '\(current.schema.name)' (one schema per process)"), false)
            }
            installed = Installed(schema)
            return (nil, true)
        }
        if let error = outcome.error { throw error }
        guard outcome.installed else { return }
        // Every model against its declaration, now that the catalog answers for it: a model of another
        // entity, or a field table with a missing, extra or mistyped key path, refuses the schema here,
        // at start, naming the entity and field (and the process runs on no schema yet).
        for description in schema.entities {
            let model = description.modelType
            var problem: (field: String?, message: String)?
            if model.entityType != description.type {
                problem = (nil, "its model \(model) models \(model.entityType), not \(description.type)")
            } else {
                problem = model.fieldTableProblem
            }
            if let problem {
                state.withLock { $0 = nil }
                throw ModelError(
                    .invalidSchema, entity: description.type, field: problem.field, message: "schema '\(schema.name)': \(problem.message)")
            }
        }
    }

    /// The schema in use.
    public static var schema: AppSchema { current.schema }

    /// Every entity of the schema in use, parents before children: the order creates sync in and
    /// bundles import in.
    public static var all: [EntityDescription] { current.schema.entities }

    /// The schema installed; a lookup before one is installed stops the process, naming the cause.
    private static var current: Installed {
        guard let installed = state.withLock({ $0 }) else {
            preconditionFailure(
                "no app schema is installed in this process: install one (EntityCatalog.install(_:)) or open a store or server with it before its entities are used")
        }
        return installed
    }

    /// Whether a schema is installed in this process.
    public static var isInstalled: Bool { state.withLock { $0 != nil } }

    private static let state = Locked<Installed?>(nil)

    /// The schema in use with its lookups, built once when it is installed.
    private final class Installed: Sendable {
        let schema: AppSchema
        let byType: [EntityType: EntityDescription]
        let byTable: [String: EntityType]

        init(_ schema: AppSchema) {
            self.schema = schema
            byType = Dictionary(uniqueKeysWithValues: schema.entities.map { ($0.type, $0) })
            byTable = Dictionary(uniqueKeysWithValues: schema.entities.map { ($0.table, $0.type) })
        }
    }

    /// The description of `type`.
    public static func description(of type: EntityType) -> EntityDescription {
        guard let description = current.byType[type] else {
            preconditionFailure("schema '\(current.schema.name)' declares no entity \(type.rawValue)")
        }
        return description
    }

    /// Whether an entity is declared under `name` (`EntityType(rawValue:)` asks).
    static func declares(_ name: String) -> Bool {
        current.byType[EntityType(declaring: name)] != nil
    }

    /// The entity stored in `table`, if any.
    public static func entity(forTable table: String) -> EntityType? {
        current.byTable[table]
    }
}

/// A value behind a lock (`Mutex` needs macOS 15; the packages support older systems).
final class Locked<Value: Sendable>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Value

    init(_ value: Value) { self.value = value }

    func withLock<Result>(_ body: (inout Value) -> Result) -> Result {
        lock.lock()
        defer { lock.unlock() }
        return body(&value)
    }
}

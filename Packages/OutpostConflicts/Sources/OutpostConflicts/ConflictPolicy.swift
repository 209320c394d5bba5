import OutpostSchema

/// Which strategy settles each entity type: the catalog's defaults (what `outpost entities` prints),
/// with an app's overrides on top, so a team changes one entity's rule without restating the rest.
public struct ConflictPolicy: Sendable, Hashable {
    /// The strategies set by the app; every other entity's is its declaration's default, read when
    /// asked. Making a policy reads no catalog: a policy is often made (as a default argument) before
    /// the app's schema is installed.
    private var strategies: [EntityType: ConflictStrategy]

    /// The catalog's default strategy for every entity, with `overrides` replacing some of them.
    public init(overriding overrides: [EntityType: ConflictStrategy] = [:]) {
        strategies = overrides
    }

    /// Two policies are equal when they settle every entity alike (an override equal to the default is none).
    public static func == (lhs: ConflictPolicy, rhs: ConflictPolicy) -> Bool {
        lhs.overrides == rhs.overrides
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(overrides)
    }

    /// The strategy for `entity`; set it to override one entity.
    public subscript(entity: EntityType) -> ConflictStrategy {
        get { strategies[entity] ?? ConflictStrategy(entity.description.defaultPolicy) }
        set { strategies[entity] = newValue }
    }

    /// The entities whose strategy differs from the catalog's default, with that strategy: what a device
    /// and its server must agree on (`SyncProtocol.conflictPolicyHeader`).
    public var overrides: [EntityType: ConflictStrategy] {
        strategies.filter { $0.value != ConflictStrategy($0.key.description.defaultPolicy) }
    }

    /// Settles two versions of one record with the strategy of its entity.
    public func resolve(client: VersionedRecord, server: VersionedRecord) throws(ConflictError) -> ConflictResolution {
        try self[server.record.entity].resolve(client: client, server: server)
    }
}

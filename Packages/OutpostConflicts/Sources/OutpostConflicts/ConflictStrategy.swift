import OutpostSchema

/// How conflicts of one entity type are settled: a value a team picks per entity in a `ConflictPolicy`.
///
/// A struct with static members rather than an enum, so strategies can be added without breaking a
/// client's `switch`. The role-based strategies (`serverWins`, `clientWins`, `manual`) treat a change as
/// concurrent when it is based on an older server version (`record.sync.version`) than the server holds;
/// the clock-based ones (`lastWriteWins`, `fieldMerge`) need no base and converge in any delivery order.
public struct ConflictStrategy: Sendable, Hashable, CustomStringConvertible {
    /// The catalog's name for the strategy.
    public let name: ConflictPolicyName

    /// The strategy the catalog names, such as an entity's `defaultPolicy`.
    public init(_ name: ConflictPolicyName) {
        self.name = name
    }

    /// On a concurrent change the server's version stands (its delete included); the client's values are
    /// surfaced for the user to override or discard. Reference data and money: the office decides.
    public static let serverWins = ConflictStrategy(.serverWins)
    /// The client's change always applies (its delete, or an update that undoes a server delete); on a
    /// concurrent change what it replaced is surfaced to the office. For facts the device observed.
    public static let clientWins = ConflictStrategy(.clientWins)
    /// The whole version with the newest clock stands; the other version's values are surfaced with it.
    /// A delete is a write like any other: the newer of delete and update wins.
    public static let lastWriteWins = ConflictStrategy(.lastWriteWins)
    /// Each field takes its newest write, so fields changed on one side never conflict; a field changed on
    /// both surfaces the older value. A delete stands only if newer than every field it hides.
    public static let fieldMerge = ConflictStrategy(.fieldMerge)
    /// On a concurrent change nothing is merged: the server's version stays provisionally and both versions
    /// are kept as an open conflict for the user.
    public static let manual = ConflictStrategy(.manual)
    /// Creates never conflict and deletes apply, but an edit of an existing record (or of a deleted one) is
    /// refused and surfaced. For photos, voice notes and comments, immutable once taken.
    public static let appendOnly = ConflictStrategy(.appendOnly)

    /// Every strategy, in the catalog's order.
    public static let all: [ConflictStrategy] = ConflictPolicyName.allCases.map(ConflictStrategy.init)

    /// Settles the client's version (its pending change when the device pulls, the pushed change on the
    /// server) against the server's. Pass the client's change only, not its whole record, so that only
    /// values the client actually wrote are surfaced as losing.
    public func resolve(client: VersionedRecord, server: VersionedRecord) throws(ConflictError) -> ConflictResolution {
        guard client.record.entity == server.record.entity, client.record.id == server.record.id else {
            throw ConflictError(
                .mismatchedRecords, entity: server.record.entity, id: server.record.id,
                message: "cannot merge it with \(client.record.entity.rawValue) "
                    + "\(client.record.id.uuidString.lowercased()): versions of one record are expected")
        }
        switch name {
        case .fieldMerge:
            return Merge.fieldMerge(client: client, server: server)
        case .lastWriteWins:
            return Merge.lastWriteWins(client: client, server: server)
        case .appendOnly:
            return Merge.appendOnly(client: client, server: server)
        case .serverWins, .manual, .clientWins:
            guard Merge.isConcurrent(client: client, server: server) else {
                return Merge.clientApplies(client: client, server: server, surfacing: false)
            }
            switch name {
            case .clientWins: return Merge.clientApplies(client: client, server: server, surfacing: true)
            case .manual: return Merge.serverStands(client: client, server: server, openConflict: true)
            default: return Merge.serverStands(client: client, server: server)
            }
        }
    }

    public var description: String { name.rawValue }
}

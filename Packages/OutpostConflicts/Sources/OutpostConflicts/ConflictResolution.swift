import OutpostSchema

/// What a strategy decided for one record: the version to write, where each field came from, and
/// every value and delete that lost, so the store can surface them rather than drop them.
public struct ConflictResolution: Sendable, Hashable {
    /// The version to write (on the device) or to store and serve (on the server).
    public let merged: VersionedRecord
    /// The side each field of `merged` came from; `.server` where both sides held the same write.
    public let sources: [String: Side]
    /// Every value that lost, ordered by field; empty when nothing did.
    public let losingValues: [LosingValue]
    /// The delete that lost to an update, if one did.
    public let losingDeletion: LosingDeletion?
    /// True under `manual` when the sides differ: `merged` is only provisional (the server's version)
    /// and the user must choose before the record counts as settled.
    public let isOpenConflict: Bool
    /// True under `appendOnly` when the client tried to edit a record: nothing of the edit was applied.
    public let isRefusal: Bool

    init(
        merged: VersionedRecord, sources: [String: Side], losingValues: [LosingValue],
        losingDeletion: LosingDeletion?, isOpenConflict: Bool = false, isRefusal: Bool = false
    ) {
        self.merged = merged
        self.sources = sources
        self.losingValues = losingValues.count > 1
            ? losingValues.sorted { $0.field.utf8.lexicographicallyPrecedes($1.field.utf8) || ($0.field == $1.field && $0.side == .client && $1.side == .server) } : losingValues
        self.losingDeletion = losingDeletion
        self.isOpenConflict = isOpenConflict
        self.isRefusal = isRefusal
    }

    /// The conflict to surface, or nil when nothing lost; the store keeps it until the user overrides or discards.
    public var conflict: Conflict? {
        guard !losingValues.isEmpty || losingDeletion != nil else { return nil }
        return Conflict(current: merged, losingValues: losingValues, losingDeletion: losingDeletion)
    }
}

import OutpostModels

/// Whether an incoming server record may replace the stored one.
enum LocalChangeDecision: Equatable {
    /// Write the incoming record (or leave the row if it is already equal).
    case write
    /// The stored record has local changes not yet synced and the bundle brings a newer server version:
    /// the fields the device did not change take the bundle's values, the changed ones stay for sync to
    /// settle through the entity's `ConflictPolicy` (`EntityTables.refreshUnchangedFields`).
    case refreshAroundLocalChanges
    /// The stored record has local changes not yet synced and the bundle brings nothing newer than the
    /// version they were made on: leave it, count it.
    case keepLocalChanges
    /// The store holds a newer server version than the bundle: leave it, count it.
    case keepNewerStored

    static func decide(stored: EntityRecord?, incoming: EntityRecord) -> LocalChangeDecision {
        guard let stored else { return .write }
        if stored.sync.syncStatus != .synced {
            return incoming.sync.version > stored.sync.version ? .refreshAroundLocalChanges : .keepLocalChanges
        }
        if stored.sync.version > incoming.sync.version { return .keepNewerStored }
        return .write
    }
}

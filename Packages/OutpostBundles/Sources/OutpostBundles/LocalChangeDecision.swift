import OutpostModels

/// Whether an incoming server record may replace the stored one. One small function on purpose: the
/// sync engine's issue routes the first case through `OutpostConflicts.ConflictPolicy` instead.
enum LocalChangeDecision: Equatable {
    /// Write the incoming record (or leave the row if it is already equal).
    case write
    /// The stored record has local changes not yet synced: leave it, count it.
    case keepLocalChanges
    /// The store holds a newer server version than the bundle: leave it, count it.
    case keepNewerStored

    static func decide(stored: EntityRecord?, incoming: EntityRecord) -> LocalChangeDecision {
        guard let stored else { return .write }
        if stored.sync.syncStatus != .synced { return .keepLocalChanges }
        if stored.sync.version > incoming.sync.version { return .keepNewerStored }
        return .write
    }
}

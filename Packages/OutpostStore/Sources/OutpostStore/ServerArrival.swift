import OutpostSchema

/// What the store does with a server's version of a record, whether a pull page or a pre-sync bundle
/// brought it: the one rule both go through.
enum ServerArrival: Equatable {
    /// Store it as the server has it: the device does not hold the record, or holds it with no change
    /// waiting at this version or an older one.
    case store
    /// The device holds a newer version and no change waits: leave it (a page or a bundle read before
    /// a newer version was applied).
    case keepNewerStored
    /// A change waits and the server's version comes with its field clocks (a pull): the entity's
    /// conflict policy merges the two now.
    case mergeWithWaitingChange
    /// A change waits and the server's version, newer than the one the device holds, comes without
    /// clocks (a bundle): the fields the device did not change take the server's values; the changed
    /// ones wait for the push, which meets the server's version and is settled with the true clocks.
    case refreshAroundWaitingChange
    /// A change waits and the server's version is no newer than what the device holds (and has no
    /// clocks to merge with): leave it for the push.
    case keepWaitingChange

    /// The rule. `changeWaiting`: the record has a local change not yet acknowledged. `carriesClocks`:
    /// the server's version comes with its per-field clocks (a pull). `storedIsImported`: the stored
    /// version is one an import wrote and the server has not confirmed (`ImportedVersions`); a pull's
    /// copy is the server's word and replaces it whatever the numbers say, as a bundle's versions may
    /// have been edited. `bringsUnseenWrite`: the server's version carries a write this device has never
    /// seen (`StoreWriter.bringsUnseenWrite`), so it is no page read before a newer one, whatever its
    /// number: the number held is wrong, and the server's copy replaces it as an import's does.
    static func decide(
        stored: EntityRecord?, incomingVersion: Int64, changeWaiting: Bool, carriesClocks: Bool, storedIsImported: Bool = false,
        bringsUnseenWrite: Bool = false
    ) -> ServerArrival {
        guard let stored else { return .store }
        if carriesClocks, storedIsImported || bringsUnseenWrite { return changeWaiting ? .mergeWithWaitingChange : .store }
        if changeWaiting {
            if incomingVersion < stored.sync.version { return .keepWaitingChange }
            if carriesClocks { return .mergeWithWaitingChange }
            return incomingVersion > stored.sync.version ? .refreshAroundWaitingChange : .keepWaitingChange
        }
        return incomingVersion < stored.sync.version ? .keepNewerStored : .store
    }
}

import Foundation
import OutpostSchema

/// A surfaced conflict: the version that won and what lost. The user either overrides (what lost
/// becomes a new change) or discards (the winner stays); both are plain functions returning what to write.
public struct Conflict: Sendable, Hashable {
    /// The version currently written, the winner.
    public let current: VersionedRecord
    /// The values that lost.
    public let losingValues: [LosingValue]
    /// The delete that lost, if one did.
    public let losingDeletion: LosingDeletion?

    /// Rebuilds a conflict the store kept, from the written version and what lost.
    public init(current: VersionedRecord, losingValues: [LosingValue], losingDeletion: LosingDeletion? = nil) {
        self.current = current
        self.losingValues = losingValues
        self.losingDeletion = losingDeletion
    }

    /// The user keeps their version: the losing values (and delete) are written again with stamps from
    /// `clock` newer than the winner's, so they win on every replica. Write the result and queue it as a change.
    ///
    /// Throws only if the winner's clock runs further ahead of `now` than the clock allows (the wall clock
    /// went back since it was received). Under `appendOnly` an override is an edit and is refused again;
    /// offer to save a copy instead.
    public func override(clock: inout HybridLogicalClock, now: Date) throws(ConflictError) -> VersionedRecord {
        var result = current
        if let newest = current.newestClock {
            _ = try clock.receive(newest, now: now)
        }
        if !losingValues.isEmpty {
            let stamp = clock.tick(now: now)
            var changes: [String: FieldValue] = [:]
            for loser in losingValues { changes[loser.field] = loser.value }
            result = result.updating(changes, at: stamp)
        }
        if losingDeletion != nil {
            result = result.deleted(at: clock.tick(now: now))
        }
        return result
    }

    /// The user accepts the winner: the written version stays as it is and nothing is sent.
    public func discard() -> VersionedRecord {
        current
    }
}

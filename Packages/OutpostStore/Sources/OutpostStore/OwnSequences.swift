import Foundation
import GRDB
import OutpostWire

/// The change sequences this device's accepted pushes took on the server (`MutationResult.sequence`),
/// in `sync_state` as `SequenceRanges` text, until a pull has passed them. Sent with the pull, they let
/// the server send a record whose latest change is one of them as its version only: the device holds
/// that version already, so its fields need not cross the wire again. Only the cost of a pull rests on
/// them: one forgotten (past the most kept, or lost in a crash) brings its record whole, as before.
enum OwnSequences {
    static let key = "own_sequences"

    static func ranges(in db: Database) throws -> SequenceRanges {
        SequenceRanges(texts: try SyncState.list(of: key, in: db)) ?? SequenceRanges()
    }

    /// Adds sequences an answer gave.
    static func note(_ sequences: [Int64], in db: Database) throws {
        var ranges = try ranges(in: db)
        for sequence in sequences where sequence > 0 { ranges.insert(sequence...sequence) }
        try save(ranges, in: db)
    }

    /// Forgets every sequence up to `last`, which a completed pull has passed.
    static func forget(through last: Int64, in db: Database) throws {
        var ranges = try ranges(in: db)
        ranges.removeAll(through: last)
        try save(ranges, in: db)
    }

    private static func save(_ ranges: SequenceRanges, in db: Database) throws {
        try SyncState.setList(key, to: ranges.texts, in: db)
    }
}

extension LocalStore {
    /// The change sequences this device's own accepted pushes took, as `SequenceRanges` text, for the
    /// next pull (`PullRequest.ownSequences`); empty when none waits.
    public func ownSequences() throws(StoreError) -> [String] {
        try read { try OwnSequences.ranges(in: $0).texts }
    }
}

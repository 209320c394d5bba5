import Foundation
import GRDB
import OutpostConflicts
import OutpostSchema

/// Saving a copy of a record that was read before a pull changed it.
///
/// A screen reads a record, a pull brings the office's change of field X, then the screen saves its
/// copy, where only Y was edited. Diffing that copy against the stored row would take its old X for a
/// local edit and quietly send it back over the office's newer value. Instead, when the copy's
/// `sync.version` is older than the stored row's, each field that differs from the row is judged by
/// what the copy must have held when it was read (the values pulls replaced, kept per field in
/// `FieldClocks.Stored.pulled`):
///
/// - no pull changed the field since the copy's version: the difference is the user's edit, written;
/// - the copy holds what the field held at its version: the user did not touch it, the stored
///   (newer) value stays;
/// - the copy holds something else: the user edited a field the server changed meanwhile. The edit is
///   written, as any edit after a pull would be, and the server's value it replaces is surfaced as a
///   conflict rather than dropped;
/// - the copy is older than the values kept: which is the user's cannot be told, so the stored value
///   stays and the copy's value is surfaced as a conflict for the user to override or discard.
///
/// A copy at the stored version (the usual case) is written as it is. A copy read before another local
/// write (a widget's, a share extension's, another task's) is judged the same way by the values local
/// writes replaced (`reconcileLocal`), so it never reverts that write either.
enum StaleCopy {
    /// The fields of `copy` reconciled with `stored`, and the conflicts to surface once it is written.
    static func reconcile(
        _ copy: EntityRecord, with stored: EntityRecord, clocks: FieldClocks.Stored?
    ) -> (EntityRecord, [Surfaced]) {
        guard copy.sync.version < stored.sync.version else { return (copy, []) }
        // A field the user edited while the server changed it: the edit is written, the server's value surfaced.
        // A value a local write replaced after the copy was read is what the copy read too: a pull that
        // then changed the field again replaced this device's own write, not the copy's value.
        let readLocally = copy.sync.updatedAt.storageMilliseconds
        // Only a value the server gave is surfaced as the server's: one a local write put there since (a
        // second save of the same screen, another task) is this device's own, replaced as a later save
        // replaces an earlier one.
        return reconcile(
            copy, readAt: copy.sync.version, history: clocks?.pulled, with: stored,
            surfacingReplaced: { field in clocks.map { $0.fields[field] != nil && $0.fields[field] == $0.server?[field] } ?? false },
            alsoRead: { field in clocks?.written?[field]?.first(where: { $0.version > readLocally }).map { $0.previous ?? .null } })
    }

    /// The fields of `copy`, read at `readAt` (its `updatedAt` in milliseconds) and saved after another
    /// local write of the record (another task or process of the app), reconciled with `stored`: a
    /// field that write changed keeps the stored value unless the copy holds something else than it
    /// read, which is its own user's edit and written (the later save of one field wins, as one after
    /// the other would). A copy older than the kept history keeps the stored value and surfaces its own.
    static func reconcileLocal(
        _ copy: EntityRecord, readAt: Int64, with stored: EntityRecord, clocks: FieldClocks.Stored?
    ) -> (EntityRecord, [Surfaced]) {
        reconcile(copy, readAt: readAt, history: clocks?.written, with: stored, surfacingReplaced: { _ in false })
    }

    /// Both rules' walk: `history` holds, per field, the values replaced after positions (versions for
    /// pulls, `updatedAt` milliseconds for local writes), and the copy was read at `readAt`. A field the
    /// copy changed from what it read is written, and with `surfacingReplaced` the stored value it
    /// replaces is surfaced.
    private static func reconcile(
        _ copy: EntityRecord, readAt: Int64, history: [String: [FieldClocks.PulledChange]]?, with stored: EntityRecord,
        surfacingReplaced: (String) -> Bool, alsoRead: (String) -> FieldValue? = { _ in nil }
    ) -> (EntityRecord, [Surfaced]) {
        guard let history else { return (copy, []) }
        var result = copy
        var surfaced: [Surfaced] = []
        for field in copy.entity.description.fields.map(\.name) where copy[field] != stored[field] {
            // The first value replaced after the copy was read is the one the copy read.
            guard let change = history[field]?.first(where: { $0.version > readAt }) else { continue }
            if change.since <= readAt {
                let read = alsoRead(field)
                if copy[field] == change.previous ?? .null || copy[field] == read {
                    result[field] = stored[field]
                } else if surfacingReplaced(field), stored[field] != read, stored[field] != change.previous ?? .null {
                    // Only a value the field did not hold when the copy was read is one the user wrote
                    // over unseen (a pull that put back the read value replaced this device's own write).
                    surfaced.append(Surfaced(field: field, losing: stored[field], side: .server))
                }
            } else {
                result[field] = stored[field]
                surfaced.append(Surfaced(field: field, losing: copy[field], side: .client))
            }
        }
        return (result, surfaced)
    }

    /// A value that lost to the reconciled save: the server's, replaced by the user's edit, or the copy's,
    /// kept back because it may only be out of date.
    struct Surfaced {
        let field: String
        let losing: FieldValue
        let side: Side
    }

    /// Writes the surfaced values to the conflicts table, once the record is written as `written`;
    /// `clocks` are the field clocks from before the write.
    static func surface(
        _ surfaced: [Surfaced], written: EntityRecord, clocks: FieldClocks.Stored, stamp: HybridTimestamp, db: Database,
        now: Date
    ) throws {
        let strategy = ConflictStrategy(written.entity.description.defaultPolicy)
        for item in surfaced {
            // The stored value's clock is the server's side either way; the copy's value is stamped now.
            let winner = written[item.field]
            let (local, remote) = item.side == .client ? (item.losing, winner) : (winner, item.losing)
            try Conflicts.insert(
                written, kind: .value, field: item.field, strategy: strategy, local: local, remote: remote, localClock: stamp,
                remoteClock: clocks.fields[item.field], losingSide: item.side, db: db, now: now)
        }
    }
}

/// A save over a tombstone: it brings the record back. Whose each field is, and whether the delete it
/// undoes was one the saving copy's user never saw, depend on how the copy came to be:
///
/// - **read as deleted** (`sync.deletedAt` set: the app showed the tombstone and the user restored it):
///   a deliberate restore. The fields the user changed are theirs; the others are carried.
/// - **built anew with the deleted record's id** (version 0 over a tombstone the server holds): every
///   field is the user's, a re-create.
/// - **read before the delete** (a screen that kept a copy while another task, process or device deleted
///   the record): only the fields the user changed since reading count. None: nothing is written, the
///   delete stands. Some: the record comes back with them, and the delete is surfaced, since its user
///   never saw it.
///
/// A carried field's value is this device's from before the delete, which may be older than what the
/// server holds (a pulled tombstone has no contents); it takes the server's value when the change meets
/// the server's record (`MutationQueue.Payload.carried`), so a revival never writes values the device
/// never saw over newer ones.
struct Revival {
    /// The delete undone, as this device knew it; nil for a row an older build deleted without it.
    let deletion: HybridTimestamp?
    /// Whether the saving copy was read before the delete.
    let readBeforeTheDelete: Bool
    /// Whether every field is the user's (a re-create).
    let everyFieldIsTheUsers: Bool
    /// Whether the fields the user did not change are carried: the server holds the tombstone and its
    /// newest values. A tombstone it never saw (version 0) goes out as a create of every field.
    let carriesFields: Bool

    /// The revival of `stored` by saving `copy`, or nil when `stored` is live. `readBeforeItsDelete`: the
    /// copy's version or `updatedAt` is older than the stored row's.
    init?(of stored: EntityRecord, by copy: EntityRecord, readBeforeItsDelete: Bool, clocks: FieldClocks.Stored?) {
        guard stored.sync.isDeleted else { return nil }
        let rebuilt = copy.sync.version == 0 && stored.sync.version > 0
        readBeforeTheDelete = copy.sync.deletedAt == nil && !rebuilt && readBeforeItsDelete
        everyFieldIsTheUsers = rebuilt
        carriesFields = stored.sync.version > 0 && !rebuilt
        deletion = clocks?.deletion
    }
}

import Foundation
import OutpostConflicts
import OutpostSchema

/// A server's version of a record with what the store works out from the record alone done ahead:
/// whether it can be stored at all (its values and its shape against the catalog), whether it names
/// a parent by a server id, and whether all its fields share one clock.
///
/// Why: a pull is as fast as the store's one writer (issue 41: the writer was busy 1.06 s of a
/// 1.22 s pull of 100,000 records), and about a sixth of its own work was these, which need no
/// database. The sync engine prepares each record where it decodes its page, on another thread, and
/// `PulledPage(prepared:…)` hands them over; a page made of plain `VersionedRecord`s is checked on the
/// writer as before. Everything here is worked out by this type's own initializer from `change`,
/// which it keeps: nothing a caller says about a record is believed.
public struct PreparedChange: Sendable {
    /// The server's version.
    public let change: VersionedRecord
    /// What was worked out of it.
    let checks: Checks

    /// What the writer would otherwise work out of a pulled record. Kept apart from the record in a
    /// page (`PulledPage.checks`): read beside it, a copy of the whole was a retain and a release of
    /// each of the record's strings and dictionaries, 4% of the writer's work (`perf`).
    struct Checks: Sendable {
        /// `Quarantine.unstorableValue` of the record.
        let unstorable: String?
        /// `Quarantine.problem` of the record; nil for a tombstone without contents, which is not checked.
        let shapeProblem: String?
        /// Whether a parent reference holds a server id (text): one to translate
        /// (`ServerIDs.clientReferences`) or, with no mapping yet, to note (`ServerIDs.noteUnmapped`).
        let namesParentByServerID: Bool
        /// The one clock every catalog field of the record has, if there is one and no delete
        /// (`FieldClocks.Stored.allFieldsClock`): its `field_clocks` row over nothing held is then that
        /// clock's compact form (`FieldClocks.Stored.compactForm(of:)`).
        let sharedClock: HybridTimestamp?
    }

    /// Prepares `change`. Nothing here allocates for a record the store can take (a problem's text
    /// only for one it refuses): what is made here is freed on the writer once the page is applied,
    /// and the id's text and the field columns converted here (tried) cost the writer about as much
    /// in their frees as they saved it (`outpost-bench server`, issue 41).
    public init(_ change: VersionedRecord) {
        self.change = change
        let record = change.record
        checks = Checks(
            unstorable: Quarantine.unstorableValue(in: record),
            shapeProblem: change.isContentlessTombstone ? nil : Quarantine.problem(with: record),
            namesParentByServerID: record.entity.description.parents.contains {
                if case .text = record[$0.field] { true } else { false }
            },
            sharedClock: change.deletion == nil ? FieldClocks.Stored.allFieldsClock(of: change.clocks, record.entity) : nil)
    }
}

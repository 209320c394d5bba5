import Foundation
import OutpostSchema

/// A record together with the clock of every field it carries and the clock of its delete: the unit
/// every strategy merges, stored next to the row and sent with each change.
///
/// It may carry all of an entity's fields (the stored state) or only some (a change: the fields one
/// write touched). A field is present exactly when it has a clock.
public struct VersionedRecord: Sendable, Hashable {
    /// The record; `sync.deletedAt` always mirrors `deletion`.
    public private(set) var record: EntityRecord
    /// When each field carried in `record.fields` was last written.
    public private(set) var clocks: [String: HybridTimestamp]
    /// When the record was deleted; nil while it is live. A later write clears it (the record is re-created).
    public private(set) var deletion: HybridTimestamp?

    /// Pairs a record with its clocks, as loaded from the store or the wire; every field needs a clock
    /// and every clock a field, since a value of unknown age cannot be merged.
    public init(record: EntityRecord, clocks: [String: HybridTimestamp], deletion: HybridTimestamp? = nil)
        throws(ConflictError)
    {
        // The common case, every value with its clock and no clock without one, is checked without
        // sorting: this runs for every pulled record. Names are sorted only to report the first.
        guard record.fields.count != clocks.count || !Self.sameNames(record.fields, clocks) else {
            self.init(unchecked: record, clocks: clocks, deletion: deletion)
            return
        }
        if let field = record.fields.keys.sorted().first(where: { clocks[$0] == nil }) {
            throw ConflictError(
                .missingClock, entity: record.entity, id: record.id, field: field,
                message: "has a value but no clock")
        }
        if let field = clocks.keys.sorted().first(where: { record.fields[$0] == nil }) {
            throw ConflictError(
                .missingClock, entity: record.entity, id: record.id, field: field,
                message: "has a clock but no value")
        }
        self.init(unchecked: record, clocks: clocks, deletion: deletion)
    }

    /// Whether two dictionaries of the same count hold the same keys. Clocks mapped from the fields
    /// (`mapValues`, as a pulled record's shared clock is expanded) keep their table's layout, so their
    /// keys come in the same order and are compared without hashing a name; any other pair is looked
    /// up name by name.
    private static func sameNames(_ fields: [String: FieldValue], _ clocks: [String: HybridTimestamp]) -> Bool {
        if fields.keys.elementsEqual(clocks.keys) { return true }
        return !fields.keys.contains(where: { clocks[$0] == nil })
    }

    /// A record written whole at `clock`, as a create is; a tombstone in `record.sync` is stamped at `clock` too.
    public init(record: EntityRecord, stampedAt clock: HybridTimestamp) {
        self.init(
            unchecked: record, clocks: record.fields.mapValues { _ in clock },
            deletion: record.sync.isDeleted ? clock : nil)
    }

    init(unchecked record: EntityRecord, clocks: [String: HybridTimestamp], deletion: HybridTimestamp?) {
        self.record = record
        self.clocks = clocks
        self.deletion = deletion
        self.record.sync.deletedAt = deletion?.date
    }

    /// Whether the record is a tombstone.
    @inlinable public var isDeleted: Bool { deletion != nil }

    /// The newest clock the version carries: what a receiver passes to `HybridLogicalClock.receive`,
    /// and what last-write-wins compares. Inlinable, as `isDeleted` is: called across modules on a record
    /// inside an array (each pulled page's), the call copied the whole record out first, a retain of every
    /// string and dictionary it holds (`perf`, a pull's apply).
    @inlinable @inline(__always) public var newestClock: HybridTimestamp? {
        var newest = deletion
        for clock in clocks.values where newest.map({ clock > $0 }) ?? true { newest = clock }
        return newest
    }

    /// This version after a local write of `changes` at `clock`; writing to a tombstone re-creates the
    /// record, so the new values are never hidden by the old delete.
    public func updating(_ changes: [String: FieldValue], at clock: HybridTimestamp) -> VersionedRecord {
        var copy = self
        for (field, value) in changes {
            copy.record.fields[field] = value
            copy.clocks[field] = clock
        }
        copy.deletion = nil
        copy.record.sync.deletedAt = nil
        copy.record.sync.updatedAt = clock.date
        return copy
    }

    /// This version after a local delete at `clock`. The values stay, so a delete that loses to a
    /// later update, or is undone, has them back.
    public func deleted(at clock: HybridTimestamp) -> VersionedRecord {
        var copy = self
        copy.deletion = clock
        copy.record.sync.deletedAt = clock.date
        copy.record.sync.updatedAt = clock.date
        return copy
    }

    /// Only the fields named, with their clocks and the delete: the change a sync engine sends, so that
    /// losing values are only the ones this side actually wrote.
    public func change(of fields: some Sequence<String>) -> VersionedRecord {
        var copy = self
        copy.record.fields = [:]
        copy.clocks = [:]
        for field in fields {
            guard let clock = clocks[field] else { continue }
            copy.record.fields[field] = record.fields[field]
            copy.clocks[field] = clock
        }
        return copy
    }
}

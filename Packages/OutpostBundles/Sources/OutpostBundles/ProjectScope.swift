import Foundation
import OutpostSchema

/// Holds a bundle's records to the one project its header names: the scope record itself, and every
/// record in the scope it names as a parent, directly or, for a parent the bundle carries, through that
/// parent's own check. A record that places itself in another project is refused (`outsideProject`),
/// naming the record and both projects: imported, it would overwrite that project's synced records, or
/// hang records under them, and the next sync would pull nothing to set them right.
///
/// A record whose project neither it nor the bundle tells (its parent is carried nowhere, a record above
/// the scope) is not refused here; the store's import holds it to the header by what the device holds
/// (`BundleRecordStream.requireProject`).
///
/// The header may come last (JSON objects are unordered, and `projectID` may follow `records`): until
/// then the first record of each project seen waits, and the header's arrival judges them. A valid
/// bundle names one project, so this waiting list stays a single entry; a hostile one is cut at
/// `maximumWaiting` projects, which is past the first refusal anyway.
struct ProjectScope {
    /// A record placed in a project, as the bundle or the device says.
    struct Placement {
        let entity: EntityType
        let id: UUID
        let project: UUID
        /// How the record is in `project`, in words ("its projectID names it").
        let reason: String
        let location: SourceLocation?
    }

    /// The header's project, once read.
    private(set) var project: UUID?
    /// Before the header: the first placement in each project, and how many more there were.
    private var waiting: [(placement: Placement, more: Int)] = []
    private let maximumWaiting: Int

    init(maximumWaiting: Int = 64) {
        self.maximumWaiting = max(2, maximumWaiting)
    }

    /// The projects `record` places itself in by its own fields: its own id for a scope record, else
    /// every scope record it names as a parent.
    static func placements(of record: EntityRecord, at location: SourceLocation?) -> [Placement] {
        let scope = EntityCatalog.schema.scope
        if record.entity == scope {
            return [Placement(entity: record.entity, id: record.id, project: record.id, reason: "it is that project's own record", location: location)]
        }
        return record.entity.description.parents.compactMap { relation in
            guard relation.entity == scope, case .uuid(let project) = record[relation.field] else { return nil }
            return Placement(entity: record.entity, id: record.id, project: project, reason: "its \(relation.field) names it", location: location)
        }
    }

    /// Checks `record` by its own fields; the refusals it earns now (none for its project while the
    /// header is unread).
    ///
    /// A bundle holds records as a server gave them, so each is at version 1 or more: version 0 is a
    /// change no server took. An attack set it on a deleted record, and the device's restore of it went
    /// out as a create carrying every value of the file with fresh clocks, over the office's newer
    /// writes. (The schemas' bound stays 0: they are frozen; this is a rule checked after them.)
    mutating func check(_ record: EntityRecord, at location: SourceLocation) -> [BundleError] {
        var refusals: [BundleError] = []
        if record.sync.version < 1 {
            refusals.append(BundleError(
                .invalidRecord, message: "version 0 is a change no server took; a bundle holds records at a version a server gave (1 or more)",
                entity: record.entity, id: record.id, field: "version").located(location))
        }
        return refusals + Self.placements(of: record, at: location).compactMap { place($0) }
    }

    /// Holds one placement to the header's project: its refusal, nil when it is the header's project or
    /// the header is not read yet (it then waits).
    mutating func place(_ placement: Placement) -> BundleError? {
        if let project { return placement.project == project ? nil : Self.refusal(placement, header: project, more: 0) }
        if let index = waiting.firstIndex(where: { $0.placement.project == placement.project }) {
            waiting[index].more += 1
        } else if waiting.count < maximumWaiting {
            waiting.append((placement, 0))
        }
        return nil
    }

    /// The header arrived: the refusals of the records that waited for it.
    mutating func header(_ project: UUID) -> [BundleError] {
        self.project = project
        defer { waiting.removeAll() }
        return waiting.filter { $0.placement.project != project }.map { Self.refusal($0.placement, header: project, more: $0.more) }
    }

    private static func refusal(_ placement: Placement, header: UUID, more: Int) -> BundleError {
        let scope = EntityCatalog.schema.scope.rawValue
        var message = "\(placement.entity.rawValue) \(placement.id.lowercasedText) belongs to \(scope) "
            + "\(placement.project.lowercasedText) (\(placement.reason)), not to \(scope) \(header.lowercasedText), the one "
            + "this bundle's header names: a bundle carries one \(scope)'s records"
        if more > 0 { message += " (and \(more) more record\(more == 1 ? "" : "s") of \(placement.project.lowercasedText) listed before the header)" }
        let error = BundleError(.outsideProject, message: message, entity: placement.entity, id: placement.id)
        return placement.location.map { error.located($0) } ?? error
    }
}

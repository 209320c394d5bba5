import Foundation
import GRDB
import OutpostModels
import OutpostStore
import OutpostWire

/// Writes one project's records from a local database as a bundle: what the server serves for pre-sync,
/// and what round-trip tests compare. The output is deterministic: entities in catalog order (parents
/// first), records by id, and `asOf` the newest `updatedAt`, so the same data gives the same bytes.
public struct BundleExporter: Sendable {
    /// An exporter.
    public init() {}

    /// Writes project `projectID` and every live record that hangs from it (tombstones left out) to `url`,
    /// returning how many records it wrote.
    @discardableResult
    public func exportProject(
        _ projectID: UUID, fromDatabaseAt databasePath: String, format: BundleFormat, to url: URL
    ) throws(BundleError) -> Int {
        let records = try Self.records(of: projectID, fromDatabaseAt: databasePath)
        try write(project: projectID, records: records, format: format, to: url)
        return records.count
    }

    /// The project's records (see `records(of:in:)`) from the database file at `databasePath`.
    static func records(of projectID: UUID, fromDatabaseAt databasePath: String) throws(BundleError) -> [EntityRecord] {
        guard FileManager.default.fileExists(atPath: databasePath) else {
            throw BundleError(.unreadableFile, message: "no database file here", file: databasePath)
        }
        do {
            let queue = try DatabaseQueue(path: databasePath)
            defer { try? queue.close() }
            return try queue.read { db in try records(of: projectID, in: db) }
        } catch let error as BundleError {
            throw error
        } catch {
            throw BundleError(.databaseFailure, message: "\(error)", file: databasePath)
        }
    }

    /// The project, its opportunity, and every record whose owning parent (the first parent it names,
    /// the one that makes it a project's: an issue's project, a comment's issue) is already included,
    /// entity by entity in catalog order. Only the owning parent counts: a record of another project
    /// that names one of this project's records in another reference (a comment whose author is this
    /// project's member) is that project's, and must not travel to this one's members. Records with a
    /// change the server has not acknowledged are left out (and so are their children), as the server
    /// does not hold them so either.
    static func records(of projectID: UUID, in db: Database) throws -> [EntityRecord] {
        guard let project = try EntityTables.fetchRecord(.project, id: projectID, in: db) else {
            throw BundleError(.databaseFailure, message: "the database holds no project \(projectID.uuidString.lowercased())")
        }
        // A bundle is the server's state, and an importing device stores its records as synced: a change of
        // this device's the server has not acknowledged must not travel in one (the receiver would hold a
        // value the server never had, or an edit of a record the server does not know, as synced).
        guard project.sync.syncStatus == .synced, project.sync.version > 0 else {
            throw BundleError(
                .databaseFailure,
                message: "project \(projectID.uuidString.lowercased()) has changes this device has not synced; sync, then export")
        }
        var included: [EntityType: Set<UUID>] = [.project: [projectID]]
        if case .uuid(let opportunity) = project["opportunityID"] { included[.opportunity] = [opportunity] }
        var result: [EntityRecord] = []
        for description in EntityCatalog.all {
            switch description.type {
            case .project:
                result.append(project)
            case .opportunity:
                guard let id = included[.opportunity]?.first,
                    let opportunity = try EntityTables.fetchRecord(.opportunity, id: id, in: db)
                else { continue }
                result.append(opportunity)
            default:
                // Tombstones stay out: a deleted record's contents do not travel (a device that held it
                // learns of the delete from its pull), and neither do its children.
                for record in try EntityTables.fetchAll(description.type, in: db)
                where record.sync.syncStatus == .synced && record.sync.version > 0 && !record.sync.isDeleted {
                    let owner = description.parents.lazy.compactMap { relation -> (EntityType, UUID)? in
                        guard case .uuid(let parent) = record[relation.field] else { return nil }
                        return (relation.entity, parent)
                    }.first
                    guard let (parentEntity, parent) = owner, included[parentEntity]?.contains(parent) == true else { continue }
                    included[description.type, default: []].insert(record.id)
                    result.append(record)
                }
            }
        }
        return result
    }
}

import Crypto
import Foundation
import GRDB
import OutpostBundles
import OutpostSchema
import OutpostWire

/// What writing a zip bundle did.
public struct ArchiveExportSummary: Sendable, Hashable {
    /// Records written to the manifest.
    public var records: Int
    /// Files shipped beside it (each once, however many records name it).
    public var files: Int
    /// Files records name that this device does not hold (or holds with other bytes), by their record's
    /// file name: the bundle still imports, without them.
    public var missingFiles: [String]
}

extension LocalStore {
    /// Writes project `projectID` and every live record that hangs from it (tombstones and unsynced
    /// changes left out) as a bundle at `url`, returning how many records it wrote.
    /// The records are read twice in one read transaction (for the header, then to be written) and
    /// written as they are read: an export held the whole project in memory, 924 MB for a 936 MB project
    /// (attack 69, finding 4).
    @discardableResult
    public func exportBundle(project projectID: UUID, format: BundleFormat, to url: URL) throws(BundleError) -> Int {
        try exporting(projectID) { db, outline, checkpoints in
            try BundleExporter().export(
                project: projectID, asOf: outline.asOf, checkpoints: checkpoints, format: format, to: url
            ) { write in try Self.forEachProjectRecord(of: projectID, in: db, write) }
            return outline.records
        }
    }

    /// Writes project `projectID` as a zip at `url`: the manifest (`bundle.xml` or `bundle.json`) and
    /// the files its reference documents and media attachments name, taken from what this device holds
    /// (files earlier zip bundles stored, photos and voice notes captured here), each checked against
    /// its record's size and SHA-256 first.
    @discardableResult
    public func exportArchive(project projectID: UUID, format: BundleFormat, to url: URL) throws(BundleError)
        -> ArchiveExportSummary
    {
        try exporting(projectID) { db, outline, checkpoints in
            try BundleExporter().exportArchive(
                project: projectID, asOf: outline.asOf, files: outline.plan.files, checkpoints: checkpoints, format: format, to: url
            ) { write in try Self.forEachProjectRecord(of: projectID, in: db, write) }
            return ArchiveExportSummary(records: outline.records, files: outline.plan.files.count, missingFiles: outline.plan.missing)
        }
    }

    /// What an export's header needs before the first record is written, from a first read of them.
    struct ExportOutline {
        var records = 0
        var asOf: Date?
        var plan: ArchivePlan
    }

    /// Runs `body` in one read transaction with the project's outline (see `forEachProjectRecord`) and the
    /// checkpoints of the server's history its records were read at (this device's own, and those of
    /// imports the server has not confirmed yet, which the receiving device asks the server about).
    private func exporting<T>(
        _ projectID: UUID, _ body: (Database, ExportOutline, [String]) throws -> T
    ) throws(BundleError) -> T {
        do {
            return try pool.read { db in
                var outline = ExportOutline(plan: ArchivePlan(databasePath: path))
                try Self.forEachProjectRecord(of: projectID, in: db) { record in
                    outline.records += 1
                    outline.asOf = max(outline.asOf ?? record.sync.updatedAt, record.sync.updatedAt)
                    outline.plan.consider(record)
                }
                outline.plan.finish()
                return try body(db, outline, try HistoryState.exportCheckpoints(in: db))
            }
        } catch let error as BundleError {
            throw error
        } catch {
            throw BundleError(.databaseFailure, message: "\(error)", file: path, underlying: error)
        }
    }

    /// The project, its opportunity, and every record whose owning parent (the first parent it names,
    /// the one that makes it a project's: an issue's project, a comment's issue) is already included,
    /// entity by entity in catalog order. Only the owning parent counts: a record of another project
    /// that names one of this project's records in another reference (a comment whose author is this
    /// project's member) is that project's, and must not travel to this one's members. Records with a
    /// change the server has not acknowledged are left out (and so are their children), as the server
    /// does not hold them so either. Handed to `body` one at a time, holding only the ids of those
    /// already handed over.
    static func forEachProjectRecord(of projectID: UUID, in db: Database, _ body: (EntityRecord) throws -> Void) throws {
        let schema = EntityCatalog.schema
        guard let project = try EntityTables.fetchRecord(schema.scope, id: projectID, in: db) else {
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
        // The scope record, and the records above it that it names (a project's opportunity).
        var included: [EntityType: Set<UUID>] = [schema.scope: [projectID]]
        var above: [EntityType: [UUID]] = [:]
        for relation in schema.scopeParents {
            if case .uuid(let id) = project[relation.field] { above[relation.entity, default: []].append(id) }
        }
        for description in schema.entities {
            switch description.type {
            case schema.scope:
                try body(project)
            case let entity where above[entity] != nil:
                for id in above[entity] ?? [] {
                    guard let record = try EntityTables.fetchRecord(entity, id: id, in: db) else { continue }
                    included[entity, default: []].insert(id)
                    try body(record)
                }
            default:
                // Tombstones stay out: a deleted record's contents do not travel (a device that held it
                // learns of the delete from its pull), and neither do its children.
                try EntityTables.forEach(description.type, in: db) { record in
                    guard record.sync.syncStatus == .synced, record.sync.version > 0, !record.sync.isDeleted else { return }
                    let owner = description.parents.lazy.compactMap { relation -> (EntityType, UUID)? in
                        guard case .uuid(let parent) = record[relation.field] else { return nil }
                        return (relation.entity, parent)
                    }.first
                    guard let (parentEntity, parent) = owner, included[parentEntity]?.contains(parent) == true else { return }
                    included[description.type, default: []].insert(record.id)
                    try body(record)
                }
            }
        }
    }
}

/// Which files a zip bundle ships and where their bytes come from.
struct ArchivePlan {
    private(set) var files: [ShippedFile] = []
    private(set) var missing: [String] = []
    private let databasePath: String
    private let media: URL
    private var found: [String: (name: String, size: Int64, source: URL)] = [:]

    /// A plan for the store of the database at `databasePath`: give it each record (`consider`), then
    /// `finish()`. It holds only the files records name, never the records.
    init(databasePath: String) {
        self.databasePath = databasePath
        media = LocalStore.mediaFolder(forDatabaseAt: databasePath)
    }

    /// Notes the file `record` names, if any, and whether this device holds its bytes.
    mutating func consider(_ record: EntityRecord) {
        guard !record.sync.isDeleted else { return }
        // A record with a file: a media record, or one that names a file by name, size and digest
        // (the field-service schema's reference documents).
        let isMedia = record.entity.description.syncClass == .media
        guard isMedia || record.entity.description.namesFile,
            case .text(let name) = record["fileName"], case .text(let digest) = record["sha256"],
            case .integer(let size) = record["byteSize"]
        else { return }
        if let known = found[digest] {
            // The same bytes named again ship once; a different size under the same digest cannot be them.
            if known.size != size { missing.append(name) }
            return
        }
        var candidates: [URL] = []
        if let copy = BundleImporter.storedFile(sha256: digest, forDatabaseAt: databasePath) { candidates.append(copy) }
        if isMedia { candidates.append(media.appendingPathComponent(record.id.uuidString.lowercased())) }
        if let source = candidates.first(where: { Self.holds($0, size: size, sha256: digest) }) {
            found[digest] = (name, size, source)
        } else {
            missing.append(name)
        }
    }

    /// Ends the plan: `files` and `missing` are then complete.
    mutating func finish() {
        files = found.map { ShippedFile(name: $0.value.name, byteSize: $0.value.size, sha256: $0.key, source: $0.value.source) }
        missing.sort()
    }

    /// Whether the file at `url` has exactly this size and digest.
    private static func holds(_ url: URL, size: Int64, sha256: String) -> Bool {
        guard let handle = try? FileHandle(forReadingFrom: url) else { return false }
        defer { try? handle.close() }
        var hash = SHA256()
        var total: Int64 = 0
        while let chunk = try? handle.read(upToCount: 1 << 16), !chunk.isEmpty {
            total += Int64(chunk.count)
            if total > size { return false }
            hash.update(data: chunk)
        }
        return total == size && hash.finalize().map { String(format: "%02x", $0) }.joined() == sha256
    }
}

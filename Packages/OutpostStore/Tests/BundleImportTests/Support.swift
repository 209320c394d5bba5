@testable import OutpostStore
import Foundation
import GRDB
import OutpostFieldService
import OutpostModels
import OutpostSchema

/// A temporary folder with a migrated database in it, removed when the value goes away.
final class Workspace: Sendable {
    let folder: URL
    let databasePath: String

    init() throws {
        folder = FileManager.default.temporaryDirectory.appendingPathComponent("outpost-bundles-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        databasePath = folder.appendingPathComponent("store.sqlite").path
        try LocalDatabase.migrate(at: databasePath)
    }

    deinit { try? FileManager.default.removeItem(at: folder) }

    func url(_ name: String) -> URL { folder.appendingPathComponent(name) }

    /// Writes `text` to a file in the folder.
    func file(_ name: String, _ text: String) throws -> URL {
        let url = url(name)
        try Data(text.utf8).write(to: url)
        return url
    }

    /// Another migrated database in the same folder.
    func database(_ name: String) throws -> String {
        let path = folder.appendingPathComponent(name).path
        try LocalDatabase.migrate(at: path)
        return path
    }

    func save(_ records: [EntityRecord], in path: String? = nil) throws {
        let queue = try DatabaseQueue(path: path ?? databasePath)
        try queue.write { db in for record in records { try EntityTables.save(record, in: db) } }
        try queue.close()
    }

    func record(_ entity: EntityType, _ id: UUID, in path: String? = nil) throws -> EntityRecord? {
        let queue = try DatabaseQueue(path: path ?? databasePath)
        defer { try? queue.close() }
        return try queue.read { try EntityTables.fetchRecord(entity, id: id, in: $0) }
    }

    /// Every row of every table of the database at `path` (or the workspace's), by table: what "the import
    /// wrote nothing" compares (in stored order: the same for an unchanged table). Rows rather than the
    /// file's bytes, which a WAL checkpoint rewrites.
    func snapshot(of path: String? = nil) throws -> [String: [Row]] {
        let queue = try DatabaseQueue(path: path ?? databasePath)
        defer { try? queue.close() }
        return try queue.read { db in
            var tables: [String: [Row]] = [:]
            for name in try String.fetchAll(db, sql: "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name") {
                tables[name] = try Row.fetchAll(db, sql: "SELECT * FROM \(name.quotedDatabaseIdentifier)")
            }
            return tables
        }
    }

    /// Every entity table's records, for comparing two databases.
    func contents(of path: String? = nil) throws -> [EntityRecord] {
        let queue = try DatabaseQueue(path: path ?? databasePath)
        defer { try? queue.close() }
        return try queue.read { db in try EntityCatalog.all.flatMap { try EntityTables.fetchAll($0.type, in: db) } }
    }
}

/// The repository's `schemas` folder, found by walking up from this file.
enum RepositorySchemas {
    static var folder: URL {
        var directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        while directory.pathComponents.count > 1 {
            let candidate = directory.appendingPathComponent("schemas")
            if FileManager.default.fileExists(atPath: candidate.appendingPathComponent("local").path) { return candidate }
            directory.deleteLastPathComponent()
        }
        fatalError("schemas/ not found above \(#filePath)")
    }
}

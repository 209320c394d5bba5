import Foundation
import GRDB

/// A fresh SQLite file in its own temporary folder, removed when the value goes away.
final class TemporaryDatabase: Sendable {
    let directory: URL
    let path: String
    let queue: DatabaseQueue

    init() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("outpost-migrator-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        path = directory.appendingPathComponent("test.sqlite").path
        queue = try DatabaseQueue(path: path)
    }

    deinit { try? FileManager.default.removeItem(at: directory) }

    /// Every row of every user table, as text, for before/after comparisons.
    func dump() throws -> [String] {
        try queue.read { db in
            let tables = try String.fetchAll(db, sql: "SELECT name FROM sqlite_schema WHERE type = 'table' ORDER BY name")
            return try tables.flatMap { table in
                try Row.fetchAll(db, sql: "SELECT * FROM \(table.quotedDatabaseIdentifier) ORDER BY rowid").map { "\(table): \($0)" }
            }
        }
    }
}

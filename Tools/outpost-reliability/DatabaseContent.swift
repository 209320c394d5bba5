import Foundation
import GRDB

/// Everything a database file holds, as text: each table (SQLite's own left out) by name, its rows
/// rendered and sorted. Two files with equal content read the same, whatever their page layout.
/// Opening a file left by a killed process recovers it first, as the app would. The change journal is
/// left out: it tells other processes which records a commit touched, names the process that wrote
/// it, and is trimmed as it grows, so two equal imports by two processes leave different rows there.
func databaseContent(_ path: String) throws -> String {
    let queue = try DatabaseQueue(path: path)
    defer { try? queue.close() }
    return try queue.read { db in
        var lines: [String] = []
        let tables = try String.fetchAll(
            db, sql: "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND name != 'change_journal' ORDER BY name")
        for table in tables {
            lines.append("== \(table)")
            lines += try Row.fetchAll(db, sql: "SELECT * FROM \"\(table)\"").map(\.description).sorted()
        }
        return lines.joined(separator: "\n")
    }
}

/// Copies a database file (and nothing left beside it) to `destination`, replacing what is there.
func copyDatabase(_ source: String, to destination: String) throws {
    for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: destination + suffix) }
    try FileManager.default.copyItem(atPath: source, toPath: destination)
}

/// `schemas/examples`, found from the current folder or above this binary (it lives in the repo's `.build`).
func examplesFolder() throws -> URL {
    var candidates = [URL(fileURLWithPath: FileManager.default.currentDirectoryPath)]
    var directory = (Bundle.main.executableURL ?? URL(fileURLWithPath: CommandLine.arguments[0])).resolvingSymlinksInPath()
    while directory.pathComponents.count > 1 {
        directory.deleteLastPathComponent()
        candidates.append(directory)
    }
    for candidate in candidates {
        let folder = candidate.appendingPathComponent("schemas/examples")
        if FileManager.default.fileExists(atPath: folder.appendingPathComponent("project-bundle.json").path) { return folder }
    }
    throw ReliabilityError("schemas/examples not found: run from the repository")
}

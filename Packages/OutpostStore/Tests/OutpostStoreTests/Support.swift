import Foundation
import GRDB

/// A fresh SQLite file in its own temporary folder, removed when the value goes away.
final class TemporaryDatabase: Sendable {
    let directory: URL
    let path: String
    let queue: DatabaseQueue

    init() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("outpost-store-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        path = directory.appendingPathComponent("store.sqlite").path
        queue = try DatabaseQueue(path: path)
    }

    deinit { try? FileManager.default.removeItem(at: directory) }
}

/// The repository's `schemas/local` folder, found by walking up from this file.
enum FrozenSchemas {
    static var folder: URL {
        var directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        while directory.pathComponents.count > 1 {
            let candidate = directory.appendingPathComponent("schemas/local")
            if FileManager.default.fileExists(atPath: candidate.path) { return candidate }
            directory.deleteLastPathComponent()
        }
        fatalError("schemas/local not found above \(#filePath)")
    }

    /// The frozen text of `name`, or nil after recording `current` into a file that did not exist yet.
    static func text(_ name: String, recording current: String) throws -> String? {
        let url = folder.appendingPathComponent(name)
        if let text = try? String(contentsOf: url, encoding: .utf8) { return text }
        try current.write(to: url, atomically: true, encoding: .utf8)
        return nil
    }
}


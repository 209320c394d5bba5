import Foundation

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

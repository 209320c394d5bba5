import Foundation
import GRDB
import OutpostFieldService
import OutpostStore

/// A new device database, migrated once per process and then copied for every simulated device:
/// migrating a file to the latest schema takes about half a second, which would otherwise be most of
/// a seed's time. The copy holds no node id or clock yet, so each device still makes its own on open.
enum DeviceTemplate {
    private static let folder = FileManager.default.temporaryDirectory
        .appendingPathComponent("outpost-reliability-template-\(ProcessInfo.processInfo.processIdentifier)")

    /// The template's path, or nil when it could not be made (each device then migrates its own file).
    private static let path: String? = {
        do {
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            let path = folder.appendingPathComponent("device.sqlite").path
            do { _ = try LocalStore.open(at: path) }
            let queue = try DatabaseQueue(path: path)
            try queue.writeWithoutTransaction { db in
                try db.execute(sql: "DELETE FROM sync_state WHERE key IN ('node_id', 'clock_last')")
                try db.execute(sql: "PRAGMA wal_checkpoint(TRUNCATE)")
            }
            try queue.close()
            return path
        } catch {
            return nil
        }
    }()

    /// Opens a new device database at `path`, from a copy of the template when there is one.
    static func openStore(at path: String) throws -> LocalStore {
        if let template = Self.path { try FileManager.default.copyItem(atPath: template, toPath: path) }
        return try LocalStore.open(at: path)
    }

    /// Removes the template at the end of the run.
    static func remove() {
        try? FileManager.default.removeItem(at: folder)
    }
}

import Foundation
import GRDB
import OutpostSchema
import OutpostWire

/// Where bundles this device downloaded from its own server left their projects (`sync_state`), until
/// a pull sends them (`PullRequest.bundlePositions`): the server then reads each project from there,
/// so a pre-synced device's first sync does not pull again every record its bundle brought.
///
/// A position is kept only for an import that took every record of the bundle as it was, into a store
/// that held none of them: a bundle leaves out deleted records, so a device that held some of the
/// project's records must pull from the beginning to hear of their deletes, and a record the import
/// skipped (the store held a version the server gave it) would never come again. Any other import of
/// the project forgets a position kept before, for the same reason.
enum BundlePositions {
    static let key = "bundle_positions"

    /// Space-separated `<project id>=<checkpoint>`, oldest first.
    static func all(in db: Database) throws -> [String] {
        try SyncState.list(of: key, in: db)
    }

    /// Keeps `project`'s position at `checkpoint`, replacing an older one of the same project. Past the
    /// most a request carries, the oldest goes: its project is then read from its beginning.
    static func save(project: UUID, checkpoint: String, in db: Database) throws {
        let prefix = project.storageText + "="
        var kept = try all(in: db).filter { !$0.hasPrefix(prefix) }
        kept.append(prefix + checkpoint)
        try SyncState.setList(key, to: Array(kept.suffix(maximumCount)), in: db)
    }

    /// Forgets `project`'s position, if one is kept: the project is then read from the device's cursor.
    static func forget(project: UUID, in db: Database) throws {
        let prefix = project.storageText + "="
        let all = try all(in: db)
        guard all.contains(where: { $0.hasPrefix(prefix) }) else { return }
        try SyncState.setList(key, to: all.filter { !$0.hasPrefix(prefix) }, in: db)
    }

    /// Forgets the positions a pull sent: its cursor holds them now, or the server left them out and
    /// read those projects from their beginning.
    static func forget(_ sent: [String], in db: Database) throws {
        guard !sent.isEmpty else { return }
        try SyncState.setList(key, to: try all(in: db).filter { !sent.contains($0) }, in: db)
    }

    /// The most kept: as many as one pull request carries.
    static let maximumCount = SyncProtocol.maximumBundlePositions
}

extension LocalStore {
    /// Where bundles downloaded from this device's server left their projects, for the next pull's first
    /// request (`importBundle(at:fromServer:)` keeps them); empty when none waits.
    public func bundlePositions() throws(StoreError) -> [String] {
        try read { try BundlePositions.all(in: $0) }
    }
}

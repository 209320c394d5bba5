import Foundation
import GRDB
import OutpostSchema

extension EntityTables {
    /// Takes a newer server version of a record that has a local change waiting (from a pre-sync bundle,
    /// which carries no per-field clocks) without deciding that change: fields this device has not
    /// changed take the server's values; fields it has changed keep the device's, and their mutations
    /// keep their base version, so the next push meets the server's version and the entity's
    /// `ConflictPolicy` settles them with the true clocks. The row moves to the server's version (the
    /// values it replaced are noted for stale copies, as a pull notes them). Inside the caller's
    /// transaction; returns the record as stored, or nil, with nothing written, when the record is not
    /// stored, has no change waiting, or either side is a delete (left for sync to settle).
    static func refreshUnchangedFields(from remote: EntityRecord, in db: Database) throws -> EntityRecord? {
        let entity = remote.entity, id = remote.id
        guard let local = try fetchRecord(entity, id: id, in: db), !local.sync.isDeleted, !remote.sync.isDeleted,
            remote.sync.version > local.sync.version,
            let waiting = try MutationQueue.unfinishedFields(entity, id, in: db)
        else { return nil }
        var written = remote
        for field in waiting { written[field] = local[field] }
        written.sync = SyncMetadata(
            serverID: remote.sync.serverID ?? local.sync.serverID, version: remote.sync.version,
            createdAt: local.sync.createdAt, updatedAt: max(local.sync.updatedAt, remote.sync.updatedAt),
            deletedAt: nil, syncStatus: local.sync.syncStatus, isOrphaned: local.sync.isOrphaned)
        guard written != local else { return local }
        var clocks = try FieldClocks.read(entity, id, in: db) ?? FieldClocks.Stored(fields: [:], deletion: nil, server: nil)
        FieldClocks.notePulledChanges(from: local, to: written, in: &clocks)
        try save(written, in: db)
        try FieldClocks.write(clocks, entity, id, in: db)
        return written
    }
}

extension EntityTables {
    /// Writes `remote`, a server version of a record that has no change waiting, over `stored`, the row the
    /// store holds, as a pull would: the values it replaces are noted (`FieldClocks.Stored.pulled`), so a
    /// screen that read the record before and saves after is judged as after a pull (`StaleCopy`) and
    /// cannot send the replaced values back as fresh edits. Inside the caller's transaction.
    static func replaceWithServerVersion(_ stored: EntityRecord, by remote: EntityRecord, in db: Database) throws {
        try save(remote, in: db)
        var clocks = try FieldClocks.read(remote.entity, remote.id, in: db)
            ?? FieldClocks.Stored(fields: [:], deletion: nil, server: nil)
        // The row now holds the values of `remote`'s version, whatever a contents-less tombstone left.
        guard stored.fields != remote.fields || clocks.heldVersion != nil else { return }
        clocks.heldVersion = nil
        FieldClocks.notePulledChanges(from: stored, to: remote, in: &clocks)
        try FieldClocks.write(clocks, remote.entity, remote.id, in: db)
    }
}

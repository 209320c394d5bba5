import Crypto
import Foundation
import GRDB
import OutpostSchema

/// The original file of a photo or voice note, as the upload queue tracks it.
public struct MediaUpload: Sendable, Hashable {
    /// The attachment the file belongs to.
    public let attachmentID: UUID
    /// The store's own copy of the file.
    public let fileURL: URL
    /// The file's size, as the attachment record states it.
    public let byteSize: Int64
    /// SHA-256 of the file, lowercase hex; the server checks it when the last byte lands.
    public let sha256: String
    /// Bytes the server has confirmed: an interrupted upload resumes here.
    public let uploadedBytes: Int64
    /// Failed attempts so far.
    public let attempts: Int
}

extension LocalStore {
    /// Where the store keeps original files: a folder beside the database, one file per attachment, so
    /// a photo survives the camera roll being cleaned and is never uploaded from a path that moved.
    public var mediaFolder: URL { Self.mediaFolder(forDatabaseAt: path) }

    /// The media folder of the store whose database is at `databasePath`, for tools that read a store's
    /// files without opening it (the bundle exporter). An attachment's original is `<folder>/<id>`.
    public static func mediaFolder(forDatabaseAt databasePath: String) -> URL {
        URL(fileURLWithPath: databasePath + ".media", isDirectory: true)
    }

    /// Saves `attachment` with a copy of its original file at `file`, measured and hashed here (the
    /// record's `byteSize` and `sha256` are set from the file). The record, its mutation and the upload
    /// entry are one transaction; the file goes up later, when sync judges the connection good.
    ///
    /// Attaching a file again to the same attachment keeps the previous original aside until the new
    /// record is saved: a save the store refuses (an invalid record) puts it back, so a refused
    /// re-attach never costs the photo the user had.
    ///
    /// A crash at any point leaves files and rows consistent once the store is opened again
    /// (`collectMediaLeftovers`): the copy is made under a name of this process, and the file is moved
    /// into place inside the write transaction of its record, so the sweep, which runs in one too, never
    /// sees an attach half done. A file with no record goes; a previous original comes back unless the
    /// new record was committed.
    ///
    /// `attachment` is a record of a media entity of the schema (a field-service `MediaAttachment`, an
    /// app's `Video`); any other is refused with `invalidRecord` before a byte is copied.
    @discardableResult
    public func attach<Media: Syncable>(
        _ attachment: Media, originalAt file: URL, now: Date = Timestamp.now()
    ) async throws(StoreError) -> Media {
        guard Media.entityType.description.syncClass == .media else {
            throw StoreError(
                .invalidRecord, path: path,
                message: "\(Media.entityType) \(attachment.id.storageText) is not a media entity of schema '\(EntityCatalog.schema.name)': only a media record carries a file")
        }
        let destination = mediaFolder.appendingPathComponent(attachment.id.storageText)
        let previous = destination.appendingPathExtension("previous")
        let partial = mediaFolder.appendingPathComponent(MediaLeftovers.partialName(for: attachment.id))
        let (size, digest) = try StoreError.mapping(path: path) { () throws -> (Int64, String) in
            try FileManager.default.createDirectory(at: mediaFolder, withIntermediateDirectories: true)
            try? FileManager.default.removeItem(at: partial)
            try FileManager.default.copyItem(at: file, to: partial)
            return try Self.measure(partial)
        }
        var record = attachment.record
        record["byteSize"] = .integer(size)
        record["sha256"] = .text(digest)
        let id = attachment.id.storageText
        let fileName = destination.lastPathComponent
        let created = now.storageMilliseconds
        let moved = MovedFlag()
        let saved: EntityRecord
        do {
            saved = try await save(record, now: now) { db in
                // In the record's transaction: a crash before its commit leaves `previous` beside the new
                // file, which the sweep puts back since the record still names the old one.
                try? FileManager.default.removeItem(at: previous)
                if FileManager.default.fileExists(atPath: destination.path) {
                    try FileManager.default.moveItem(at: destination, to: previous)
                }
                try FileManager.default.moveItem(at: partial, to: destination)
                moved.set()
                try db.execute(
                    sql: """
                        INSERT INTO media_uploads (attachment_id, file_name, byte_size, sha256, created_at)
                        VALUES (?, ?, ?, ?, ?)
                        ON CONFLICT(attachment_id) DO UPDATE SET
                            byte_size = excluded.byte_size, sha256 = excluded.sha256, uploaded_bytes = 0,
                            status = 'pending', attempts = 0, last_error = NULL
                        """,
                    arguments: [id, fileName, size, digest, created])
            }
            try? FileManager.default.removeItem(at: previous)
            try? FileManager.default.removeItem(at: partial)  // the same file attached again: nothing was written
        } catch {
            try? FileManager.default.removeItem(at: partial)
            if moved.isSet {
                try? FileManager.default.removeItem(at: destination)
                try? FileManager.default.moveItem(at: previous, to: destination)
            } else if !FileManager.default.fileExists(atPath: destination.path) {
                try? FileManager.default.moveItem(at: previous, to: destination)
            }
            throw error
        }
        do {
            return try Media(record: saved)
        } catch {
            throw StoreError(.invalidRecord, path: path, message: "\(error)", modelError: error, underlying: error)
        }
    }

    /// Puts right what a crash left in the media and scratch folders: copies and downloads of processes
    /// that are gone, files no record names, a previous original whose replacement never committed (put
    /// back) or did (removed). In one write transaction, so no attach of another process is half done
    /// meanwhile (see `attach`). A sync's first run runs it (`recoverInterruptedRun`), and so does a
    /// pre-sync before it downloads; returns how many files it removed or put back.
    @discardableResult
    public func collectMediaLeftovers() throws(StoreError) -> Int {
        try write { db in
            try MediaLeftovers.collect(media: mediaFolder, scratch: scratchFolder, in: db)
        }
    }

    /// A folder beside the database for files the store's tools write and remove (a pre-sync download).
    /// What a process that is gone left there is removed by `collectMediaLeftovers()`.
    public var scratchFolder: URL { URL(fileURLWithPath: path + ".scratch", isDirectory: true) }

    /// A new file name in `scratchFolder` (the folder created), marked as this process's, ending in `pathExtension`.
    public func scratchFile(pathExtension: String) throws(StoreError) -> URL {
        try StoreError.mapping(path: path) {
            try FileManager.default.createDirectory(at: scratchFolder, withIntermediateDirectories: true)
        }
        return scratchFolder.appendingPathComponent(MediaLeftovers.scratchName(pathExtension: pathExtension))
    }

    /// Puts every upload that failed for good (the server refused the file, a checksum mismatch after a
    /// co-member's or a broken server's bytes, retries used up) back in line from the server's offset,
    /// its attempts counted from zero, once the cause is fixed. Returns how many.
    @discardableResult
    public func retryFailedMediaUploads() throws(StoreError) -> Int {
        try write { db in
            try db.execute(sql: """
                UPDATE media_uploads SET status = 'pending', attempts = 0, last_error = NULL WHERE status = 'failed'
                """)
            return db.changesCount
        }
    }

    /// Uploads still to do, oldest first, whose attachment record the server already has (the server
    /// checks the file against that record).
    public func pendingMediaUploads(limit: Int = 50) throws(StoreError) -> [MediaUpload] {
        try read { db in
            try Row.fetchAll(
                db,
                sql: """
                    SELECT u.attachment_id, u.file_name, u.byte_size, u.sha256, u.uploaded_bytes, u.attempts
                    FROM media_uploads AS u JOIN \(EntityTables.mediaRecords) AS a ON a.id = u.attachment_id
                    WHERE u.status = 'pending' AND a.version > 0 AND a.deleted_at IS NULL
                    ORDER BY u.created_at, u.attachment_id LIMIT ?
                    """,
                arguments: [limit]
            ).compactMap { row in
                guard let id = UUID(hyphenatedText: row[0]) else { return nil }
                return MediaUpload(
                    attachmentID: id, fileURL: mediaFolder.appendingPathComponent(row[1]), byteSize: row[2],
                    sha256: row[3], uploadedBytes: row[4], attempts: row[5])
            }
        }
    }

    /// Records how far an upload got (what the server confirmed); `complete` takes it off the queue.
    public func recordMediaProgress(
        of attachmentID: UUID, uploadedBytes: Int64, complete: Bool, checkpoint: String? = nil
    ) throws(StoreError) {
        try write { db in
            // In the same transaction: a device that holds the upload as done must also hold the
            // checkpoint that lets it notice a restore that lost the file.
            if complete, let checkpoint { try HistoryState.save(checkpoint: checkpoint, in: db) }
            try db.execute(
                sql: """
                    UPDATE media_uploads SET uploaded_bytes = ?, status = CASE WHEN ? THEN 'done' ELSE status END,
                        last_error = NULL
                    WHERE attachment_id = ?
                    """,
                arguments: [uploadedBytes, complete, attachmentID.storageText])
        }
    }

    /// Counts a failed attempt; `permanently` (the server refused the file) takes it off the queue.
    public func recordMediaFailure(of attachmentID: UUID, reason: String, permanently: Bool) throws(StoreError) {
        try write { db in
            try db.execute(
                sql: """
                    UPDATE media_uploads SET attempts = attempts + 1, last_error = ?,
                        status = CASE WHEN ? THEN 'failed' ELSE status END
                    WHERE attachment_id = ?
                    """,
                arguments: [reason, permanently, attachmentID.storageText])
        }
    }

    /// Size and SHA-256 of a file, read in chunks so a long video never sits in memory whole.
    static func measure(_ file: URL) throws -> (Int64, String) {
        let handle = try FileHandle(forReadingFrom: file)
        defer { try? handle.close() }
        var hasher = SHA256()
        var size: Int64 = 0
        while let chunk = try handle.read(upToCount: 1 << 20), !chunk.isEmpty {
            hasher.update(data: chunk)
            size += Int64(chunk.count)
        }
        return (size, hasher.finalize().map { String(format: "%02x", $0) }.joined())
    }
}

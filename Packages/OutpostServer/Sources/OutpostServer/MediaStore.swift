import Crypto
import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import OutpostSchema
import OutpostWire

/// Resumable media uploads, one file per attachment next to the database (`<id>.part` while it
/// arrives, `<id>` once its SHA-256 matched).
///
/// Only the member who created the attachment's record may upload its file, and only while the record
/// is not deleted: a co-member could otherwise write garbage at the owner's next offset and make the
/// upload end in a checksum mismatch. One chunk of a file at a time, across this server's tasks and
/// every instance sharing the folder: each chunk holds an exclusive `flock` on `<id>.lock` from reading
/// the upload's state to saving it (the actor alone did not serialize them: it re-enters at each
/// await, and 16 chunks at one offset got six 200s). A chunk that finds the lock held is answered 409
/// `range_mismatch`, and the client asks where to resume.
actor MediaStore {
    private let directory: URL
    private let storage: any ServerStorage
    private let maximumFileBytes: Int64
    private let quotas: MediaQuotas

    init(directory: String, storage: any ServerStorage, maximumFileBytes: Int64, quotas: MediaQuotas = MediaQuotas())
        throws(ServerError)
    {
        self.directory = URL(fileURLWithPath: directory, isDirectory: true)
        self.storage = storage
        self.maximumFileBytes = maximumFileBytes
        self.quotas = quotas
        do {
            try FileManager.default.createDirectory(at: self.directory, withIntermediateDirectories: true)
        } catch {
            throw ServerError(.mediaFailure, message: "cannot create the media folder: \(error)", path: directory,
                underlying: error)
        }
    }

    /// Where the finished file of an attachment lives.
    nonisolated func fileURL(of attachmentID: UUID) -> URL {
        directory.appendingPathComponent(attachmentID.storageText)
    }

    nonisolated func partURL(of attachmentID: UUID) -> URL {
        directory.appendingPathComponent(attachmentID.storageText + ".part")
    }

    func status(of attachmentID: UUID, by caller: Caller) async throws(ServerError) -> MediaUploadStatus {
        let (record, _, _) = try await storage.mediaAttachment(attachmentID, by: caller, checkingArchive: false)
        // As for its upload: a deleted attachment's file, size included, is no one's business any more.
        guard record.deletion == nil else { throw ServerError.noMediaAttachment(attachmentID) }
        let state = try await upload(of: attachmentID, naming: record)
        return MediaUploadStatus(
            attachmentID: attachmentID, receivedBytes: state?.receivedBytes ?? 0,
            totalBytes: state?.totalBytes ?? record.fields["byteSize"].flatMap(\.integerValue),
            complete: state?.complete ?? false, checkpoint: try await checkpoint(of: state))
    }

    /// The finished original of an attachment, for any member of its project, a viewer included: a
    /// teammate's device shows the photo the crew member took. An attachment the caller may not see is
    /// answered as one that does not exist; a deleted one's file is no one's any more; one still
    /// uploading has no original to give yet.
    func original(of attachmentID: UUID, by caller: Caller) async throws(ServerError) -> MediaOriginal {
        let (record, _, _) = try await storage.mediaAttachment(attachmentID, by: caller, checkingArchive: false)
        guard record.deletion == nil else { throw ServerError.noMediaAttachment(attachmentID) }
        guard let state = try await upload(of: attachmentID, naming: record), state.complete else {
            throw ServerError.notFound("the original of attachment \(attachmentID.storageText) has not been uploaded yet")
        }
        let file = fileURL(of: attachmentID)
        // The database says the file is whole: one missing here was lost under the server (a restore
        // of the database without its media folder), which is the operator's to know, not a 404.
        guard FileManager.default.fileExists(atPath: file.path) else {
            throw ServerError(.mediaFailure, message: "the finished original of \(attachmentID.storageText) is missing", path: file.path)
        }
        return MediaOriginal(path: file.path, byteCount: state.totalBytes, sha256: state.sha256)
    }

    /// The upload of `attachmentID` when it is of the file `record` names now; nil for none, and for one
    /// of another file (the record's `sha256` edited since, as a device that attaches another file does).
    /// Read as the record's, the old file was served against the new checksum, and the new one was
    /// refused as "already complete", for good (attack 108, F1).
    private func upload(of attachmentID: UUID, naming record: StoredRecord) async throws(ServerError) -> MediaUploadState? {
        guard let state = try await storage.mediaUpload(attachmentID), case .text(state.sha256)? = record.fields["sha256"] else {
            return nil
        }
        return state
    }

    /// The checkpoint of the change a finished upload took: a device that learns here that the file is
    /// whole (its answer to the last chunk lost) keeps it, so a restore that lost the file is noticed.
    private func checkpoint(of state: MediaUploadState?) async throws(ServerError) -> String? {
        guard let state, state.complete, let sequence = state.completedSequence else { return nil }
        let checkpoint = try await storage.historyCheckpoint(at: sequence)
        return checkpoint.sequence > 0 ? checkpoint.text : nil
    }

    /// Stores one chunk; the last one is checked against the announced SHA-256 and the record's.
    func receive(
        _ data: Data, range: ContentRange, sha256: String, for attachmentID: UUID, by caller: Caller, now: Date
    ) async throws(ServerError) -> MediaUploadStatus {
        let attachment = try await storage.mediaAttachment(attachmentID, by: caller, checkingArchive: true)
        if let refusal = Self.uploadRefusal(attachment, of: attachmentID, by: caller) { throw refusal }
        let record = attachment.record
        guard sha256.utf8.count == 64, sha256.utf8.allSatisfy({ (0x30...0x39).contains($0) || (0x61...0x66).contains($0) })
        else { throw ServerError.badRequest("\(SyncProtocol.mediaDigestHeader) must be 64 lowercase hex digits") }
        guard case .text(sha256) = record.fields["sha256"] ?? .null else {
            throw ServerError(status: 422, .checksumMismatch, "the announced SHA-256 is not the attachment record's")
        }
        guard range.total <= maximumFileBytes else {
            throw ServerError(status: 413, .payloadTooLarge, "media files are limited to \(maximumFileBytes) bytes")
        }
        if let size = record.fields["byteSize"].flatMap(\.integerValue), size != range.total {
            throw ServerError.badRequest("the file has \(range.total) bytes but its record says \(size)")
        }
        guard Int64(data.count) == range.length else {
            throw ServerError.badRequest("Content-Range announces \(range.length) bytes but the body has \(data.count)")
        }
        try checkDiskReserve(for: Int64(data.count))
        let lock = try UploadLock(directory.appendingPathComponent(attachmentID.storageText + ".lock"))
        defer { lock.release() }
        var held = try await storage.mediaUpload(attachmentID)
        if let stale = held, stale.sha256 != sha256 {
            // Of another file than the one the record names now (its `sha256` edited since): nothing of
            // it is this file's, and it goes (`upload(of:naming:)`).
            try await discardUpload(of: attachmentID, now: now)
            held = nil
        }
        if let held, !held.complete, let last = held.updatedAt, now.timeIntervalSince(last) > Self.reservationLifetime {
            // Stopped for longer than a reservation lasts, it held only what it received meanwhile, and
            // others may have taken the room: it is admitted again before it takes more.
            try await readmit(held, for: attachmentID, of: record, by: caller, now: now)
        }
        if held == nil {
            guard range.first == 0 else {
                throw ServerError(status: 409, .rangeMismatch, "the server holds 0 of \(range.total) bytes; resume there")
            }
            do {
                try await admit(range.total, sha256: sha256, for: attachmentID, of: record, by: caller, now: now)
            } catch {
                // A refused upload leaves nothing behind, its lock file included (one per attachment
                // record, which cost nothing to push, piled up otherwise).
                try? FileManager.default.removeItem(at: directory.appendingPathComponent(attachmentID.storageText + ".lock"))
                throw error
            }
        }
        var state = held ?? MediaUploadState(totalBytes: range.total, receivedBytes: 0, sha256: sha256, complete: false)
        guard !state.complete, state.totalBytes == range.total, range.first == state.receivedBytes else {
            throw ServerError(
                status: 409, .rangeMismatch,
                state.complete
                    ? "the upload is already complete"
                    : "the server holds \(state.receivedBytes) of \(state.totalBytes) bytes; resume there")
        }
        let part = partURL(of: attachmentID)
        do {
            if !FileManager.default.fileExists(atPath: part.path) {
                guard FileManager.default.createFile(atPath: part.path, contents: nil) else {
                    throw ServerError(.mediaFailure, message: "cannot create the upload file", path: part.path)
                }
            }
            let handle = try FileHandle(forWritingTo: part)
            defer { try? handle.close() }
            // Bytes past what the database acknowledges (a crash between write and commit) are dropped.
            try handle.truncate(atOffset: UInt64(state.receivedBytes))
            try handle.seekToEnd()
            try handle.write(contentsOf: data)
            try handle.synchronize()
        } catch {
            throw ServerError(.mediaFailure, message: "cannot write the upload: \(error)", path: part.path, underlying: error)
        }
        let acknowledged = state.receivedBytes
        state.receivedBytes += Int64(data.count)
        if state.receivedBytes == state.totalBytes {
            guard try Self.sha256(of: part) == sha256 else {
                try? FileManager.default.removeItem(at: part)
                try await storage.setMediaUpload(nil, for: attachmentID, now: now, uploadedBy: nil)
                throw ServerError(status: 422, .checksumMismatch, "the file's SHA-256 does not match; upload it again")
            }
            do {
                try? FileManager.default.removeItem(at: fileURL(of: attachmentID))
                try FileManager.default.moveItem(at: part, to: fileURL(of: attachmentID))
            } catch {
                throw ServerError(.mediaFailure, message: "cannot keep the upload: \(error)", path: part.path, underlying: error)
            }
            state.complete = true
        }
        let saved: MediaUploadState?
        do {
            // Access asked again in the transaction that saves the chunk (`uploadRefusal`).
            saved = try await storage.setMediaUpload(state, for: attachmentID, now: now, uploadedBy: caller)
        } catch {
            // A file not recorded as finished goes back to being the upload's part, so the upload resumes
            // from what the database holds instead of from nothing; the chunk's bytes go now, not at the
            // next chunk: a refused 8 MiB chunk stayed on the disk, counted by no quota (attack 116, F1).
            if state.complete { try? FileManager.default.moveItem(at: fileURL(of: attachmentID), to: part) }
            if let handle = try? FileHandle(forWritingTo: part) {
                try? handle.truncate(atOffset: UInt64(acknowledged))
                try? handle.close()
            }
            throw error
        }
        return MediaUploadStatus(
            attachmentID: attachmentID, receivedBytes: state.receivedBytes, totalBytes: state.totalBytes,
            complete: state.complete, checkpoint: try await checkpoint(of: saved))
    }

    /// Why `caller` may not add to the file of `attachment` (as `ServerStorage.mediaAttachment` reads it
    /// for them), nil when they may. Asked when a chunk arrives, and again by the storage in the
    /// transaction that saves its state (`setMediaUpload(_:for:now:uploadedBy:)`): a last chunk waiting
    /// for the database's writer while the office revoked the token, removed the member, made them a
    /// viewer or archived the project completed the file for every teammate (attack 115, F2).
    static func uploadRefusal(
        _ attachment: (record: StoredRecord, role: String, archived: Bool), of attachmentID: UUID, by caller: Caller
    ) -> ServerError? {
        let record = attachment.record
        guard record.deletion == nil else { return ServerError.noMediaAttachment(attachmentID) }
        guard record.ownerID == caller.userID else {
            return ServerError.forbidden("only the member who attached this file may upload it")
        }
        // The role the office gives now, not the one the member had when they attached it.
        guard Roles.mayWrite(record.entity, as: attachment.role) else {
            return ServerError.forbidden("a \(attachment.role) may not upload files in this project")
        }
        // As a push is (`PushRules`), after the access checks: an upload that completes is a change of the
        // project (its checkpoint moved), and an archived one took files that counted against its quotas
        // and reached every member (attack 85, F3).
        if attachment.archived, let project = record.projectID { return ServerError.projectArchived(project) }
        return nil
    }

    /// Takes a new upload's whole size from its project's and its uploader's quotas, one admission at a
    /// time (uploads started together all passed a check made before any of them was counted), and
    /// reserves it: its state with nothing received, and its empty part file, so the next admission
    /// counts it and the sweep frees it if no byte ever comes. Attachments deleted since still count
    /// until their files go; past a quota they are removed first, then the quota is checked again.
    private func admit(
        _ total: Int64, sha256: String, for attachmentID: UUID, of record: StoredRecord, by caller: Caller, now: Date
    ) async throws(ServerError) {
        try await oneAdmissionAtATime { () async throws(ServerError) in
            try await checkQuotas(for: total, of: attachmentID, record: record, by: caller, now: now)
            try checkDiskReserve(for: total)
            let part = partURL(of: attachmentID)
            if !FileManager.default.fileExists(atPath: part.path) {
                guard FileManager.default.createFile(atPath: part.path, contents: nil) else {
                    throw ServerError(.mediaFailure, message: "cannot create the upload file", path: part.path)
                }
            }
            try await storage.setMediaUpload(
                MediaUploadState(totalBytes: total, receivedBytes: 0, sha256: sha256, complete: false), for: attachmentID, now: now,
                uploadedBy: caller)
        }
    }

    /// Runs `admission` alone among this process's admissions and, through a lock file in the folder,
    /// among the instances sharing it: each admission reserves its size before the next one counts what
    /// is held (two instances each admitted a file past the quota before).
    private func oneAdmissionAtATime(_ admission: () async throws(ServerError) -> Void) async throws(ServerError) {
        await enterAdmission()
        defer { leaveAdmission() }
        let folderLock = try await UploadLock.waiting(for: directory.appendingPathComponent(".admission"), seconds: 30)
        defer { folderLock.release() }
        try await admission()
    }

    /// Admits again an upload stopped past `reservationLifetime`, one admission at a time as `admit`,
    /// and holds its whole size again from now (its state stored again, stamped now) before the next
    /// admission counts it.
    private func readmit(
        _ held: MediaUploadState, for attachmentID: UUID, of record: StoredRecord, by caller: Caller, now: Date
    ) async throws(ServerError) {
        try await oneAdmissionAtATime { () async throws(ServerError) in
            try await checkQuotas(for: held.totalBytes, of: attachmentID, record: record, by: caller, now: now)
            try await storage.setMediaUpload(held, for: attachmentID, now: now, uploadedBy: caller)
        }
    }

    /// How long an unfinished upload holds its whole size against the quotas after its last chunk.
    /// Holding it until the upload was swept (`partLifetime`, 7 days) let one byte of a declared
    /// 1.4 MB file keep a whole project from uploading for a week (attack 44 finding 9); after this it
    /// holds the bytes it received, and its next chunk is admitted again.
    static let reservationLifetime: TimeInterval = 3600

    /// Refuses (413) `total` bytes more for the attachment when its project's or its uploader's media
    /// would pass their quota; past one, deleted attachments' files are removed first and it is counted
    /// again.
    private func checkQuotas(
        for total: Int64, of attachmentID: UUID, record: StoredRecord, by caller: Caller, now: Date
    ) async throws(ServerError) {
        func fits(_ used: (project: Int64, owner: Int64)) -> Bool {
            used.project + total <= quotas.perProject && used.owner + total <= quotas.perUser
        }
        let since = now.addingTimeInterval(-Self.reservationLifetime)
        var used = try await storage.mediaBytesHeld(
            project: record.projectID, owner: caller.userID, excluding: attachmentID, reservedSince: since)
        if !fits(used) {
            await removeDeletedAttachments(now: now)
            used = try await storage.mediaBytesHeld(
                project: record.projectID, owner: caller.userID, excluding: attachmentID, reservedSince: since)
        }
        guard used.project + total <= quotas.perProject else {
            throw ServerError(
                status: 413, .payloadTooLarge,
                "this project's media would pass its quota of \(quotas.perProject) bytes (\(used.project) held)")
        }
        guard used.owner + total <= quotas.perUser else {
            throw ServerError(
                status: 413, .payloadTooLarge, "your media would pass your quota of \(quotas.perUser) bytes (\(used.owner) held)")
        }
    }

    /// Refuses `bytes` more on the media volume when they would leave less free space than the reserve
    /// the database keeps: at admission for the whole file, and for each chunk as it arrives (other
    /// uploads and the database grow meanwhile).
    private func checkDiskReserve(for bytes: Int64) throws(ServerError) {
        guard let free = Self.freeBytes(at: directory.path) else { return }
        guard free - bytes >= quotas.diskReserve else {
            throw ServerError(
                status: 507, .insufficientStorage,
                // No figures: how much disk the operator's machine has is not a member's business.
                "the server keeps the rest of its disk for the database: this upload waits until an operator frees space; records still sync",
                retryAfterSeconds: 300)
        }
    }

    /// Free bytes on the volume holding `path` (statfs), nil when it cannot be told.
    static func freeBytes(at path: String) -> Int64? {
        (try? FileManager.default.attributesOfFileSystem(forPath: path)[.systemFreeSize] as? NSNumber)?.int64Value
    }

    private var admitting = false
    private var waitingToAdmit: [CheckedContinuation<Void, Never>] = []

    private func enterAdmission() async {
        guard admitting else {
            admitting = true
            return
        }
        await withCheckedContinuation { waitingToAdmit.append($0) }
    }

    private func leaveAdmission() {
        if waitingToAdmit.isEmpty {
            admitting = false
        } else {
            waitingToAdmit.removeFirst().resume()
        }
    }

    /// Removes the files, partial uploads and upload state of attachments deleted since they were
    /// uploaded, each under its upload lock.
    private func removeDeletedAttachments(now: Date) async {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
        let stored = Set(names.compactMap { name -> UUID? in
            UUID(uuidString: name.hasSuffix(".part") ? String(name.dropLast(".part".count)) : name)
        })
        for id in (try? await storage.deletedAttachments(among: Array(stored))) ?? [] {
            guard let lock = try? UploadLock(directory.appendingPathComponent(id.storageText + ".lock")) else { continue }
            try? await discardUpload(of: id, now: now)
            try? FileManager.default.removeItem(at: directory.appendingPathComponent(id.storageText + ".lock"))
            lock.release()
        }
    }

    /// Drops all the server holds of an attachment's upload: its finished file, its partial file and its
    /// state. The caller holds the attachment's upload lock.
    private func discardUpload(of id: UUID, now: Date) async throws(ServerError) {
        try? FileManager.default.removeItem(at: fileURL(of: id))
        try? FileManager.default.removeItem(at: partURL(of: id))
        _ = try await storage.setMediaUpload(nil, for: id, now: now, uploadedBy: nil)
    }

    /// How long an unfinished upload's bytes are kept after its last chunk: a device that never comes
    /// back must not hold disk space for ever. The upload then starts again from 0.
    static let partLifetime: TimeInterval = 7 * 24 * 3600

    /// Drops unfinished uploads whose last chunk is older than `partLifetime` (their `.part` file and
    /// their state), and lock files of finished ones, skipping any upload a chunk is being stored for.
    /// Returns how many unfinished uploads went. The server runs it at start and every hour.
    @discardableResult
    func sweep(now: Date) async -> Int {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
        var dropped = 0
        for name in names where name.hasSuffix(".part") {
            let part = directory.appendingPathComponent(name)
            guard let id = UUID(uuidString: String(name.dropLast(".part".count))),
                let modified = (try? FileManager.default.attributesOfItem(atPath: part.path))?[.modificationDate] as? Date,
                now.timeIntervalSince(modified) > Self.partLifetime,
                let lock = try? UploadLock(directory.appendingPathComponent(id.storageText + ".lock"))
            else { continue }
            defer { lock.release() }
            if (try? await storage.mediaUpload(id))??.complete == true { continue }
            try? FileManager.default.removeItem(at: part)
            _ = try? await storage.setMediaUpload(nil, for: id, now: now, uploadedBy: nil)
            dropped += 1
        }
        // Files of attachments deleted since: nobody can reach them, and their room goes back.
        await removeDeletedAttachments(now: now)
        // Lock files of uploads that are finished or gone (one per attachment ever uploaded to).
        for name in names where name.hasSuffix(".lock") {
            let stem = String(name.dropLast(".lock".count))
            guard !FileManager.default.fileExists(atPath: directory.appendingPathComponent(stem + ".part").path),
                let lock = try? UploadLock(directory.appendingPathComponent(name))  // not while a chunk holds it
            else { continue }
            try? FileManager.default.removeItem(at: directory.appendingPathComponent(name))
            lock.release()
        }
        return dropped
    }

    private static func sha256(of url: URL) throws(ServerError) -> String {
        do {
            let handle = try FileHandle(forReadingFrom: url)
            defer { try? handle.close() }
            var hasher = SHA256()
            while let chunk = try handle.read(upToCount: 1 << 20), !chunk.isEmpty { hasher.update(data: chunk) }
            return hasher.finalize().hexText
        } catch {
            throw ServerError(.mediaFailure, message: "cannot read the upload: \(error)", path: url.path, underlying: error)
        }
    }
}

/// A `Content-Range: bytes first-last/total` header (`bytes */total` for an empty file).
package struct ContentRange: Sendable, Hashable {
    var first: Int64
    var length: Int64
    var total: Int64

    /// Reads the header in two steps, as the API document splits them: text outside its pattern
    /// (`bytes <1–18 digits>-<1–18 digits>/<1–18 digits>`, or `bytes */<digits>`) is a bad request (400);
    /// a range of that form whose bounds do not fit (last before first, past the total, `*` for a file
    /// that has bytes) is a chunk that cannot go where the file stands: 409 `range_mismatch`, as a chunk
    /// at the wrong offset is.
    init(header: String) throws(ServerError) {
        let invalid = ServerError.badRequest("Content-Range must be 'bytes first-last/total' or 'bytes */total'")
        let number = rangeBound
        guard header.hasPrefix("bytes ") else { throw invalid }
        let parts = header.dropFirst(6).split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 2, let total = number(parts[1]) else { throw invalid }
        let unfit = ServerError(status: 409, .rangeMismatch, "Content-Range \(header) does not fit a file of \(total) bytes")
        if parts[0] == "*" {
            guard total == 0 else { throw unfit }
            self.init(first: 0, length: 0, total: 0)
            return
        }
        let bounds = parts[0].split(separator: "-", omittingEmptySubsequences: false)
        guard bounds.count == 2, let first = number(bounds[0]), let last = number(bounds[1]) else { throw invalid }
        guard last >= first, last < total else { throw unfit }
        self.init(first: first, length: last - first + 1, total: total)
    }

    package init(first: Int64, length: Int64, total: Int64) {
        self.first = first
        self.length = length
        self.total = total
    }
}

/// A byte position of a `Content-Range` or `Range` header: 1 to 18 decimal digits, nil otherwise.
private func rangeBound(_ digits: Substring) -> Int64? {
    guard (1...18).contains(digits.count), digits.allSatisfy({ ("0"..."9").contains($0) }) else { return nil }
    return Int64(digits)
}

/// A `Range: bytes=first-` or `bytes=first-last` header of a download that resumes. Nil for no header
/// and for every other form (a suffix, several ranges, text of no form): those are ignored and the
/// whole file is sent, as RFC 9110 lets a server do.
struct MediaRange: Sendable, Hashable {
    var first: Int64
    var last: Int64?

    init?(header: String?) {
        guard let header, header.hasPrefix("bytes=") else { return nil }
        let bounds = header.dropFirst(6).split(separator: "-", omittingEmptySubsequences: false)
        guard bounds.count == 2, let first = rangeBound(bounds[0]) else { return nil }
        if bounds[1].isEmpty {
            self.init(first: first, last: nil)
        } else {
            guard let last = rangeBound(bounds[1]), last >= first else { return nil }
            self.init(first: first, last: last)
        }
    }

    init(first: Int64, last: Int64?) {
        self.first = first
        self.last = last
    }
}

extension FieldValue {
    var integerValue: Int64? {
        if case .integer(let value) = self { return value }
        return nil
    }
}

/// An exclusive, non-blocking `flock` on an upload's lock file, held for one chunk. `flock` locks belong
/// to the open file, so two tasks of one process exclude each other as two instances do.
final class UploadLock: Sendable {
    private let descriptor: Int32

    /// Takes the lock, or throws 409 `range_mismatch` when another chunk of the file holds it.
    init(_ url: URL) throws(ServerError) {
        let descriptor = open(url.path, O_RDWR | O_CREAT, 0o644)
        guard descriptor >= 0 else {
            throw ServerError(.mediaFailure, message: "cannot open the upload's lock file (errno \(errno))", path: url.path)
        }
        guard flock(descriptor, LOCK_EX | LOCK_NB) == 0 else {
            close(descriptor)
            throw ServerError(
                status: 409, .rangeMismatch, "another chunk of this file is being stored; ask where to resume and send it again")
        }
        // The sweep (or a refused admission) removes a lock file while holding it: a chunk that opened
        // it just before then locks a file no longer at the path, while the next one opens a new file and
        // locks that too. Only a lock on the file still at the path counts.
        guard Self.isStillAtPath(descriptor, url) else {
            flock(descriptor, LOCK_UN)
            close(descriptor)
            throw ServerError(
                status: 409, .rangeMismatch, "another chunk of this file is being stored; ask where to resume and send it again")
        }
        self.descriptor = descriptor
    }

    /// Whether the open file `descriptor` is the one at `url` (same device and inode).
    static func isStillAtPath(_ descriptor: Int32, _ url: URL) -> Bool {
        var open = stat(), named = stat()
        guard fstat(descriptor, &open) == 0, stat(url.path, &named) == 0 else { return false }
        return open.st_dev == named.st_dev && open.st_ino == named.st_ino
    }

    /// Waits for an exclusive `flock` on `url`, trying every 10 ms for up to `seconds` without holding
    /// a thread; throws 503 `unavailable` when it stays held. The file is never removed.
    static func waiting(for url: URL, seconds: Int) async throws(ServerError) -> UploadLock {
        let deadline = ContinuousClock.now + .seconds(seconds)
        while true {
            let descriptor = open(url.path, O_RDWR | O_CREAT, 0o644)
            guard descriptor >= 0 else {
                throw ServerError(.mediaFailure, message: "cannot open the lock file (errno \(errno))", path: url.path)
            }
            if flock(descriptor, LOCK_EX | LOCK_NB) == 0 { return UploadLock(holding: descriptor) }
            close(descriptor)
            // A cancelled request stops waiting too: its sleeps would return at once and spin here.
            guard ContinuousClock.now < deadline, !Task.isCancelled else {
                throw ServerError(
                    status: 503, .unavailable, "other uploads are being admitted; try again shortly", retryAfterSeconds: 2)
            }
            try? await Task.sleep(for: .milliseconds(10))
        }
    }

    private init(holding descriptor: Int32) { self.descriptor = descriptor }

    func release() {
        flock(descriptor, LOCK_UN)
        close(descriptor)
    }
}

/// How many media bytes one project's, and one member's, live attachments may hold.
struct MediaQuotas: Sendable {
    var perProject: Int64 = 100 << 30
    var perUser: Int64 = 25 << 30
    /// Free space on the media volume uploads never take (`ServerConfiguration.mediaDiskReserveBytes`).
    var diskReserve: Int64 = 256 << 20
}

/// A finished original as `GET /media/{id}` serves it.
package struct MediaOriginal: Sendable {
    package var path: String
    package var byteCount: Int64
    package var sha256: String
}

extension ServerError {
    /// The answer to a media attachment that does not exist, that the caller may not see, or that was
    /// deleted: one answer for all three. "Was deleted" told a member who joined after the delete that the
    /// id was a real attachment (attack 107, F1), where the push routes answer them as for nothing there.
    static func noMediaAttachment(_ id: UUID) -> ServerError {
        .notFound("no media attachment \(id.storageText); push its record first")
    }
}

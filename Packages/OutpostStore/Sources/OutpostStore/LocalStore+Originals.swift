import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import GRDB
import OutpostBundles
import OutpostSchema

/// An attachment's original as this device holds it: where to read it, or where a download goes.
public struct OriginalFile: Sendable, Hashable {
    /// The attachment's media entity.
    public let entity: EntityType
    /// The attachment.
    public let attachmentID: UUID
    /// The file's size, as the attachment record states it.
    public let byteCount: Int64
    /// The file's SHA-256, as the attachment record states it: what a download is checked against.
    public let sha256: String
    /// The file to read when `isHeld`; otherwise the partial file a download appends to, which a cut
    /// leaves in place so the next request resumes after the bytes it holds.
    public let url: URL
    /// Whether the device holds the whole original: its own (attached here) or one downloaded earlier.
    public let isHeld: Bool
}

extension LocalStore {
    /// Where originals downloaded from the server are kept: a cache beside the database, apart from the
    /// media folder, so evicting one never touches a file this device attached (and may not have
    /// uploaded yet). A cached original is `<id>-<sha256>`: a file attached again under the same
    /// record is another name, never the old bytes.
    public var originalsFolder: URL { URL(fileURLWithPath: path + ".originals", isDirectory: true) }

    /// Where the original of `attachment`, a record of a media entity, is: this device's own copy
    /// (attached here, of the file the record names now), a cached download (marked as just used), or,
    /// when neither, the partial file a download appends to. Refused with `mediaNotFound` for a record
    /// the device does not hold, a deleted one, or one with no file yet.
    public func originalFile<Media: Syncable>(of attachment: Media) throws(StoreError) -> OriginalFile {
        try originalFile(of: Media.entityType, id: attachment.id)
    }

    /// The originals of `project`'s media records this device holds (deleted ones and records with no
    /// file yet left out), each as `originalFile(of:)` finds it, the record created last first: for a
    /// pre-sync that brings the files too, where a crew wants the newest photos when the budget cannot
    /// hold them all. Not by last change: a finished upload changes a record, so photos taken an hour
    /// apart and uploaded in one sync tied. The records are found as a bundle export finds a project's (by their owning parents).
    public func originalFiles(ofProject project: UUID) throws(StoreError) -> [OriginalFile] {
        let media = try read { db -> [(entity: EntityType, id: UUID, created: Date)] in
            do {
                var media: [(entity: EntityType, id: UUID, created: Date)] = []
                try Self.forEachProjectRecord(of: project, in: db) { record in
                    if record.entity.description.syncClass == .media, record.sync.deletedAt == nil {
                        media.append((record.entity, record.id, record.sync.createdAt))
                    }
                }
                return media
            } catch let error as BundleError {
                throw StoreError(.mediaNotFound, path: path, message: error.message, underlying: error)
            }
        }
        // Ties (records written in one millisecond) by id, so every run orders them alike.
        let ordered = media.sorted { ($0.created, $0.id.storageText) > ($1.created, $1.id.storageText) }
        var files: [OriginalFile] = []
        for (entity, id, _) in ordered {
            do {
                files.append(try originalFile(of: entity, id: id))
            } catch where error.code == .mediaNotFound {
                continue  // no file yet
            }
        }
        return files
    }

    /// `originalFile(of:)` by the record's entity and id: how a file found earlier is looked up again.
    public func originalFile(of entity: EntityType, id: UUID) throws(StoreError) -> OriginalFile {
        let stored = try read { db -> (record: EntityRecord?, ownDigest: String?) in
            let record = try EntityTables.fetchRecord(entity, id: id, in: db)
            let own = try String.fetchOne(
                db, sql: "SELECT sha256 FROM media_uploads WHERE attachment_id = ?", arguments: [id.storageText])
            return (record, own)
        }
        guard entity.description.syncClass == .media, let record = stored.record, record.sync.deletedAt == nil,
            case .text(let digest)? = record.fields["sha256"], case .integer(let byteCount)? = record.fields["byteSize"]
        else {
            throw StoreError(
                .mediaNotFound, path: path,
                message: "no \(entity) \(id.storageText) with a file on this device (not pulled yet, deleted, or not a media record)")
        }
        // The digest names the cached file: one that is not 64 lowercase hex digits (a hostile server's or
        // bundle's record, "../../x") must never become a path.
        guard Self.isSHA256Hex(digest) else {
            throw StoreError(
                .mediaNotFound, path: path,
                message: "\(entity) \(id.storageText) names no file: its sha256 is not 64 lowercase hex digits")
        }
        // Its own copy while it is the file the record names: a teammate may have attached another since.
        let own = mediaFolder.appendingPathComponent(id.storageText)
        if stored.ownDigest == digest, FileManager.default.fileExists(atPath: own.path) {
            return OriginalFile(entity: entity, attachmentID: id, byteCount: byteCount, sha256: digest, url: own, isHeld: true)
        }
        let cached = originalsFolder.appendingPathComponent("\(id.storageText)-\(digest)")
        let partial = cached.appendingPathExtension("partial")
        // A link planted in the cache folder would have a download write, or a read return, a file
        // elsewhere: links are removed, never followed.
        Self.removeIfLink(cached)
        Self.removeIfLink(partial)
        if FileManager.default.fileExists(atPath: cached.path) {
            // Its modification date is its last use: the least recently used go first.
            try? FileManager.default.setAttributes([.modificationDate: Date()], ofItemAtPath: cached.path)
            return OriginalFile(entity: entity, attachmentID: id, byteCount: byteCount, sha256: digest, url: cached, isHeld: true)
        }
        try StoreError.mapping(path: path) {
            try FileManager.default.createDirectory(at: originalsFolder, withIntermediateDirectories: true)
        }
        return OriginalFile(entity: entity, attachmentID: id, byteCount: byteCount, sha256: digest, url: partial, isHeld: false)
    }

    /// 64 lowercase hex digits: a SHA-256 as records and cache file names write it.
    private static func isSHA256Hex(_ text: some StringProtocol) -> Bool {
        text.utf8.count == 64 && text.utf8.allSatisfy { (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }
    }

    private static func removeIfLink(_ url: URL) {
        var status = stat()
        if lstat(url.path, &status) == 0, status.st_mode & S_IFMT == S_IFLNK { try? FileManager.default.removeItem(at: url) }
    }

    /// Holds `file`'s download for this process alone, across every process on the database (an app and
    /// its share extension): an exclusive `flock` on `<id>-<sha256>.lock` in the cache folder, released
    /// when the returned lock is dropped. Nil while another holds it: two writers of one partial file let
    /// one's bytes land after the other had checked and kept the file, and a corrupt original was served.
    /// The lock file goes when the lock is dropped: one per original ever downloaded piled up in the
    /// cache (attack 125, F4).
    public func lockOriginalDownload(_ file: OriginalFile) throws(StoreError) -> OriginalDownloadLock? {
        try lockDownload(at: file.url.deletingPathExtension().appendingPathExtension("lock"))
    }

    /// `lockOriginalDownload` by the lock file's place.
    private func lockDownload(at url: URL) throws(StoreError) -> OriginalDownloadLock? {
        while true {
            Self.removeIfLink(url)
            let descriptor = openLockFile(url.path)
            guard descriptor >= 0 else {
                throw StoreError(.databaseFailure, path: url.path, message: "cannot open the download's lock file (errno \(errno))")
            }
            switch OriginalDownloadLock.take(descriptor, at: url.path) {
            case .held(let lock): return lock
            case .busy: return nil
            case .removed: continue  // its holder removed it on letting go: the lock is the next file's
            }
        }
    }

    /// Keeps a download that holds all of `file`'s bytes: checks it against the record's SHA-256 (a
    /// mismatch removes it and throws `checksumMismatch`, so the next request starts from 0), puts it in
    /// the cache and then removes the least recently used originals until the cache holds at most
    /// `budget` bytes (`evictOriginals(within:sparing:)`). The one just kept stays (`Device` refuses to
    /// download one larger than the whole budget), and so do `spared` (the originals a download of a
    /// project's files wants to keep). Returns where it now is.
    public func keepOriginal(_ file: OriginalFile, within budget: Int64, sparing spared: Set<URL> = []) throws(StoreError) -> URL {
        let kept = file.url.deletingPathExtension()
        Self.removeIfLink(file.url)
        let digest = try StoreError.mapping(path: path) { try Self.measure(file.url) }
        guard digest.0 == file.byteCount, digest.1 == file.sha256 else {
            try? FileManager.default.removeItem(at: file.url)
            throw StoreError(
                .checksumMismatch, path: file.url.path,
                message: "the original of \(file.attachmentID.storageText) downloaded as \(digest.0) bytes with SHA-256 \(digest.1), not the record's \(file.byteCount) bytes with \(file.sha256); it was removed")
        }
        try StoreError.mapping(path: path) {
            try? FileManager.default.removeItem(at: kept)
            try FileManager.default.moveItem(at: file.url, to: kept)
        }
        evictOriginals(within: budget, sparing: spared.union([kept]))
        return kept
    }

    /// Removes the cached originals (and partial downloads) no live record names any more: the record
    /// was deleted, left with its project, or names another file since it was attached again. A
    /// teammate's photo the device may no longer see must not stay on it until the budget happens to
    /// evict it. The files zip bundles shipped (`<database>.files/`) go the same way once no record
    /// names them (`sweepBundleFiles`). `Device.sync` runs it after each run; returns how many files went.
    @discardableResult
    public func sweepOriginals() throws(StoreError) -> Int {
        let bundleFiles = try sweepBundleFiles()
        sweepOriginalLocks()
        let files = cachedOriginals()
        guard !files.isEmpty else { return bundleFiles }
        let tables = EntityCatalog.all.filter { $0.syncClass == .media }.map(\.table)
        let named = tables.map { "SELECT sha256 FROM \"\($0)\" WHERE id = ? AND deleted_at IS NULL" }.joined(separator: " UNION ALL ")
        // One read for the whole cache: which of its files a live record still names.
        let unnamed = try read { db in
            try files.filter { file in
                let name = file.url.lastPathComponent
                let id = String(name.prefix(36)), digest = String(name.dropFirst(37).prefix(64))
                guard !tables.isEmpty else { return true }
                return try !String.fetchAll(db, sql: named, arguments: StatementArguments(Array(repeating: id, count: tables.count)))
                    .contains(digest)
            }
        }
        return bundleFiles + unnamed.filter { (try? FileManager.default.removeItem(at: $0.url)) != nil }.count
    }

    /// Removes the files imports stored that no record names any more: its record was deleted and the
    /// server took the delete, or it went whole (a file's record the server never had). A record with a
    /// delete not yet sent keeps its file, since a conflict may bring it back. Under the write lock
    /// (`BEGIN IMMEDIATE`), which an import holds until its records commit, so a file is never taken from
    /// an import that stored it for records about to commit, in this process or another.
    func sweepBundleFiles() throws(StoreError) -> Int {
        let stored = BundleImporter.storedFiles(forDatabaseAt: path)
        let tables = EntityCatalog.all.filter { $0.syncClass == .media || $0.namesFile }.map(\.table)
        guard !stored.isEmpty else { return 0 }
        return try StoreError.mapping(path: path) {
            try pool.writeWithoutTransaction { db in
                var removed = 0
                try db.inTransaction(.immediate) {
                    var named: Set<String> = []
                    for table in tables {
                        named.formUnion(try String.fetchAll(
                            db, sql: "SELECT sha256 FROM \"\(table)\" WHERE deleted_at IS NULL OR sync_status <> 'synced'"))
                    }
                    removed = stored.subtracting(named).filter {
                        BundleImporter.removeStoredFile(sha256: $0, forDatabaseAt: path)
                    }.count
                    return .commit
                }
                return removed
            }
        }
    }

    /// The bytes of originals (and partial downloads) the cache holds.
    public func originalsCacheBytes() -> Int64 {
        cachedOriginals().reduce(0) { $0 + $1.size }
    }

    /// Removes the least recently used originals (and partial downloads) until the cache holds at most
    /// `budget` bytes, leaving `spared` (an original's cached or partial file names it, as
    /// `OriginalFile.url` does) and downloads under way. `Device` runs it after each sync and before a
    /// project's downloads, so a budget the app lowered holds from then on, not from the next download.
    public func evictOriginals(within budget: Int64, sparing spared: Set<URL> = []) {
        var files = cachedOriginals()
        var total = files.reduce(0) { $0 + $1.size }
        files.sort { $0.used < $1.used }
        let sparedNames = Set(spared.map { Self.originalName(of: $0) })
        for file in files where total > budget && !sparedNames.contains(Self.originalName(of: file.url)) {
            // A partial whose download's lock another holds is a download under way (its writer would go
            // on into a removed file); one no one holds is a cut download, and goes like any other. Told
            // apart by its age (ten minutes) before, every partial of a run cut more often than that
            // stayed, and the cache grew past its budget with them (attack 126, F2).
            var lock: OriginalDownloadLock?
            if file.url.pathExtension == "partial" {
                lock = try? lockDownload(at: file.url.deletingPathExtension().appendingPathExtension("lock"))
                if lock == nil { continue }
            }
            if (try? FileManager.default.removeItem(at: file.url)) != nil { total -= file.size }
            withExtendedLifetime(lock) {}
        }
    }

    /// `<id>-<sha256>`: what an original's cached file and its partial download have in common.
    private static func originalName(of url: URL) -> String {
        url.pathExtension == "partial" ? url.deletingPathExtension().lastPathComponent : url.lastPathComponent
    }

    /// Removes the lock files no download holds: one a process left when it was killed mid-download,
    /// and those every download left before a lock took its file with it.
    func sweepOriginalLocks() {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: originalsFolder.path)) ?? []
        for name in names where name.hasSuffix(".lock") {
            // Taken, it is removed as any lock is when dropped; held by a download, it stays.
            _ = try? lockDownload(at: originalsFolder.appendingPathComponent(name))
        }
    }

    /// The cache's originals and partial downloads: files named `<id>-<sha256>` (and `.partial`), nothing
    /// else the folder may hold (a lock file, anything put there by hand).
    private func cachedOriginals() -> [(url: URL, size: Int64, used: Date)] {
        let keys: [URLResourceKey] = [.fileSizeKey, .contentModificationDateKey, .isRegularFileKey]
        let urls = (try? FileManager.default.contentsOfDirectory(at: originalsFolder, includingPropertiesForKeys: keys)) ?? []
        return urls.compactMap { url in
            let name = url.lastPathComponent
            let base = name.hasSuffix(".partial") ? String(name.dropLast(8)) : name
            guard base.utf8.count == 36 + 1 + 64, UUID(uuidString: String(base.prefix(36))) != nil,
                Self.isSHA256Hex(base.dropFirst(37)),
                let values = try? url.resourceValues(forKeys: Set(keys)), values.isRegularFile == true
            else { return nil }
            return (url, Int64(values.fileSize ?? 0), values.contentModificationDate ?? .distantPast)
        }
    }
}

/// One process's hold on an original's download (`LocalStore.lockOriginalDownload`); released when
/// dropped, and its lock file removed then.
public final class OriginalDownloadLock: Sendable {
    private let descriptor: Int32
    private let path: String

    private init(descriptor: Int32, path: String) {
        self.descriptor = descriptor
        self.path = path
    }

    enum Taking {
        case held(OriginalDownloadLock)
        case busy
        /// The file was removed (or replaced) by the lock's last holder while this one waited for it.
        case removed
    }

    /// Takes the `flock` on `descriptor`, the open lock file at `path`, without waiting; closes the
    /// descriptor unless it returns the lock. Removing a lock file on letting go is safe only because a
    /// taker checks that the file it locked is still the one at `path`: one opened before its holder
    /// removed it would otherwise be a second lock beside the next process's, on a new file.
    static func take(_ descriptor: Int32, at path: String) -> Taking {
        guard flock(descriptor, LOCK_EX | LOCK_NB) == 0 else {
            close(descriptor)
            return .busy
        }
        var opened = stat(), named = stat()
        guard fstat(descriptor, &opened) == 0, lstat(path, &named) == 0,
            opened.st_dev == named.st_dev, opened.st_ino == named.st_ino
        else {
            close(descriptor)
            return .removed
        }
        return .held(OriginalDownloadLock(descriptor: descriptor, path: path))
    }

    deinit {
        // Removed while still held, so no one can lock this file and believe it the current one.
        unlink(path)
        close(descriptor)
    }
}

/// Opens (creating) a lock file, never through a link; at file scope, where `open` is the system's and
/// not `LocalStore.open`.
private func openLockFile(_ path: String) -> Int32 {
    open(path, O_RDWR | O_CREAT | O_NOFOLLOW, 0o644)
}

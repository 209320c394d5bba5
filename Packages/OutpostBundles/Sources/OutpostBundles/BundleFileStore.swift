import Foundation

/// Where a device keeps the files zip bundles ship (drawings, RFIs, thumbnails): `<database>.files/`, one
/// file per content, named by its SHA-256. Two bundles naming different files alike never collide, a
/// file shipped twice is stored once, and no name from a bundle ever becomes a path.
///
/// An import copies each listed file into a private `.incoming-…` folder while checking it, and moves
/// the copies into place only after its transaction commits, so a failed import leaves no file behind.
/// A crash between the commit and the move leaves the folder (swept by a later import) and the file
/// missing until the bundle is imported again, which stores it.
struct BundleFileStore {
    let folder: URL

    init(databasePath: String) {
        folder = URL(fileURLWithPath: databasePath + ".files", isDirectory: true)
    }

    /// The stored copy of the file with this digest, nil when no import stored it.
    func storedFile(sha256: String) -> URL? {
        guard Self.isDigest(sha256) else { return nil }
        let url = folder.appendingPathComponent(sha256)
        return FileManager.default.fileExists(atPath: url.path) ? url : nil
    }

    /// A folder for one import's copies, created with its first copy.
    func beginIncoming() -> Incoming {
        Incoming(store: self, folder: folder.appendingPathComponent(".incoming-\(UUID().uuidString.lowercased())", isDirectory: true))
    }

    /// Removes `.incoming-…` folders a crashed or killed import left: at once when no one holds the lock
    /// in it (`IncomingClaim`: the process that made it is gone), and one not locked yet (being made, or
    /// left by an earlier build) once older than `seconds`. By age alone, an app killed again and again
    /// during a zip's import left a folder a kill until the hour passed: 166 MB from a 0.5 MB bundle in
    /// 25 kills (attack 102, F1).
    func sweepAbandonedIncoming(olderThan seconds: TimeInterval) {
        let manager = FileManager.default
        guard let names = try? manager.contentsOfDirectory(atPath: folder.path) else { return }
        for name in names where name.hasPrefix(".incoming-") {
            let url = folder.appendingPathComponent(name)
            switch IncomingClaim.isAbandoned(url) {
            case true?:
                try? manager.removeItem(at: url)
            case false?:
                continue
            case nil:
                let modified = (try? manager.attributesOfItem(atPath: url.path)[.modificationDate] as? Date) ?? .distantFuture
                if Date().timeIntervalSince(modified) > seconds { try? manager.removeItem(at: url) }
            }
        }
    }

    /// The digests of the files stored: files and links named by a digest, never a folder (an import's
    /// `.incoming-…` one, or one put there under a digest's name, which a sweep must not empty).
    func storedDigests() -> Set<String> {
        let manager = FileManager.default
        let names = (try? manager.contentsOfDirectory(atPath: folder.path)) ?? []
        return Set(names.filter { name in
            guard Self.isDigest(name),
                let type = (try? manager.attributesOfItem(atPath: folder.appendingPathComponent(name).path))?[.type] as? FileAttributeType
            else { return false }
            return type == .typeRegular || type == .typeSymbolicLink
        })
    }

    /// Removes the stored file with this digest; whether one went.
    func removeFile(sha256: String) -> Bool {
        guard Self.isDigest(sha256) else { return false }
        return (try? FileManager.default.removeItem(at: folder.appendingPathComponent(sha256))) != nil
    }

    /// Lowercase hexadecimal SHA-256, the only names this store uses.
    static func isDigest(_ text: String) -> Bool {
        text.utf8.count == 64 && text.utf8.allSatisfy { (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }
    }

    /// One import's copies, waiting for its commit.
    struct Incoming {
        let store: BundleFileStore
        let folder: URL
        private(set) var waiting: Set<String> = []
        /// Held from the first copy on, so that no sweep takes the folder while this import runs.
        private var claim: IncomingClaim?

        init(store: BundleFileStore, folder: URL) {
            self.store = store
            self.folder = folder
        }

        /// Where to copy the file with this digest, or nil when it is stored already (or copied by this
        /// import): such a file is only checked.
        mutating func destination(for file: FileReference) throws(BundleError) -> URL? {
            guard BundleFileStore.isDigest(file.sha256) else {
                throw BundleError(.checksumMismatch, message: "\"\(file.sha256)\" is not a lowercase SHA-256", archiveEntry: file.name)
            }
            if store.storedFile(sha256: file.sha256) != nil || waiting.contains(file.sha256) { return nil }
            if waiting.isEmpty {
                claim = try IncomingClaim(folder, for: store.folder.path)
                store.sweepAbandonedIncoming(olderThan: 3600)
            }
            waiting.insert(file.sha256)
            return folder.appendingPathComponent(file.sha256)
        }

        /// Moves the copies into the store (after the import committed); returns how many are new there.
        func commit() throws(BundleError) -> Int {
            let manager = FileManager.default
            var stored = 0
            for digest in waiting {
                let target = store.folder.appendingPathComponent(digest)
                if manager.fileExists(atPath: target.path) { continue }
                do {
                    try manager.moveItem(at: folder.appendingPathComponent(digest), to: target)
                } catch {
                    throw BundleError(.unreadableFile,
                        message: "the import committed but its file could not be stored (import the bundle again): \(error)",
                        file: target.path, underlying: error)
                }
                stored += 1
            }
            discard()
            return stored
        }

        /// Drops every copy (the import failed).
        func discard() {
            try? FileManager.default.removeItem(at: folder)
        }
    }
}

/// An `.incoming-…` folder made and held by one running import: an exclusive `flock` on its `.lock` file,
/// released when this goes away or its process ends, however it ends (a kill included). A sweep that can
/// take the lock knows the folder's import is gone. `flock` locks belong to an open file description, so
/// two imports of one process exclude each other as two processes do.
final class IncomingClaim: Sendable {
    private let descriptor: Int32

    /// Makes `folder` (private to this user) and takes its lock; `file` names the store's folder in errors.
    init(_ folder: URL, for file: String) throws(BundleError) {
        do {
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true,
                attributes: [.posixPermissions: 0o700])
        } catch {
            throw BundleError(.unreadableFile, message: "cannot create \(folder.path): \(error)", file: file, underlying: error)
        }
        let descriptor = open(folder.appendingPathComponent(Self.lockName).path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard descriptor >= 0, flock(descriptor, LOCK_EX | LOCK_NB) == 0 else {
            let cause = String(cString: strerror(errno))
            if descriptor >= 0 { close(descriptor) }
            throw BundleError(.unreadableFile, message: "cannot lock \(folder.path): \(cause)", file: file)
        }
        self.descriptor = descriptor
    }

    deinit {
        close(descriptor)
    }

    static let lockName = ".lock"

    /// Whether the import that made `folder` is gone (true: its lock is free), still running (false), or
    /// cannot be told (nil: no lock file, a folder being made or one an earlier build left).
    static func isAbandoned(_ folder: URL) -> Bool? {
        let descriptor = open(folder.appendingPathComponent(lockName).path, O_RDWR | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        return flock(descriptor, LOCK_EX | LOCK_NB) == 0
    }
}

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

    /// Removes `.incoming-…` folders a crashed import left, once they are old enough not to be a running one's.
    func sweepAbandonedIncoming(olderThan seconds: TimeInterval) {
        let manager = FileManager.default
        guard let names = try? manager.contentsOfDirectory(atPath: folder.path) else { return }
        for name in names where name.hasPrefix(".incoming-") {
            let url = folder.appendingPathComponent(name)
            let modified = (try? manager.attributesOfItem(atPath: url.path)[.modificationDate] as? Date) ?? .distantFuture
            if Date().timeIntervalSince(modified) > seconds { try? manager.removeItem(at: url) }
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
                do {
                    try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
                } catch {
                    throw BundleError(.unreadableFile, message: "cannot create \(folder.path): \(error)", file: store.folder.path,
                        underlying: error)
                }
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

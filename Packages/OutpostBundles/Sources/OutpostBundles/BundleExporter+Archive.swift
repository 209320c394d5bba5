import Crypto
import Foundation
import OutpostModels
import OutpostStore
import OutpostWire
import ZIPFoundation

/// What writing a zip bundle did.
public struct ArchiveExportSummary: Sendable, Hashable {
    /// Records written to the manifest.
    public var records: Int
    /// Files shipped beside it (each once, however many records name it).
    public var files: Int
    /// Files records name that this device does not hold (or holds with other bytes), by their record's
    /// file name: the bundle still imports, without them.
    public var missingFiles: [String]
}

extension BundleExporter {
    /// Writes project `projectID` as a zip at `url`: the manifest (`bundle.xml` or `bundle.json`) and
    /// the files its reference documents and media attachments name, taken from what this device holds
    /// (files earlier zip bundles stored, photos and voice notes captured here), each checked against
    /// its record's size and SHA-256 first. The archive is written beside `url` and moved there whole.
    @discardableResult
    public func exportArchive(
        _ projectID: UUID, fromDatabaseAt databasePath: String, format: BundleFormat, to url: URL
    ) throws(BundleError) -> ArchiveExportSummary {
        let records = try Self.records(of: projectID, fromDatabaseAt: databasePath)
        let plan = ArchivePlan(records: records, databasePath: databasePath)
        let scratch = url.deletingLastPathComponent()
            .appendingPathComponent(".\(url.lastPathComponent).\(UUID().uuidString.lowercased())", isDirectory: true)
        do {
            try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
        } catch {
            throw BundleError(.unreadableFile, message: "cannot create a working folder: \(error)", file: scratch.path)
        }
        defer { try? FileManager.default.removeItem(at: scratch) }

        let manifest = scratch.appendingPathComponent(format.manifestName)
        do {
            try write(project: projectID, records: records, files: plan.files.map(\.reference), format: format, to: manifest)
        } catch {
            var located = error
            located.file = url.path  // the archive the caller asked for, not the working copy
            throw located
        }
        let asOf = records.map(\.sync.updatedAt).max()

        // Entries carry `asOf` (or 1980) as their time, so the same data gives the same archive bytes.
        let stamp = max(asOf ?? .distantPast, Date(timeIntervalSince1970: 315_532_800))
        let partial = scratch.appendingPathComponent("bundle.zip")
        do {
            let archive = try Archive(url: partial, accessMode: .create)
            try Self.add(manifest, as: format.manifestName, to: archive, stamp: stamp)
            for file in plan.files { try Self.add(file.source, as: file.reference.name, to: archive, stamp: stamp) }
        } catch {
            throw BundleError(.unreadableFile, message: "cannot write the zip archive: \(error)", file: url.path)
        }
        do {
            if FileManager.default.fileExists(atPath: url.path) { try FileManager.default.removeItem(at: url) }
            try FileManager.default.moveItem(at: partial, to: url)
        } catch {
            throw BundleError(.unreadableFile, message: "cannot move the archive into place: \(error)", file: url.path)
        }
        return ArchiveExportSummary(records: records.count, files: plan.files.count, missingFiles: plan.missing)
    }

    private static func add(_ source: URL, as name: String, to archive: Archive, stamp: Date) throws {
        let handle = try FileHandle(forReadingFrom: source)
        defer { try? handle.close() }
        let size = Int64((try FileManager.default.attributesOfItem(atPath: source.path)[.size] as? NSNumber)?.int64Value ?? 0)
        try archive.addEntry(
            with: name, type: .file, uncompressedSize: size, modificationDate: stamp, permissions: 0o644,
            compressionMethod: .deflate
        ) { (position: Int64, chunk: Int) -> Data in
            try handle.seek(toOffset: UInt64(position))
            return try handle.read(upToCount: chunk) ?? Data()
        }
    }
}

/// Which files a zip bundle ships and where their bytes come from.
struct ArchivePlan {
    struct File {
        var reference: FileReference
        var source: URL
    }

    private(set) var files: [File] = []
    private(set) var missing: [String] = []

    init(records: [EntityRecord], databasePath: String) {
        let stored = BundleFileStore(databasePath: databasePath)
        let media = LocalStore.mediaFolder(forDatabaseAt: databasePath)
        var found: [String: (name: String, size: Int64, source: URL)] = [:]
        for record in records where !record.sync.isDeleted {
            guard record.entity == .referenceDocument || record.entity == .mediaAttachment,
                case .text(let name) = record["fileName"], case .text(let digest) = record["sha256"],
                case .integer(let size) = record["byteSize"]
            else { continue }
            if let known = found[digest] {
                // The same bytes named again ship once; a different size under the same digest cannot be them.
                if known.size != size { missing.append(name) }
                continue
            }
            var candidates: [URL] = []
            if let copy = stored.storedFile(sha256: digest) { candidates.append(copy) }
            if record.entity == .mediaAttachment { candidates.append(media.appendingPathComponent(record.id.uuidString.lowercased())) }
            if let source = candidates.first(where: { Self.holds($0, size: size, sha256: digest) }) {
                found[digest] = (name, size, source)
            } else {
                missing.append(name)
            }
        }
        // Entry names: `files/<record's file name>` when that is a safe, plain name no other file uses;
        // otherwise `files/<digest>`. Sorted, so the archive does not depend on record order.
        var uses: [String: Int] = [:]
        for entry in found.values { uses[entry.name, default: 0] += 1 }
        for (digest, entry) in found {
            let plain = uses[entry.name] == 1 && !entry.name.contains("/") && ArchivePath.problem(with: entry.name) == nil
                && entry.name.unicodeScalars.allSatisfy { $0.properties.isAlphabetic || $0.properties.numericType != nil || "._- ()".unicodeScalars.contains($0) }
            files.append(File(
                reference: FileReference(name: "files/" + (plain ? entry.name : digest), byteSize: entry.size, sha256: digest),
                source: entry.source))
        }
        files.sort { $0.reference.name < $1.reference.name }
        missing.sort()
    }

    /// Whether the file at `url` has exactly this size and digest.
    private static func holds(_ url: URL, size: Int64, sha256: String) -> Bool {
        guard let handle = try? FileHandle(forReadingFrom: url) else { return false }
        defer { try? handle.close() }
        var hash = SHA256()
        var total: Int64 = 0
        while let chunk = try? handle.read(upToCount: 1 << 16), !chunk.isEmpty {
            total += Int64(chunk.count)
            if total > size { return false }
            hash.update(data: chunk)
        }
        return total == size && hash.finalize().map { String(format: "%02x", $0) }.joined() == sha256
    }
}

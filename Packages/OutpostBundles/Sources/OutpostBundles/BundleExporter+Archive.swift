import Foundation
import OutpostSchema
import OutpostWire
import ZIPFoundation

/// A file a zip bundle ships beside its manifest, and where its bytes are now.
public struct ShippedFile: Sendable, Hashable {
    /// The file's name as its record gives it; the archive entry is `files/<name>` when that is a safe,
    /// plain name no other shipped file uses, else `files/<sha256>`.
    public var name: String
    /// Its size, as its record names it.
    public var byteSize: Int64
    /// Its lowercase hexadecimal SHA-256, as its record names it.
    public var sha256: String
    /// The file holding those bytes.
    public var source: URL

    /// A file to ship.
    public init(name: String, byteSize: Int64, sha256: String, source: URL) {
        self.name = name
        self.byteSize = byteSize
        self.sha256 = sha256
        self.source = source
    }

    /// The archive entries for `files` (one per digest), in name order, so the archive does not depend
    /// on the order records came in. A name that reads as a digest is never taken as plain: it could be
    /// another file's, which goes under its digest (two entries of one name, an archive the importer
    /// refused: review of attack 118 F2's fix).
    static func entries(for files: [ShippedFile]) -> [(reference: FileReference, source: URL)] {
        var uses: [String: Int] = [:]
        for file in files { uses[file.name, default: 0] += 1 }
        let entries = files.map { file -> (reference: FileReference, source: URL) in
            let plain = uses[file.name] == 1 && !JSONBundleReader.isSHA256(file.name) && !file.name.contains("/") && ArchivePath.problem(with: file.name) == nil
                && file.name.unicodeScalars.allSatisfy {
                    $0.properties.isAlphabetic || $0.properties.numericType != nil || "._- ()".unicodeScalars.contains($0)
                }
            let name = "files/" + (plain ? file.name : file.sha256)
            return (FileReference(name: name, byteSize: file.byteSize, sha256: file.sha256), file.source)
        }
        return entries.sorted { $0.reference.name < $1.reference.name }
    }
}

extension BundleExporter {
    /// Writes project `projectID` as a zip at `url`: the manifest (`bundle.xml` or `bundle.json`) of
    /// `records` and the `files` beside it, in name order. The archive is written beside `url` and moved
    /// there whole. Entries carry `asOf` (or 1980) as their time, so the same data gives the same bytes.
    /// The manifest's header carries `checkpoints`, as `export`'s.
    public func exportArchive(
        project projectID: UUID, records: [EntityRecord], files: [ShippedFile], checkpoints: [String] = [],
        format: BundleFormat, to url: URL
    ) throws(BundleError) {
        try exportArchive(
            project: projectID, asOf: records.map(\.sync.updatedAt).max(), files: files, checkpoints: checkpoints,
            format: format, to: url
        ) { write in for record in records { try write(record) } }
    }

    /// `exportArchive`, the records handed over one at a time by `records` as the manifest is written:
    /// `asOf` must be the newest `updatedAt` among them.
    public func exportArchive(
        project projectID: UUID, asOf: Date?, files: [ShippedFile], checkpoints: [String] = [],
        format: BundleFormat, to url: URL, records: BundleRecords
    ) throws(BundleError) {
        let entries = ShippedFile.entries(for: files)
        let scratch = url.deletingLastPathComponent()
            .appendingPathComponent(".\(url.lastPathComponent).\(UUID().uuidString.lowercased())", isDirectory: true)
        do {
            try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
        } catch {
            throw BundleError(.unreadableFile, message: "cannot create a working folder: \(error)", file: scratch.path,
                underlying: error)
        }
        defer { try? FileManager.default.removeItem(at: scratch) }

        let manifest = scratch.appendingPathComponent(format.manifestName)
        do {
            try write(
                project: projectID, asOf: asOf, files: entries.map(\.reference), checkpoints: checkpoints,
                format: format, to: manifest, records: records)
        } catch {
            var located = error
            located.file = url.path  // the archive the caller asked for, not the working copy
            throw located
        }

        // Entries carry `asOf` (or 1980) as their time, so the same data gives the same archive bytes.
        let stamp = max(asOf ?? .distantPast, Date(timeIntervalSince1970: 315_532_800))
        let partial = scratch.appendingPathComponent("bundle.zip")
        do {
            let archive = try Archive(url: partial, accessMode: .create)
            try Self.add(manifest, as: format.manifestName, to: archive, stamp: stamp)
            for entry in entries { try Self.add(entry.source, as: entry.reference.name, to: archive, stamp: stamp) }
        } catch {
            throw BundleError(.unreadableFile, message: "cannot write the zip archive: \(error)", file: url.path,
                underlying: error)
        }
        do {
            try OutputFile.place(partial, at: url)
        } catch {
            throw BundleError(.unreadableFile, message: "cannot move the archive into place: \(error)", file: url.path,
                underlying: error)
        }
    }

    /// Adds `source` deflated, or stored when deflated it would shrink past what an importer takes
    /// (`BundleLimits.maximumCompressionRatio`, a zip bomb's guard): a 1 MiB text of one letter made the
    /// manifest expand 631 times, a silent voice note 1,020 times, and the export of a project with
    /// either was an archive `outpost import` refused (attack 118, F2).
    private static func add(_ source: URL, as name: String, to archive: Archive, stamp: Date) throws {
        let handle = try FileHandle(forReadingFrom: source)
        defer { try? handle.close() }
        let size = Int64((try FileManager.default.attributesOfItem(atPath: source.path)[.size] as? NSNumber)?.int64Value ?? 0)
        try archive.addEntry(
            with: name, type: .file, uncompressedSize: size, modificationDate: stamp, permissions: 0o644,
            compressionMethod: try method(for: handle, size: size)
        ) { (position: Int64, chunk: Int) -> Data in
            try handle.seek(toOffset: UInt64(position))
            return try handle.read(upToCount: chunk) ?? Data()
        }
    }

    /// Deflate for an entry of `size` bytes read from `handle`, unless deflated it would shrink past half
    /// the importer's ratio: decided before it goes in, by deflating it into a count. A file that does
    /// not shrink that far shows it within its first MiBs (a photo in its first), so only one that keeps
    /// shrinking is deflated through. (Looked up and removed once in, it made an export of 10,000
    /// entries 45 times slower, and each removal copied the archive so far: review of F2's fix.)
    private static func method(for handle: FileHandle, size: Int64) throws -> CompressionMethod {
        let ratio = BundleLimits.standard.maximumCompressionRatio / 2
        guard size > 1 << 20 else { return .deflate }
        defer { try? handle.seek(toOffset: 0) }
        let probe = GzipStream(keepingDevicesRatio: false)
        var shrunk: Int64 = 0
        while let chunk = try handle.read(upToCount: 1 << 20), !chunk.isEmpty {
            shrunk += Int64(probe.compress([UInt8](chunk)).count)
            if shrunk * ratio >= size { return .deflate }
        }
        shrunk += Int64(probe.finish().count)
        return shrunk * ratio >= size ? .deflate : .none
    }
}
